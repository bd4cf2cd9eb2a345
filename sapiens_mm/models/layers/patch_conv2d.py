"""Patch-embedding convolution that runs as one GEMM in reduced precision
on CPU (shared by the Sapiens and Sapiens2 backbones)."""
import torch
import torch.nn as nn

__all__ = ['PatchConv2d']


class PatchConv2d(nn.Conv2d):
    """The patch-embedding convolution (kernel == stride), computed as one
    GEMM for reduced precision on CPU.

    On CPUs without native bf16 / fp16 support PyTorch runs a bf16 / fp16
    ``Conv2d`` through its slow reference kernel (measured at sapiens_0.3b,
    1024x768: 5.8 s for the patch embedding, about as long as a whole
    transformer layer, against ~0.3 s for the same FLOPs as a GEMM). A
    kernel == stride convolution is exactly a matrix product of
    non-overlapping patches with the flattened kernel, so it runs as one
    here. fp32, GPUs and other shapes keep ``Conv2d``; parameters and state
    dict are those of ``Conv2d``.
    """

    def _as_gemm(self, x: torch.Tensor) -> bool:
        return (x.device.type == 'cpu'
                and x.dtype in (torch.bfloat16, torch.float16)
                and self.kernel_size == self.stride and self.groups == 1
                and self.dilation == (1, 1)
                and self.padding_mode == 'zeros'
                and not isinstance(self.padding, str))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._as_gemm(x):
            return super().forward(x)
        ph, pw = self.padding
        if ph or pw:
            x = nn.functional.pad(x, (pw, pw, ph, ph))
        kh, kw = self.kernel_size
        n, c, h, w = x.shape
        gh, gw = h // kh, w // kw  # Conv2d drops a partial last patch
        x = x[:, :, :gh * kh, :gw * kw]
        patches = x.reshape(n, c, gh, kh, gw, kw).permute(0, 2, 4, 1, 3, 5)
        out = nn.functional.linear(
            patches.reshape(n, gh * gw, c * kh * kw),
            self.weight.reshape(self.out_channels, -1), self.bias)
        return out.transpose(1, 2).reshape(n, self.out_channels, gh, gw)
