"""SapiensDenseEstimator: inference modes, flip rules, output format."""
import pytest
import torch
import torch.nn.functional as F
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

H, W = 64, 48


def build(task, test_cfg=None, **head):
    init_default_scope('mmseg')
    n_deconv, n_conv = (4, 2) if task == 'depth' else (3, 3)
    model = MODELS.build(dict(
        type='SapiensDenseEstimator', task=task,
        data_preprocessor=dict(type='SegDataPreProcessor', size=(H, W)),
        backbone=dict(type='mmpretrain.SapiensVisionTransformer',
                      arch='sapiens_tiny', img_size=(H, W)),
        decode_head=dict(type=f'Sapiens{task.capitalize()}Head',
                         in_channels=64, channels=8,
                         deconv_out_channels=(8, ) * n_deconv,
                         conv_out_channels=(8, ) * n_conv, **head),
        test_cfg=test_cfg or dict(mode='whole')))
    model.init_weights()
    # larger head weights than the official 0.001 init, so outputs vary
    for p in model.decode_head.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return model.eval()


def raw(model, x):
    """Head output resized to the input: the un-post-processed prediction."""
    out = model._forward(x)
    return F.interpolate(out, size=x.shape[2:], mode='bilinear',
                         align_corners=False)


def unflip(pred, task):
    pred = pred.flip(-1)
    if task == 'normal':
        pred = torch.cat([-pred[:, :1], pred[:, 1:]], 1)
    return pred


def finish(pred, task):
    return F.normalize(pred, dim=1) if task == 'normal' else pred


def predict(model, x, samples=None):
    key = 'pred_depth_map' if model.task == 'depth' else 'pred_normal_map'
    with torch.no_grad():
        out = model.predict(x, samples)
    return torch.stack([s.get(key).data for s in out])


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_whole_mode_output(task):
    model = build(task)
    x = torch.randn(2, 3, H, W)
    pred = predict(model, x)
    assert pred.shape == (2, 1 if task == 'depth' else 3, H, W)
    with torch.no_grad():
        torch.testing.assert_close(pred, finish(raw(model, x), task))
    if task == 'normal':
        torch.testing.assert_close(pred.norm(dim=1),
                                   torch.ones(2, H, W))
        assert model._forward(x).shape == (2, 3, H // 2, W // 2)


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_flip_mode_averages_with_unflipped_prediction(task):
    model = build(task, dict(mode='whole', flip=True))
    x = torch.randn(1, 3, H, W)
    with torch.no_grad():
        expected = (raw(model, x) + unflip(raw(model, x.flip(-1)), task)) / 2
    torch.testing.assert_close(predict(model, x), finish(expected, task))


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_flip_averaged_prediction_is_mirror_equivariant(task):
    """Predicting a mirrored image gives the mirrored prediction, with the
    normal X component negated (a wrong flip rule breaks this)."""
    model = build(task, dict(mode='whole', flip=True))
    x = torch.randn(1, 3, H, W)
    pred, pred_mirror = predict(model, x), predict(model, x.flip(-1))
    torch.testing.assert_close(pred_mirror, unflip(pred, task), atol=1e-5,
                               rtol=1e-4)
    if task == 'normal':
        # not trivially true: X really changes sign
        assert (pred_mirror[:, 0] - pred.flip(-1)[:, 0]).abs().max() > 1e-2


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_slide_mode_matches_manual_windows(task):
    model = build(task, dict(mode='slide', crop_size=(32, 32),
                             stride=(16, 16)))
    x = torch.randn(1, 3, H, W)
    total = torch.zeros(1, 3 if task == 'normal' else 1, H, W)
    count = torch.zeros(1, 1, H, W)
    with torch.no_grad():
        for y1 in (0, 16, 32):
            for x1 in (0, 16):
                total[..., y1:y1 + 32, x1:x1 + 32] += raw(
                    model, x[..., y1:y1 + 32, x1:x1 + 32])
                count[..., y1:y1 + 32, x1:x1 + 32] += 1
    torch.testing.assert_close(predict(model, x), finish(total / count, task))
    # a crop covering the image is the whole-image prediction
    model.test_cfg = dict(mode='slide', crop_size=(H, W), stride=(8, 8))
    whole = build(task)
    whole.load_state_dict(model.state_dict())
    torch.testing.assert_close(predict(model, x), predict(whole, x))


def test_slide_flip_is_slide_plus_flip():
    model = build('normal', dict(mode='slide_flip', crop_size=(32, 48),
                                 stride=(32, 48)))
    x = torch.randn(1, 3, H, W)
    with torch.no_grad():
        parts = []
        for crop in (x[..., :32, :], x[..., 32:, :]):
            parts.append((raw(model, crop) +
                          unflip(raw(model, crop.flip(-1)), 'normal')) / 2)
    torch.testing.assert_close(predict(model, x),
                               finish(torch.cat(parts, 2), 'normal'))


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_outputs_at_original_size_unpadded_and_unflipped(task):
    model = build(task)
    x = torch.randn(1, 3, H, W)
    sample = SegDataSample(metainfo=dict(
        ori_shape=(50, 37), img_shape=(H, W), padding_size=[0, 8, 0, 16],
        flip=True, flip_direction='horizontal'))
    pred = predict(model, x, [sample])
    assert pred.shape == (1, 1 if task == 'depth' else 3, 50, 37)
    with torch.no_grad():
        expected = unflip(raw(model, x)[..., :H - 16, :W - 8], task)
    expected = F.interpolate(expected, size=(50, 37), mode='bilinear',
                             align_corners=False)
    torch.testing.assert_close(pred, finish(expected, task))


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_loss_ignores_padding(task):
    model = build(task).train()
    x = torch.randn(1, 3, H, W)
    c = 1 if task == 'depth' else 3
    target = (torch.rand(c, H - 16, W) + 0.5 if task == 'depth' else
              F.normalize(torch.randn(c, H - 16, W), dim=0))
    sample = SegDataSample(metainfo=dict(img_shape=(H - 16, W)))
    sample.set_data({f'gt_{task}_map': PixelData(data=target)})
    losses = model.loss(x, [sample])
    padded = sample.get(f'gt_{task}_map').data
    assert padded.shape == (c, H, W)
    assert (padded[:, H - 16:] == (-1 if task == 'depth' else 0)).all()
    assert all(torch.isfinite(v) for v in losses.values())
    names = ({'decode.loss_silog'} if task == 'depth' else
             {'decode.loss_cos', 'decode.loss_l1'})
    assert set(losses) == names


def test_bad_configuration_is_explained():
    with pytest.raises(ValueError, match='crop_size'):
        build('depth', dict(mode='slide'))
    with pytest.raises(ValueError, match='test_cfg.mode'):
        build('depth', dict(mode='tta'))
    with pytest.raises(ValueError, match='SapiensNormalHead'):
        MODELS.build(dict(
            type='SapiensDenseEstimator', task='normal',
            backbone=dict(type='mmpretrain.SapiensVisionTransformer',
                          arch='sapiens_tiny', img_size=(32, 32)),
            decode_head=dict(type='SapiensDepthHead', in_channels=64)))
    with pytest.raises(ValueError, match='task must be'):
        MODELS.build(dict(type='SapiensDenseEstimator', task='seg'))
