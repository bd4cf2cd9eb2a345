"""The Sapiens2 matting model: head layout, official post-processing,
loading (official and Transformers layouts, head widths from the file) and
recognition. Equality with Hugging Face Transformers' independent port
(``Sapiens2ForImageMatting``) is in
tests/checkpoint/test_transformers_reference.py."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

from sapiens_mm.apis.inference import init_model
from sapiens_mm.checkpoint import save_official_checkpoint
from sapiens_mm.zoo import parse_checkpoint_name, recognize_state_dict

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / ('configs/sapiens2/matting/'
               'sapiens2_tiny_matting_gss_p3m_metasim-256x192.py')
RELEASED = ROOT / ('configs/sapiens2/matting/'
                   'sapiens2_1b_matting_gss_p3m_metasim-1024x768.py')


def tiny_model(**head):
    cfg = Config.fromfile(str(TINY))
    cfg.model.decode_head.update(head)
    return init_model(cfg), cfg


def test_head_layout_and_range():
    """Keys are the normal head's with conv_matting (4 outputs); the output
    is a sigmoid in [0, 1] at the input size."""
    model, _ = tiny_model()
    keys = {k for k in model.state_dict() if k.startswith('decode_head.')}
    assert 'decode_head.conv_matting.weight' in keys
    assert model.decode_head.conv_matting.weight.shape[0] == 4
    assert {'decode_head.input_conv.0.weight',
            'decode_head.upsample_blocks.3.0.weight',
            'decode_head.conv_layers.6.weight'} <= keys
    with torch.no_grad():
        model.decode_head.conv_matting.bias.fill_(8.0)  # logits far > 0
        out = model(torch.randn(1, 3, 256, 192), mode='tensor')
    assert out.shape == (1, 4, 256, 192)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    assert float(out.min()) > 0.99  # the sigmoid is applied


def test_official_postprocessing():
    """Prediction fields at the original size: bilinear resize of the raw
    matte, then clamp to [0, 1] (Sapiens2 / Transformers order); alpha is
    channel 3, the pre-multiplied foreground channels 0-2."""
    from mmseg.structures import SegDataSample
    model, _ = tiny_model()
    raw = torch.rand(1, 4, 256, 192) * 1.4 - 0.2  # outside [0, 1] too
    sample = SegDataSample(metainfo=dict(ori_shape=(101, 77),
                                         img_shape=(256, 192)))
    out = model.postprocess_result(raw, [sample])[0]
    expected = F.interpolate(raw, size=(101, 77), mode='bilinear',
                             align_corners=False).clamp(0, 1)[0]
    assert torch.equal(out.pred_matting.data, expected)
    assert torch.equal(out.pred_alpha.data, expected[3:4])
    assert torch.equal(out.pred_foreground.data, expected[:3])


def test_released_config_and_name(tmp_path):
    """The official file name is recognised as the 1b matting model and
    leads to the official config name; the keys recognise it too."""
    info = parse_checkpoint_name('sapiens2_1b_matting.safetensors')
    assert (info.task, info.size, info.version) == ('matting', '1b', 2)
    assert info.config.name == RELEASED.name
    cfg = Config.fromfile(str(info.config))
    assert cfg.model.task == 'matting'
    assert cfg.model.decode_head.in_channels == 1536
    assert cfg.model.backbone.arch == 'sapiens2_1b'
    model, _ = tiny_model()
    state = {k: v for k, v in model.state_dict().items()
             if not k.startswith('data_preprocessor')}
    by_keys = recognize_state_dict(state, 'renamed.safetensors')
    assert (by_keys.task, by_keys.size) == ('matting', 'tiny')


def test_head_widths_from_file_and_strict_mismatch(tmp_path):
    """A file whose head widths differ from the config, in the official or
    the Transformers layout, loads strictly (the head is built from the
    tensor shapes) and predicts what it predicted; a file with a key
    missing is refused with the key named."""
    from sapiens_mm.checkpoint import load_file, save_transformers_checkpoint
    src, _ = tiny_model(upsample_channels=(24, 16, 8, 8),
                        conv_out_channels=(8, 4, 4))
    path = tmp_path / 'sapiens2_tiny_matting.safetensors'
    save_official_checkpoint(src, str(path))
    save_transformers_checkpoint(load_file(str(path)), str(tmp_path / 'hf'),
                                 (256, 192))
    x = torch.randn(1, 3, 256, 192)
    for file in (path, tmp_path / 'hf' / 'model.safetensors'):
        loaded = init_model(TINY, str(file))
        assert loaded.decode_head.upsample_blocks[0][0].out_channels == 96
        with torch.no_grad():
            assert torch.equal(loaded(x, mode='tensor'),
                               src(x, mode='tensor'))
    from sapiens_mm.checkpoint.safetensors_io import save_safetensors
    state = dict(load_file(str(path)))
    del state['decode_head.conv_matting.bias']
    broken = tmp_path / 'broken.safetensors'
    save_safetensors(state, str(broken))
    with pytest.raises(RuntimeError, match='conv_matting.bias'):
        init_model(TINY, str(broken))


def test_channels_read_from_both_layouts():
    """The head widths come out of the official and the Transformers key
    names alike (shapes only)."""
    from sapiens_mm.models.heads import Sapiens2DenseHead
    official = {'decode_head.upsample_blocks.0.0.weight': (96, 64, 3, 3),
                'decode_head.upsample_blocks.1.0.weight': (64, 24, 3, 3),
                'decode_head.conv_layers.0.weight': (8, 16, 3, 3),
                'decode_head.conv_layers.3.weight': (4, 8, 3, 3),
                'decode_head.conv_layers.1.norm.weight': (8, )}
    hf = {'decode_head.upsample_layers.0.convolution.weight': (96, 64, 3, 3),
          'decode_head.upsample_layers.1.convolution.weight': (64, 24, 3, 3),
          'decode_head.conv_layers.0.convolution.weight': (8, 16, 3, 3),
          'decode_head.conv_layers.1.convolution.weight': (4, 8, 3, 3)}
    expected = dict(upsample_channels=(24, 16), conv_out_channels=(8, 4))
    assert Sapiens2DenseHead.channels_of_state_dict(official) == expected
    assert Sapiens2DenseHead.channels_of_state_dict(hf) == expected
    assert Sapiens2DenseHead.channels_of_state_dict({}) is None
