"""What activation checkpointing and bf16 autocast save, measured on CPU.

Trains a Sapiens-style ViT encoder (+ a 1x1 conv head and a per-pixel
cross-entropy loss) for a few AdamW steps in four settings: fp32, fp32 +
activation checkpointing (``with_cp=True``), bf16 autocast, bf16 autocast +
activation checkpointing. Each setting runs in a fresh Python process and
reports:

- ``state``: resident memory after a warm-up step (Python and the
  libraries, weights, AdamW moments), the floor every setting shares;
- ``peak``: the highest resident memory (Linux ``VmHWM``) during the timed
  steps, and ``peak - state``, the memory the training step itself needs
  (mostly the activations kept for the backward pass);
- the mean wall time of a step.

Example (the README table; about 10 minutes on 2 CPU cores)::

    python tools/analysis/memory_benchmark.py --arch vit-base \\
        --img-size 512 384 --batch-size 2 --steps 2

Peak memory is read from ``/proc/self/status`` (Linux); big allocations are
forced to ``mmap`` (``MALLOC_MMAP_THRESHOLD_``) so freed activations leave
resident memory at once and the numbers reflect the live tensors.
"""
import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time

SETTINGS = {
    'fp32': dict(with_cp=False, bf16=False),
    'fp32+cp': dict(with_cp=True, bf16=False),
    'bf16': dict(with_cp=False, bf16=True),
    'bf16+cp': dict(with_cp=True, bf16=True),
}
# A mid-size arch between sapiens_tiny and sapiens_0.3b (ViT-Base widths).
CUSTOM_ARCHS = {
    'vit-base':
    dict(embed_dims=768, num_layers=12, num_heads=12,
         feedforward_channels=3072),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--arch', default='vit-base',
                   help='vit-base (768 wide, 12 layers) or a Sapiens arch: '
                   'sapiens_0.3b | sapiens_0.6b | sapiens_1b | sapiens_2b | '
                   'sapiens_tiny')
    p.add_argument('--img-size', type=int, nargs=2, default=(512, 384),
                   metavar=('H', 'W'))
    p.add_argument('--batch-size', type=int, default=2)
    p.add_argument('--steps', type=int, default=2,
                   help='timed steps after one warm-up step')
    p.add_argument('--settings', nargs='+', default=list(SETTINGS),
                   choices=list(SETTINGS))
    p.add_argument('--threads', type=int, default=None,
                   help='torch threads (default: torch default)')
    p.add_argument('--json', help='also write the results to this file')
    p.add_argument('--child', help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _status_kib(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise RuntimeError(f'{field} not in /proc/self/status')


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0)."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def _trim() -> None:
    gc.collect()
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass


def run_child(args) -> dict:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from sapiens_mm.models.backbones.sapiens_vision_transformer import \
        SapiensVisionTransformer

    setting = SETTINGS[args.child]
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    arch = CUSTOM_ARCHS.get(args.arch, args.arch)
    h, w = args.img_size
    backbone = SapiensVisionTransformer(
        arch=arch, img_size=(h, w), with_cp=setting['with_cp'])
    head = nn.Conv2d(backbone.embed_dims, 28, 1)
    model = nn.ModuleDict(dict(backbone=backbone, head=head)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch_size, 3, h, w)
    target = torch.randint(0, 28, (args.batch_size, h // 16, w // 16))

    def step():
        with torch.autocast('cpu', dtype=torch.bfloat16,
                            enabled=setting['bf16']):
            feat = model['backbone'](x)[-1]
            logits = model['head'](feat)
            loss = F.cross_entropy(logits.float(), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    step()  # warm-up: allocates gradients and AdamW moments
    _trim()
    state_kib = _status_kib('VmRSS')
    exact = _reset_peak()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    peak_kib = _status_kib('VmHWM')
    return dict(
        setting=args.child,
        params_m=sum(p.numel() for p in model.parameters()) / 1e6,
        state_mib=state_kib / 1024,
        peak_mib=peak_kib / 1024,
        step_mib=(peak_kib - state_kib) / 1024,
        step_s=sum(times) / len(times),
        exact_peak=exact,
        threads=torch.get_num_threads())


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print('RESULT ' + json.dumps(run_child(args)), flush=True)
        return None
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_='65536')
    results = []
    for name in args.settings:
        cmd = [sys.executable, os.path.abspath(__file__), '--child', name,
               '--arch', args.arch, '--img-size', *map(str, args.img_size),
               '--batch-size', str(args.batch_size), '--steps',
               str(args.steps)]
        if args.threads:
            cmd += ['--threads', str(args.threads)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        lines = [ln for ln in out.stdout.splitlines()
                 if ln.startswith('RESULT ')]
        if out.returncode != 0 or not lines:
            sys.stderr.write(out.stdout + out.stderr)
            raise SystemExit(f'setting {name} failed (exit '
                             f'{out.returncode}).')
        results.append(json.loads(lines[-1][len('RESULT '):]))
        print(f'{name}: done', file=sys.stderr, flush=True)
    base = results[0]
    h, w = args.img_size
    tokens = (h // 16) * (w // 16)
    print(f'\narch {args.arch} ({base["params_m"]:.1f} M params), input '
          f'{h}x{w} ({tokens} tokens), batch {args.batch_size}, AdamW, '
          f'{base["threads"]} CPU threads, mean of {args.steps} steps\n')
    print('| setting | state (MiB) | peak (MiB) | step memory = peak - state '
          '(MiB) | step time (s) |')
    print('|---|---|---|---|---|')
    for r in results:
        rel = r['step_mib'] / base['step_mib'] if base['step_mib'] else 0
        print(f'| {r["setting"]} | {r["state_mib"]:.0f} | '
              f'{r["peak_mib"]:.0f} | {r["step_mib"]:.0f} ({rel:.0%} of '
              f'{base["setting"]}) | {r["step_s"]:.2f} |')
    if not all(r['exact_peak'] for r in results):
        print('\n(peak includes the warm-up step: /proc/self/clear_refs '
              'could not be written)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(args=vars(args), results=results), f, indent=2)
    return results


if __name__ == '__main__':
    main()
