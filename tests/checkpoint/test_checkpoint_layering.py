"""Loading a checkpoint imports nothing of the inference front end
(sapiens_mm.apis: the inferencers, cv2 writers, ...): checkpoint/ only turns
files into state dicts, and the model zoo's mmengine hook (the dataset_meta
of an official task checkpoint) lives below apis/. A fresh interpreter, as
every Runner resume starts."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sapiens2_helpers import leaf

ROOT = Path(__file__).resolve().parents[2]


def test_loading_an_official_checkpoint_leaves_apis_unimported(tmp_path):
    from sapiens_mm.apis.inference import init_model
    from sapiens_mm.checkpoint import save_official_checkpoint
    path = tmp_path / 'sapiens2_tiny_pose.safetensors'
    save_official_checkpoint(init_model(str(leaf('pose', 'tiny'))),
                             str(path))
    code = textwrap.dedent(f'''
        import json, sys
        import sapiens_mm
        from mmengine.runner.checkpoint import CheckpointLoader
        from sapiens_mm.checkpoint import get_state_dict, load_file
        from sapiens_mm.zoo import safe_checkpoint_loading
        with safe_checkpoint_loading():
            ckpt = CheckpointLoader.load_checkpoint({str(path)!r})
        state = get_state_dict(load_file({str(path)!r}))
        print(json.dumps(dict(
            meta=sorted(ckpt['meta']['dataset_meta']), keys=len(state),
            apis=sorted(m for m in sys.modules
                        if m.startswith('sapiens_mm.apis')))))
    ''')
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out['apis'] == []
    assert 'keypoint_name2id' in out['meta']  # the hook ran
    assert out['keys'] > 0
