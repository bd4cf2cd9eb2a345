"""Scaling of sharded inference: images/s of 1 process against N processes
over the same inputs, in one run, and the efficiency.

    python tools/analysis/sharded_scaling.py                  # CPU: 1x2 vs 2x1
    python tools/analysis/sharded_scaling.py --procs 8 --threads 1 \\
        --device cuda --num 2000 --model-size 0.3b             # a GPU node

Both runs go through the real launch path on a generated set of images
(``--num`` noise images of ``--input-size``): the single process is
``tools/infer.py`` over a list file (``--launcher none``) with ``--procs x
--threads`` threads, the sharded one ``tools/dist_infer.sh N`` with
``--threads`` threads per process, so that both use the same number of
cores; a third run, 1 process with ``--threads`` threads, gives the
speed-up of N processes over one. The figure is the engine's own
(``summary.json``): frames over the slowest rank's processing time,
without the start-up (imports, model build). On CPU both runs use the
same cores and the efficiency is N-process images/s / 1-process
images/s: 1.0 means the processes do as well as the threads they replace,
above 1.0 that they use the cores better (no synchronisation inside small
operators), below 1.0 that the ranks contend (memory bandwidth,
stragglers). With ``--device cuda`` the single
process has one GPU and the N processes N GPUs: the efficiency is
N-process images/s / (N x 1-process images/s).

Prints the CPU model; on a machine shared with other jobs the figures move
from run to run: repeat, and read the efficiency rather than the rates.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's."""
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def make_inputs(folder: str, num: int, size) -> str:
    """``num`` random images and their list file; returns the list."""
    import cv2
    import numpy as np
    rng = np.random.default_rng(0)
    h, w = size
    names = []
    for i in range(num):
        name = f'img{i:05d}.jpg'
        cv2.imwrite(os.path.join(folder, name),
                    rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        names.append(name)
    listing = os.path.join(folder, 'inputs.txt')
    with open(listing, 'w', encoding='utf-8') as f:
        f.write('\n'.join(names) + '\n')
    return listing


def make_model(folder: str, task: str, model_size: str, size) -> list:
    """The shipped ``task`` config of ``model_size`` at input ``size`` and
    its (random)
    weights saved once, so every process runs the same model; the CLI
    arguments that load them."""
    import torch
    from mmengine.config import Config
    from mmengine.registry import DefaultScope

    import sapiens_mm  # noqa: F401  (registers the models)
    from sapiens_mm.zoo import shipped_config
    cfg = Config.fromfile(str(shipped_config(task, model_size)))
    h, w = size
    cfg.model.backbone.img_size = (h, w)
    cfg.model.data_preprocessor.size = (h, w)
    for step in cfg.test_dataloader.dataset.pipeline:
        if step['type'] == 'Resize':
            step['scale'] = (w, h)
    cfg_path = os.path.join(folder, f'{task}.py')
    cfg.dump(cfg_path)
    scope = 'mmseg'
    from mmseg.registry import MODELS
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(scope):
        model = MODELS.build(cfg.model)
    ckpt = os.path.join(folder, f'{task}.pth')
    torch.save({'state_dict': model.state_dict()}, ckpt)
    return [f'--{task}', ckpt, f'--{task}-config', cfg_path]


def run(cmd, env, log) -> float:
    """Run ``cmd``; its wall time (raises on failure, with the log)."""
    t0 = time.perf_counter()
    with open(log, 'w') as f:
        rc = subprocess.call(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                             cwd=ROOT)
    if rc != 0:
        with open(log) as f:
            sys.exit(f'{" ".join(cmd[:4])}... failed ({rc}):\n'
                     f'{f.read()[-3000:]}')
    return time.perf_counter() - t0


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--procs', type=int, default=2,
                   help='processes of the sharded run (default: 2)')
    p.add_argument('--threads', type=int, default=1,
                   help='threads per process of the sharded run; the single '
                   'process gets procs x threads (default: 1)')
    p.add_argument('--num', type=int, default=64,
                   help='images (default: 64)')
    p.add_argument('--input-size', type=int, nargs=2, default=(256, 192),
                   metavar=('H', 'W'), help='image and model input size '
                   '(default: 256 192)')
    p.add_argument('--model-size', default='tiny',
                   help='size of the seg model: tiny, 0.3b, 0.6b, 1b, 2b '
                   '(default: tiny)')
    p.add_argument('--batch-size', type=int, default=4)
    p.add_argument('--device', default='cpu', help='cpu or cuda')
    p.add_argument('--json', help='also write the figures to this file')
    args = p.parse_args(argv)
    if args.procs < 2:
        p.error('--procs must be 2 or more (it is compared with 1 process)')
    with tempfile.TemporaryDirectory() as tmp:
        listing = make_inputs(tmp, args.num, args.input_size)
        model = make_model(tmp, 'seg', args.model_size, args.input_size)
        common = ['--no-save-vis', '--batch-size', str(args.batch_size),
                  '--progress-interval', '0'] + model
        if args.device != 'cuda':
            common += ['--device', 'cpu']
        base_env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
                        os.environ.get('PYTHONPATH', ''),
                        PYTHON=sys.executable)
        figures = {}
        for procs, threads in ((1, args.procs * args.threads),
                               (1, args.threads),
                               (args.procs, args.threads)):
            label = f'{procs} process{"es" if procs > 1 else ""} x {threads}'
            out = os.path.join(tmp, f'out{procs}x{threads}')
            env = dict(base_env, OMP_NUM_THREADS=str(threads),
                       MKL_NUM_THREADS=str(threads))
            if procs == 1:
                cmd = [sys.executable, os.path.join(ROOT, 'tools', 'infer.py'),
                       listing, '--out-dir', out] + common
            else:
                import socket
                with socket.socket() as s:
                    s.bind(('127.0.0.1', 0))
                    env['PORT'] = str(s.getsockname()[1])
                cmd = ['bash', os.path.join(ROOT, 'tools', 'dist_infer.sh'),
                       str(procs), listing, '--out-dir', out] + common
            wall = run(cmd, env, os.path.join(tmp, f'log{procs}x{threads}'))
            with open(os.path.join(out, 'summary.json')) as f:
                summary = json.load(f)
            figures[label] = dict(
                processes=procs, threads_per_process=threads,
                images_per_s=summary['images_per_s'],
                processing_s=summary['seconds'], wall_s=round(wall, 2),
                ranks=[r['images_per_s'] for r in summary['ranks']])
    one, one_thread, many = figures.values()
    efficiency = many['images_per_s'] / one['images_per_s']
    if args.device == 'cuda':  # one GPU against N
        efficiency /= args.procs
    speedup = many['images_per_s'] / one_thread['images_per_s']
    report = dict(cpu=cpu_model(), cores=os.cpu_count(),
                  model_size=args.model_size,
                  size=list(args.input_size), images=args.num,
                  batch_size=args.batch_size, device=args.device,
                  runs=figures, efficiency=round(efficiency, 3),
                  speedup_over_one_process=round(speedup, 3))
    h, w = args.input_size
    print(f'CPU: {report["cpu"]} ({report["cores"]} cores visible); '
          f'sapiens_{args.model_size} seg at {h}x{w}, {args.num} images, '
          f'batch {args.batch_size}, {args.device}')
    for label, f in figures.items():
        print(f'{label:>16} thread(s): {f["images_per_s"]:.2f} images/s '
              f'(processing {f["processing_s"]:.1f} s, wall with start-up '
              f'{f["wall_s"]:.1f} s; per rank {f["ranks"]})')
    print(f'efficiency ({args.procs} processes against 1'
          f'{", per GPU" if args.device == "cuda" else ", same cores"}): '
          f'{efficiency:.2f}')
    print(f'speed-up of {args.procs} processes over 1 process with '
          f'{args.threads} thread(s): {speedup:.2f}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == '__main__':
    main()
