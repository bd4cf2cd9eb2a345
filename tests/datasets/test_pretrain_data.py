"""Unlabeled image dataset, pretraining configs, a tiny Runner run, tools."""
import io
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner
from PIL import Image

from log_helpers import logged_warnings
from tool_helpers import load_tool

from sapiens_mm.checkpoint import load_file
from sapiens_mm.zoo import safe_checkpoint_loading
from sapiens_mm.datasets.unlabeled_image_dataset import UnlabeledImageDataset
from sapiens_mm.utils.image_io import (UnreadableImageError, list_images,
                                       read_image)

ROOT = Path(__file__).resolve().parents[2]
CFG_DIR = ROOT / 'configs/pretrain'
TINY_CFG = CFG_DIR / 'sapiens_tiny-mae-1600e_humans-128x128.py'
SIZES = ['0.3b', '0.6b', '1b', '2b']


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: these tiny models run slower on more threads when
    the CPU is shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def image(seed, size=(48, 64)):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size[0], 0:size[1]]
    img = np.stack([xx * 3, yy * 4, (xx + yy) * 2], -1) + rng.integers(
        0, 30, (*size, 3))
    return img.clip(0, 255).astype(np.uint8)


def jpeg_bytes(img):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format='JPEG', quality=90)
    return buf.getvalue()


@pytest.fixture
def image_tree(tmp_path):
    """Good images (nested, several formats) and three unreadable ones."""
    root = tmp_path / 'imgs'
    (root / 'sub' / 'deeper').mkdir(parents=True)
    Image.fromarray(image(0)).save(root / 'a.jpg')
    Image.fromarray(image(1)).save(root / 'sub' / 'b.png')
    Image.fromarray(image(2)).save(root / 'sub' / 'deeper' / 'c.webp')
    Image.fromarray(image(3)).save(root / 'D.JPG')
    (root / 'notes.txt').write_text('not an image')
    (root / 'bad.jpg').write_bytes(b'this is not a jpeg at all')
    (root / 'sub' / 'truncated.jpg').write_bytes(jpeg_bytes(image(4))[:400])
    png = io.BytesIO()
    Image.fromarray(image(5)).save(png, format='PNG')
    (root / 'sub' / 'truncated.png').write_bytes(png.getvalue()[:300])
    return root


GOOD = ['D.JPG', 'a.jpg', 'sub/b.png', 'sub/deeper/c.webp']
BAD = ['bad.jpg', 'sub/truncated.jpg', 'sub/truncated.png']


def test_list_and_read_images(image_tree):
    assert list_images(str(image_tree)) == sorted(GOOD + BAD)
    img = read_image(str(image_tree / 'sub/deeper/c.webp'))
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8
    # BGR order, like cv2.imread
    ref = cv2.imread(str(image_tree / 'sub/b.png'))
    assert np.array_equal(read_image(str(image_tree / 'sub/b.png')), ref)
    for bad in BAD + ['missing.jpg']:
        with pytest.raises(UnreadableImageError):
            read_image(str(image_tree / bad))
    with pytest.raises(FileNotFoundError, match='Image folder not found'):
        list_images(str(image_tree / 'nope'))


@pytest.mark.slow
def test_dataset_skips_and_counts_unreadable_images(image_tree):
    ds = UnlabeledImageDataset(
        data_root=str(image_tree), pipeline=[dict(type='mmpretrain.PackInputs')],
        test_mode=True)
    assert len(ds) == 7
    with logged_warnings() as messages:
        items = [ds[i] for i in range(len(ds))]
    for item in items:
        assert item['inputs'].shape == (3, 48, 64)
    assert sorted(Path(p).relative_to(image_tree).as_posix()
                  for p in ds.skipped) == BAD
    assert len(messages) == 3 and '3 skipped so far' in messages[-1]
    # A known-bad file is not read again.
    bad_idx = [i for i in range(len(ds))
               if ds.get_data_info(i)['img_path'].endswith('bad.jpg')][0]
    ds[bad_idx]
    assert len(ds.skipped) == 3

    # Training mode draws a random replacement and never crashes.
    ds = UnlabeledImageDataset(
        data_root=str(image_tree), pipeline=[dict(type='mmpretrain.PackInputs')])
    for i in range(len(ds)):
        assert ds[i]['inputs'].shape == (3, 48, 64)


def test_dataset_reads_a_manifest(image_tree, tmp_path):
    manifest = image_tree / 'list.txt'
    outside = tmp_path / 'elsewhere.png'
    Image.fromarray(image(9)).save(outside)
    manifest.write_text(f'# kept images\nsub/b.png\n\na.jpg\n{outside}\n')
    ds = UnlabeledImageDataset(
        data_root=str(image_tree), ann_file='list.txt',
        pipeline=[dict(type='mmpretrain.PackInputs')])
    paths = [ds.get_data_info(i)['img_path'] for i in range(len(ds))]
    assert paths == [str(image_tree / 'sub/b.png'),
                     str(image_tree / 'a.jpg'), str(outside)]
    with pytest.raises(FileNotFoundError, match='Manifest not found'):
        UnlabeledImageDataset(data_root=str(image_tree), ann_file='no.txt')


def test_dataset_errors(tmp_path, image_tree):
    (tmp_path / 'empty').mkdir()
    with pytest.raises(ValueError, match='No images found'):
        UnlabeledImageDataset(data_root=str(tmp_path / 'empty'))
    with pytest.raises(ValueError, match='remove LoadImageFromFile'):
        UnlabeledImageDataset(
            data_root=str(image_tree),
            pipeline=[dict(type='LoadImageFromFile'),
                      dict(type='mmpretrain.PackInputs')])


# ----------------------------------------------------------------- configs
@pytest.mark.parametrize('size', SIZES)
def test_size_configs_official_settings(size):
    cfg = Config.fromfile(
        str(CFG_DIR / f'sapiens_{size}-mae-1600e_humans-1024x1024.py'))
    assert cfg.custom_imports.imports == ['sapiens_mm']
    assert cfg.model.backbone.arch == f'sapiens_{size}'
    assert cfg.model.backbone.img_size == 1024
    assert cfg.model.backbone.mask_ratio == 0.75
    neck = cfg.model.neck
    assert (neck.decoder_embed_dim, neck.decoder_depth,
            neck.decoder_num_heads, neck.num_patches) == (512, 8, 16, 4096)
    assert neck.embed_dim == {'0.3b': 1024, '0.6b': 1280, '1b': 1536,
                              '2b': 1920}[size]
    assert cfg.model.head.norm_pix is True
    assert cfg.model.head.loss.criterion == 'L2'
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.betas, opt.weight_decay) == ('AdamW',
                                                               1.5e-4,
                                                               (0.9, 0.95),
                                                               0.05)
    assert cfg.auto_scale_lr == dict(base_batch_size=256, enable=True)
    warm, cos = cfg.param_scheduler
    assert (warm.type, warm.begin, warm.end) == ('LinearLR', 0, 40)
    assert (cos.type, cos.begin, cos.end, cos.T_max) == (
        'CosineAnnealingLR', 40, 1600, 1560)
    assert cfg.train_cfg.max_epochs == 1600
    crop = cfg.train_dataloader.dataset.pipeline[0]
    assert (crop.type, crop.scale, crop.crop_ratio_range) == (
        'RandomResizedCrop', 1024, (0.2, 1.0))
    assert cfg.train_dataloader.dataset.pipeline[1].prob == 0.5


def test_size_configs_differ_only_by_the_size_base():
    texts = [(CFG_DIR / f'sapiens_{s}-mae-1600e_humans-1024x1024.py')
             .read_text().replace(s, 'SIZE') for s in SIZES]
    assert len(set(texts)) == 1


def write_images(folder, n, size=(96, 128)):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(image(i, size)).save(folder / f'img_{i}.png')


@pytest.mark.slow
def test_tiny_config_runner_run_with_hook_and_official_resume(tmp_path):
    data = tmp_path / 'imgs'
    write_images(data, 7)
    (data / 'broken.jpg').write_bytes(b'\xff\xd8 broken')
    cfg = Config.fromfile(str(TINY_CFG))
    cfg.work_dir = str(tmp_path / 'work')
    cfg.train_dataloader.update(batch_size=4, num_workers=0,
                                persistent_workers=False, pin_memory=False)
    cfg.train_dataloader.dataset.data_root = str(data)
    cfg.train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1)
    cfg.default_hooks.checkpoint.interval = 1
    cfg.default_hooks.logger.interval = 1
    cfg.custom_hooks[0].interval = 1
    cfg.env_cfg.cudnn_benchmark = False
    runner = Runner.from_cfg(cfg)
    runner.train()

    # auto_scale_lr: 1.5e-4 per 256 images, batch 4 here.
    group = runner.optim_wrapper.optimizer.param_groups[0]
    assert group['initial_lr'] == pytest.approx(1.5e-4 * 4 / 256)
    # reconstruction grids: 4 rows x (original | masked | reconstruction)
    grids = sorted((tmp_path / 'work' / 'vis_mae').glob('*.png'))
    assert [g.name for g in grids] == ['iter_1.png', 'iter_2.png']
    grid = cv2.imread(str(grids[0]))
    assert grid.shape == (4 * 128 + 3 * 4, 3 * 128 + 2 * 4, 3)
    ckpt = tmp_path / 'work' / 'epoch_1.pth'
    state = load_file(str(ckpt))['state_dict']
    assert 'backbone.pos_embed' in state and 'neck.mask_token' in state

    # Continue pretraining from a full checkpoint via load_from (a Runner
    # checkpoint: its message hub objects read by sapiens_mm's loader, as
    # tools/train.py runs the Runner)
    cfg2 = cfg.copy()
    cfg2.work_dir = str(tmp_path / 'work2')
    cfg2.load_from = str(ckpt)
    cfg2.train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=0)
    runner2 = Runner.from_cfg(cfg2)
    with safe_checkpoint_loading():
        runner2.train()
    for k, v in runner2.model.state_dict().items():
        assert torch.equal(v, state[k]), k


def test_mae_visualize_tool(tmp_path):
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(str(TINY_CFG))
    model = MODELS.build(cfg.model)
    model.init_weights()
    ckpt = tmp_path / 'mae.pth'
    torch.save(dict(state_dict=model.state_dict()), ckpt)
    write_images(tmp_path / 'imgs', 2, size=(150, 100))
    out = tmp_path / 'grid.png'
    load_tool('mae_visualize').main(
        [str(TINY_CFG), str(ckpt), str(tmp_path / 'imgs'), '--out',
         str(out)])
    grid = cv2.imread(str(out))
    assert grid.shape == (2 * 128 + 4, 3 * 128 + 8, 3)
    # first column: the centre crop of the first image, resized
    assert not np.all(grid[:128, :128] == grid[0, 0])
