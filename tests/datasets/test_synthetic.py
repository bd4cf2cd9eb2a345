"""Tests of the synthetic human generator (sapiens_mm.datasets.synthetic).

The labels of a synthetic sample must be exact and agree with each other:
the same seed gives the same bytes, the part mask equals the depth
foreground, the analytic normals agree with normals derived from the depth
map, visible keypoints lie on their own body part, and every annotation has
the 308 / 17 keypoints of the fixed COCO format.
"""
import hashlib
import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sapiens_mm.datasets.synthetic import render_sample, write_dataset
from sapiens_mm.datasets.synthetic.figure import modelled_keypoints

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / 'sapiens_mm' / 'data'
SIZE = (256, 192)
SPLITS = ('train', 'val')
NUM = {'train': 5, 'val': 3}


def _goliath_names():
    meta = json.loads((DATA / 'goliath_keypoints_308.json').read_text())
    return [k['name'] for k in sorted(meta['keypoints'],
                                      key=lambda k: k['id'])]


def _class_names():
    meta = json.loads((DATA / 'body_part_classes.json').read_text())
    return meta['goliath_28']['classes']


COCO17 = ['nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear',
          'left_shoulder', 'right_shoulder', 'left_elbow', 'right_elbow',
          'left_wrist', 'right_wrist', 'left_hip', 'right_hip', 'left_knee',
          'right_knee', 'left_ankle', 'right_ankle']


def _allowed_classes(name):
    """Part classes a visible keypoint may lie on (clothing included)."""
    side = next((s for s in ('left', 'right') if name.startswith(s + '_')),
                None)
    if side is None:
        if name == 'neck':
            return {'Face_Neck', 'Torso', 'Upper_Clothing'}
        return {'Face_Neck', 'Hair', 'Upper_Lip', 'Lower_Lip'}  # head
    S, part = side.capitalize(), name[len(side) + 1:]
    if 'thumb' in part or 'finger' in part:
        return {f'{S}_Hand'}
    table = {
        'eye': {'Face_Neck', 'Hair'}, 'ear': {'Face_Neck', 'Hair'},
        'shoulder': {f'{S}_Upper_Arm', 'Torso', 'Upper_Clothing'},
        'acromion': {f'{S}_Upper_Arm', 'Torso', 'Upper_Clothing'},
        'elbow': {f'{S}_Upper_Arm', f'{S}_Lower_Arm', 'Upper_Clothing'},
        'olecranon': {f'{S}_Upper_Arm', f'{S}_Lower_Arm', 'Upper_Clothing'},
        'cubital_fossa': {f'{S}_Upper_Arm', f'{S}_Lower_Arm',
                          'Upper_Clothing'},
        'wrist': {f'{S}_Lower_Arm', f'{S}_Hand', 'Upper_Clothing'},
        'hip': {f'{S}_Upper_Leg', 'Lower_Clothing', 'Torso',
                'Upper_Clothing'},
        'knee': {f'{S}_Upper_Leg', f'{S}_Lower_Leg', 'Lower_Clothing'},
        'ankle': {f'{S}_Lower_Leg', f'{S}_Foot', f'{S}_Shoe', f'{S}_Sock',
                  'Lower_Clothing'},
        'big_toe': {f'{S}_Foot', f'{S}_Shoe'},
        'small_toe': {f'{S}_Foot', f'{S}_Shoe'},
        'heel': {f'{S}_Foot', f'{S}_Shoe'},
    }
    return table[part]


def _tree_digest(root: Path):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes())
            .hexdigest() for p in sorted(root.rglob('*')) if p.is_file()}


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp('synthetic') / 'seed0'
    counts = write_dataset(out, NUM['train'], NUM['val'], seed=0, size=SIZE,
                           progress=False)
    assert counts['train'] > 0 and counts['val'] > 0
    return out


def _load(root, split, stem):
    d = root / split
    return (np.asarray(Image.open(d / 'images' / f'{stem}.png')),
            np.asarray(Image.open(d / 'masks' / f'{stem}.png')),
            np.load(d / 'depths' / f'{stem}.npy'),
            np.load(d / 'normals' / f'{stem}.npy'))


def _anns(root, split, num):
    name = 'goliath_308.json' if num == 308 else 'coco_17.json'
    return json.loads((root / split / 'annotations' / name).read_text())


def _samples(root):
    for split in SPLITS:
        doc = _anns(root, split, 308)
        by_img = {}
        for a in doc['annotations']:
            by_img.setdefault(a['image_id'], []).append(a)
        for img in doc['images']:
            stem = Path(img['file_name']).stem
            yield split, img, by_img.get(img['id'], []), \
                _load(root, split, stem)


# --------------------------------------------------------------------------
# determinism


def test_same_seed_same_bytes_other_seed_differs(dataset, tmp_path):
    again = tmp_path / 'again'
    other = tmp_path / 'other'
    write_dataset(again, NUM['train'], NUM['val'], seed=0, size=SIZE,
                  progress=False)
    write_dataset(other, NUM['train'], NUM['val'], seed=1, size=SIZE,
                  progress=False)
    ref = _tree_digest(dataset)
    assert len(ref) == 4 * (NUM['train'] + NUM['val']) + 2 * 2
    assert _tree_digest(again) == ref
    dig = _tree_digest(other)
    assert dig.keys() == ref.keys()
    images = [k for k in ref if '/images/' in k]
    assert all(dig[k] != ref[k] for k in images)


def test_render_sample_deterministic():
    a, b = render_sample(123), render_sample(np.random.default_rng(123))
    c = render_sample(124)
    for key in ('image', 'mask', 'depth', 'normal', 'instance', 'K'):
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a['image'], c['image'])
    assert len(a['people']) == len(b['people'])
    for p, q in zip(a['people'], b['people']):
        np.testing.assert_array_equal(p['keypoints'], q['keypoints'])


# --------------------------------------------------------------------------
# files and formats


def test_layout_and_dtypes(dataset):
    for split in SPLITS:
        d = dataset / split
        assert sorted(p.name for p in (d / 'images').iterdir()) == \
            [f'{i:06d}.png' for i in range(NUM[split])]
        for i in range(NUM[split]):
            img, mask, depth, normal = _load(dataset, split, f'{i:06d}')
            assert img.shape == SIZE + (3,) and img.dtype == np.uint8
            assert mask.shape == SIZE and mask.dtype == np.uint8
            assert depth.shape == SIZE and depth.dtype == np.float32
            assert normal.shape == SIZE + (3,) and normal.dtype == np.float32
            assert mask.max() < len(_class_names())


def test_mask_equals_depth_foreground(dataset):
    total = 0
    for _, _, _, (img, mask, depth, normal) in _samples(dataset):
        fg = depth > 0
        np.testing.assert_array_equal(mask > 0, fg)
        assert np.isfinite(depth).all()
        assert (normal[~fg] == 0).all()
        np.testing.assert_allclose(np.linalg.norm(normal[fg], axis=1), 1,
                                   atol=1e-5)
        total += fg.sum()
    assert total > 1000


def test_normals_face_camera(dataset):
    for _, img, _, (_, mask, depth, normal) in _samples(dataset):
        K = np.array(img['cam_K'])
        v, u = np.nonzero(depth > 0)
        ray = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1],
                        np.ones(len(u))], 1)
        assert ((normal[v, u] * ray).sum(1) < 1e-6).all()


def _depth_normals(depth, K):
    """Normals from back-projected depth by central differences."""
    H, W = depth.shape
    v, u = np.mgrid[:H, :W].astype(np.float64)
    z = depth.astype(np.float64)
    X = np.stack([(u - K[0, 2]) / K[0, 0] * z, (v - K[1, 2]) / K[1, 1] * z,
                  z], -1)
    du = X[1:-1, 2:] - X[1:-1, :-2]
    dv = X[2:, 1:-1] - X[:-2, 1:-1]
    n = -np.cross(du, dv)  # u right x v down points away from the camera
    return n / (np.linalg.norm(n, axis=-1, keepdims=True) + 1e-12)


def test_normals_agree_with_depth(dataset):
    angles = []
    for _, img, _, (_, mask, depth, normal) in _samples(dataset):
        K = np.array(img['cam_K'])
        c = mask[1:-1, 1:-1]
        interior = c > 0
        H, W = mask.shape
        for dy in (-1, 0, 1):  # same part class in the 3x3 neighbourhood
            for dx in (-1, 0, 1):
                interior &= mask[1 + dy:H - 1 + dy, 1 + dx:W - 1 + dx] == c
        z = depth.astype(np.float64)
        smooth = (np.abs(z[1:-1, 2:] - 2 * z[1:-1, 1:-1] + z[1:-1, :-2]) <
                  0.01) & (np.abs(z[2:, 1:-1] - 2 * z[1:-1, 1:-1] +
                                  z[:-2, 1:-1]) < 0.01)
        sel = interior & smooth
        cos = (_depth_normals(depth, K)[sel] * normal[1:-1, 1:-1][sel]).sum(1)
        angles.append(np.degrees(np.arccos(np.clip(cos, -1, 1))))
    ang = np.concatenate(angles)
    assert len(ang) > 5000
    assert np.median(ang) < 1.0
    assert (ang < 5).mean() > 0.9


def test_coco_json_structure(dataset):
    goliath = _goliath_names()
    for split in SPLITS:
        for num, names in ((308, goliath), (17, COCO17)):
            doc = _anns(dataset, split, num)
            cat, = doc['categories']
            assert cat['id'] == 1 and cat['name'] == 'person'
            assert cat['keypoints'] == names
            sk = np.array(cat['skeleton'])
            assert sk.min() >= 1 and sk.max() <= num
            assert len(doc['images']) == NUM[split]
            ids = {im['id'] for im in doc['images']}
            for im in doc['images']:
                assert (dataset / split / 'images' / im['file_name']).exists()
                assert (im['height'], im['width']) == SIZE
            ann_ids = [a['id'] for a in doc['annotations']]
            assert len(set(ann_ids)) == len(ann_ids)
            for a in doc['annotations']:
                assert a['image_id'] in ids
                assert a['category_id'] == 1 and a['iscrowd'] == 0
                kps = np.array(a['keypoints'], float).reshape(-1, 3)
                assert kps.shape == (num, 3)
                assert a['num_keypoints'] == int((kps[:, 2] > 0).sum())
                assert set(np.unique(kps[:, 2])) <= {0, 1, 2}
                lab = kps[:, 2] > 0
                assert (kps[~lab, :2] == 0).all()
                assert (kps[lab, 0] >= -0.5).all() and \
                    (kps[lab, 0] < SIZE[1] - 0.5).all()
                assert (kps[lab, 1] >= -0.5).all() and \
                    (kps[lab, 1] < SIZE[0] - 0.5).all()
                x, y, w, h = a['bbox']
                assert w > 0 and h > 0 and a['area'] > 0
                assert x >= 0 and y >= 0 and x + w <= SIZE[1] and \
                    y + h <= SIZE[0]
                assert a['area'] <= w * h


def test_coco17_matches_goliath_by_name(dataset):
    gidx = {n: i for i, n in enumerate(_goliath_names())}
    for split in SPLITS:
        g, c = _anns(dataset, split, 308), _anns(dataset, split, 17)
        assert len(g['annotations']) == len(c['annotations'])
        for a, b in zip(g['annotations'], c['annotations']):
            assert (a['image_id'], a['bbox'], a['area']) == \
                (b['image_id'], b['bbox'], b['area'])
            kg = np.array(a['keypoints']).reshape(-1, 3)
            kc = np.array(b['keypoints']).reshape(-1, 3)
            np.testing.assert_array_equal(kc, kg[[gidx[n] for n in COCO17]])


def test_unmodelled_keypoints_are_unlabelled(dataset):
    names = _goliath_names()
    modelled = set(modelled_keypoints())
    assert set(COCO17) <= modelled
    never = ('lash_line', 'eyelid', 'crease', 'helix', 'tragus', 'nostril',
             'border_of_iris', 'border_of_pupil', 'concha', 'ear_lobe',
             'inner_lip', 'nose_bridge')
    assert not any(s in n for n in modelled for s in never)
    seen = set()
    for split in SPLITS:
        for a in _anns(dataset, split, 308)['annotations']:
            kps = np.array(a['keypoints']).reshape(-1, 3)
            for i in np.nonzero(kps[:, 2] > 0)[0]:
                seen.add(names[i])
            for i, n in enumerate(names):
                if n not in modelled:
                    assert tuple(kps[i]) == (0, 0, 0), n
    assert seen <= modelled
    assert len(seen) >= 60  # body, feet, hands and face points are labelled


def test_visible_keypoints_lie_on_their_part(dataset):
    names, classes = _goliath_names(), _class_names()
    n_vis = n_occ = 0
    for _, _, anns, (_, mask, depth, _) in _samples(dataset):
        for a in anns:
            kps = np.array(a['keypoints']).reshape(-1, 3)
            for i in np.nonzero(kps[:, 2] == 2)[0]:
                x, y = kps[i, :2]
                c = classes[mask[int(np.floor(y + 0.5)),
                                 int(np.floor(x + 0.5))]]
                assert c in _allowed_classes(names[i]), (names[i], c)
                n_vis += 1
            n_occ += int((kps[:, 2] == 1).sum())
    assert n_vis > 100 and n_occ > 0


# --------------------------------------------------------------------------
# in-memory sample


def test_people_boxes_and_areas_match_instances():
    for seed in range(6):
        s = render_sample(seed, size=(128, 96))
        inst, mask = s['instance'], s['mask']
        np.testing.assert_array_equal(inst >= 0, mask > 0)
        assert set(np.unique(inst[inst >= 0])) == set(range(len(s['people'])))
        for i, p in enumerate(s['people']):
            m = inst == i
            rows, cols = np.nonzero(m.any(1))[0], np.nonzero(m.any(0))[0]
            assert p['area'] == m.sum() > 0
            assert p['bbox'] == [cols[0], rows[0], cols[-1] - cols[0] + 1,
                                 rows[-1] - rows[0] + 1]
            vis = p['keypoints'][:, 2] == 2
            xy = np.floor(p['keypoints'][vis, :2] + 0.5).astype(int)
            # a visible keypoint is seen on its own person
            assert (inst[xy[:, 1], xy[:, 0]] == i).all()


def test_cli_writes_dataset(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        'generate_synthetic', ROOT / 'tools' / 'generate_synthetic.py')
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with pytest.raises(SystemExit) as exc:
        cli.main(['--help'])
    assert exc.value.code == 0
    assert '--num-train' in capsys.readouterr().out
    out = tmp_path / 'cli'
    assert cli.main([str(out), '--num-train', '2', '--num-val', '1',
                     '--height', '64', '--width', '48', '--seed', '3',
                     '--no-progress']) == 0
    assert len(list((out / 'train' / 'images').iterdir())) == 2
    img = np.asarray(Image.open(out / 'val' / 'images' / '000000.png'))
    assert img.shape == (64, 48, 3)
    assert (out / 'val' / 'annotations' / 'coco_17.json').exists()


def test_max_people_bounds_the_people_per_image(tmp_path):
    write_dataset(tmp_path / 'one', num_train=6, num_val=0, seed=5,
                  size=(64, 48), max_people=1, progress=False)
    ann = json.loads(
        (tmp_path / 'one/train/annotations/coco_17.json').read_text())
    per_image = Counter(a['image_id'] for a in ann['annotations'])
    assert len(per_image) == 6 and set(per_image.values()) == {1}
    with pytest.raises(ValueError, match='max_people must be at least 1'):
        write_dataset(tmp_path / 'none', 1, 1, max_people=0, progress=False)
    assert not (tmp_path / 'none').exists()  # nothing written before it


def test_min_people_places_that_many_and_default_is_unchanged():
    # min_people=1 is the old behaviour: the same seed, the same sample
    np.testing.assert_array_equal(render_sample(7, size=(64, 48))['image'],
                                  render_sample(7, size=(64, 48),
                                                min_people=1)['image'])
    counts = [len(render_sample(seed, size=(192, 256), min_people=3,
                                max_people=3)['people'])
              for seed in range(4)]
    # 3 placed; one can be hidden behind another or out of frame
    assert all(2 <= c <= 3 for c in counts) and counts.count(3) >= 3
    with pytest.raises(ValueError, match='min_people'):
        render_sample(0, min_people=4, max_people=3)


def test_write_video_cycles_its_scenes_and_returns_their_boxes(tmp_path):
    import cv2

    from sapiens_mm.datasets.synthetic.video import write_video
    path = tmp_path / 'v' / 'people.mp4'
    info = write_video(path, num_frames=5, size=(96, 128), min_people=2,
                       max_people=2, unique_frames=2, fps=10, seed=1)
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame.astype(np.float32))
    cap.release()
    assert len(frames) == 5 and frames[0].shape == (96, 128, 3)
    assert info['num_frames'] == 5 and len(info['boxes']) == 5
    # frame i shows scene i % 2 (up to the codec's loss)
    same = np.abs(frames[2] - frames[0]).mean()
    other = np.abs(frames[1] - frames[0]).mean()
    assert same < 3 and other > 4 * same
    for i, boxes in enumerate(info['boxes']):
        np.testing.assert_array_equal(boxes, info['boxes'][i % 2])
        assert boxes.shape[1] == 4 and 1 <= len(boxes) <= 2
    # boxes are those of the scene's people (x1, y1, x2, y2)
    scene = render_sample(np.random.SeedSequence([1, 2, 0]), size=(96, 128),
                          max_people=2, min_people=2)
    x, y, w, h = scene['people'][0]['bbox']
    np.testing.assert_array_equal(info['boxes'][0][0], [x, y, x + w, y + h])
    with pytest.raises(ValueError, match='min_people'):
        write_video(path, 1, min_people=3, max_people=2)
    held = write_video(tmp_path / 'held.mp4', num_frames=5, size=(96, 128),
                       min_people=2, max_people=2, unique_frames=2,
                       frames_per_scene=2, seed=1)
    # scenes 0, 0, 1, 1, 0
    for i, scene in enumerate([0, 0, 1, 1, 0]):
        np.testing.assert_array_equal(held['boxes'][i], info['boxes'][scene])
