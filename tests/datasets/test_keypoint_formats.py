"""Keypoint format conversion (COCO-17, COCO-WholeBody-133, OpenPose) and
ControlNet-style OpenPose skeleton images.

The expected tables are written here by keypoint name from the public
definitions (COCO person keypoints, COCO-WholeBody, OpenPose output doc),
not taken from the package's data file.
"""
import json
import os

import numpy as np
import pytest
from attack_helpers import changed, run_measured, tree_state
from tiny_configs import ROOT
from tool_helpers import load_tool

from sapiens_mm.datasets import coco_wholebody_to_goliath
from sapiens_mm.datasets.keypoint_formats import (
    convert_keypoints,
    convert_pose_record,
    keypoint_mapping,
    layout_names,
    pose_record_canvas,
    to_openpose,
)
from sapiens_mm.datasets.metainfo import load_goliath_keypoints
from sapiens_mm.utils.image_io import ImageTooLargeError
from sapiens_mm.visualization.openpose import draw_openpose

GOLIATH = [k['name'] for k in load_goliath_keypoints()['keypoints']]

# COCO person keypoints, in the order of the COCO 'keypoints' field.
COCO17 = ['nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear',
          'left_shoulder', 'right_shoulder', 'left_elbow', 'right_elbow',
          'left_wrist', 'right_wrist', 'left_hip', 'right_hip', 'left_knee',
          'right_knee', 'left_ankle', 'right_ankle']
# COCO-WholeBody: body 17, feet 6, face 68 (300-W), left hand, right hand.
FEET = ['left_big_toe', 'left_small_toe', 'left_heel', 'right_big_toe',
        'right_small_toe', 'right_heel']
FINGERS = ['thumb', 'forefinger', 'middle_finger', 'ring_finger',
           'pinky_finger']


def hand(side):
    """COCO-WholeBody / OpenPose hand: root (wrist), then per finger the
    joints 1 (base) to 4 (tip)."""
    return [f'{side}_hand_root'] + [f'{side}_{f}{j}' for f in FINGERS
                                    for j in (1, 2, 3, 4)]


WHOLEBODY = (COCO17 + FEET + [f'face-{i}' for i in range(68)] + hand('left')
             + hand('right'))
# OpenPose COCO-18 body: Nose, Neck, RShoulder, RElbow, RWrist, LShoulder,
# LElbow, LWrist, RHip, RKnee, RAnkle, LHip, LKnee, LAnkle, REye, LEye,
# REar, LEar.
OPENPOSE18 = ['nose', 'neck', 'right_shoulder', 'right_elbow', 'right_wrist',
              'left_shoulder', 'left_elbow', 'left_wrist', 'right_hip',
              'right_knee', 'right_ankle', 'left_hip', 'left_knee',
              'left_ankle', 'right_eye', 'left_eye', 'right_ear', 'left_ear']

# Goliath-308 source of each COCO-WholeBody face landmark that has one
# (300-W numbering): chin, nose root, nose tip, subnasale, eye corners,
# mouth corners and lip midpoints.
FACE_FROM_GOLIATH = {
    8: 'tip_of_chin', 27: 'center_of_nose_root', 30: 'tip_of_nose',
    33: 'bottom_center_of_nose', 36: 'r_outer_end_of_upper_lash_line',
    39: 'r_inner_end_of_upper_lash_line',
    42: 'l_inner_end_of_upper_lash_line',
    45: 'l_outer_end_of_upper_lash_line', 48: 'r_outer_corner_of_mouth',
    51: 'center_of_cupid_bow', 54: 'l_outer_corner_of_mouth',
    57: 'center_of_lower_outer_lip', 60: 'r_inner_corner_of_mouth',
    62: 'center_of_upper_inner_lip', 64: 'l_inner_corner_of_mouth',
    66: 'center_of_lower_inner_lip'
}


def hand_from_goliath(side):
    """Goliath names a finger's joints <finger>4 (tip), 3, 2 and
    <finger>_third_joint (the base, COCO-WholeBody's 1); the wrist is the
    hand root."""
    out = {f'{side}_hand_root': f'{side}_wrist'}
    for f in FINGERS:
        out[f'{side}_{f}1'] = f'{side}_{f}_third_joint'
        out.update({f'{side}_{f}{j}': f'{side}_{f}{j}' for j in (2, 3, 4)})
    return out


def wholebody_from_goliath():
    table = {n: n for n in COCO17 + FEET}
    table.update({f'face-{i}': n for i, n in FACE_FROM_GOLIATH.items()})
    table.update(hand_from_goliath('left'))
    table.update(hand_from_goliath('right'))
    return table  # every other name is missing


def expected_index(target, source, table):
    return [source.index(table[n]) if n in table else -1 for n in target]


def test_layouts_are_the_public_ones():
    assert list(layout_names('coco17')) == COCO17
    assert list(layout_names('coco_wholebody')) == WHOLEBODY
    assert list(layout_names('openpose_body18')) == OPENPOSE18
    assert list(layout_names('openpose_hand_left')) == hand('left')
    assert list(layout_names('openpose_hand_right')) == hand('right')
    assert list(layout_names('openpose_face70')) == (
        [f'face-{i}' for i in range(68)] + ['right_pupil', 'left_pupil'])
    with pytest.raises(ValueError, match='Unknown keypoint layout'):
        layout_names('coco18')


def test_names_match_mmpose_metainfo():
    """The source names of 17 / 133-point models come from mmpose's
    metainfo: the layouts must spell them the same way."""
    from mmpose.datasets.datasets.utils import parse_pose_metainfo
    for layout, cfg in (('coco17', 'coco.py'),
                        ('coco_wholebody', 'coco_wholebody.py')):
        meta = parse_pose_metainfo(
            dict(from_file=f'configs/_base_/datasets/{cfg}'))
        names = [meta['keypoint_id2name'][i]
                 for i in range(meta['num_keypoints'])]
        assert list(layout_names(layout)) == names


def test_goliath_to_coco17():
    m = keypoint_mapping(GOLIATH, 'coco17')
    # COCO-17 wrists are Goliath 62 / 41 (Goliath lists hips before hands)
    np.testing.assert_array_equal(
        m.index[:, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 62, 41, 9, 10, 11, 12, 13,
                        14])
    assert set(m.kinds) == {'name'}


def test_goliath_to_wholebody():
    m = keypoint_mapping(GOLIATH, 'coco_wholebody')
    table = wholebody_from_goliath()
    np.testing.assert_array_equal(m.index[:, 0],
                                  expected_index(WHOLEBODY, GOLIATH, table))
    np.testing.assert_array_equal(m.index[:, 0], m.index[:, 1])
    assert m.kinds.count('missing') == 133 - len(table) == 52
    # The same-name part is the official Sapiens table (shipped in the
    # Goliath metadata, from the official repository), entry for entry.
    by_name = {(w, g) for w, (g, kind) in enumerate(zip(m.index[:, 0],
                                                        m.kinds))
               if kind == 'name'}
    assert by_name == {tuple(p) for p in coco_wholebody_to_goliath()}


def test_openpose_body_from_each_layout():
    for source in (COCO17, WHOLEBODY, GOLIATH):
        m = keypoint_mapping(source, 'openpose_body18')
        for j, name in enumerate(OPENPOSE18):
            if name == 'neck' and 'neck' not in source:
                # the shoulders' midpoint, as OpenPose / ControlNet place it
                assert m.kinds[j] == 'derived'
                assert sorted(m.index[j]) == sorted(
                    [source.index('left_shoulder'),
                     source.index('right_shoulder')])
            else:
                assert m.kinds[j] == 'name'
                assert m.index[j, 0] == source.index(name)
    assert 'neck' in GOLIATH  # the 308-point model predicts a neck point


def test_openpose_hands_and_face():
    for side in ('left', 'right'):
        m = keypoint_mapping(WHOLEBODY, f'openpose_hand_{side}')
        start = 91 if side == 'left' else 112
        np.testing.assert_array_equal(m.index[:, 0],
                                      np.arange(start, start + 21))
        m = keypoint_mapping(GOLIATH, f'openpose_hand_{side}')
        np.testing.assert_array_equal(
            m.index[:, 0],
            expected_index(hand(side), GOLIATH, hand_from_goliath(side)))
        m = keypoint_mapping(COCO17, f'openpose_hand_{side}')
        assert set(m.kinds) == {'missing'}
    face70 = [f'face-{i}' for i in range(68)] + ['right_pupil', 'left_pupil']
    m = keypoint_mapping(WHOLEBODY, 'openpose_face70')
    np.testing.assert_array_equal(m.index[:, 0],
                                  list(range(23, 91)) + [-1, -1])
    m = keypoint_mapping(GOLIATH, 'openpose_face70')
    table = {f'face-{i}': n for i, n in FACE_FROM_GOLIATH.items()}
    table.update(right_pupil='r_center_of_pupil',
                 left_pupil='l_center_of_pupil')
    np.testing.assert_array_equal(m.index[:, 0],
                                  expected_index(face70, GOLIATH, table))


def test_convert_values():
    rng = np.random.default_rng(0)
    kpts = rng.uniform(0, 100, (2, 308, 2)).astype(np.float32)
    scores = rng.uniform(0.1, 1, (2, 308)).astype(np.float32)
    k, s = convert_keypoints(kpts, scores, GOLIATH, 'coco_wholebody')
    assert k.shape == (2, 133, 2) and s.shape == (2, 133)
    table = wholebody_from_goliath()
    for j, name in enumerate(WHOLEBODY):
        if name in table:
            g = GOLIATH.index(table[name])
            np.testing.assert_array_equal(k[:, j], kpts[:, g])
            np.testing.assert_array_equal(s[:, j], scores[:, g])
        else:
            assert (k[:, j] == 0).all() and (s[:, j] == 0).all()
    # neck of a COCO-17 person: the shoulders' midpoint, the lower score
    k17, s17 = kpts[:, :17], scores[:, :17]
    k, s = convert_keypoints(k17, s17, COCO17, 'openpose_body18')
    np.testing.assert_allclose(k[:, 1], (k17[:, 5] + k17[:, 6]) / 2)
    np.testing.assert_array_equal(s[:, 1], np.minimum(s17[:, 5], s17[:, 6]))
    k, s = convert_keypoints(np.zeros((0, 17, 2)), np.zeros((0, 17)), COCO17,
                             'coco_wholebody')
    assert k.shape == (0, 133, 2)


def _record(kpts, scores, names, w=64, h=48):
    return dict(
        input='x.png', frame_index=None, width=w, height=h, skeleton='goliath',
        num_keypoints=len(names), keypoint_names=list(names),
        skeleton_links=[], instances=[
            dict(bbox=[0, 0, 10, 10], bbox_score=1.0, skeleton='goliath',
                 score=float(s.mean()),
                 keypoints=np.concatenate([k, s[:, None]], 1).reshape(
                     -1).tolist(), keypoint_scores=s.tolist())
            for k, s in zip(kpts, scores)])


def test_openpose_json_and_records():
    rng = np.random.default_rng(1)
    kpts = rng.uniform(0, 40, (2, 308, 2)).astype(np.float32)
    scores = rng.uniform(0.5, 1, (2, 308)).astype(np.float32)
    doc = to_openpose(kpts, scores, GOLIATH, 64, 48)
    assert (doc['canvas_width'], doc['canvas_height']) == (64, 48)
    assert len(doc['people']) == 2
    p = doc['people'][1]
    sizes = {k: len(v) for k, v in p.items() if k.endswith('_2d')}
    assert sizes == dict(pose_keypoints_2d=54, face_keypoints_2d=210,
                         hand_left_keypoints_2d=63,
                         hand_right_keypoints_2d=63)
    body = np.asarray(p['pose_keypoints_2d']).reshape(18, 3)
    rw = GOLIATH.index('right_wrist')
    np.testing.assert_allclose(body[4], [*kpts[1, rw], scores[1, rw]],
                               rtol=1e-6)
    face = np.asarray(p['face_keypoints_2d']).reshape(70, 3)
    assert (face[0] == 0).all()  # face-0 (jaw) has no Goliath counterpart
    pupil = GOLIATH.index('l_center_of_pupil')
    np.testing.assert_allclose(face[69], [*kpts[1, pupil], scores[1, pupil]],
                               rtol=1e-6)

    rec = _record(kpts, scores, GOLIATH)
    assert convert_pose_record(rec, 'openpose') == doc
    assert [p['person_id'] for p in doc['people']] == [[-1], [-1]]
    for inst, tid in zip(rec['instances'], (7, 3)):  # video: track IDs
        inst['track_id'] = tid
    tracked = convert_pose_record(rec, 'openpose')
    assert [p['person_id'] for p in tracked['people']] == [[7], [3]]
    assert convert_pose_record(rec, 'coco17')['instances'][1]['track_id'] == 3
    for inst in rec['instances']:
        del inst['track_id']
    coco = convert_pose_record(rec, 'coco17')
    assert coco['skeleton'] == 'coco17' and coco['num_keypoints'] == 17
    assert coco['keypoint_names'] == COCO17
    assert coco['converted_from'] == 'goliath'
    flat = np.asarray(coco['instances'][0]['keypoints']).reshape(17, 3)
    lw = GOLIATH.index('left_wrist')
    np.testing.assert_allclose(flat[9], [*kpts[0, lw], scores[0, lw]],
                               rtol=1e-6)
    # a converted record converts again (17 -> OpenPose)
    again = convert_pose_record(coco, 'openpose')
    assert len(again['people'][0]['pose_keypoints_2d']) == 54
    with pytest.raises(ValueError, match='Unknown export format'):
        convert_pose_record(rec, 'coco18')
    with pytest.raises(ValueError, match='no keypoint_names'):
        convert_pose_record(dict(rec, keypoint_names=None), 'coco17')


def _person(names, h=256, w=192):
    """A standing figure in a layout: body joints at fixed places, each
    hand's points at one spot beside the hips, all other points on the
    face."""
    pos = dict(nose=(96, 40), left_eye=(104, 34), right_eye=(88, 34),
               left_ear=(112, 38), right_ear=(80, 38),
               left_shoulder=(126, 80), right_shoulder=(66, 80),
               left_elbow=(136, 120), right_elbow=(56, 120),
               left_wrist=(140, 160), right_wrist=(52, 160),
               left_hip=(116, 150), right_hip=(76, 150),
               left_knee=(118, 195), right_knee=(74, 195),
               left_ankle=(120, 240), right_ankle=(72, 240), neck=(96, 78))
    k = np.zeros((1, len(names), 2), np.float32)
    for i, n in enumerate(names):
        if n in pos:
            k[0, i] = pos[n]
        elif 'hand_root' in n or any(f in n for f in FINGERS):
            k[0, i] = (150, 175) if n.startswith('left') else (42, 175)
        else:  # face (and points OpenPose does not have)
            k[0, i] = (96, 50)
    return k, np.ones((1, len(names)), np.float32)


@pytest.mark.parametrize('names', [COCO17, WHOLEBODY, GOLIATH],
                         ids=['17', '133', '308'])
def test_draw_openpose(names):
    k, s = _person(names)
    img = draw_openpose(k, s, names, (256, 192), size=4)
    assert img.shape == (256, 192, 3) and img.dtype == np.uint8
    # black canvas outside the figure
    assert (img[:20] == 0).all() and (img[:, :30] == 0).all()
    bgr = lambda rgb: list(rgb[::-1])  # noqa: E731
    # joints in the OpenPose colours: nose red, right elbow (3) orange-yellow
    assert list(img[40, 96]) == bgr((255, 0, 0))
    assert list(img[120, 56]) == bgr((255, 255, 0))
    # limb right_shoulder -> right_elbow (limb 2, colour (255, 170, 0)) at
    # 60 %, in the middle of the limb
    assert list(img[100, 61]) == bgr((153, 102, 0))
    # left thigh (left_hip -> left_knee, limb 10, colour (0, 170, 255))
    assert list(img[172, 117]) == bgr((0, 102, 153))
    has_hands = names is not COCO17
    # hand joints are blue, the face is white
    assert (list(img[175, 150]) == bgr((0, 0, 255))) == has_hands
    assert (list(img[175, 42]) == bgr((0, 0, 255))) == has_hands
    white = (img == 255).all(-1)
    assert white[45:56, 90:102].any() == has_hands
    # below the threshold nothing is drawn
    assert not draw_openpose(k, s * 0.1, names, (256, 192)).any()


def test_convert_tool(tmp_path, capsys):
    rng = np.random.default_rng(2)
    kpts = rng.uniform(0, 40, (1, 308, 2)).astype(np.float32)
    scores = rng.uniform(0.5, 1, (1, 308)).astype(np.float32)
    (tmp_path / 'pose/clip').mkdir(parents=True)
    rec = _record(kpts, scores, GOLIATH)
    (tmp_path / 'pose/a.json').write_text(json.dumps(rec))
    (tmp_path / 'pose/clip/000001.json').write_text(json.dumps(rec))
    out = tmp_path / 'op'
    argv = [str(tmp_path / 'pose'), '--format', 'openpose', '--out-dir',
            str(out), '--draw']
    tool = load_tool('convert_keypoints')
    assert tool.main(argv) == 0
    assert 'wrote 4 file(s)' in capsys.readouterr().out
    assert json.loads((out / 'clip/000001.json').read_text()) == to_openpose(
        kpts, scores, GOLIATH, 64, 48)
    assert (out / 'a_openpose.png').is_file()
    (tmp_path / 'bad.json').write_text(json.dumps(dict(rec, instances=[
        dict(keypoints=[1, 2, 3])])))
    with pytest.raises(SystemExit) as exit_:
        tool.run_cli(tool.main, [str(tmp_path / 'bad.json')] + argv[1:],
                     'tools/convert_keypoints.py')
    msg = str(exit_.value.code)  # a message: Python prints it, exit code 1
    assert msg.startswith('tools/convert_keypoints.py: error: ') and \
        '\n' not in msg
    assert 'bad.json: An instance has 3 keypoint values, expected 924' in msg


def test_canvas_size_from_a_file_is_bounded_like_images(tmp_path):
    """A 1 KB pose JSON that claims a 40000 x 40000 image: --draw would
    allocate a 4.5 GiB canvas (and write a 40000 x 40000 PNG). The tool
    refuses it in one line before writing anything, and the refused file
    costs no more memory than a 64 x 48 record; the image limits apply
    (and are raised the same way)."""
    kpts = np.full((1, 17, 2), 20, np.float32)
    scores = np.ones((1, 17), np.float32)
    ok = _record(kpts, scores, COCO17)
    big = _record(kpts, scores, COCO17, w=40000, h=40000)
    (tmp_path / 'in').mkdir()
    (tmp_path / 'in/ok.json').write_text(json.dumps(ok))
    (tmp_path / 'in/big.json').write_text(json.dumps(big))
    assert (tmp_path / 'in/big.json').stat().st_size < 2048
    with pytest.raises(ImageTooLargeError, match='40000 x 40000'):
        pose_record_canvas(big, 'big.json')
    with pytest.raises(ValueError, match='positive integers'):
        pose_record_canvas(dict(ok, height=-1), 'neg.json')
    with pytest.raises(ImageTooLargeError, match='the canvas'):
        convert_pose_record(big, 'openpose')  # a canvas size, written out
    assert pose_record_canvas(ok) == (48, 64)
    # the tool, in a fresh process: the valid record, then the claim
    code = (
        'import resource, runpy, sys\n'
        'for name in ("ok", "big"):\n'
        '    sys.argv = ["tools/convert_keypoints.py", f"in/{name}.json",\n'
        '                "--format", "openpose", "--out-dir", "out",\n'
        '                "--draw"]\n'
        '    try:\n'
        f'        runpy.run_path({str(ROOT / "tools/convert_keypoints.py")!r},'
        '\n                       run_name="__main__")\n'
        '    except SystemExit as e:\n'
        '        print("EXIT", e.code)\n'
        '    print("peak", resource.getrusage(\n'
        '        resource.RUSAGE_SELF).ru_maxrss / 1024)\n')
    before = tree_state(tmp_path, skip=[tmp_path / 'out'])
    rc, out, err, _ = run_measured(['-c', code], tmp_path,
                                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert rc == 0, err[-2000:]
    exits = [ln for ln in out.splitlines() if ln.startswith('EXIT')]
    assert exits[0] == 'EXIT 0', out
    assert exits[1].startswith('EXIT tools/convert_keypoints.py: error: ')
    assert 'big.json: the canvas is 40000 x 40000' in exits[1], exits[1]
    assert (tmp_path / 'out/ok_openpose.png').is_file()
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == \
        ['ok.json', 'ok_openpose.png']  # nothing of big.json
    assert changed(before, tree_state(tmp_path, skip=[tmp_path / 'out'])) \
        == {}
    ok_peak, big_peak = [float(ln.split()[1]) for ln in out.splitlines()
                         if ln.startswith('peak')]
    # a canvas at the claimed size adds 4.5 GiB; 64 MiB is allocator noise
    assert big_peak < ok_peak + 64, (ok_peak, big_peak)
