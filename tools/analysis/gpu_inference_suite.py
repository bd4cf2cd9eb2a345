"""The GPU inference measurements, one group of rows per call, in one process
(the stack is imported once): each row is a ``tools/analysis/benchmark.py``
run whose results go to ``<results>/<group>__<row>.json``; ``summary``
turns them into the README's tables.

    python tools/analysis/gpu_inference_suite.py env      --results DIR
    python tools/analysis/gpu_inference_suite.py model    --results DIR  # 0.3b/1b x bs 1/8
    python tools/analysis/gpu_inference_suite.py options  --results DIR  # SDPA kernels, CUDA graphs
    python tools/analysis/gpu_inference_suite.py e2e      --results DIR  # 1080p video
    python tools/analysis/gpu_inference_suite.py compile  --results DIR  # torch.compile modes
    python tools/analysis/gpu_inference_suite.py sapiens2 --results DIR
    python tools/analysis/gpu_inference_suite.py summary  --results DIR

``bash tools/analysis/gpu_inference_suite.sh`` runs them all (with the training
rows of ``gpu_train_check.py``) on a GPU machine. ``--dry`` runs every row
with tiny archs, tiny inputs and one timed pass, on any device: it checks
the script, not the speed.
"""
import argparse
import importlib.util
import json
import os
import os.path as osp
import sys
import time
import traceback

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
ARCHS = ('sapiens_0.3b', 'sapiens_1b')
# Each row: benchmark.py arguments beyond --arch / --batch-size.
GROUPS = {
    'model': [dict(arch=a, batch=b) for a in ARCHS for b in (1, 8)],
    'options': [
        *(dict(arch=a, batch=8, args=['--sdpa-backend', k]) for a in ARCHS
          for k in ('cudnn', 'flash')),
        *(dict(arch=a, batch=1, args=['--cuda-graph']) for a in ARCHS),
        dict(arch='sapiens_0.3b', batch=8, args=['--sdpa-backend',
                                                  'efficient']),
        dict(arch='sapiens_0.3b', batch=8, args=['--cuda-graph']),
    ],
    'compile': [
        dict(arch='sapiens_0.3b', batch=8, args=['--compile']),
        dict(arch='sapiens_0.3b', batch=1,
             args=['--compile-mode', 'reduce-overhead']),
        dict(arch='sapiens_1b', batch=8, args=['--compile']),
        dict(arch='sapiens_0.3b', batch=8,
             args=['--compile-mode', 'max-autotune-no-cudagraphs']),
    ],
    'sapiens2': [dict(arch=a, batch=b) for a in ('sapiens2_0.4b',
                                                 'sapiens2_1b')
                 for b in (1, 8)],
}
# End to end: the four tasks of one size on a generated video.
E2E_TASKS = {
    'pose': 'configs/pose/goliath/{arch}-210e_goliath-{size}.py',
    'seg': 'configs/seg/goliath/{arch}-200e_goliath-{size}.py',
    'depth': 'configs/depth/{arch}-200e_depth_folder-{size}.py',
    'normal': 'configs/normal/{arch}-200e_normal_folder-{size}.py',
}


def load_tool(name: str):
    """A module of tools/analysis (the benchmark CLI, the train check)."""
    spec = importlib.util.spec_from_file_location(
        f'sapiens_tools_{name}', osp.join(ROOT, 'tools', 'analysis',
                                          f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row_name(row: dict) -> str:
    extra = '_'.join(a.lstrip('-') for a in row.get('args', []))
    return f"{row['arch']}_bs{row['batch']}" + (f'_{extra}' if extra else '')


def dry_row(row: dict) -> dict:
    """The row with the tiny arch of its family."""
    arch = 'sapiens2_tiny' if row['arch'].startswith('sapiens2') else \
        'sapiens_tiny'
    return dict(row, arch=arch)


def run_rows(group: str, args) -> int:
    bench = load_tool('benchmark')
    failed = 0
    for row in GROUPS[group]:
        name = row_name(row)
        if args.dry:
            row = dry_row(row)
        if args.dry and args.device == 'cpu' and '--cuda-graph' in row.get(
                'args', []):
            print(f'-- {group} {name}: skipped (CUDA graphs need a GPU)')
            continue
        argv = ['--arch', row['arch'], '--batch-size', str(row['batch']),
                '--dtype', args.dtype, '--device', args.device,
                '--compare-stock', '--json',
                osp.join(args.results, f'{group}__{name}.json')]
        if args.dry:
            argv += ['--img-size', '64', '48', '--warmup', '0', '--repeats',
                     '1']
        else:
            argv += ['--warmup', '3', '--repeats', '10']
        argv += row.get('args', [])
        failed += not run_benchmark(bench, f'{group} {name}', argv)
    return failed


def run_benchmark(bench, label: str, argv) -> bool:
    """One benchmark.py run; a failure is reported and the caller goes on
    with the other rows."""
    print(f'-- {label}: benchmark.py {" ".join(argv)}', flush=True)
    start = time.perf_counter()
    ok = True
    try:
        bench.main(argv, prog='benchmark.py',
                   echo=lambda text: print(text, flush=True))
    except (Exception, SystemExit) as e:
        ok = False
        print(f'-- {label} FAILED: {e!r}')
        traceback.print_exc()
    print(f'-- {label}: {time.perf_counter() - start:.1f} s', flush=True)
    return ok


def run_e2e(args) -> int:
    from sapiens_mm.datasets.synthetic.video import write_video
    bench = load_tool('benchmark')
    arch, size, frames = 'sapiens_0.3b', '1024x768', 64
    video_size, unique, hold = (1080, 1920), 16, 4
    if args.dry:
        arch, size, frames, video_size, unique, hold = (
            'sapiens_tiny', '256x192', 4, (96, 128), 2, 2)
    video = osp.join(args.results, 'people_1080p.mp4')
    start = time.perf_counter()
    # 16 scenes of 1-5 people (seed 0: 2.1 on average), each held for 4
    # frames (a still shot)
    info = write_video(video, frames, size=video_size, min_people=1,
                       max_people=5, unique_frames=unique,
                       frames_per_scene=hold, seed=0,
                       num_workers=min(unique, os.cpu_count() or 1))
    people = [len(b) for b in info['boxes']]
    print(f'-- e2e: {video}: {frames} frames {video_size[1]}x'
          f'{video_size[0]}, {sum(people) / len(people):.2f} people per '
          f'frame ({min(people)}-{max(people)}), rendered in '
          f'{time.perf_counter() - start:.1f} s', flush=True)
    configs = {t: osp.join(ROOT, p.format(arch=arch, size=size))
               for t, p in E2E_TASKS.items()}
    failed = 0
    all_tasks = ('pose', 'seg', 'depth', 'normal')
    for name, tasks, extra in (
            ('dense', ('seg', 'depth', 'normal'), []),
            ('all', all_tasks, []),  # HOG person detector on every frame
            ('all_det', all_tasks, ['--e2e-det-interval', str(hold)])):
        argv = [*extra, '--arch', arch, '--e2e-only', '--end-to-end', video,
                '--e2e-config', *[configs[t] for t in tasks],
                '--batch-size', '1' if args.dry else '8', '--dtype',
                args.dtype, '--device', args.device, '--repeats',
                '2' if args.dry else '5', '--json',
                osp.join(args.results, f'e2e__{arch}_{name}.json')]
        failed += not run_benchmark(bench, f'e2e {name}', argv)
    return failed


def write_env(args) -> int:
    from importlib import metadata

    import numpy
    import torch
    env = dict(
        python=sys.version.split()[0], torch=torch.__version__,
        cuda=torch.version.cuda, numpy=numpy.__version__,
        cudnn=(torch.backends.cudnn.version()
               if torch.backends.cudnn.is_available() else None),
        gpu=(torch.cuda.get_device_name() if torch.cuda.is_available()
             else None),
        gpu_memory_mib=(torch.cuda.get_device_properties(0).total_memory //
                        2**20 if torch.cuda.is_available() else None))
    for dist in ('mmengine', 'mmcv', 'mmpretrain', 'mmpose',
                 'mmsegmentation', 'mmdet'):
        env[dist] = metadata.version(dist)
    with open(osp.join(args.results, 'env.json'), 'w') as f:
        json.dump(env, f, indent=1)
    print('-- env: ' + ', '.join(f'{k} {v}' for k, v in env.items()))
    return 0


# ----------------------------------------------------------------- summary
def _load(results: str):
    rows = {}
    for name in sorted(os.listdir(results)):
        if name.endswith('.json'):
            with open(osp.join(results, name)) as f:
                rows[name[:-5]] = json.load(f)
    return rows


def _model_line(r: dict) -> str:
    m = r['model_only']
    frac = m.get('peak_fraction')
    opts = m.get('options', {})
    desc = ', '.join(
        x for x in (
            f"compile {opts['compile_mode']}" if opts.get('compile_mode')
            else '', f"attention {opts['sdpa']}" if opts.get('sdpa', 'auto')
            != 'auto' else '', 'CUDA graph' if opts.get('cuda_graph') else '')
        if x) or 'eager'
    lim = m['limit_s']['total']
    stock = next(iter(m.get('comparisons', {}).values()), {})
    return (f"| {r['model']} | {m['batch_size']} | {desc} | "
            f"{m['images_per_s']:.1f} | {m['latency']['median'] * 1e3:.1f} | "
            f"{m['peak_mem'] / 2**20:.0f} | {m['gflops_per_s'] / 1e3:.1f} | "
            f"{'n/a' if frac is None else f'{100 * frac:.1f}'} | "
            f"{lim * 1e3:.1f} ms / {m['achieved_over_limit']:.2f} | "
            f"{stock.get('speedup', float('nan')):.2f}x "
            f"({stock.get('max_abs_diff') or float('nan'):.3g}) |")


def summary(args) -> int:
    rows = _load(args.results)
    lines = []
    env = rows.pop('env', None)
    if env:
        lines.append('Stack: ' + ', '.join(f'{k} {v}' for k, v in env.items())
                     + '\n')
    model_lines = [
        _model_line(r)
        for group in ('model', 'options', 'compile', 'sapiens2')
        for name, r in rows.items()
        if name.startswith(group + '__') and 'model_only' in r
    ]
    if model_lines:
        lines += [
            '| model | batch | options | images/s | latency median (ms) | '
            'peak mem (MiB) | TFLOP/s | % of bf16 peak | limit / '
            'achieved/limit | vs stock (max abs diff) |',
            '|---|---|---|---|---|---|---|---|---|---|', *model_lines]
    e2e = [(n, r) for n, r in rows.items() if n.startswith('e2e__')]
    if e2e:
        lines += ['', '| end to end | frames | people per frame | frames/s '
                  '| model-only frames/s | ratio |', '|---|---|---|---|---|'
                  '---|']
        for name, r in e2e:
            e = r['end_to_end']
            lines.append(
                f"| {name[5:]} ({', '.join(e.get('tasks', []))}) | "
                f"{e['images']} | {e.get('crops_per_image', 0):.2f} | "
                f"{e['e2e_images_per_s']:.2f} | "
                f"{e['model_images_per_s']:.2f} | {e['ratio']:.3f} |")
    train = [(n, r) for n, r in rows.items() if n.startswith('train__')]
    if train:
        lines += ['', '| training | mode | step (s) | peak alloc (GiB) | '
                  'TFLOP/s (3 x forward) | % of bf16 peak |',
                  '|---|---|---|---|---|---|']
        for name, r in train:
            frac = r.get('peak_fraction')
            lines.append(
                f"| {r['config']} | {r['mode']} | {r['iter_s']:.3f} | "
                f"{r['peak_allocated_gib']:.2f} | {r['tflops_per_s']:.1f} | "
                f"{'n/a' if frac is None else f'{100 * frac:.1f}'} |")
    text = '\n'.join(lines)
    print(text)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text + '\n')
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('group', choices=['env', 'e2e', 'summary', *GROUPS])
    p.add_argument('--results', required=True,
                   help='folder of the per-row JSON files')
    p.add_argument('--device', default='cuda')
    p.add_argument('--dtype', default='bf16')
    p.add_argument('--dry', action='store_true',
                   help='tiny archs and inputs, one timed pass (checks the '
                   'script on any machine)')
    p.add_argument('--out', default=None, help='summary: also write here')
    args = p.parse_args(argv)
    os.makedirs(args.results, exist_ok=True)
    if args.group == 'summary':
        return summary(args)
    if args.group == 'env':
        return write_env(args)
    if args.group == 'e2e':
        return 1 if run_e2e(args) else 0
    return 1 if run_rows(args.group, args) else 0


if __name__ == '__main__':
    sys.exit(main())
