"""mmseg IoUMetric (as configured for the seg configs) on a hand-built case."""
from pathlib import Path

import torch
from mmengine.config import Config
from mmseg.evaluation.metrics import iou_metric
from mmseg.registry import METRICS


def _sample(pred, label):
    return dict(pred_sem_seg=dict(data=torch.tensor(pred)[None]),
                gt_sem_seg=dict(data=torch.tensor(label)[None]))


def test_miou_matches_hand_computation(monkeypatch):
    logged = []
    monkeypatch.setattr(iou_metric, 'print_log',
                        lambda msg, *a, **k: logged.append(str(msg)))
    cfg = Config.fromfile(
        str(Path(__file__).resolve().parents[2] / 'configs' / 'seg' /
            'goliath' / 'sapiens_0.3b-200e_goliath-1024x768.py'))
    metric = METRICS.build(cfg.val_evaluator)
    metric.dataset_meta = dict(
        classes=('Background', 'Hair', 'Torso', 'Tongue', 'Unused'))
    # image 1: one pixel ignored (255)
    label1 = [[0, 0, 1], [1, 2, 255]]
    pred1 = [[0, 1, 1], [1, 2, 0]]
    # image 2: a Tongue pixel predicted as background
    label2 = [[3]]
    pred2 = [[0]]
    metric.process({}, [_sample(pred1, label1), _sample(pred2, label2)])
    result = metric.evaluate(2)

    # Hand computation over the 6 labelled pixels (ignore excluded):
    #   class       inter  pred  label  union   IoU   Acc
    #   Background    1     2     2      3      1/3   1/2
    #   Hair          2     3     2      3      2/3   1
    #   Torso         1     1     1      1      1     1
    #   Tongue        0     0     1      1      0     0
    #   Unused        0     0     0      0      nan   nan  (left out)
    # mIoU = (1/3 + 2/3 + 1 + 0) / 4 = 50 %, mAcc = 2.5 / 4 = 62.5 %,
    # aAcc = 4 correct / 6 = 66.67 %.
    assert result == {'aAcc': 66.67, 'mIoU': 50.0, 'mAcc': 62.5}
    table = '\n'.join(logged)
    for name in ('Background', 'Hair', 'Torso', 'Tongue'):
        assert name in table  # the per-class table is logged
    assert '33.33' in table and '66.67' in table
