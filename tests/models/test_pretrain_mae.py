"""MAE pretraining model: masking, loss, official layout, clean round trip."""
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmpretrain.models.utils import build_2d_sincos_position_embedding, resize_pos_embed
from mmpretrain.registry import MODELS

from tool_helpers import load_tool

from sapiens_mm.checkpoint import (
    convert_pretrain_to_clean,
    extract_backbone_state_dict,
    load_checkpoint,
    load_file,
)
from sapiens_mm.models import SapiensVisionTransformer
from sapiens_mm.models.selfsup import SapiensMAEViT, mae_reconstruct, patchify

ROOT = Path(__file__).resolve().parents[2]
TINY_CFG = ROOT / 'configs/pretrain/sapiens_tiny-mae-1600e_humans-128x128.py'


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: these tiny models run slower on more threads when
    the CPU is shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def build_tiny_mae(img_size=64):
    """The tiny pretraining model at a small input (decoder as configured)."""
    cfg = Config.fromfile(str(TINY_CFG))
    cfg.model.backbone.img_size = img_size
    cfg.model.neck.num_patches = (img_size // 16)**2
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model


def layer_keys(prefix):
    names = ['ln1.weight', 'ln1.bias', 'attn.qkv.weight', 'attn.qkv.bias',
             'attn.proj.weight', 'attn.proj.bias', 'ln2.weight', 'ln2.bias',
             'ffn.layers.0.0.weight', 'ffn.layers.0.0.bias',
             'ffn.layers.1.weight', 'ffn.layers.1.bias']
    return [prefix + n for n in names]


def official_mae_keys(num_layers, decoder_depth):
    """Key names of an official full MAE checkpoint (facts §1, §2)."""
    keys = ['backbone.cls_token', 'backbone.pos_embed',
            'backbone.patch_embed.projection.weight',
            'backbone.patch_embed.projection.bias',
            'backbone.ln1.weight', 'backbone.ln1.bias']
    for i in range(num_layers):
        keys += layer_keys(f'backbone.layers.{i}.')
    keys += ['neck.mask_token', 'neck.decoder_pos_embed',
             'neck.decoder_embed.weight', 'neck.decoder_embed.bias',
             'neck.ln1.weight', 'neck.ln1.bias', 'neck.decoder_pred.weight',
             'neck.decoder_pred.bias']
    for i in range(decoder_depth):
        keys += layer_keys(f'neck.decoder_blocks.{i}.')
    return keys


# ----------------------------------------------------------------- masking
@pytest.mark.parametrize('img_size,ratio,masked', [(64, 0.75, 12),
                                                   (1024, 0.75, 3072),
                                                   (160, 0.9, 90),
                                                   (64, 0.0, 0)])
def test_mask_ratio_is_exact(img_size, ratio, masked):
    vit = SapiensMAEViT(arch='sapiens_tiny', img_size=img_size,
                        mask_ratio=ratio)
    n = (img_size // 16)**2
    assert vit.num_patches == n
    x = torch.randn(3, n, 8)
    visible, mask, ids_restore = vit.random_masking(x)
    assert mask.shape == (3, n)
    assert set(mask.unique().tolist()) <= {0.0, 1.0}
    assert (mask.sum(1) == masked).all()
    assert visible.shape == (3, n - masked, 8)
    for b in range(3):
        # The visible tokens are exactly the unmasked ones.
        kept = x[b][mask[b] == 0]
        assert torch.equal(visible[b].sort(0)[0], kept.sort(0)[0])
        assert torch.equal(ids_restore[b].sort()[0], torch.arange(n))
    # Masks differ between samples.
    assert not torch.equal(mask[0], mask[1]) or masked in (0, n)


def test_encoder_forward_and_fixed_sincos_pos_embed():
    vit = SapiensMAEViT(arch='sapiens_tiny', img_size=1024)
    vit.init_weights()
    # Official pretraining layout: (1, 1 + 64*64, C), fixed 2D sin-cos.
    assert vit.pos_embed.shape == (1, 4097, 64)
    assert not vit.pos_embed.requires_grad
    ref = build_2d_sincos_position_embedding(64, 64, cls_token=True)
    assert torch.allclose(vit.pos_embed, ref)
    assert vit.cls_token.shape == (1, 1, 64)

    vit = SapiensMAEViT(arch='sapiens_tiny', img_size=64)
    vit.init_weights()
    latent, mask, ids_restore = vit(torch.randn(2, 3, 64, 64))
    assert latent.shape == (2, 1 + 4, 64)  # cls + 25% of 16 patches
    assert mask.shape == ids_restore.shape == (2, 16)
    full = vit(torch.randn(2, 3, 64, 64), mask=None)[0]
    assert full.shape == (2, 17, 64)
    with pytest.raises(ValueError, match='patch grid'):
        vit(torch.randn(1, 3, 96, 96))


def test_bad_arguments_are_explained():
    with pytest.raises(ValueError, match='square'):
        SapiensMAEViT(arch='sapiens_tiny', img_size=(64, 48))
    with pytest.raises(ValueError, match='mask_ratio'):
        SapiensMAEViT(arch='sapiens_tiny', img_size=64, mask_ratio=1.0)
    with pytest.raises(ValueError, match='with_cls_token'):
        SapiensMAEViT(arch='sapiens_tiny', img_size=64, with_cls_token=False)


# -------------------------------------------------------------------- loss
def hand_loss(imgs, pred, mask, p=16):
    """Normalised-pixel L2 over masked patches, written out with loops."""
    imgs, pred, mask = (t.detach().double().numpy() for t in (imgs, pred,
                                                              mask))
    B, C, H, W = imgs.shape
    total, count = 0.0, 0
    for b in range(B):
        k = 0
        for i in range(H // p):
            for j in range(W // p):
                patch = imgs[b, :, i * p:(i + 1) * p, j * p:(j + 1) * p]
                target = patch.transpose(1, 2, 0).reshape(-1)  # (y, x, c)
                target = (target - target.mean()) / np.sqrt(
                    target.var(ddof=1) + 1e-6)
                if mask[b, k]:
                    total += np.mean((pred[b, k] - target)**2)
                    count += 1
                k += 1
    return total / count


def test_loss_matches_hand_computation_and_ignores_visible_patches():
    model = build_tiny_mae(64)
    inputs = torch.randn(2, 3, 64, 64)
    torch.manual_seed(3)
    latent, mask, ids_restore = model.backbone(inputs)
    pred = model.neck(latent, ids_restore)
    torch.manual_seed(3)
    loss = model.loss(inputs, data_samples=None)['loss']
    assert loss.item() == pytest.approx(hand_loss(inputs, pred, mask),
                                        rel=1e-5)

    # Changing the prediction on visible patches does not change the loss.
    head_loss = model.head.loss(pred, inputs, mask)
    changed = pred.clone()
    changed[mask == 0] += 100.0
    assert model.head.loss(changed, inputs, mask).item() == pytest.approx(
        head_loss.item(), rel=1e-6)
    changed = pred.clone()
    changed[mask == 1] += 1.0
    assert model.head.loss(changed, inputs, mask).item() > head_loss.item()


def test_tiny_mae_training_lowers_the_loss(tmp_path):
    model = build_tiny_mae(64)
    # Smooth generated images: gradients + a bright disc per image.
    yy, xx = np.mgrid[0:64, 0:64]
    imgs = []
    for k in range(4):
        img = np.stack([xx * (2 + k), yy * 3, (xx + yy) * 1.5], -1)
        disc = (xx - 20 - 8 * k)**2 + (yy - 30)**2 < 100
        img[disc] = 250
        imgs.append(img.clip(0, 255).astype(np.uint8))
    batch = dict(
        inputs=torch.stack(
            [torch.from_numpy(i).permute(2, 0, 1) for i in imgs]),
        data_samples=None)

    def eval_loss():
        torch.manual_seed(123)
        with torch.no_grad():
            data = model.data_preprocessor(batch, True)
            return model.loss(data['inputs'], None)['loss'].item()

    from mmengine.optim import OptimWrapper
    optim = OptimWrapper(torch.optim.AdamW(model.parameters(), lr=2e-3))
    before = eval_loss()
    model.train()
    for _ in range(25):
        log = model.train_step(batch, optim)
        assert torch.isfinite(log['loss'])
    after = eval_loss()
    assert after < 0.8 * before, (before, after)
    # The fixed sin-cos position embeddings did not move.
    ref = build_2d_sincos_position_embedding(4, 64, cls_token=True)
    assert torch.allclose(model.backbone.pos_embed, ref)


# ------------------------------------------------------- checkpoint layout
def test_state_dict_has_the_official_mae_layout(tmp_path):
    model = build_tiny_mae(128)
    expected = official_mae_keys(num_layers=2, decoder_depth=2)
    assert sorted(model.state_dict()) == sorted(expected)

    # A file laid out like the official full MAE checkpoint loads strictly.
    torch.manual_seed(7)
    official = OrderedDict(
        (k, torch.randn_like(v)) for k, v in model.state_dict().items())
    path = tmp_path / 'sapiens_tiny_epoch_1600.pth'
    torch.save(dict(meta=dict(epoch=1600, iter=10), state_dict=official),
               path)
    load_checkpoint(model, str(path), strict=True)
    for k, v in model.state_dict().items():
        assert torch.equal(v, official[k]), k
    # A key from another model is refused.
    official['neck.extra.weight'] = torch.zeros(1)
    torch.save(dict(state_dict=official), path)
    with pytest.raises(RuntimeError, match='unexpected'):
        load_checkpoint(model, str(path), strict=True)


@pytest.mark.parametrize('size,total,encoder', [('0.3b', 0.3355, 0.3073),
                                                ('0.6b', 0.6643, 0.6359),
                                                ('1b', 1.1692, 1.1407),
                                                ('2b', 2.1626, 2.1339)])
def test_released_size_configs_match_official_shapes(size, total, encoder):
    cfg = Config.fromfile(
        str(ROOT / f'configs/pretrain/sapiens_{size}-mae-1600e_humans-'
            '1024x1024.py'))
    with torch.device('meta'):
        model = MODELS.build(cfg.model)
    sd = model.state_dict()
    dims = {'0.3b': 1024, '0.6b': 1280, '1b': 1536, '2b': 1920}[size]
    assert sd['backbone.pos_embed'].shape == (1, 4097, dims)
    assert sd['neck.decoder_pos_embed'].shape == (1, 4097, 512)
    assert sd['neck.decoder_embed.weight'].shape == (512, dims)
    assert sd['neck.decoder_pred.weight'].shape == (768, 512)
    assert 'neck.decoder_blocks.7.attn.qkv.weight' in sd
    assert 'neck.decoder_blocks.8.attn.qkv.weight' not in sd
    n_all = sum(v.numel() for v in sd.values()) / 1e9
    n_enc = sum(v.numel() for k, v in sd.items()
                if k.startswith('backbone.')) / 1e9
    # Parameter counts of the paper / facts §10.
    assert n_all == pytest.approx(total, abs=6e-4)
    assert n_enc == pytest.approx(encoder, abs=6e-4)


def test_pretrain_clean_finetune_round_trip(tmp_path):
    model = build_tiny_mae(128)
    src = tmp_path / 'epoch_5.pth'
    torch.save(
        dict(meta=dict(epoch=5), state_dict=model.state_dict(),
             message_hub=dict(), optimizer=dict(state={}, param_groups=[])),
        src)
    dst = tmp_path / 'sapiens_tiny_clean.pth'
    clean = convert_pretrain_to_clean(str(src), str(dst))

    written = load_file(str(dst))
    enc = {k[len('backbone.'):]: v for k, v in model.state_dict().items()
           if k.startswith('backbone.')}
    assert sorted(written) == sorted(enc) == sorted(clean)
    assert written['pos_embed'].shape == (1, 65, 64)
    assert 'cls_token' in written and not any(k.startswith('neck')
                                              for k in written)

    # Fine-tuning backbone (no cls token, 128x96 grid 8x6, padding 2) loads
    # the clean file strictly through its Pretrained init_cfg.
    ft = SapiensVisionTransformer(
        arch='sapiens_tiny', img_size=(128, 96), patch_cfg=dict(padding=2),
        with_cls_token=False, out_type='featmap',
        init_cfg=dict(type='Pretrained', checkpoint=str(dst)))
    ft.init_weights()
    ft_sd = ft.state_dict()
    assert set(ft_sd) == set(enc) - {'cls_token'}
    for k, v in ft_sd.items():
        if k != 'pos_embed':
            assert torch.equal(v, enc[k]), k
    expected_pos = resize_pos_embed(enc['pos_embed'][:, 1:], (8, 8), (8, 6),
                                    mode='bicubic', num_extra_tokens=0)
    assert torch.allclose(ft_sd['pos_embed'], expected_pos, atol=1e-6)
    assert ft(torch.randn(1, 3, 128, 96))[0].shape == (1, 64, 8, 6)

    # Strict: a clean file with a foreign key is refused.
    bad = dict(written, **{'head.weight': torch.zeros(1)})
    torch.save(bad, dst)
    ft = SapiensVisionTransformer(
        arch='sapiens_tiny', img_size=(128, 96), with_cls_token=False,
        init_cfg=dict(type='Pretrained', checkpoint=str(dst)))
    with pytest.raises(RuntimeError, match='unexpected'):
        ft.init_weights()


def test_convert_errors_are_explained(tmp_path):
    vit = SapiensVisionTransformer(arch='sapiens_tiny', img_size=(32, 32))
    with pytest.raises(ValueError, match='already is a backbone-only'):
        extract_backbone_state_dict(vit.state_dict())
    with pytest.raises(ValueError, match='--prefix'):
        extract_backbone_state_dict({'encoder.x': torch.zeros(1)})
    path = tmp_path / 'a.pth'
    torch.save({'backbone.x': torch.zeros(1)}, path)
    with pytest.raises(ValueError, match='overwrite'):
        convert_pretrain_to_clean(str(path), str(path))
    with pytest.raises(ValueError, match='missing'):
        convert_pretrain_to_clean(str(path), str(tmp_path / 'b.pth'))


def test_convert_cli(tmp_path):
    main = load_tool('convert_pretrain_to_clean').main
    model = build_tiny_mae(64)
    src, dst = tmp_path / 'full.pth', tmp_path / 'out' / 'clean.pth'
    torch.save(dict(state_dict=model.state_dict()), src)
    main([str(src), str(dst), '--drop-cls-token', '--dtype', 'float16'])
    out = load_file(str(dst))
    assert 'cls_token' not in out
    assert out['layers.0.attn.qkv.weight'].dtype == torch.float16


# ------------------------------------------------------------ visualisation
class Oracle(nn.Module):
    """A 'decoder' that predicts the exact normalised-pixel target."""

    def __init__(self, inputs):
        super().__init__()
        self.inputs = inputs

    def forward(self, latent, ids_restore):
        t = patchify(self.inputs, 16)
        return (t - t.mean(-1, keepdim=True)) / (
            t.var(-1, keepdim=True) + 1e-6)**.5


def test_reconstruction_images():
    model = build_tiny_mae(64)
    inputs = torch.randn(2, 3, 64, 64)
    out = mae_reconstruct(model, inputs)
    mask = out['mask']
    assert mask.shape == (2, 1, 64, 64)
    assert mask.mean().item() == pytest.approx(0.75)
    assert torch.equal(out['original'], inputs)
    assert (out['masked'][mask.expand_as(inputs) == 1] == 0).all()
    visible = mask.expand_as(inputs) == 0
    assert torch.equal(out['masked'][visible], inputs[visible])
    assert torch.equal(out['reconstruction'][visible], inputs[visible])
    # norm_pix predictions are mapped back with the patch statistics: a
    # perfect prediction gives back the original image.
    model.neck = Oracle(inputs)
    model.train()
    out = mae_reconstruct(model, inputs, paste_visible=False)
    assert torch.allclose(out['reconstruction'], inputs, atol=1e-4)
    assert model.training  # mode restored
