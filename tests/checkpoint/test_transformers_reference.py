"""Our Sapiens2 backbone and task heads against Hugging Face Transformers'
independent port (``transformers.Sapiens2*``), the weights passed through
the Transformers layout (tools/convert_checkpoint.py's converter).

Tiny random models: 64 wide, 4 heads, 18 blocks (blocks 8 and 9 are GQA
blocks with 2 key/value heads, as the official rule gives), the shipped
tiny heads at 256x192. Both sides run RoPE in fp32 (Transformers always
does; ours takes ``rope_dtype='fp32'``). The tolerance is measured in each
test: the relative difference between Transformers' own "eager" and "sdpa"
attention on the same weights (the floor any two correct fp32
implementations have); ours may differ from Transformers' "sdpa" by at most
8 times that floor. Measured here: floor 1.2e-6..1.8e-6 relative, ours
1.2e-6..2.0e-6 (at most 1.2 times the floor); the official bf16 RoPE on
our side alone gives 5e-3..8e-3, a wrong key, GQA grouping or norm far
more.
"""
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.checkpoint import (
    from_transformers_layout,
    load_checkpoint,
    load_file,
    save_official_checkpoint,
    save_transformers_checkpoint,
    to_official_layout,
    to_transformers_layout,
)

transformers = pytest.importorskip('transformers')
from sapiens2_helpers import leaf  # noqa: E402

ARCH = dict(embed_dims=64, num_layers=18, num_heads=4, feedforward_channels=128,
            num_tokenizer_layers=1)
CLASSES = {
    'pose': ('Sapiens2ForPoseEstimation', 'heatmaps'),
    'seg': ('Sapiens2ForSemanticSegmentation', 'logits'),
    'normal': ('Sapiens2ForNormalEstimation', 'normals'),
    'pointmap': ('Sapiens2ForPointmapEstimation', 'pointmaps'),
    # two fields: the pre-multiplied foreground, then alpha (our 4 channels)
    'matting': ('Sapiens2ForImageMatting', ('foregrounds', 'alphas')),
}


def _randomise(model: torch.nn.Module) -> None:
    """Random weights everywhere, norms and layer scales included (their
    inits, 1 and 1e-4, would hide mistakes)."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if not p.is_floating_point() or name.endswith('periods'):
                continue
            if 'norm' in name or '.ln' in name or name.startswith('ln') or \
                    'gamma' in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith('bias'):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = max(p[0].numel(), 1)
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)


def _ours(task: str):
    from sapiens_mm.apis.inference import init_model
    cfg = Config.fromfile(str(leaf(task, 'tiny')))
    cfg.model.backbone.arch = ARCH
    cfg.model.backbone.rope_dtype = 'fp32'
    model = init_model(cfg, None).eval()
    _randomise(model)
    return model


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def _theirs(folder, cls_name: str, attn: str):
    cls = getattr(transformers, cls_name)
    return cls.from_pretrained(str(folder), attn_implementation=attn).eval()


@pytest.mark.parametrize('task', list(CLASSES))
def test_task_model_matches_transformers(task, tmp_path):
    ours = _ours(task)
    save_official_checkpoint(ours, str(tmp_path / 'official.safetensors'))
    official = load_file(str(tmp_path / 'official.safetensors'))
    save_transformers_checkpoint(official, str(tmp_path / 'hf'), (256, 192))
    cls_name, field = CLASSES[task]
    sdpa, eager = (_theirs(tmp_path / 'hf', cls_name, a)
                   for a in ('sdpa', 'eager'))
    x = torch.randn(1, 3, 256, 192, generator=torch.Generator().manual_seed(1))
    head = ours.head if hasattr(ours, 'head') else ours.decode_head
    with torch.no_grad():
        out = head(ours.extract_feat(x))
        ref, ref_eager = sdpa(x), eager(x)
    mine = out[0] if task == 'pointmap' else out
    if isinstance(field, tuple):
        ref, ref_eager = ({field: torch.cat([r[f] for f in field], 1)}
                          for r in (ref, ref_eager))
    floor = _relative(ref_eager[field], ref[field])
    assert _relative(mine, ref[field]) <= 8 * max(floor, 1e-7)
    if task == 'pointmap':
        floor = _relative(ref_eager['scales'], ref['scales'])
        assert _relative(out[1], ref['scales']) <= 8 * max(floor, 1e-7)


def test_backbone_matches_transformers_model_and_backbone(tmp_path):
    from sapiens_mm.models import Sapiens2VisionTransformer
    ours = Sapiens2VisionTransformer(ARCH, out_indices=(9, -1),
                                     out_type='featmap',
                                     rope_dtype='fp32').eval()
    _randomise(ours)
    save_transformers_checkpoint(to_official_layout(ours), str(tmp_path),
                                 (256, 192))
    x = torch.randn(2, 3, 256, 192, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        mid, last = ours(x)
        outs = {}
        for attn in ('sdpa', 'eager'):
            model = _theirs(tmp_path, 'Sapiens2Model', attn)
            tokens = model(x).last_hidden_state[:, 9:]
            # their stage i is the output of block i-1 (stage 0: the
            # embeddings); normalize_backbone_outputs=False as written by
            # the converter, so it is un-normed like ours
            backbone = transformers.Sapiens2Backbone.from_pretrained(
                str(tmp_path), out_indices=[10],
                attn_implementation=attn).eval()
            outs[attn] = (backbone(x).feature_maps[0],
                          tokens.transpose(1, 2).reshape(2, 64, 16, 12))
    for i, mine in enumerate((mid, last)):
        floor = _relative(outs['eager'][i], outs['sdpa'][i])
        assert _relative(mine, outs['sdpa'][i]) <= 8 * max(floor, 1e-7)


def test_transformers_state_dict_round_trips_to_the_official_layout():
    config = transformers.Sapiens2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=18,
        num_attention_heads=4, num_key_value_attention_heads=2,
        image_size=[256, 192], num_labels=308,
        head_config=dict(upsample_out_channels=[32, 32],
                         conv_out_channels=[16, 16, 8]))
    model = transformers.Sapiens2ForPoseEstimation(config)
    state = model.state_dict()
    official = from_transformers_layout(state, 'pose')
    assert official['backbone.blocks.9.attn.wk.weight'].shape == (32, 64)
    assert torch.equal(
        official['backbone.blocks.3.ffn.w12.weight'],
        torch.cat([state['model.model.layer.3.mlp.gate_proj.weight'],
                   state['model.model.layer.3.mlp.up_proj.weight']]))
    assert torch.equal(official['decode_head.deconv_layers.3.weight'],
                       state['decode_head.upsample_layers.1.convolution.'
                             'weight'])


def test_transformers_checkpoints_load_strictly_into_our_model(tmp_path):
    from safetensors.torch import save_file
    ours = _ours('pose')
    _, config = to_transformers_layout(to_official_layout(ours), (256, 192))
    theirs = transformers.Sapiens2ForPoseEstimation(
        transformers.Sapiens2Config.from_dict(config)).eval()
    # save_pretrained (Transformers 5 writes the official key names back)
    theirs.save_pretrained(str(tmp_path / 'saved'))
    # the Transformers module names, with and without config.json
    (tmp_path / 'modules').mkdir()
    theirs.config.save_pretrained(str(tmp_path / 'modules'))
    save_file({k: v.contiguous() for k, v in theirs.state_dict().items()},
              str(tmp_path / 'modules' / 'model.safetensors'),
              metadata={'format': 'pt'})
    (tmp_path / 'alone').mkdir()
    (tmp_path / 'alone' / 'model.safetensors').symlink_to(
        tmp_path / 'modules' / 'model.safetensors')
    x = torch.randn(1, 3, 256, 192, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = theirs(x).heatmaps
        floor = _relative(
            _theirs(tmp_path / 'saved', 'Sapiens2ForPoseEstimation',
                    'eager')(x).heatmaps, ref)
    for source in ('saved', 'modules', 'alone/model.safetensors'):
        model = _ours('pose')
        load_checkpoint(model, str(tmp_path / source))  # strict
        with torch.no_grad():
            mine = model.head(model.extract_feat(x))
        assert _relative(mine, ref) <= 8 * max(floor, 1e-7), source
    seg = _ours('seg')
    with pytest.raises(RuntimeError) as e:
        load_checkpoint(seg, str(tmp_path / 'modules'))
    assert 'unexpected keys [' in str(e.value)
    assert 'decode_head.conv_pose.weight' in str(e.value)


def test_convert_tool_round_trip(tmp_path):
    from tool_helpers import load_tool
    tool = load_tool('convert_checkpoint')
    ours = _ours('pointmap')
    official = tmp_path / 'sapiens2_tiny_pointmap.safetensors'
    save_official_checkpoint(ours, str(official))
    tool.main([str(official), str(tmp_path / 'hf'), '--to', 'transformers',
               '--image-size', '256', '192'])
    model = _theirs(tmp_path / 'hf', 'Sapiens2ForPointmapEstimation', 'sdpa')
    assert model.config.num_key_value_heads_per_layer == \
        [4] * 8 + [2] * 2 + [4] * 8
    tool.main([str(tmp_path / 'hf'), str(tmp_path / 'back.safetensors'),
               '--to', 'official'])
    before = load_file(str(official))
    after = load_file(str(tmp_path / 'back.safetensors'))
    assert sorted(after) == sorted(k for k in before
                                   if not k.endswith('rope_embed.periods'))
    assert all(torch.equal(after[k], before[k]) for k in after)
    with pytest.raises(FileExistsError):
        tool.main([str(official), str(tmp_path / 'hf'), '--to',
                   'transformers'])
