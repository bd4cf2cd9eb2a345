"""tools/test.py refuses a checkpoint that does not fit the model (it used
to evaluate random weights and exit 0), refuses NaN weights, and ends user
errors of tools/train.py and tools/test.py with one line."""
import json

import pytest
import torch
from cluster_helpers import write_seg_data, write_tiny_config
from mmengine.config import Config
from mmengine.registry import init_default_scope
from tool_helpers import load_tool

from sapiens_mm.cli import run_cli


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    """A tiny seg config with 2 images, its model's weights and the tool."""
    import sys
    from mmseg.registry import MODELS
    tmp = tmp_path_factory.mktemp('strict')
    data = write_seg_data(tmp / 'data', n=2)
    cfg_path = write_tiny_config(tmp, data, batch_size=1, max_epochs=1,
                                 augment=False, dropout=0.0)
    sys.path.insert(0, str(tmp))  # its custom_imports
    init_default_scope('mmseg')
    torch.manual_seed(0)
    state = MODELS.build(Config.fromfile(str(cfg_path)).model).state_dict()
    yield tmp, cfg_path, state, load_tool('test')
    sys.path.remove(str(tmp))


def _save(tmp, name, state):
    path = tmp / name
    torch.save({'state_dict': state}, str(path))
    return str(path)


def _run_test(tool, cfg_path, ckpt, out, *extra):
    return run_cli(tool.main, [str(cfg_path), ckpt, '--out', str(out),
                               '--work-dir', str(out.parent / 'w'), *extra],
                   prog='tools/test.py')


def _one_line_error(capsys, fn, *args):
    with pytest.raises(SystemExit) as exc:
        fn(*args)
    msg = str(exc.value.code)  # what Python prints to stderr, alone
    assert exc.value.code not in (0, None) and '\n' not in msg
    return msg


def _variants(state):
    missing = dict(state)
    missing.pop('decode_head.conv_seg.bias')
    shape = dict(state)
    shape['decode_head.conv_seg.weight'] = torch.zeros(3, 64, 1, 1)
    return dict(
        missing=(missing, 'missing keys [decode_head.conv_seg.bias]'),
        wrong_shape=(shape, 'decode_head.conv_seg.weight: checkpoint '
                     '(3, 64, 1, 1) vs model (28, 64, 1, 1)'),
        single_key=({'w': torch.zeros(1)}, 'unexpected keys [w]'),
    )


@pytest.mark.parametrize('case', ['missing', 'wrong_shape', 'single_key'])
def test_checkpoint_that_does_not_fit_is_refused(setup, capsys, case):
    tmp, cfg_path, state, tool = setup
    bad, expect = _variants(state)[case]
    ckpt = _save(tmp, f'{case}.pth', bad)
    out = tmp / case / 'metrics.json'
    msg = _one_line_error(capsys, _run_test, tool, cfg_path, ckpt, out)
    assert expect in msg and '--non-strict' in msg
    assert not out.exists()  # no metrics of random weights


def test_wrong_task_checkpoint_is_refused(setup, capsys):
    from mmpose.registry import MODELS as POSE_MODELS
    from tiny_configs import TINY
    tmp, cfg_path, _, tool = setup
    init_default_scope('mmpose')
    pose = POSE_MODELS.build(Config.fromfile(str(TINY['pose'])).model)
    init_default_scope('mmseg')
    ckpt = _save(tmp, 'pose.pth', pose.state_dict())
    out = tmp / 'pose' / 'metrics.json'
    msg = _one_line_error(capsys, _run_test, tool, cfg_path, ckpt, out)
    assert 'does not fit' in msg and 'head.final_layer.weight' in msg
    assert not out.exists()


@pytest.mark.slow
def test_non_strict_evaluates_with_a_warning(setup, caplog):
    tmp, cfg_path, state, tool = setup
    bad, _ = _variants(state)['missing']
    ckpt = _save(tmp, 'missing_ns.pth', bad)
    out = tmp / 'ns' / 'metrics.json'
    _run_test(tool, cfg_path, ckpt, out, '--non-strict')
    assert set(json.loads(out.read_text())['metrics']) == {
        'aAcc', 'mIoU', 'mAcc'}
    # the fitting checkpoint passes the strict default
    good = _save(tmp, 'good.pth', state)
    out = tmp / 'good' / 'metrics.json'
    _run_test(tool, cfg_path, good, out)
    assert out.is_file()


@pytest.mark.slow
def test_nan_weights_refused_even_non_strict(setup, capsys):
    tmp, cfg_path, state, tool = setup
    bad = {k: v.clone() for k, v in state.items()}
    bad['backbone.layers.0.attn.qkv.weight'][0, :3] = float('nan')
    ckpt = _save(tmp, 'nan.pth', bad)
    out = tmp / 'nan' / 'metrics.json'
    for extra in ((), ('--non-strict', )):
        msg = _one_line_error(capsys, _run_test, tool, cfg_path, ckpt, out,
                              *extra)
        assert 'backbone.layers.0.attn.qkv.weight (3 of' in msg
        assert 'NaN / infinite' in msg
    assert not out.exists()


@pytest.mark.parametrize('content', [b'', b'\x8a\x03random bytes' * 50])
def test_empty_or_random_checkpoint_one_line(setup, capsys, content):
    tmp, cfg_path, _, tool = setup
    ckpt = tmp / 'broken.pth'
    ckpt.write_bytes(content)
    msg = _one_line_error(capsys, _run_test, tool, cfg_path, str(ckpt),
                          tmp / 'broken' / 'metrics.json')
    assert f'Cannot read checkpoint {ckpt}' in msg
    assert 'weights_only' not in msg


def _tools_test_error(tmp_path, capsys, ann, evaluator):
    """The one-line error of tools/test.py on the tiny pose config whose
    test split and metric read ``ann``."""
    from tiny_configs import TINY
    cfg = Config.fromfile(str(TINY['pose']))
    cfg.test_dataloader.dataset.update(data_root=str(tmp_path),
                                       ann_file=ann.name, bbox_file=None)
    cfg.test_evaluator = dict(type=evaluator, ann_file=str(ann))
    cfg.model.backbone.init_cfg = None
    cfg_path = tmp_path / 'pose.py'
    cfg.dump(str(cfg_path))
    model_ckpt = tmp_path / 'w.pth'
    init_default_scope('mmpose')
    from mmpose.registry import MODELS
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict()},
               str(model_ckpt))
    tool = load_tool('test')
    return _one_line_error(capsys, run_cli, tool.main, [
        str(cfg_path), str(model_ckpt), '--work-dir', str(tmp_path / 'w')
    ], 'tools/test.py')


def test_malformed_coco_annotation_file_is_named(tmp_path, capsys):
    """A pose config whose COCO annotation file is cut short: the error
    names the file (json.JSONDecodeError alone does not)."""
    ann = tmp_path / 'person_keypoints_val.json'
    ann.write_text('{"images": [{"id": 1, ')
    msg = _tools_test_error(tmp_path, capsys, ann, 'CocoMetric')
    assert f'Annotation file {ann} is not valid JSON' in msg


def test_nan_ground_truth_box_is_named(tmp_path, capsys):
    """A NaN ground-truth box (accepted by mmpose, it changed AP) ends
    tools/test.py with one line naming the file and the entry."""
    ann = tmp_path / 'goliath_val.json'
    ann.write_text(json.dumps(dict(
        images=[dict(id=7, file_name='a.jpg', width=64, height=64)],
        annotations=[dict(id=3, image_id=7, category_id=1, iscrowd=0,
                          bbox=[1, 2, float('nan'), 40], area=800.0,
                          num_keypoints=308, keypoints=[5, 5, 2] * 308)],
        categories=[dict(id=1, name='person')])))
    msg = _tools_test_error(tmp_path, capsys, ann, 'GoliathMetric')
    assert msg.startswith(f'tools/test.py: error: {ann}: annotations[0] '
                          '(id 3, image_id 7): "bbox" [1, 2, nan, 40] has a '
                          'non-finite value')


def test_unwritable_work_dir_one_line(setup, capsys):
    tmp, cfg_path, state, tool = setup
    blocker = tmp / 'blocker'
    blocker.write_text('')
    train = load_tool('train')
    msg = _one_line_error(capsys, run_cli, train.main, [
        str(cfg_path), '--work-dir', str(blocker / 'w')], 'tools/train.py')
    assert f'Cannot write to the work dir (--work-dir) {blocker / "w"}' in msg


@pytest.mark.slow
def test_debug_shows_the_traceback(setup):
    tmp, cfg_path, state, tool = setup
    ckpt = tmp / 'empty_dbg.pth'
    ckpt.write_bytes(b'')
    with pytest.raises(Exception, match='Cannot read checkpoint'):
        run_cli(tool.main, [str(cfg_path), str(ckpt), '--work-dir',
                            str(tmp / 'dbg'), '--debug'], 'tools/test.py')


@pytest.mark.slow
def test_tools_test_py_process_ends_with_one_line(setup):
    """The real process: exit 1, the last stderr line is the error, no
    Python traceback."""
    import subprocess
    import sys

    from cluster_helpers import ROOT, run_env
    tmp, cfg_path, _, _ = setup
    ckpt = tmp / 'single.pth'
    torch.save({'w': torch.zeros(1)}, str(ckpt))
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools/test.py'), str(cfg_path),
         str(ckpt), '--work-dir', str(tmp / 'proc')],
        capture_output=True, text=True, timeout=300, env=run_env(tmp))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith('tools/test.py: error: ') and \
        'unexpected keys [w]' in last


def test_convert_tool_random_bytes_one_line(tmp_path, capsys):
    src = tmp_path / 'download.pth'
    src.write_bytes(bytes(range(256)) * 8)
    tool = load_tool('convert_pretrain_to_clean')
    msg = _one_line_error(capsys, run_cli, tool.main,
                          [str(src), str(tmp_path / 'clean.pth')],
                          'tools/convert_pretrain_to_clean.py')
    assert f'Cannot read checkpoint {src}' in msg
    assert not (tmp_path / 'clean.pth').exists()
