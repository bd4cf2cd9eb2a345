"""``dtype='auto'``: bf16 where the hardware has native bf16, float32
elsewhere; the ``infer`` command's default."""
import pytest
import torch

from sapiens_mm.apis.inference import auto_dtype, resolve_device_and_dtype
from sapiens_mm.utils import cpu_features


@pytest.mark.parametrize('flags, want', [
    ({'avx2', 'fma'}, torch.float32),  # bf16 emulated: slower
    ({'avx512f', 'avx512_bf16'}, torch.bfloat16),
    ({'amx_bf16', 'amx_tile'}, torch.bfloat16),
])
def test_auto_follows_the_cpu_flags(monkeypatch, flags, want):
    monkeypatch.setattr(cpu_features, 'cpu_flags', lambda: frozenset(flags))
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
    monkeypatch.setattr(cpu_features, 'cpu_flags',
                        lambda: frozenset({'avx512_bf16'}))
    inf = SapiensInferencer(dict(seg=small_cfg('seg')), device='cpu',
                            dtype='auto')
    assert inf.dtype == torch.bfloat16
    assert inf.task_inferencers['seg'].dtype == torch.bfloat16
    args = build_parser().parse_args(['photo.jpg', '--seg', 'x.pth'])
    assert args.dtype == 'auto'
