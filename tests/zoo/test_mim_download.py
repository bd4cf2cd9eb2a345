"""``mim download sapiens_mm --config NAME --dest DIR`` (OpenMMLab's mim):
mim reads the ``model-index.yml`` shipped in the installed package
(``sapiens_mm/.mim/``, as ``setup.py`` builds it; ``tests/test_wheel.py``
checks a real wheel holds it), downloads the entry's ``Weights`` URL with
``requests`` and dumps its config. The ``https://huggingface.co`` host is
served by a loopback stand-in for the Hub (a requests transport adapter):
no internet."""
import importlib
import os
from pathlib import Path

import pytest
from fake_hub import FakeHub

from sapiens_mm.zoo import find_card, model_cards

ROOT = Path(__file__).resolve().parents[2]
HUB = 'https://huggingface.co'


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A site folder where sapiens_mm is installed as a wheel installs it
    (a dist-info, the package's ``.mim/model-index.yml`` and
    ``.mim/configs``), first on ``sys.path``, so that mim finds it through
    ``pkg_resources`` as it finds any installed package."""
    pkg_resources = pytest.importorskip('pkg_resources')
    site = tmp_path / 'site'
    mim_dir = site / 'sapiens_mm' / '.mim'
    mim_dir.mkdir(parents=True)
    (mim_dir / 'configs').symlink_to(ROOT / 'configs')
    (mim_dir / 'model-index.yml').symlink_to(ROOT / 'model-index.yml')
    info = site / 'sapiens_mm-0.1.0.dist-info'
    info.mkdir()
    (info / 'METADATA').write_text(
        'Metadata-Version: 2.1\nName: sapiens_mm\nVersion: 0.1.0\n')
    monkeypatch.syspath_prepend(str(site))
    yield site
    monkeypatch.undo()
    importlib.reload(pkg_resources)  # forget the folder again


@pytest.fixture
def hub(monkeypatch):
    """A loopback Hub answering for https://huggingface.co (requests)."""
    requests = pytest.importorskip('requests')
    from requests.adapters import HTTPAdapter

    class Loopback(HTTPAdapter):

        def send(self, request, **kwargs):
            request.url = fake.endpoint + request.url[len(HUB):]
            return super().send(request, **kwargs)

    adapter = Loopback()
    get_adapter = requests.Session.get_adapter

    def route(session, url):
        if url.startswith(HUB + '/'):
            return adapter
        return get_adapter(session, url)

    with FakeHub() as fake:
        monkeypatch.setattr(requests.Session, 'get_adapter', route)
        yield fake


def test_mim_download_from_the_shipped_model_index(installed, hub,
                                                   tmp_path):
    download = pytest.importorskip('mim.commands.download').download
    from mmengine import Config
    card = find_card('sapiens2-pose-0.4b')
    weights = os.urandom(3000)
    hub.add_file(card.repo_id, card.filename, weights)
    dest = tmp_path / 'dest'
    assert download('sapiens_mm', [card.name], str(dest)) == [card.filename]
    assert (dest / card.filename).read_bytes() == weights
    assert hub.downloads(card.filename) == [
        ('GET', f'/{card.repo_id}/resolve/main/{card.filename}', None)]
    # the config mim dumps (its _base_ files merged) is the shipped one
    dumped = Config.fromfile(str(dest / f'{card.name}.py')).to_dict()
    assert dumped == Config.fromfile(str(card.config)).to_dict()
    # mim's search sees every registry model with its file and config
    from mim.commands.search import get_model_info
    info = get_model_info('sapiens_mm', shown_fields=['weight', 'config'],
                          to_dict=True)
    cards = model_cards()
    assert set(info) == set(cards)
    for name, entry in info.items():
        assert entry['weight'] == cards[name].weights
        if cards[name].config is not None:
            assert (ROOT / entry['config']).resolve() == cards[name].config
    # unknown names are refused by mim itself
    with pytest.raises(ValueError, match='sapiens2-pose-9b'):
        download('sapiens_mm', ['sapiens2-pose-9b'], str(dest))
