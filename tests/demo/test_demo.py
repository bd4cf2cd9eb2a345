"""The main job (``make demo``): config adaptation, the four datasets on
generated folders through the demo's configs, the table, and a smoke run of
the command itself (the CI variant of the main job)."""
import json
import os
import shlex
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpose.registry import DATASETS as POSE_DATASETS
from mmseg.registry import DATASETS as SEG_DATASETS
from mmseg.registry import MODELS

from doc_commands import project_venv

from sapiens_mm.demo.pipeline import (
    DEMO_TASKS,
    DemoSettings,
    adapt_config,
    format_table,
)
from sapiens_mm.apis.inference import set_input_size
from sapiens_mm.datasets.synthetic import write_dataset

ROOT = Path(__file__).resolve().parents[2]
SIZE = (64, 48)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp('demo_data')
    write_dataset(root, num_train=3, num_val=2, seed=3, size=SIZE,
                  progress=False, matting=True)
    return root


def _cfg(task, data, tmp_path):
    settings = DemoSettings(image_size=SIZE,
                            input_sizes={t: SIZE for t in DEMO_TASKS})
    cfg = Config.fromfile(str(ROOT / 'configs' / DEMO_TASKS[task].config))
    return adapt_config(cfg, task, str(data), str(tmp_path), settings)


@pytest.mark.parametrize('task', list(DEMO_TASKS))
def test_datasets_load_generated_folders_at_the_demo_size(
        task, data, tmp_path):
    """Each task's real dataset class and pipelines read the generator's
    folders, with the demo's changes to the shipped tiny config."""
    cfg = _cfg(task, data, tmp_path)
    assert cfg.model.backbone.img_size == SIZE
    init_default_scope('mmpose' if task == 'pose' else 'mmseg')
    registry = POSE_DATASETS if task == 'pose' else SEG_DATASETS
    for split in ('train', 'val'):
        loader = cfg[f'{split}_dataloader']
        ds = registry.build(loader.dataset)
        assert len(ds) > 0
        sample = ds[0]
        assert tuple(sample['inputs'].shape) == (3, ) + SIZE
        ds_sample = sample['data_samples']
        if task == 'pose':
            if split == 'train':  # heatmaps at 1/4 of the input
                assert tuple(ds_sample.gt_fields.heatmaps.shape) == (
                    17, SIZE[0] // 4, SIZE[1] // 4)
                assert ds_sample.gt_instance_labels.keypoint_weights.sum() > 0
            continue
        info = ds.get_data_info(0)
        if task == 'matting':
            if split == 'train':  # alpha, image, fg, bg at the input size
                assert tuple(ds_sample.gt_matting.shape) == SIZE
                assert ds_sample.gt_matting.data.shape[0] == 10
            else:  # the alpha file itself, at the rendered size
                ref = cv2.imread(info['alpha_path'], cv2.IMREAD_UNCHANGED)
                np.testing.assert_allclose(
                    ds_sample.gt_alpha.data.numpy()[0], ref / 65535.0,
                    atol=1e-7)
            continue
        mask = cv2.imread(info.get('seg_map_path', info.get('mask_path')),
                          cv2.IMREAD_UNCHANGED)
        if task == 'seg':
            gt = ds_sample.gt_sem_seg.data.numpy()[0]
            assert gt.max() < 28
            if split == 'val':  # no augmentation: the mask file itself
                np.testing.assert_array_equal(gt, mask)
        elif split == 'val':
            gt = ds_sample.get(f'gt_{task}_map').data.numpy()
            ref = np.load(info[f'{task}_path'])
            if task == 'depth':
                np.testing.assert_allclose(gt[0][mask > 0], ref[mask > 0])
            else:
                np.testing.assert_allclose(gt.transpose(1, 2, 0), ref,
                                           atol=1e-6)


def test_adapt_config_points_at_data_and_makes_a_short_run(data, tmp_path):
    cfg = _cfg('seg', data, tmp_path)
    assert 'RandomBackground' not in [
        t.type for t in cfg.train_dataloader.dataset.pipeline]
    assert cfg.train_cfg == dict(type='IterBasedTrainLoop', max_iters=300,
                                 val_begin=301, val_interval=301)
    assert cfg.train_dataloader.batch_size == 8
    head = cfg.model.decode_head
    assert head.channels == 32 and head.deconv_out_channels == (32, 32, 32)
    pose = _cfg('pose', data, tmp_path)
    coco, pck = pose.val_evaluator
    assert coco.ann_file == str(data / 'val/annotations/coco_17.json')
    assert pck == dict(type='PCKAccuracy', thr=0.1, norm_item='bbox')
    assert pose.train_dataloader.dataset.ann_file == \
        'train/annotations/coco_17.json'
    assert 'bbox_file' not in pose.val_dataloader.dataset
    assert 'RandomHalfBody' not in [
        t.type for t in pose.train_dataloader.dataset.pipeline]
    assert pose.model.head.decoder.input_size == (SIZE[1], SIZE[0])
    assert pose.model.head.decoder.heatmap_size == (SIZE[1] // 4,
                                                   SIZE[0] // 4)


def test_depth_trains_with_the_chosen_loss(data, tmp_path):
    """The demo's depth model trains with the scale-and-shift-invariant
    loss by default; ``depth_loss=None`` keeps the config's official SiLog
    loss. Other tasks' losses are untouched."""
    depth = _cfg('depth', data, tmp_path)
    assert depth.model.decode_head.loss_decode == dict(
        type='DepthScaleShiftLoss')
    official = adapt_config(
        Config.fromfile(str(ROOT / 'configs' / DEMO_TASKS['depth'].config)),
        'depth', str(data), str(tmp_path),
        DemoSettings(image_size=SIZE, depth_loss=None))
    assert official.model.decode_head.loss_decode.type == 'DepthSiLogLoss'
    normal = _cfg('normal', data, tmp_path).model.decode_head.loss_decode
    normal = normal if isinstance(normal, list) else [normal]
    assert [loss.type for loss in normal] == ['NormalCosineLoss',
                                              'NormalL1Loss']
    init_default_scope('mmseg')
    head = MODELS.build(depth.model.decode_head)
    assert type(head.loss_decode).__name__ == 'DepthScaleShiftLoss'


@pytest.mark.slow
def test_each_task_gets_its_own_input_size(data, tmp_path):
    """Pose crops and the dense tasks' whole images are sized separately;
    the rendered images keep their own size."""
    settings = DemoSettings(image_size=SIZE, input_sizes=dict(
        pose=(96, 64), seg=(32, 48), depth=(48, 32), normal=(64, 48),
        matting=(48, 32)))
    for task, (h, w) in settings.input_sizes.items():
        cfg = adapt_config(
            Config.fromfile(str(ROOT / 'configs' / DEMO_TASKS[task].config)),
            task, str(data), str(tmp_path), settings)
        assert cfg.model.backbone.img_size == (h, w)
        if task == 'pose':
            assert cfg.model.head.decoder.input_size == (w, h)
        else:
            assert cfg.model.data_preprocessor.size == (h, w)
        init_default_scope('mmpose' if task == 'pose' else 'mmseg')
        registry = POSE_DATASETS if task == 'pose' else SEG_DATASETS
        sample = registry.build(cfg.train_dataloader.dataset)[0]
        assert tuple(sample['inputs'].shape) == (3, h, w)


def test_set_input_size_rejects_sizes_the_patches_do_not_tile():
    cfg = Config.fromfile(str(ROOT / 'configs' / DEMO_TASKS['depth'].config))
    with pytest.raises(ValueError, match='multiples of the patch size 16'):
        set_input_size(cfg, (100, 96))
    resized = set_input_size(cfg, (64, 48), train=True)
    assert resized.model.backbone.img_size == (64, 48)
    assert cfg.model.backbone.img_size == (256, 192)  # the input is kept


def test_table_marks_the_direction_of_each_metric():
    rows = [
        dict(task='pose', metric_name='AP', before=0.0, after=0.3,
             higher_is_better=True, unit='', train_s=10.0),
        dict(task='depth', metric_name='RMSE', before=0.2, after=0.3,
             higher_is_better=False, unit=' m', train_s=5.0),
    ]
    lines = format_table(rows).splitlines()
    assert lines[2] == ('| pose | AP (higher is better) | 0 | 0.3 | yes | '
                        '10 s |')
    assert lines[3] == ('| depth | RMSE (lower is better) | 0.2 m | 0.3 m | '
                        'NO | 5 s |')


@pytest.mark.slow
def test_demo_smoke_run(tmp_path):
    """``demo/main_job.py --smoke``: every step of the main job on a few images
    and iterations (CI's variant of ``make demo``)."""
    out = tmp_path / 'work_dirs' / 'demo'  # where make demo writes
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(ROOT))
    # as make demo runs it (.venv/bin/python demo/main_job.py, from the
    # folder that holds work_dirs/), shortened; tmp_path stands for the
    # checkout: its .venv is the tests' environment, demo/ the repository's
    python = project_venv(tmp_path)
    (tmp_path / 'demo').symlink_to(ROOT / 'demo')
    proc = subprocess.run(
        [str(python.relative_to(tmp_path)), 'demo/main_job.py', '--smoke'],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    table = [ln for ln in lines if ln.startswith('|')]
    # header, rule, one row per task and metric
    num_rows = sum(len(spec.metrics) for spec in DEMO_TASKS.values())
    assert len(table) == 2 + num_rows, proc.stdout[-3000:]
    for task, spec in DEMO_TASKS.items():
        rows = [ln for ln in table if ln.startswith(f'| {task} |')]
        assert [r.split(' | ')[1].split(' (')[0] for r in rows] == [
            m.name.split(' (')[0] for m in spec.metrics]
        for where, stem in (('held_out', '*'), ('astronaut', 'astronaut')):
            vis = list((out / 'vis' / where / task).glob(f'{stem}.png'))
            assert vis, (where, task)
            img = cv2.imread(str(vis[0]))
            assert img is not None and img.std() > 0
        assert (out / task / 'iter_5.pth').is_file()
    assert (out / 'results.md').read_text().strip() == '\n'.join(table)
    # The default data: one person per image, rendered at 256x192; pose
    # trains on 192x144 crops.
    ann = json.loads((out / 'data/val/annotations/coco_17.json').read_text())
    per_image = Counter(a['image_id'] for a in ann['annotations'])
    assert len(per_image) == 8 and set(per_image.values()) == {1}
    img = cv2.imread(str(out / 'data/val/images' / ann['images'][0]['file_name']))
    assert img.shape == (256, 192, 3)
    # one numbered step each: rendering, each task, inference, results
    steps = 3 + len(DEMO_TASKS)
    assert [ln.split(']')[0] + ']' for ln in lines if ln.startswith('[')] \
        == [f'[{i}/{steps}]' for i in range(1, steps + 1)]
    assert any(ln.startswith(f'[2/{steps}] pose (input 192x144)')
               for ln in lines)
    # each metric with its unit
    assert any(ln.strip().startswith('seg mIoU (28 parts): ') and
               ln.count(' %') == 2 for ln in lines), lines
    assert any(ln.startswith('elapsed: ') for ln in lines)
    # one config per work dir, under the demo's name; the checkpoint
    # carries it as data
    for task in DEMO_TASKS:
        assert sorted(p.name for p in (out / task).glob('*.py')) == [
            'demo_config.py']
    # the demo ends with the commands that run its models: they run as
    # printed
    _printed_commands_run(lines, tmp_path, env)
    _readme_commands_run(tmp_path, env)


def _printed_commands_run(lines, root, env):
    """The commands the demo printed, run as printed from the folder it ran
    in (the web demo with a free port added, stopped once it answers)."""
    import socket
    import urllib.request
    commands = [ln.strip() for ln in lines
                if ln.startswith('  ') and not ln.startswith('  (') and (
                    ' -m sapiens_mm ' in ln or 'demo/web_demo.py' in ln)]
    photo, web = commands
    python = photo.split(' -m sapiens_mm ')[0]
    assert python == '.venv/bin/python'  # the venv's, by its path
    assert all(f'--{t} work_dirs/demo/{t}/iter_5.pth' in photo
               for t in DEMO_TASKS)
    proc = subprocess.run(photo, shell=True, cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (photo, proc.stderr[-3000:])
    for task in DEMO_TASKS:
        assert (root / 'outputs' / task / 'astronaut.png').is_file(), task
    help_line = next(ln for ln in lines if '-m sapiens_mm --help' in ln)
    assert f'{python} -m sapiens_mm --help' in help_line
    assert web == f'{python} demo/web_demo.py --checkpoints work_dirs/demo'
    # the web demo on a port of its own
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        shlex.split(web) + ['--port', str(port)], cwd=root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, server.stdout.read()[-3000:]
            try:
                with urllib.request.urlopen(f'http://127.0.0.1:{port}/',
                                            timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, 'no answer'
                time.sleep(1)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _readme_block(name, page='README.md'):
    """The code of ``page`` (README.md or a docs page) between
    ``<!-- name:start -->`` and ``<!-- name:end -->`` (one fenced block)."""
    text = (ROOT / page).read_text()
    block = text.split(f'<!-- {name}:start -->')[1].split(
        f'<!-- {name}:end -->')[0]
    return block.split('```', 2)[1].split('\n', 1)[1]


def _readme_commands_run(root, env):
    """README's first screen (set-up to a photo result) and the stock front
    end example of docs/inference.md, executed as written in ``root`` where
    the demo wrote ``work_dirs/demo`` (and its ``.venv``): the first
    command, ``make demo``, is the shortened demo just run."""
    commands = _readme_block('first-photo').strip().splitlines()
    assert commands[0] == 'make demo' and len(commands) == 3
    for command in commands[1:]:
        proc = subprocess.run(
            command, shell=True, cwd=root, env=env, capture_output=True,
            text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stderr[-3000:])
    for task in DEMO_TASKS:
        vis = cv2.imread(str(root / 'outputs' / task / 'astronaut.png'))
        assert vis is not None and vis.std() > 0
    # docs/inference.md's command on make demo's models, into a fresh
    # outputs/
    shutil.rmtree(root / 'outputs')
    block = _readme_block('demo-models', 'docs/inference.md').strip()
    proc = subprocess.run(block, shell=True, cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (block, proc.stderr[-3000:])
    assert sorted(p.name for p in (root / 'outputs').iterdir()) == \
        sorted(list(DEMO_TASKS) + ['outputs.json'])
    proc = subprocess.run(['.venv/bin/python', '-c',
                           _readme_block('stock-frontends',
                                         'docs/inference.md')], cwd=root,
                          env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
