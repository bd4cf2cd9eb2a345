"""``dtype='auto'``: bf16 where the hardware has native bf16, float32
elsewhere; the ``infer`` command's default."""
import pytest
import torch

from sapiens_mm.apis.inference import auto_dtype, resolve_device_and_dtype
from sapiens_mm.utils import cpu_features


@pytest.mark.parametrize('caps, want', [
    (dict(architecture='x86_64', avx2=True, fma3=True), torch.float32),
    (dict(architecture='x86_64', avx512_f=True, avx512_bf16=True),
     torch.bfloat16),
    (dict(architecture='x86_64', amx_bf16=True, amx_tile=True),
     torch.bfloat16),
])
def test_auto_follows_the_cpu_capabilities(monkeypatch, caps, want):
    monkeypatch.setattr(torch.cpu, 'get_capabilities', lambda: dict(caps))
    assert auto_dtype('cpu') == want
    assert resolve_device_and_dtype('cpu', 'auto') == (torch.device('cpu'),
                                                       want)


def test_names_and_dtypes():
    cpu = torch.device('cpu')
    assert resolve_device_and_dtype('cpu', 'fp32') == (cpu, torch.float32)
    assert resolve_device_and_dtype('cpu', 'bfloat16')[1] == torch.bfloat16
    with pytest.raises(ValueError, match='dtype must be one of'):
        resolve_device_and_dtype('cpu', 'int8')
    if not torch.cuda.is_available():
        assert auto_dtype('cuda') == torch.float32


def test_inferencers_and_the_cli_default(monkeypatch):
    from inference_helpers import small_cfg

    from sapiens_mm.apis import SapiensInferencer
    from sapiens_mm.cli.infer import build_parser
    monkeypatch.setattr(torch.cpu, 'get_capabilities', lambda: dict(
        architecture='x86_64', avx512_f=True, avx512_bf16=True))
    inf = SapiensInferencer(dict(seg=small_cfg('seg')), device='cpu',
                            dtype='auto')
    assert inf.dtype == torch.bfloat16
    assert inf.task_inferencers['seg'].dtype == torch.bfloat16
    args = build_parser().parse_args(['photo.jpg', '--seg', 'x.pth'])
    assert args.dtype == 'auto'
