"""tools/download.py: prefetch by name into the Hugging Face cache (and a
copy in --dest), and --list, against a loopback stand-in for the Hub."""
from pathlib import Path

import pytest
from fake_hub import FakeHub
from tool_helpers import load_tool

POSE = 'sapiens_0.3b_goliath_best_goliath_AP_573.pth'


def test_download_dest_and_list(tmp_path, monkeypatch, capsys):
    tool = load_tool('download')
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        hub.add_file('facebook/sapiens-pose-0.3b', POSE, b'x' * (3 << 20))
        tool.main(['sapiens-pose-0.3b', '--dest', str(tmp_path / 'dest')])
        assert (tmp_path / 'dest' / POSE).read_bytes() == b'x' * (3 << 20)
        tool.main(['--list'])
        (tmp_path / 'dest' / POSE).write_bytes(b'mine')
        with pytest.raises(FileExistsError, match='differs'):
            tool.main(['sapiens-pose-0.3b', '--dest', str(tmp_path / 'dest')])
        assert (tmp_path / 'dest' / POSE).read_bytes() == b'mine'
        # every name is checked before anything is downloaded
        with pytest.raises(ValueError, match='sapiens-seg-0.3b'):
            tool.main(['sapiens-seg-0.3b', 'sapiens-seg-0.3'])
        assert not [r for r in hub.requests if 'sapiens-seg' in r[1]]
    rows = {line.split()[0]: line.split() for line in
            capsys.readouterr().out.splitlines() if line.startswith('sapiens')}
    assert rows['sapiens-pose-0.3b'][1:6] == ['pose', '0.3b', 'CC-BY-NC-4.0',
                                              '3.0', 'MiB']
    assert rows['sapiens-pose-0.6b'][4] == '-'  # not cached
    assert Path(rows['sapiens-pose-0.3b:'][1]).name == POSE
