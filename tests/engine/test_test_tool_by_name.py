"""tools/test.py CONFIG NAME: a registry model (here a test-only entry) is
downloaded by the Runner's load_from (hf:// scheme) from a loopback stand-in
for the Hub and evaluates exactly as the local file does."""
import json

from cluster_helpers import write_tiny_seg_checkpoint
from fake_hub import FakeHub
from tool_helpers import load_tool

from sapiens_mm.zoo.cards import MODEL_INDEX_ENV


def test_test_tool_by_registry_name(tmp_path, monkeypatch):
    cfg_path, local = write_tiny_seg_checkpoint(tmp_path, monkeypatch, n=2)
    (tmp_path / 'metafile.yml').write_text("""
Models:
  - Name: my-tiny-seg
    Metadata: {Task: seg, License: test}
    Weights: https://huggingface.co/someone/tiny-seg/resolve/main/seg.pth
""")
    monkeypatch.setenv(MODEL_INDEX_ENV, str(tmp_path / 'metafile.yml'))
    tool = load_tool('test')

    def metrics(ckpt, name):
        out = tmp_path / name / 'metrics.json'
        tool.main([str(cfg_path), ckpt, '--out', str(out), '--work-dir',
                   str(tmp_path / name / 'w')])
        return json.loads(out.read_text())['metrics']

    expected = metrics(str(local), 'local')
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        hub.add_file('someone/tiny-seg', 'seg.pth', local.read_bytes())
        assert metrics('my-tiny-seg', 'named') == expected
        assert len(hub.downloads('seg.pth')) == 1
