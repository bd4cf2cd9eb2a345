"""Speed of a Sapiens model against the limit of this machine.

    python tools/analysis/benchmark.py --arch sapiens_0.3b --compare-stock
    python tools/analysis/benchmark.py --arch sapiens2_0.4b --dtype bf16 \
        --autocast --compare-routes --compare-transformers \
        --compare-runtimes
    python tools/analysis/benchmark.py --arch sapiens_0.3b --end-to-end photos/
    python tools/analysis/benchmark.py --decode

The measuring is :mod:`sapiens_mm.analysis` (it returns data); this
tool parses the command line, prints the reports and writes ``--json``.
See ``--help``. As a whole program it sets ``malloc`` to keep freed memory
on a CPU, as the command line does (``--system-malloc`` leaves it).
"""
import argparse
import json
import os
import os.path as osp
import shutil
import sys
import tempfile
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from mmengine.config import Config, DictAction

import sapiens_mm  # noqa: F401  (registers the models)
from sapiens_mm.analysis import (
    BENCHMARK_DTYPES,
    COMPILE_MODES,
    EXPORT_RUNTIMES,
    backbone_config,
    benchmark_decode,
    benchmark_model,
    build_backbone,
    build_exported_runtimes,
    build_registry_route,
    build_transformers_sapiens2,
    export_onnx,
    end_to_end,
    format_decode,
    format_end_to_end,
    format_report,
    is_sapiens2_arch,
    result_to_json,
)
from sapiens_mm.apis import inferencers
from sapiens_mm.apis.inference import init_model
from sapiens_mm.cli import add_debug_argument, run_cli
from sapiens_mm.models.backbones import (
    Sapiens2VisionTransformer,
    SapiensVisionTransformer,
)
from sapiens_mm.utils.cpu_allocator import keep_freed_memory
from sapiens_mm.utils.image_io import list_images
from sapiens_mm.utils.sdpa import SDPA_BACKENDS
from sapiens_mm.zoo.model_zoo import config_root


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The argument parser of this tool."""
    p = argparse.ArgumentParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            'Speed of a Sapiens backbone or task model: images/s, latency, '
            'peak memory, achieved GFLOP/s, and the limit (the time its '
            'FLOPs take at the rates this machine reaches on the model\'s '
            'own GEMM shapes, measured in the same run, attention counted at '
            'that GEMM rate; the attention kernel\'s own rate is printed '
            'beside it).'),
        epilog=(
            'Examples:\n'
            '  python tools/analysis/benchmark.py --arch sapiens_0.3b '
            '--compare-stock\n'
            '  python tools/analysis/benchmark.py --arch sapiens_0.3b '
            '--dtype bf16 --compare-stock\n'
            '  python tools/analysis/benchmark.py --arch sapiens2_0.4b '
            '--dtype bf16 --compare-stock\n'
            '  python tools/analysis/benchmark.py --arch sapiens2_0.4b '
            '--dtype bf16 --autocast --compare-routes '
            '--compare-transformers --compare-runtimes\n'
            '  python tools/analysis/benchmark.py --arch sapiens_0.3b '
            '--end-to-end photos/\n'
            '  python tools/analysis/benchmark.py --config '
            'configs/pose/goliath/sapiens_1b-210e_goliath-1024x768.py '
            '--device cuda --dtype bf16 --batch-size 8 --compile'))
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        '--arch', default='sapiens_0.3b',
        help='backbone arch: sapiens_0.3b | sapiens_0.6b | sapiens_1b | '
        'sapiens_2b | sapiens_tiny, or Sapiens2: sapiens2_0.1b | '
        'sapiens2_0.4b | sapiens2_0.8b | sapiens2_1b | sapiens2_1b_4k | '
        'sapiens2_5b | sapiens2_tiny (default: %(default)s)')
    what.add_argument('--config', default=None,
                      help='a task config (pose / seg / depth / normal): '
                      'times the whole model (backbone + head)')
    p.add_argument('--layers', type=int, default=None,
                   help='with --arch: keep only the first N encoder layers '
                   '(quick runs; FLOPs and limit follow)')
    p.add_argument('--checkpoint', default=None,
                   help='weights for --config (default: random)')
    p.add_argument('--img-size', type=int, nargs=2, default=(1024, 768),
                   metavar=('H', 'W'), help='input size (default: 1024 768)')
    p.add_argument('--batch-size', type=int, default=1)
    p.add_argument('--dtype', choices=BENCHMARK_DTYPES, default='fp32')
    p.add_argument('--autocast', action='store_true',
                   help='apply bf16 / fp16 with torch.autocast (fp32 '
                   'weights) instead of casting the model to the dtype')
    p.add_argument('--device', default=None,
                   help='cpu, cuda or cuda:N (default: cuda if available)')
    p.add_argument('--threads', type=int, default=None,
                   help='CPU threads for torch (default: torch\'s choice)')
    p.add_argument('--warmup', type=int, default=1,
                   help='untimed forward passes (default: %(default)s)')
    p.add_argument('--repeats', type=int, default=3,
                   help='rounds: each times the model, each comparison '
                   'model and each kernel once (end to end: the model-only '
                   'passes and the whole run once); default: %(default)s')
    p.add_argument('--compile', action='store_true',
                   help='time torch.compile(model) (compiled in the warm-up)')
    p.add_argument('--compile-mode', choices=COMPILE_MODES, default=None,
                   help='torch.compile mode (implies --compile): '
                   'reduce-overhead adds CUDA graphs on a GPU, max-autotune '
                   'also searches GEMM kernels')
    p.add_argument('--sdpa-backend', choices=SDPA_BACKENDS, default='auto',
                   help='attention kernel of our model and of the attention '
                   'timings: auto (the C CPU kernel, bf16 or fp32, where '
                   'it applies, else PyTorch chooses), torch (PyTorch '
                   'chooses), cudnn, '
                   'flash, efficient, math; cudnn / efficient fall back to '
                   'auto on CPU (default: %(default)s)')
    p.add_argument('--cuda-graph', action='store_true',
                   help='capture our forward pass as one CUDA graph and time '
                   'its replays (CUDA only; fixed batch)')
    p.add_argument('--channels-last', action='store_true',
                   help='channels-last 4-D weights (patch embedding, head '
                   'convolutions)')
    p.add_argument('--breakdown', action='store_true',
                   help='after the rounds, one more pass with each GEMM-like '
                   'call, attention call and norm timed where the model makes '
                   'it: where the time goes, beside the limit\'s parts '
                   '(eager only: not with --compile / --cuda-graph)')
    p.add_argument('--compare-stock', action='store_true',
                   help='also time mmpretrain\'s VisionTransformer (Sapiens2: '
                   'a plain-PyTorch reference written from the official '
                   'model\'s description) with the same arch and weights; '
                   'print the speed ratio and the max output difference')
    p.add_argument('--compare-transformers', action='store_true',
                   help='Sapiens2 --arch only: also time Hugging Face '
                   'Transformers\' Sapiens2Model (pip install '
                   'transformers==5.23.0) on the same weights in the same '
                   'interleaved rounds; print the speed ratio and the max '
                   'output difference (its RoPE is float32, ours the '
                   'official bf16: ~1e-3 relative)')
    p.add_argument('--compare-routes', action='store_true',
                   help='also time the same model built through the '
                   'registry (MODELS.build from its config, as mmengine\'s '
                   'Runner and tools/test.py build it; same weights, the '
                   'same optimize_for_inference call), and report every '
                   'comparison against it too')
    p.add_argument('--compare-runtimes', nargs='*', default=None,
                   choices=EXPORT_RUNTIMES, metavar='RUNTIME',
                   help='also time the model exported to ONNX (float32, '
                   'static shape) and run by these CPU runtimes on the same '
                   'weights: onnxruntime (float32) and openvino (in the '
                   '--dtype precision; pip install openvino); default both')
    p.add_argument('--system-malloc', action='store_true',
                   help='leave malloc as the process has it (by default, on '
                   'a CPU, this program makes malloc keep freed memory, as '
                   'the inference command line does; a library user\'s '
                   'process has the system setting)')
    p.add_argument('--peak-tflops', type=float, default=None,
                   help='GPU peak TFLOP/s for the dtype (default: a table '
                   'of known GPUs, e.g. H100/H200 SXM 989, A100 312)')
    e = p.add_argument_group('end-to-end')
    e.add_argument('--end-to-end', metavar='SOURCE', default=None,
                   help='time SapiensInferencer on a folder of images or a '
                   'video (decode, detection, pre-processing, models, '
                   'decoding, post-processing, writing) against model-only '
                   'time of the same work at the same batch size')
    e.add_argument('--e2e-config', nargs='+', default=None,
                   help='task config(s) the inferencer runs, e.g. a pose '
                   'and a seg config (default: with --config that config, '
                   'else the Goliath body-part segmentation config of '
                   '--arch)')
    e.add_argument('--e2e-boxes', metavar='JSON', default=None,
                   help='person boxes for pose, used for every frame: a '
                   'JSON file with a list of [x1, y1, x2, y2] (default: '
                   'the HOG detector)')
    e.add_argument('--e2e-only', action='store_true',
                   help='skip the model-only benchmark of --arch / --config '
                   '(the end-to-end run times its own model-only passes)')
    e.add_argument('--e2e-cfg-options', nargs='+', default=None,
                   action=DictAction, metavar='KEY=VALUE',
                   help='overrides merged into each --e2e-config that has '
                   'the key, e.g. model.test_cfg.flip_test=False (the pose '
                   'config\'s flip test)')
    e.add_argument('--e2e-det-interval', type=int, default=1, metavar='N',
                   help='on a video, run the person detector every N frames '
                   '(the others take their boxes from the tracked people; '
                   'default: %(default)s)')
    e.add_argument('--e2e-images', type=int, default=None,
                   help='use only the first N images / frames of SOURCE')
    e.add_argument('--out-dir', default=None,
                   help='where the inferencer writes (default: a temporary '
                   'folder, deleted afterwards)')
    d = p.add_argument_group('decoding')
    d.add_argument('--decode', action='store_true',
                   help='time heatmap -> keypoint decoding instead: mmpose\'s '
                   'UDPHeatmap against sapiens_mm\'s batched decoder (numpy '
                   'and torch on --device), ms per person for 17, 133 and '
                   '308 keypoints')
    d.add_argument('--decode-sizes', nargs='+', default=['64x48', '256x192'],
                   metavar='HxW', help='heatmap sizes (default: 64x48, the '
                   '256x192 crops\' heatmaps, and 256x192, the 1024x768 '
                   'crops\')')
    d.add_argument('--decode-people', type=int, default=4,
                   help='people per decoding call (default: %(default)s)')
    p.add_argument('--json', default=None,
                   help='also write the results to this JSON file')
    add_debug_argument(p)
    return p


def _has_key(cfg, key: str) -> bool:
    node = cfg
    for part in key.split('.'):
        if not hasattr(node, 'get') or node.get(part) is None:
            return False
        node = node.get(part)
    return True


def _with_options(configs: Sequence[str], options: dict) -> list:
    """The config files as Configs, each ``KEY: value`` of ``options`` merged
    into those that have ``KEY``.

    Raises:
        SystemExit: A key is in none of the configs.
    """
    out, used = [], set()
    for path in configs:
        cfg = Config.fromfile(path)
        mine = {k: v for k, v in options.items() if _has_key(cfg, k)}
        cfg.merge_from_dict(mine)
        used.update(mine)
        out.append(cfg)
    unused = sorted(set(options) - used)
    if unused:
        raise SystemExit(f'--e2e-cfg-options: no --e2e-config has '
                         f'{", ".join(unused)}.')
    return out


def _read_boxes(path: str):
    """(N, 4) float32 boxes from a JSON list of [x1, y1, x2, y2]."""
    try:
        with open(path) as f:
            boxes = np.asarray(json.load(f), np.float32)
    except (OSError, ValueError) as e:
        raise SystemExit(f'--e2e-boxes {path}: cannot read a JSON list of '
                         f'[x1, y1, x2, y2] boxes ({e}).') from None
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise SystemExit(f'--e2e-boxes {path}: expected a list of [x1, y1, '
                         f'x2, y2] boxes, got an array of shape '
                         f'{boxes.shape}.')
    return boxes


def _default_e2e_config(arch: str) -> str:
    name = str(arch).lower()
    name = name if name.startswith('sapiens_') else 'sapiens_' + name
    root = config_root() / 'seg' / 'goliath'
    found = sorted(root.glob(f'{name}-*_goliath-*.py'))
    if not found:
        raise ValueError(
            f'No Goliath segmentation config for arch {arch!r} in {root}; '
            'pass --e2e-config.')
    return str(found[0])


def say(text: str) -> None:
    """Print a report line now (a long run shows its progress)."""
    print(text, flush=True)


def main(argv: Optional[Sequence[str]] = None,
         prog: Optional[str] = None,
         echo: Callable[[str], None] = say) -> dict:
    """Run the benchmark; returns the results (also written by ``--json``).

    Args:
        argv: The command line (default: ``sys.argv[1:]``).
        prog: Program name of the help text.
        echo: Where the report lines go (default: printed).

    Raises:
        SystemExit: Bad arguments, with a message saying what to change.
    """
    args = build_parser(prog).parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    if torch.device(device).type == 'cpu':
        kept = not args.system_malloc and keep_freed_memory()
        echo('malloc: ' + ('keeps freed memory (this program\'s setting, as '
                           'the inference command line\'s)' if kept else
                           'the system setting'))
    if args.decode:
        try:
            sizes = [tuple(int(v) for v in s.lower().split('x'))
                     for s in args.decode_sizes]
        except ValueError:
            raise SystemExit(f'--decode-sizes takes HxW sizes such as 64x48, '
                             f'got {args.decode_sizes}.') from None
        rows = benchmark_decode(
            heatmap_sizes=sizes, people=args.decode_people,
            devices=sorted({'cpu', device}), warmup=args.warmup,
            repeats=args.repeats)
        echo(format_decode(rows))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(dict(decode=rows), f, indent=1)
        return dict(decode=rows)
    if args.e2e_only and not args.end_to_end:
        raise SystemExit('--e2e-only needs --end-to-end FOLDER.')
    if args.cuda_graph and not str(device).startswith('cuda'):
        raise SystemExit(f'--cuda-graph needs a CUDA device (got {device}); '
                         'leave it off on CPU.')
    if args.breakdown and (args.compile or args.compile_mode
                           or args.cuda_graph):
        raise SystemExit('--breakdown times each call of the eager model: '
                         'leave out --compile / --compile-mode / '
                         '--cuda-graph.')
    if args.compare_runtimes is not None and not str(device).startswith(
            'cpu'):
        raise SystemExit('--compare-runtimes times CPU runtimes: use '
                         '--device cpu.')
    model = backbone_cfg = None
    if args.config:
        if not args.e2e_only:
            model = init_model(args.config, args.checkpoint)
    else:
        if args.checkpoint:
            raise SystemExit('--checkpoint goes with --config.')
        zoo = (Sapiens2VisionTransformer if is_sapiens2_arch(args.arch) else
               SapiensVisionTransformer).arch_zoo
        if args.arch.lower() not in zoo:
            raise SystemExit(
                f'Unknown --arch {args.arch!r}; choose one of '
                f'{sorted(SapiensVisionTransformer.arch_zoo)} or '
                f'{sorted(Sapiens2VisionTransformer.arch_zoo)}.')
        if not args.e2e_only:
            backbone_cfg = backbone_config(args.arch, tuple(args.img_size),
                                           num_layers=args.layers)
            model = build_backbone(args.arch, tuple(args.img_size),
                                   num_layers=args.layers)
    what = args.config or args.arch + (f' ({args.layers} layers)'
                                       if args.layers else '')
    results = dict(model=what)
    if not args.e2e_only:
        echo(f'== {what}')
        compare, optimized = {}, []
        if args.compare_routes:
            compare['registry route'] = build_registry_route(model,
                                                             backbone_cfg)
            optimized.append('registry route')
        if args.compare_transformers:
            try:
                compare['transformers'] = build_transformers_sapiens2(model)
            except (ImportError, TypeError) as e:
                raise SystemExit(str(e)) from None
        onnx_dir = None
        if args.compare_runtimes is not None:
            onnx_dir = tempfile.mkdtemp(prefix='sapiens_benchmark_onnx_')
            example = torch.zeros(args.batch_size, 3, *args.img_size)
            try:
                path = export_onnx(model, example,
                                   osp.join(onnx_dir, 'model.onnx'))
                compare.update(build_exported_runtimes(
                    path, args.compare_runtimes or EXPORT_RUNTIMES,
                    args.dtype))
            except ImportError as e:
                shutil.rmtree(onnx_dir, ignore_errors=True)
                raise SystemExit(str(e)) from None
        try:
            result = benchmark_model(
                model, batch_size=args.batch_size,
                img_size=tuple(args.img_size), dtype=args.dtype,
                precision='autocast' if args.autocast else 'cast',
                device=device, warmup=args.warmup, repeats=args.repeats,
                compile=args.compile, compare_stock=args.compare_stock,
                compare_with=compare, optimized=optimized,
                peak_tflops=args.peak_tflops,
                compile_mode=args.compile_mode, sdpa=args.sdpa_backend,
                cuda_graph=args.cuda_graph,
                channels_last=args.channels_last, breakdown=args.breakdown)
        finally:
            if onnx_dir:
                shutil.rmtree(onnx_dir, ignore_errors=True)
        echo(format_report(result))
        results['model_only'] = result_to_json(result)
    del model
    if args.end_to_end:
        config = args.e2e_config or args.config or _default_e2e_config(
            args.arch)
        config = [config] if isinstance(config, str) else list(config)
        names = ', '.join(config) + (
            f' with {args.e2e_cfg_options}' if args.e2e_cfg_options else '')
        if args.e2e_cfg_options:
            config = _with_options(config, args.e2e_cfg_options)
        if len(config) == 1:
            config = config[0]
        boxes = None
        if args.e2e_boxes:
            boxes = _read_boxes(args.e2e_boxes)
        inferencer = inferencers.SapiensInferencer(
            models=config, device=device, batch_size=args.batch_size,
            dtype=args.dtype, compile=args.compile,
            det_interval=args.e2e_det_interval, detector='hog')
        out_dir = args.out_dir or tempfile.mkdtemp(prefix='sapiens_e2e_')
        folder = args.end_to_end
        if args.e2e_images and os.path.isdir(folder):
            files = [os.path.join(folder, f) for f in list_images(folder)]
            folder_tmp = tempfile.mkdtemp(prefix='sapiens_e2e_in_')
            for f in files[:args.e2e_images]:
                os.symlink(os.path.abspath(f),
                           os.path.join(folder_tmp, os.path.basename(f)))
            folder = folder_tmp
        try:
            e2e = end_to_end(inferencer, folder, out_dir,
                             batch_size=args.batch_size,
                             repeats=args.repeats, bboxes=boxes,
                             max_frames=args.e2e_images)
        finally:
            if not args.out_dir:
                shutil.rmtree(out_dir, ignore_errors=True)
            if folder != args.end_to_end:
                shutil.rmtree(folder, ignore_errors=True)
        mode = '' if args.dtype == 'fp32' else ' (autocast)'
        echo(f'== end-to-end: SapiensInferencer({names}), dtype '
             f'{args.dtype}{mode}, compile {args.compile}, on '
             f'{args.end_to_end}')
        echo(format_end_to_end(e2e))
        results['end_to_end'] = result_to_json(e2e)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == '__main__':
    run_cli(main, prog='tools/analysis/benchmark.py')
    sys.exit(0)
