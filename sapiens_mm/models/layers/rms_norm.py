"""RMSNorm with a one-pass CPU kernel for inference, and PyTorch's
single-dtype kernel under autocast."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.utils.cpu_kernels import kernel_route, rms_norm, rms_norm_fits

__all__ = ['RMSNorm']


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` (same parameters and state dict) with two inference
    routes.

    - bf16 or float32 input on a CPU with AVX512_BF16, no autograd: the C
      kernel of :func:`sapiens_mm.utils.cpu_kernels.rms_norm`, one pass
      over the tensor instead of PyTorch's five element-wise kernels with
      float32 temporaries, with PyTorch's roundings. It is the custom op
      ``sapiens_mm::cpu_rms_norm``, which ``torch.compile`` and
      ``torch.export`` keep.
    - An input whose dtype differs from the weight's, as the Sapiens2 q / k
      norms see under ``torch.autocast`` (bf16 activations of the
      projections, float32 weights): PyTorch's kernel would leave its
      single-dtype path with a "Mismatch dtype" warning for every call; the
      input runs in the weight's dtype and the result returns to the
      input's dtype, which gives the same bits (PyTorch's mixed-dtype route
      computes in float32 and rounds once too).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if (w is not None and len(self.normalized_shape) == 1
                and self.eps is not None and kernel_route(x, w)
                and rms_norm_fits(x, w)):
            return torch.ops.sapiens_mm.cpu_rms_norm(x, w, self.eps)
        if w is not None and x.dtype != w.dtype and x.is_floating_point():
            return _mixed_dtype_rms_norm(x, w, self.eps)
        return super().forward(x)


def _mixed_dtype_rms_norm(x: torch.Tensor, w: torch.Tensor,
                          eps: float) -> torch.Tensor:
    """PyTorch's norm of ``x`` in the weight's dtype, back in x's dtype."""
    return F.rms_norm(x.to(w.dtype), (w.shape[0], ), w, eps).to(x.dtype)


@torch.library.custom_op('sapiens_mm::cpu_rms_norm', mutates_args=(),
                         device_types='cpu')
def _cpu_rms_norm_op(x: torch.Tensor, weight: torch.Tensor,
                     eps: float) -> torch.Tensor:
    """``sapiens_mm::cpu_rms_norm``: RMSNorm over the last dim by the C
    kernel (:func:`sapiens_mm.utils.cpu_kernels.rms_norm`), a new
    contiguous tensor in x's dtype. Where the kernel cannot run (a graph
    recorded on another machine) PyTorch's norm computes it."""
    out = rms_norm(x, weight, eps)
    if out is None:
        out = _mixed_dtype_rms_norm(x, weight, eps).contiguous()
    return out


@_cpu_rms_norm_op.register_fake
def _cpu_rms_norm_fake(x: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> torch.Tensor:
    return x.new_empty(x.shape)
