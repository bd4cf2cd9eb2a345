"""Train a few iterations of a large Sapiens model on GPU(s) and print the
peak memory and the iteration time.

Runs the shipped FSDP recipe (mmengine FlexibleRunner + FSDPStrategy,
activation checkpointing, bf16 autocast) on generated images, so it checks
the exact code path of ``tools/train.py`` on a config of
``configs/fsdp/``. Single GPU::

    python tools/analysis/gpu_train_check.py

Several GPUs (FSDP shards over them)::

    python -m torch.distributed.run --nproc_per_node 8 \\
        tools/analysis/gpu_train_check.py --iters 10

Compare with the memory options off: ``--no-cp`` (no activation
checkpointing), ``--no-bf16`` (fp32), ``--no-fsdp`` (plain DDP / one GPU).
``--cpu-smoke`` runs the same code path on CPU with the tiny arch (gloo),
to check the script itself on a machine without a GPU.

It also prints the model FLOPs of one iteration (3 x the forward pass:
forward, and a backward pass of twice its cost; the forward recomputed by
activation checkpointing is not counted, as in the usual "model FLOPs
utilisation"), counted with ``torch.utils.flop_counter`` on a copy of the
model on the meta device, the achieved TFLOP/s and, on a GPU of known peak
(or with ``--peak-tflops``), their fraction of the dense bf16 peak.
``--json FILE`` writes the figures.

Exits with status 2 and a message when no CUDA GPU is available.
"""
import argparse
import os
import os.path as osp
import resource
import socket
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DEFAULT_CONFIG = osp.join(
    ROOT, 'configs', 'fsdp', 'sapiens_1b-200e_goliath-1024x768-seg_fsdp_bf16.py')


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--config', default=DEFAULT_CONFIG,
                   help='an FSDP config (default: the 1b segmentation one)')
    p.add_argument('--iters', type=int, default=6,
                   help='training iterations (the first is not timed)')
    p.add_argument('--batch-size', type=int, default=1, help='per GPU')
    p.add_argument('--no-cp', action='store_true',
                   help='no activation checkpointing')
    p.add_argument('--no-bf16', action='store_true', help='fp32 training')
    p.add_argument('--no-fsdp', action='store_true',
                   help='plain Runner (DDP under torchrun, else one GPU)')
    p.add_argument('--cpu-smoke', action='store_true',
                   help='tiny arch on CPU (gloo): checks the script only')
    p.add_argument('--work-dir', help='logs and generated images (default: '
                   'work_dirs/gpu_train_check; shared by the ranks of a node)')
    p.add_argument('--peak-tflops', type=float, default=None,
                   help='peak TFLOP/s per GPU for the fraction of peak '
                   '(default: the known dense bf16 peak of the GPU)')
    p.add_argument('--json', default=None,
                   help='also write the figures to this JSON file (rank 0)')
    return p.parse_args(argv)


def train_flops(cfg, batch_size: int, size) -> int:
    """Model FLOPs of one training iteration per process: 3 x those of
    the forward pass of ``cfg.model`` on ``batch_size`` images of ``size``
    (H, W), counted on the meta device (no memory, no compute)."""
    import torch
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    from torch.utils.flop_counter import FlopCounterMode
    with DefaultScope.overwrite_default_scope('mmseg'), \
            torch.device('meta'):
        model = MODELS.build(cfg.model)
        x = torch.empty(batch_size, 3, *size)
        with FlopCounterMode(display=False) as counter:
            model(x, mode='tensor')
    return 3 * counter.get_total_flops()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _write_data(root: str, n: int, size, seed: int = 0) -> None:
    import mmcv
    import numpy as np
    rng = np.random.default_rng(seed)
    h, w = size
    for split in ('train', 'val'):
        for i in range(n):
            img = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
            mask = np.zeros((h, w), np.uint8)
            mask[h // 4:3 * h // 4, w // 3:2 * w // 3] = 1 + i % 27
            mmcv.imwrite(img, osp.join(root, split, 'images', f'{i:03d}.png'))
            mmcv.imwrite(mask, osp.join(root, split, 'masks', f'{i:03d}.png'))


def _build_cfg(args, work_dir: str, data_root: str, launcher: str):
    from sapiens_mm.engine.runner_cfg import build_train_cfg
    options = {'model.backbone.init_cfg': None}
    if args.cpu_smoke:
        options.update({
            'model.backbone.arch': 'sapiens_tiny',
            'model.backbone.img_size': (64, 48),
            'model.data_preprocessor.size': (64, 48),
            'model.decode_head.in_channels': 64,
            'model.decode_head.channels': 64,
            'model.decode_head.deconv_out_channels': (64, 64, 64),
            'model.decode_head.conv_out_channels': (64, 64, 64),
        })
    cfg = build_train_cfg(
        args.config, work_dir=work_dir, cfg_options=options,
        launcher=launcher, seed=0)
    pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations'),
        dict(type='PackSegInputs'),
    ]
    cfg.train_dataloader.update(
        batch_size=args.batch_size, num_workers=2, persistent_workers=False)
    cfg.train_dataloader.dataset.update(data_root=data_root, pipeline=pipeline)
    cfg.val_dataloader = cfg.val_evaluator = cfg.val_cfg = None
    cfg.test_dataloader = cfg.test_evaluator = cfg.test_cfg = None
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=args.iters)
    cfg.param_scheduler = []
    cfg.log_processor = dict(by_epoch=False)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=1)
    cfg.default_hooks.checkpoint = dict(
        type='CheckpointHook', by_epoch=False, interval=10**9, save_last=False)
    cfg.default_hooks.pop('visualization', None)
    cfg.custom_hooks = list(cfg.custom_hooks) + [dict(type='GpuCheckHook')]
    if args.no_cp:
        cfg.model.backbone.with_cp = False
    if args.no_fsdp:
        cfg.pop('runner_type', None)
        cfg.pop('strategy', None)
        cfg.optim_wrapper.type = ('AmpOptimWrapper'
                                  if not args.no_bf16 else 'OptimWrapper')
        cfg.optim_wrapper.pop('use_fsdp', None)
    if args.no_bf16 or args.cpu_smoke:
        cfg.optim_wrapper.type = ('OptimWrapper' if args.no_fsdp else
                                  'FSDPOptimWrapper')
        for key in ('dtype', 'use_fsdp', 'loss_scale'):
            cfg.optim_wrapper.pop(key, None)
    return cfg


def _register_hook():
    import torch
    from mmengine.hooks import Hook
    from mmengine.registry import HOOKS

    @HOOKS.register_module(force=True)
    class GpuCheckHook(Hook):
        """Record per-iteration wall time and peak memory."""
        priority = 'VERY_LOW'

        def __init__(self):
            self.times = []
            self._t0 = 0.0

        def before_train(self, runner):
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self._t0 = time.perf_counter()

        def after_train_iter(self, runner, batch_idx, data_batch=None,
                             outputs=None):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self._t0)

    return GpuCheckHook


def main(argv=None):
    args = parse_args(argv)
    import torch
    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.stderr.write(
            'gpu_train_check.py needs a CUDA GPU, and torch.cuda.is_available()'
            ' is False on this machine: nothing was run. Run it on a GPU node '
            '(see the README, "Training on a cluster"), or pass --cpu-smoke to '
            'check the script itself with the tiny arch on CPU.\n')
        return 2
    if 'WORLD_SIZE' not in os.environ and not args.no_fsdp:
        # FSDP needs a process group, even with one GPU.
        os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(
            _free_port()), RANK='0', WORLD_SIZE='1', LOCAL_RANK='0')
    launcher = 'pytorch' if 'WORLD_SIZE' in os.environ else 'none'
    world = int(os.environ.get('WORLD_SIZE', 1))

    import sapiens_mm  # noqa: F401
    from mmengine.dist import all_reduce, get_rank
    from sapiens_mm.engine.runner_cfg import build_runner
    hook_cls = _register_hook()

    work_dir = args.work_dir or osp.join('work_dirs', 'gpu_train_check')
    data_root = osp.join(work_dir, 'data')
    size = (64, 48) if args.cpu_smoke else (1024, 768)
    done = osp.join(data_root, 'complete')
    if int(os.environ.get('LOCAL_RANK', 0)) == 0 and not osp.exists(done):
        _write_data(data_root, max(4, args.batch_size * world * 2), size)
        open(done, 'w').close()
    while not osp.exists(done):  # other ranks of this node
        time.sleep(0.5)
    cfg = _build_cfg(args, work_dir, data_root, launcher)
    flops = train_flops(cfg, args.batch_size, size)
    runner = build_runner(cfg)
    runner.train()

    hook = next(h for h in runner.hooks if isinstance(h, hook_cls))
    times = hook.times[1:] or hook.times
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if device == 'cuda':
        stats = torch.tensor([
            torch.cuda.max_memory_allocated() / 2**30,
            torch.cuda.max_memory_reserved() / 2**30
        ], device=device)
    else:
        stats = torch.tensor([
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            0.0
        ])
    if world > 1:
        all_reduce(stats, op='max')
    if get_rank() == 0:
        n_params = sum(p.numel() for p in runner.model.parameters())
        mode = ('DDP/single' if args.no_fsdp else 'FSDP') + \
            (' + act. checkpointing' if not args.no_cp else '') + \
            (' + bf16' if not (args.no_bf16 or args.cpu_smoke) else ' fp32')
        print(f'\n{osp.basename(args.config)}: {mode}, {world} process(es), '
              f'batch {args.batch_size}/GPU, device {device}'
              + (f' ({torch.cuda.get_device_name()})' if device == 'cuda'
                 else ''))
        print(f'parameters on rank 0 (sharded under FSDP): {n_params / 1e6:.1f} M')
        step = sum(times) / len(times)
        print(f'iteration time: {step:.3f} s (mean of '
              f'{len(times)}; all: {", ".join(f"{t:.3f}" for t in hook.times)})')
        if device == 'cuda':
            print(f'peak memory (max over ranks): allocated {stats[0]:.2f} GiB,'
                  f' reserved {stats[1]:.2f} GiB')
        else:
            print(f'peak resident memory (max over ranks): {stats[0]:.2f} GiB')
        from sapiens_mm.apis.benchmark import gpu_peak_tflops
        peak = args.peak_tflops or gpu_peak_tflops(torch.device(device))
        achieved = flops / step / 1e12
        print(f'model FLOPs per iteration and process (3 x forward): '
              f'{flops / 1e12:.4g} TFLOP; achieved {achieved:.4g} TFLOP/s'
              + (f' = {100 * achieved / peak:.1f} % of the {peak:.0f} TFLOP/s '
                 'dense bf16 peak' if peak else ''))
        if args.json:
            import json
            with open(args.json, 'w') as f:
                json.dump(dict(
                    config=osp.basename(args.config), mode=mode,
                    processes=world, batch_size=args.batch_size,
                    device=device, parameters=n_params, iter_s=step,
                    iter_times=hook.times, peak_allocated_gib=float(stats[0]),
                    peak_reserved_gib=float(stats[1]),
                    train_flops=flops, tflops_per_s=achieved,
                    peak_tflops=peak,
                    peak_fraction=achieved / peak if peak else None), f,
                    indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
