"""A forward pass captured once as a CUDA graph and replayed.

At small batches a ViT forward pass is hundreds of short kernels; launching
them one by one from Python can cost more than running them. A CUDA graph
records the launches once and replays them with one call. The shapes,
dtypes and memory of the inputs and outputs are fixed at capture time, which
suits a benchmark or a video at a fixed batch size. Follows the recipe of
PyTorch's CUDA graphs notes (warm-up on a side stream, then
``torch.cuda.graph``): https://pytorch.org/docs/stable/notes/cuda.html
"""
from typing import Callable

import torch

__all__ = ['CUDAGraphForward']


class CUDAGraphForward:
    """``fn`` on a fixed-shape CUDA tensor, captured once, then replayed.

    Args:
        fn: The forward pass: tensor ``(B, ...)`` -> tensor or nested tuple /
            list of tensors. It runs ``warmup + 1`` times here (the last
            one is recorded), so it must have no side effects beyond its
            outputs (run it under ``torch.inference_mode()`` or
            ``torch.no_grad()`` yourself, as for eager inference).
        example: A CUDA input of the shape and dtype every later call uses
            (copied; the caller keeps its tensor).
        warmup: Eager runs on a side stream before the capture (lazy
            initialisation, cuBLAS / cuDNN workspace and autotuning happen
            outside the graph). Defaults to 3.

    Calling the object copies the input into the graph's input buffer and
    replays the graph. It returns the graph's own output tensors, which the
    next call overwrites: clone what you keep.

    Raises:
        ValueError: ``example`` is not a CUDA tensor.
    """

    def __init__(self, fn: Callable[[torch.Tensor], object],
                 example: torch.Tensor, warmup: int = 3) -> None:
        if not isinstance(example, torch.Tensor) or \
                example.device.type != 'cuda':
            where = (example.device.type if isinstance(example, torch.Tensor)
                     else type(example).__name__)
            raise ValueError(
                f'CUDA graphs capture CUDA work; the example input is on '
                f'{where}. Run on a CUDA device, or without the CUDA graph.')
        self.input = example.detach().clone()
        side = torch.cuda.Stream(device=example.device)
        side.wait_stream(torch.cuda.current_stream(example.device))
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn(self.input)
        torch.cuda.current_stream(example.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.output = fn(self.input)

    def __call__(self, x: torch.Tensor):
        """Replay on ``x`` (same shape and dtype as the example).

        Raises:
            ValueError: ``x`` has another shape, dtype or device.
        """
        if (x.shape, x.dtype, x.device) != (self.input.shape,
                                           self.input.dtype,
                                           self.input.device):
            raise ValueError(
                f'This CUDA graph was captured for inputs of shape '
                f'{tuple(self.input.shape)}, {self.input.dtype} on '
                f'{self.input.device}; got {tuple(x.shape)}, {x.dtype} on '
                f'{x.device}. Capture another graph for that shape.')
        self.input.copy_(x)
        self.graph.replay()
        return self.output
