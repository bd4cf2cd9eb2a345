"""COCO keypoint annotation files: a malformed entry is refused with the
file and the entry named, through the dataset classes the shipped pose
configs build; a valid file loads exactly as with mmpose's classes."""
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpose.datasets import CocoDataset, CocoWholeBodyDataset
from mmpose.registry import DATASETS
from coco_helpers import DATASET_CONFIGS, WHOLEBODY_EXTRA, write_json

from sapiens_mm.datasets import (AnnotationFileError, CheckedCocoDataset,
                                 CheckedCocoWholeBodyDataset, GoliathDataset)


@pytest.fixture(autouse=True)
def _mmpose_scope():
    with DefaultScope.overwrite_default_scope('mmpose'):
        yield


def _kpts(count, offset):
    return [v for k in range(count) for v in (offset + k, offset + k, 2)]


def coco_dict(num_keypoints=17, wholebody=False):
    """Three images: two people, a crowd region, a person without
    keypoints (mmpose skips it) and one with no labelled keypoint."""
    images = [dict(id=i, file_name=f'{i}.jpg', width=100, height=120)
              for i in (1, 2, 3)]

    def person(ann_id, image_id, labelled=True, **extra):
        ann = dict(id=ann_id, image_id=image_id, category_id=1,
                   bbox=[10.5, 12, 50, 80], area=3000.0, iscrowd=0,
                   segmentation=[], num_keypoints=num_keypoints,
                   keypoints=_kpts(num_keypoints, 20 + ann_id))
        if wholebody:
            ann.update({f: _kpts(n, 15) for f, n in WHOLEBODY_EXTRA.items()})
        if not labelled:
            for field in ('keypoints', *WHOLEBODY_EXTRA):
                if field in ann:
                    ann[field] = [0] * len(ann[field])
            ann['num_keypoints'] = 0
        ann.update(extra)
        return ann

    anns = [person(1, 1), person(2, 2, bbox=[90, 100, 30, 40]),
            person(3, 2, iscrowd=1), person(5, 3, labelled=False)]
    if not wholebody:  # CocoWholeBodyDataset needs keypoints everywhere
        no_kpts = person(4, 3)
        del no_kpts['keypoints']
        anns.append(no_kpts)
    return dict(images=images, annotations=anns,
                categories=[dict(id=1, name='person')])


def assert_same(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize('checked,stock,wholebody', [
    (CheckedCocoDataset, CocoDataset, False),
    (CheckedCocoWholeBodyDataset, CocoWholeBodyDataset, True),
])
@pytest.mark.parametrize('data_mode', ['topdown', 'bottomup'])
def test_valid_file_loads_exactly_as_mmpose(tmp_path, checked, stock,
                                            wholebody, data_mode):
    ann = write_json(tmp_path, coco_dict(wholebody=wholebody))
    kwargs = dict(ann_file=ann, data_root='', data_mode=data_mode,
                  pipeline=[], test_mode=True)
    ours, theirs = checked(**kwargs), stock(**kwargs)
    assert len(ours) > 0
    assert_same([ours.get_data_info(i) for i in range(len(ours))],
                [theirs.get_data_info(i) for i in range(len(theirs))])
    assert_same(ours.metainfo, theirs.metainfo)


def _set(path, value):
    def edit(data):
        *keys, last = path
        node = data
        for key in keys:
            node = node[key]
        node[last] = value
    return edit


def _drop(path):
    def edit(data):
        *keys, last = path
        node = data
        for key in keys:
            node = node[key]
        del node[last]
    return edit


# (edit of the valid file, entry named, what is said to be wrong)
SECOND_PERSON = 'annotations[1] (id 2, image_id 2)'
BAD = {
    'nan box': (_set(['annotations', 1, 'bbox'], [10, float('nan'), 50, 80]),
                SECOND_PERSON, '"bbox" [10, nan, 50, 80] has a non-finite'),
    'inf box': (_set(['annotations', 1, 'bbox', 2], float('inf')),
                SECOND_PERSON, 'has a non-finite value'),
    'negative box': (_set(['annotations', 1, 'bbox', 3], -40),
                     SECOND_PERSON, 'negative width or height'),
    'box of 3': (_set(['annotations', 1, 'bbox'], [1, 2, 3]), SECOND_PERSON,
                 '"bbox" must be 4 numbers'),
    'no image_id': (_drop(['annotations', 1, 'image_id']),
                    'annotations[1] (id 2, image_id None)',
                    '"image_id" is missing'),
    'unknown image': (_set(['annotations', 1, 'image_id'], 9),
                      'annotations[1] (id 2, image_id 9)',
                      '"image_id" 9 is not the id of any entry of "images"'),
    'num_keypoints null': (_set(['annotations', 1, 'num_keypoints'], None),
                           SECOND_PERSON, '"num_keypoints" must be a non-'),
    'keypoint null': (_set(['annotations', 1, 'keypoints', 4], None),
                      SECOND_PERSON, '"keypoints" must be a list of numbers'),
    'keypoint nan': (_set(['annotations', 1, 'keypoints', 0], float('nan')),
                     SECOND_PERSON, '"keypoints" has a non-finite value'),
    'width null': (_set(['images', 1, 'width'], None), 'images[1] (id 2)',
                   '"width" must be a positive number, got None'),
    'duplicate id': (_set(['annotations', 1, 'id'], 1),
                     'annotations[1] (id 1, image_id 2)',
                     '"id" 1 appears twice'),
    'no annotations': (_drop(['annotations']), '"annotations"',
                       'is missing or not a list'),
    'empty annotations': (_set(['annotations'], []), 'no usable person',
                          'nothing to load'),
}


@pytest.mark.parametrize('dataset,num_keypoints,wholebody', [
    (CheckedCocoDataset, 17, False),
    (CheckedCocoWholeBodyDataset, 17, True),
    (GoliathDataset, 308, False),
], ids=['coco', 'coco_wholebody', 'goliath'])
@pytest.mark.parametrize('case', list(BAD))
def test_bad_entry_is_named(tmp_path, dataset, num_keypoints, wholebody,
                            case):
    edit, entry, problem = BAD[case]
    data = coco_dict(num_keypoints, wholebody)
    edit(data)
    ann = write_json(tmp_path, data)
    with pytest.raises(AnnotationFileError) as info:
        dataset(ann_file=ann, data_root='', pipeline=[], test_mode=True)
    message = str(info.value)
    assert message.startswith(f'{ann}: ')
    assert entry in message and problem in message
    assert '\n' not in message


def test_wrong_keypoint_count_and_missing_wholebody_field(tmp_path):
    data = coco_dict(17)
    data['annotations'][1]['keypoints'] = [1, 2, 2]
    ann = write_json(tmp_path, data)
    with pytest.raises(AnnotationFileError, match=r'annotations\[1\] \(id 2,'
                       r' image_id 2\): "keypoints" has 3 values; this '
                       'dataset needs 51'):
        CheckedCocoDataset(ann_file=ann, data_root='', pipeline=[])
    data = coco_dict(17, wholebody=True)
    del data['annotations'][1]['face_kpts']
    ann = write_json(tmp_path, data, 'wb.json')
    # mmpose alone: KeyError: 'face_kpts', without file or entry
    with pytest.raises(KeyError):
        CocoWholeBodyDataset(ann_file=ann, data_root='', pipeline=[])
    with pytest.raises(AnnotationFileError, match=r'wb.json: annotations\[1\]'
                       r' \(id 2, image_id 2\): "face_kpts" is missing'):
        CheckedCocoWholeBodyDataset(ann_file=ann, data_root='', pipeline=[])


def test_not_json_is_named_and_never_unpickled(tmp_path):
    """An annotation file is read as JSON whatever its suffix (a ``.pkl``
    name must not reach a pickle loader)."""
    path = tmp_path / 'ann.pkl'
    path.write_bytes(b'\x80\x04\x95not json')
    with pytest.raises(AnnotationFileError,
                       match=f'Annotation file {path} is not valid JSON'):
        CheckedCocoDataset(ann_file=str(path), data_root='', pipeline=[])


def test_nan_box_with_detected_boxes(tmp_path):
    """Evaluation on detected boxes (``bbox_file``) reads the annotation
    file too: a NaN box there is refused as well."""
    data = coco_dict(17)
    data['annotations'][0]['bbox'][0] = float('nan')
    ann = write_json(tmp_path, data)
    dets = write_json(tmp_path, [dict(image_id=1, category_id=1, score=0.9,
                                 bbox=[10, 12, 50, 80])], 'dets.json')
    with pytest.raises(AnnotationFileError,
                       match=r'annotations\[0\] \(id 1, image_id 1\): '
                       '"bbox" .* non-finite'):
        CheckedCocoDataset(ann_file=ann, bbox_file=dets, data_root='',
                           pipeline=[], test_mode=True)


DETECTION = dict(image_id=1, category_id=1, score=0.9, bbox=[10, 12, 50, 80])


@pytest.mark.parametrize('edit,problem', [
    (dict(bbox=[10, 12, float('nan'), 80]), r'"bbox" \[10, 12, nan, 80\] '
     'has a non-finite value'),
    (dict(bbox=[10, 12, 50, -80]), r'"bbox" \[10, 12, 50, -80\] has a '
     'negative width or height'),
    (dict(score=None), '"score" must be a finite number, got None'),
    (dict(image_id=9), '"image_id" 9 is not an image of the annotation'),
])
def test_bad_detected_box_is_named(tmp_path, edit, problem):
    """Evaluation on detected boxes (``bbox_file``): mmpose used a NaN
    detected box, and an unknown image id was a bare KeyError."""
    ann = write_json(tmp_path, coco_dict(17))
    dets = write_json(tmp_path, [DETECTION, dict(DETECTION, **edit)],
                      'dets.json')
    with pytest.raises(AnnotationFileError,
                       match=r'dets.json: \[1\] \(image_id \d\): ' + problem):
        CheckedCocoDataset(ann_file=ann, bbox_file=dets, data_root='',
                           pipeline=[], test_mode=True)


def test_detection_file_other_than_json_is_not_read(tmp_path):
    """mmpose reads ``bbox_file`` with mmengine's ``load``, which unpickles
    a ``.pkl``: such a file is refused before it is opened."""
    import pickle
    ann = write_json(tmp_path, coco_dict(17))
    dets = tmp_path / 'dets.pkl'
    marker = tmp_path / 'marker'
    dets.write_bytes(pickle.dumps(_Payload(str(marker))))
    with pytest.raises(AnnotationFileError,
                       match='dets.pkl: a detection-results file .* must be '
                       'a .json file'):
        CheckedCocoDataset(ann_file=ann, bbox_file=str(dets), data_root='',
                           pipeline=[], test_mode=True)
    assert not marker.exists()


class _Payload:
    """Unpickling this creates ``path`` (stands in for any code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, 'w'))


def test_valid_detections_load_exactly_as_mmpose(tmp_path):
    ann = write_json(tmp_path, coco_dict(17))
    dets = write_json(tmp_path, [DETECTION, dict(DETECTION, image_id=2,
                                                 score=0.4)], 'dets.json')
    kwargs = dict(ann_file=ann, bbox_file=dets, data_root='', pipeline=[],
                  test_mode=True)
    ours, theirs = CheckedCocoDataset(**kwargs), CocoDataset(**kwargs)
    assert len(ours) == 2
    assert_same([ours.get_data_info(i) for i in range(2)],
                [theirs.get_data_info(i) for i in range(2)])


@pytest.mark.parametrize('config,num_keypoints,wholebody', [
    ('pose_coco.py', 17, False),
    ('pose_coco_wholebody.py', 17, True),
    ('pose_goliath.py', 308, False),
    ('pose_goliath_sapiens2.py', 308, False),
])
def test_shipped_configs_refuse_a_nan_box(tmp_path, config, num_keypoints,
                                          wholebody):
    """The datasets the shipped pose configs build (train and test
    splits) refuse a NaN ground-truth box; mmpose's stock classes accepted
    it."""
    data = coco_dict(num_keypoints, wholebody)
    data['annotations'][1]['bbox'][2] = float('nan')
    ann = write_json(tmp_path, data)
    cfg = Config.fromfile(str(DATASET_CONFIGS / config))
    for split in ('train_dataloader', 'test_dataloader'):
        dataset = dict(cfg[split].dataset, ann_file=ann, data_root='',
                       bbox_file=None, pipeline=[])
        with pytest.raises(AnnotationFileError,
                           match=r'annotations\[1\] \(id 2, image_id 2\): '
                           r'"bbox" \[90, 100, nan, 40\] has a non-finite'):
            DATASETS.build(dataset)
