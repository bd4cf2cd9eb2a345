"""sapiens_mm imports and works with Hugging Face Transformers 5 installed,
although mmpretrain 1.2's multimodal models do not import under it (there,
``python -c "import mmpretrain.models"`` fails with ``TypeError: NoneType
takes no arguments``). A fresh interpreter: the switch acts at import."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sapiens_mm.utils.mmpretrain_compat import transformers_major

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    transformers_major() < 5,
    reason='needs Transformers 5 installed (requirements-test.txt)')


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_sapiens_mm_imports_and_builds_models_beside_transformers_5():
    proc = _python('''
        import sys
        import torch
        import transformers
        import sapiens_mm
        from mmpretrain.registry import MODELS as PRETRAIN
        from mmpretrain.utils import dependency
        from sapiens_mm.models import Sapiens2VisionTransformer
        assert int(transformers.__version__.split('.')[0]) >= 5
        assert 'mmpretrain.models' in sys.modules
        assert dependency.WITH_MULTIMODAL is False
        vit = PRETRAIN.build(dict(type='VisionTransformer', arch='b',
                                  img_size=32, patch_size=16))
        feats = Sapiens2VisionTransformer('sapiens2_tiny', out_type='featmap')(
            torch.zeros(1, 3, 64, 48))
        print(type(vit).__name__, tuple(feats[0].shape))
        try:
            PRETRAIN.build(dict(type='BlipCaption'))
        except ImportError as e:  # the placeholder names the extra
            print('placeholder:', 'multimodal' in str(e))
    ''')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split('\n')[:2] == [
        'VisionTransformer (1, 64, 4, 3)', 'placeholder: True']
