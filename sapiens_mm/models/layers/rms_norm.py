"""RMSNorm that keeps PyTorch's single-dtype kernel under autocast."""
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ['RMSNorm']


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` (same parameters and state dict) for inputs whose
    dtype differs from the weight's, as the Sapiens2 q / k norms see under
    ``torch.autocast``: bf16 activations of the projections, float32
    weights. PyTorch's kernel then leaves its single-dtype path with a
    "Mismatch dtype" warning for every call; this norm runs the input in
    the weight's dtype and returns the input's dtype, which gives the same
    bits (PyTorch's mixed-dtype route computes in float32 and rounds once
    too).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if w is not None and x.dtype != w.dtype and x.is_floating_point():
            return F.rms_norm(x.to(w.dtype), self.normalized_shape, w,
                              self.eps).to(x.dtype)
        return super().forward(x)
