"""Training hook that draws MAE reconstructions every N iterations."""
import os.path as osp
from typing import Optional, Union

import cv2
import torch
from mmengine.dist import master_only
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.utils import mkdir_or_exist
from mmpretrain.registry import HOOKS

from sapiens_mm.models.selfsup.reconstruction import reconstruction_grid

__all__ = ['MAEReconstructionHook']

DATA_BATCH = Optional[Union[dict, tuple, list]]


@HOOKS.register_module()
class MAEReconstructionHook(Hook):
    """Save an original | masked | reconstruction grid of the current batch.

    Every ``interval`` training iterations, the first ``num_images`` images
    of the batch just trained on are masked afresh and reconstructed by the
    model (eval mode, no gradient, global RNG state untouched); the grid is
    written to ``<out_dir>/iter_<n>.png`` (one row per image) and, with
    ``add_to_visualizer``, also given to the runner's visualizer (TensorBoard
    / W&B backends show it). Runs on the main process only.

    Args:
        interval: Iterations between two grids. Defaults to 1000.
        num_images: Images per grid (rows). Defaults to 4.
        out_dir: Output folder; defaults to ``<work_dir>/vis_mae``.
        mask_ratio: Mask ratio for the pictures; defaults to the model's.
        paste_visible: Show original pixels on visible patches of the
            reconstruction (MAE paper style). Defaults to True.
        add_to_visualizer: Also call ``runner.visualizer.add_image``.
            Defaults to False.
    """

    priority = 'LOW'

    def __init__(self,
                 interval: int = 1000,
                 num_images: int = 4,
                 out_dir: Optional[str] = None,
                 mask_ratio: Optional[float] = None,
                 paste_visible: bool = True,
                 add_to_visualizer: bool = False) -> None:
        if interval < 1 or num_images < 1:
            raise ValueError(
                'MAEReconstructionHook needs interval >= 1 and num_images >= '
                f'1, got interval={interval}, num_images={num_images}.')
        self.interval = interval
        self.num_images = num_images
        self.out_dir = out_dir
        self.mask_ratio = mask_ratio
        self.paste_visible = paste_visible
        self.add_to_visualizer = add_to_visualizer

    def before_train(self, runner) -> None:
        if self.out_dir is None:
            self.out_dir = osp.join(runner.work_dir, 'vis_mae')

    @master_only
    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch: DATA_BATCH = None,
                         outputs: Optional[dict] = None) -> None:
        if data_batch is None or not self.every_n_train_iters(
                runner, self.interval):
            return
        self.visualize(runner, data_batch, f'iter_{runner.iter + 1}')

    def visualize(self, runner, data_batch: dict, name: str) -> str:
        """Draw the grid of ``data_batch`` and return the written file."""
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        data = model.data_preprocessor(data_batch, False)
        inputs = data['inputs']
        if isinstance(inputs, (list, tuple)):
            inputs = inputs[0]
        inputs = inputs[:self.num_images]
        devices = [inputs.device] if inputs.is_cuda else []
        with torch.random.fork_rng(devices=devices):
            grid = reconstruction_grid(model, inputs, self.mask_ratio,
                                       self.paste_visible)
        out_dir = self.out_dir or osp.join(runner.work_dir, 'vis_mae')
        path = osp.join(out_dir, f'{name}.png')
        mkdir_or_exist(out_dir)
        if not cv2.imwrite(path, cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)):
            raise OSError(f'Could not write {path}.')
        if self.add_to_visualizer:
            runner.visualizer.add_image(
                'mae_reconstruction', grid, step=runner.iter + 1)
        runner.logger.info(f'MAE reconstruction grid written to {path}')
        return path
