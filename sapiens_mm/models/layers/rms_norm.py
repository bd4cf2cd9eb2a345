"""RMSNorm with a one-pass CPU kernel for inference, and PyTorch's
single-dtype kernel under autocast."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.utils.cpu_kernels import rms_norm

__all__ = ['RMSNorm']


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` (same parameters and state dict) with two inference
    routes.

    - bf16 or float32 input on a CPU with AVX512_BF16, no autograd: the C
      kernel of :func:`sapiens_mm.utils.cpu_kernels.rms_norm`, one pass
      over the tensor instead of PyTorch's five element-wise kernels with
      float32 temporaries, with PyTorch's roundings.
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
                and self.eps is not None):
            out = rms_norm(x, w, self.eps)
            if out is not None:
                return out
        if w is not None and x.dtype != w.dtype and x.is_floating_point():
            return F.rms_norm(x.to(w.dtype), self.normalized_shape, w,
                              self.eps).to(x.dtype)
        return super().forward(x)
