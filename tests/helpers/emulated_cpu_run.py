"""Run by tests/test_emulated_cpu.py twice, natively and on an emulated CPU:
tiny pose, seg and Sapiens2 normal models in ``auto``, ``fp32`` and
``bf16`` through the inferencers and ``python -m sapiens_mm`` (run in this
process, as ``python -m`` runs it), all in one Python process (under
emulation every process start costs a minute).

    python emulated_cpu_run.py MODELS_DIR OUT_DIR

MODELS_DIR holds ``<task>.py`` configs and ``<task>.pth`` weights (made
natively by the test) and ``person.png``. OUT_DIR gets ``results.npz``
(the inferencers' outputs), ``facts.json`` (what this process's PyTorch
and sapiens_mm see of the CPU) and ``cli_<dtype>/`` (the command's
outputs).

The pose head's output is made well posed as in the inference tests
(``inference_helpers.well_posed``): one clear peak per keypoint plus 1 %
of the head's own output, so that keypoints move with the model's numbers
instead of jumping between the maxima of flat random heatmaps.
"""
import json
import runpy
import sys
from pathlib import Path

import numpy as np
import torch

TASKS = ('pose', 'seg', 'normal')
DTYPES = ('auto', 'fp32', 'bf16')


def well_posed_pose_heads(peaks: torch.Tensor) -> None:
    """Every pose head of the process (the inferencers' and the
    command's): ``peaks + 0.01 * own output``."""
    from sapiens_mm.models.heads.sapiens_heatmap_head import \
        SapiensHeatmapHead
    forward = SapiensHeatmapHead.forward
    SapiensHeatmapHead.forward = (
        lambda self, feats: peaks + 0.01 * forward(self, feats))


def main(models: Path, out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from inference_helpers import peaked_heatmaps

    from sapiens_mm.apis import DenseInferencer, PoseInferencer
    from sapiens_mm.apis.inference import auto_dtype
    from sapiens_mm.utils.cpu_features import packed_linear_supported
    from sapiens_mm.utils.cpu_kernels import cpu_kernel
    from sapiens_mm.utils.image_io import read_image

    with open('/proc/cpuinfo') as f:
        cpuinfo = f.read()
    facts = dict(
        capability=torch.backends.cpu.get_cpu_capability(),
        cpuinfo_avx512='avx512' in cpuinfo,
        c_kernels=cpu_kernel('sapiens_rms_norm') is not None,
        packed_bf16=packed_linear_supported(torch.bfloat16),
        auto=str(auto_dtype('cpu')), dtypes={})
    well_posed_pose_heads(peaked_heatmaps(16, 12))
    photo = read_image(str(models / 'person.png'))
    results = {}
    for dtype in DTYPES:
        common = dict(device='cpu', dtype=dtype, show_progress=False)
        pose = PoseInferencer(str(models / 'pose.py'),
                              str(models / 'pose.pth'), detector='none',
                              **common)
        (p, ) = pose(photo)['predictions']
        results[f'pose_{dtype}'] = np.asarray(p['keypoints'], np.float32)
        seg = DenseInferencer(str(models / 'seg.py'), str(models / 'seg.pth'),
                              **common)
        (s, ) = seg(photo, return_datasamples=True)['predictions']
        results[f'seg_{dtype}'] = s.seg_logits.data.float().numpy()
        normal = DenseInferencer(str(models / 'normal.py'),
                                 str(models / 'normal.pth'), **common)
        (n, ) = normal(photo)['predictions']
        results[f'normal_{dtype}'] = np.asarray(n, np.float32)
        facts['dtypes'][dtype] = [
            str(i.dtype) for i in (pose, seg, normal)]
        sys.argv = ['sapiens_mm', str(models / 'person.png'), '--device',
                    'cpu', '--dtype', dtype, '--detector', 'none',
                    '--no-save-vis', '--no-progress', '--out-dir',
                    str(out / f'cli_{dtype}')]
        for task in TASKS:
            sys.argv += [f'--{task}', str(models / f'{task}.pth'),
                         f'--{task}-config', str(models / f'{task}.py')]
        try:
            runpy.run_module('sapiens_mm', run_name='__main__',
                             alter_sys=True)
        except SystemExit as e:
            if e.code not in (0, None):
                raise RuntimeError(f'python -m sapiens_mm --dtype {dtype} '
                                   f'exited with {e.code}') from None
    np.savez(out / 'results.npz', **results)
    (out / 'facts.json').write_text(json.dumps(facts))


if __name__ == '__main__':
    main(Path(sys.argv[1]), Path(sys.argv[2]))
