"""The browser demo (demo/web_demo.py) in a real headless Chromium, driven
by selenium: upload the astronaut, wait for the overlays, check
them; a non-image upload shows a readable error in the page. Also the demo's
webcam path and checkpoint discovery, without a browser."""
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import cv2
import numpy as np
import pytest
from cluster_helpers import free_port
from PIL import Image

from sapiens_mm.visualization.legend import panel_width

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
CHROMEDRIVER = shutil.which('chromedriver')

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason='headless Chromium is not installed (chromium and '
    'chromium-driver; tools/setup_env.sh installs them with apt-get, or '
    'run: apt-get install -y chromium chromium-driver)')

STARTUP_S = 180  # importing torch + OpenMMLab + gradio on 2 busy cores
RUN_S = 180  # first run builds the tiny models, then runs them on CPU


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    port = free_port()
    out = tmp_path_factory.mktemp('web_demo')
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED='False',
               PYTHONPATH=str(ROOT))
    log = open(out / 'server.log', 'w')
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / 'demo/web_demo.py'), '--port',
         str(port), '--device', 'cpu', '--out-dir', str(out / 'runs')],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f'http://127.0.0.1:{port}/'
    deadline = time.time() + STARTUP_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail('the demo server exited:\n' +
                            (out / 'server.log').read_text()[-3000:])
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                pytest.fail(f'the demo server did not answer within '
                            f'{STARTUP_S} s')
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope='module')
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage',
                '--disable-gpu', '--window-size=1600,1400'):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()


def _upload(driver, url, path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(url)
    wait = WebDriverWait(driver, 60)
    field = wait.until(EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#upload input[type=file]')))
    field.send_keys(str(path))
    # the file is uploaded when its name (stem and suffix on two lines)
    # and size show in the component
    wait.until(lambda d: Path(path).stem in d.find_element(By.ID, 'upload')
               .text and 'B' in d.find_element(By.ID, 'upload').text)


def _click_task(driver, name):
    from selenium.webdriver.common.by import By
    for label in driver.find_elements(By.CSS_SELECTOR, '#tasks label'):
        if label.text.strip() == name:
            label.click()
            return
    raise AssertionError(f'no {name!r} task checkbox')


@pytest.mark.slow
@needs_chromium
def test_astronaut(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    from skimage import data
    img_path = tmp_path / 'astronaut.png'
    Image.fromarray(data.astronaut()).save(img_path)
    _upload(browser, server, img_path)
    _click_task(browser, 'seg')  # default pose + seg: run pose + depth
    _click_task(browser, 'depth')
    browser.find_element(By.ID, 'run').click()
    WebDriverWait(browser, RUN_S).until(
        lambda d: 'Ran ' in d.find_element(By.ID, 'status').text or
        'Error' in d.find_element(By.ID, 'status').text)
    status = browser.find_element(By.ID, 'status').text
    assert status.startswith('Ran pose, depth on astronaut (512x512)'), status
    shot = tmp_path / 'page.png'
    assert browser.save_screenshot(str(shot))
    page = cv2.imread(str(shot))
    assert page is not None and page.std() > 10
    src = WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR,
                                 '#overlays img').get_attribute('src'))
    with urllib.request.urlopen(src, timeout=30) as r:
        overlays = cv2.imdecode(np.frombuffer(r.read(), np.uint8),
                                cv2.IMREAD_COLOR)
    # the results get the page's width, and the picture is shown at its
    # own size (or the full width): the keys' text is not scaled down
    box = browser.find_element(By.ID, 'overlays')
    page_w = browser.execute_script('return document.body.clientWidth')
    assert box.size['width'] >= 0.8 * page_w, (box.size, page_w)
    img = browser.find_element(By.CSS_SELECTOR, '#overlays img')
    natural = browser.execute_script('return arguments[0].naturalWidth', img)
    assert img.size['width'] >= 0.95 * min(natural, box.size['width']), (
        img.size, natural, box.size)
    # input and pose in the first row, depth (with its colour bar) in the
    # second (512 + 28 px title bars, rows 8 px apart); each picture with
    # its caption below, the whole scaled to the panel height
    assert overlays.shape[0] == 2 * 540 + 8

    def panel_end(row_top, start):
        """The first all-white column right of ``start`` in a row."""
        body = overlays[row_top + 28:row_top + 540, start:]
        white = np.flatnonzero((body == 255).all((0, 2)))
        return start + (white[0] if len(white) else body.shape[1])

    bar = panel_width(512)  # the depth picture is 512 px high
    depth_w = panel_end(548, 0)
    scale = depth_w / (512 + bar)  # the caption's share of the panel
    assert 0.8 < scale < 1
    top = 548 + 28
    image_w = int(round(512 * scale))
    depth_panel = overlays[top:top + image_w, :image_w - 1]
    assert depth_panel.std() > 5  # a colour map, not a blank panel
    key = overlays[top:top + image_w, image_w + 1:depth_w - 1]
    assert key.std() > 5 and not np.array_equal(
        key, depth_panel[:, :key.shape[1]])
    caption = overlays[top + image_w + 2:540 + 548, :depth_w]
    assert (caption < 60).all(-1).mean() > 0.5  # the dark caption strip
    pose_w = panel_end(0, 512 + 8) - 520
    pose_panel = overlays[28:28 + pose_w, 520:520 + pose_w].astype(int)
    inp = cv2.resize(data.astronaut()[..., ::-1], (pose_w, pose_w))
    # the photo under the pose
    assert np.abs(pose_panel - inp.astype(int)).mean() < 40
    # downloads: the input, the pose JSON + PNG, the depth .npy + PNG
    links = browser.find_element(By.ID, 'downloads').text.replace('\n', '')
    names = ['depth_astronaut.npy', 'depth_astronaut.png',
             'input_astronaut.png', 'pose_astronaut.json',
             'pose_astronaut.png']
    assert links.count('astronaut') == len(names), links
    for name in names:
        assert name in links, (name, links)
    if os.environ.get('SAPIENS_WEB_DEMO_SHOT'):  # keep it to look at
        shutil.copy(shot, os.environ['SAPIENS_WEB_DEMO_SHOT'])


@pytest.mark.slow
@needs_chromium
def test_non_image_upload_shows_error(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    bad = tmp_path / 'notes.txt'
    bad.write_text('not a picture\n')
    _upload(browser, server, bad)
    browser.find_element(By.ID, 'run').click()
    WebDriverWait(browser, RUN_S).until(
        lambda d: 'Error' in d.find_element(By.ID, 'status').text)
    status = browser.find_element(By.ID, 'status')
    assert status.is_displayed()
    assert ('notes.txt is not an image that can be read: upload a JPEG, '
            'PNG') in status.text


def test_webcam_snapshot_and_checkpoints(tmp_path):
    """A webcam snapshot (RGB array) runs like an upload; checkpoints in a
    folder are offered per task, unrecognisable files left out."""
    import torch
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    from tiny_configs import TINY

    from sapiens_mm.demo.web import TINY_CHOICE, WebDemo, find_checkpoints
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(Config.fromfile(str(TINY['depth'])).model)
    (tmp_path / 'ckpts').mkdir()
    ckpt = tmp_path / 'ckpts/sapiens_tiny_render_people_epoch_1.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, ckpt)
    (tmp_path / 'ckpts/notes.pth').write_bytes(b'not a checkpoint')
    found = find_checkpoints([str(tmp_path / 'ckpts')])
    # named by their path from the folder given, the folder included
    label = f'ckpts/{ckpt.name}'
    assert found['depth'] == {label: str(ckpt)}
    assert found['pose'] == found['seg'] == found['normal'] == {}
    # released models by name: offered, downloaded only when chosen
    named = find_checkpoints(['sapiens-seg-0.3b', 'sapiens2-pose-0.4b'])
    assert named['seg'] == {'sapiens-seg-0.3b': 'sapiens-seg-0.3b'}
    assert named['pose'] == {'sapiens2-pose-0.4b': 'sapiens2-pose-0.4b'}
    demo = WebDemo(found, device='cpu', out_root=str(tmp_path / 'runs'))
    assert demo.choices('depth') == [label, TINY_CHOICE]
    rgb = np.zeros((60, 40, 3), np.uint8)
    rgb[10:50, 10:30] = (200, 120, 40)
    overlays, files, status = demo.run(None, rgb, ['depth'],
                                       {'depth': label})
    assert status == 'Ran depth on webcam (40x60); 3 file(s) to download.'
    # input and depth panels in one row, 512 px high plus the title bar;
    # the depth panel: its colour bar beside it, the caption below
    from sapiens_mm.visualization import add_caption
    depth_h = add_caption(np.zeros((60, 40 + panel_width(60), 3), np.uint8),
                          [f'depth: {label}, tiny demo model']).shape[0]
    assert overlays.shape == (
        540, round(40 * 512 / 60) + 8 + round(
            (40 + panel_width(60)) * 512 / depth_h), 3)
    assert sorted(Path(f).name for f in files) == [
        'depth_webcam.npy', 'depth_webcam.png', 'input_webcam.png']
    # the snapshot is RGB: the saved input is its BGR version
    saved = cv2.imread(next(f for f in files if 'input_' in f))
    np.testing.assert_array_equal(saved, rgb[..., ::-1])
    _, _, status = demo.run(None, None, ['depth'], {})
    assert status == ('**Error:** Upload an image or take a webcam snapshot '
                      'first.')
    _, _, status = demo.run(None, rgb, [], {})
    assert status == '**Error:** Choose at least one task.'


def test_checkpoints_with_their_configs_and_readable_keys(tmp_path):
    """A checkpoint that does not carry its config (a narrower head than the
    shipped tiny config) runs with --seg-config; without it the page names
    the differing option. The seg picture keeps its legend, at the scale of
    the image, beside it."""
    import torch
    from mmengine.config import Config
    from tiny_configs import TINY

    from sapiens_mm.apis.inference import init_model
    from sapiens_mm.demo.web import WebDemo, find_checkpoints
    cfg = Config.fromfile(str(TINY['seg']))
    cfg.model.decode_head.update(channels=32, deconv_out_channels=(32, ) * 3,
                                 conv_out_channels=(32, ) * 3)
    cfg_path = tmp_path / 'narrow_seg.py'
    cfg.dump(str(cfg_path))
    (tmp_path / 'ckpts').mkdir()
    ckpt = tmp_path / 'ckpts/iter_10.pth'
    torch.save({'state_dict': init_model(cfg).state_dict(), 'meta': {}},
               ckpt)
    found = find_checkpoints([str(tmp_path / 'ckpts')])
    label = 'ckpts/iter_10.pth'
    assert found['seg'] == {label: str(ckpt)}
    rgb = np.zeros((120, 90, 3), np.uint8)
    rgb[20:100, 30:60] = (200, 120, 40)
    bare = WebDemo(found, device='cpu', out_root=str(tmp_path / 'bare'))
    overlays, _, status = bare.run(None, rgb, ['seg'], {'seg': label})
    assert overlays is None
    assert 'model.decode_head.deconv_out_channels 32 in the file, 64 in ' \
        'sapiens_tiny-200e_goliath-256x192.py' in status, status
    assert 'start the web demo with --seg-config CFG' in status
    assert 'dict(config=' not in status
    demo = WebDemo(found, device='cpu', out_root=str(tmp_path / 'runs'),
                   configs={'seg': str(cfg_path)})
    assert demo.choices('seg')[:2] == [label,
                                       'narrow_seg.py (random weights)']
    overlays, _, status = demo.run(None, rgb, ['seg'], {'seg': label})
    assert status.startswith('Ran seg on webcam'), status
    # input and seg in one row; the seg panel is wider than the input's:
    # its legend, white with dark text, beside the image
    panel_w = round(90 * 512 / 120)
    seg = overlays[28:, panel_w + 8:]
    assert seg.shape[1] > panel_w + 50
    legend = seg[:, panel_w:]
    assert (legend > 200).all(-1).mean() > 0.5  # white panel
    assert (legend < 80).all(-1).any()  # text
    image = overlays[28:, :legend.shape[1]]
    assert not np.array_equal(legend, image)
    with pytest.raises(ValueError, match='unknown task'):
        WebDemo(found, configs={'matte': str(cfg_path)})


def test_the_page_says_what_the_cli_log_says(tmp_path):
    """The notes of a run (the person detector found no one, so pose ran on
    the whole image) are in the page's status, not only in the server
    log; the picture's caption says it too."""
    from sapiens_mm.demo.web import TINY_CHOICE, WebDemo
    demo = WebDemo(device='cpu', out_root=str(tmp_path / 'runs'))
    rgb = np.full((80, 60, 3), 90, np.uint8)  # no one to find
    overlays, _, status = demo.run(None, rgb, ['pose'],
                                   {'pose': TINY_CHOICE})
    assert overlays is not None
    assert status.startswith('Ran pose on webcam'), status
    note = status.split('**Note:** ', 1)[1]
    assert 'found no one, so pose ran on the whole image' in note, status


def test_matting_background_is_a_colour_or_an_upload_never_a_path(
        tmp_path):
    """The background box takes colours only: a private image on the server
    (mode 0600), an unreadable file and a missing one give the same message
    and nothing is composited or written; an uploaded image is used, and
    the uploaded copy is read under the image limits."""
    from attack_helpers import changed, tree_state

    from sapiens_mm.demo.web import WebDemo, _matting_background
    private = tmp_path / 'private.png'
    cv2.imwrite(str(private), np.full((40, 30, 3), (1, 2, 3), np.uint8))
    os.chmod(private, 0o600)
    unreadable = tmp_path / 'unreadable.png'
    unreadable.write_bytes(b'\x89PNG not really')
    os.chmod(unreadable, 0)
    photo = tmp_path / 'photo.png'
    cv2.imwrite(str(photo), np.full((48, 32, 3), 90, np.uint8))
    demo = WebDemo(device='cpu', out_root=str(tmp_path / 'web'))
    before = tree_state(tmp_path, skip=[tmp_path / 'web'])
    statuses = set()
    for text in (str(private), str(unreadable), str(tmp_path / 'missing'),
                 '/etc/shadow', 'not a colour'):
        overlay, files, status = demo.run(str(photo), None, ['matting'], {},
                                          background=text)
        assert overlay is None and files == []
        statuses.add(status)
    assert statuses == {
        '**Error:** The matting background is not a colour: give a name '
        '(black, blue, gray, green, grey, red, white), #RRGGBB or R,G,B '
        '(0-255), '
        'or upload a background image.'}, statuses
    assert not list((tmp_path / 'web').glob('run_*/**/*.png'))
    assert changed(before, tree_state(tmp_path, skip=[tmp_path / 'web'])) \
        == {}
    # colours and uploads
    assert _matting_background('white', None) == (255, 255, 255)
    assert _matting_background('', None) is None
    bg = tmp_path / 'bg.png'
    cv2.imwrite(str(bg), np.full((20, 20, 3), (10, 20, 30), np.uint8))
    np.testing.assert_array_equal(_matting_background('ignored', str(bg)),
                                  np.full((20, 20, 3), (10, 20, 30)))
    strip = tmp_path / 'strip.png'
    cv2.imwrite(str(strip), np.zeros((1, 200, 3), np.uint8))
    with pytest.raises(ValueError, match='strip.png is 200 x 1'):
        _matting_background('', str(strip))
