"""The model registry read from the metafiles (configs/**/metafile.yml,
model-index.yml), checked against independent sources: OpenMMLab's own
model-index reader, the shipped configs, the file-name recognition, and the
generated docs page."""
import fnmatch
from pathlib import Path

import pytest
from mmengine.config import Config
from tool_helpers import load_tool

from sapiens_mm.zoo.cards import (
    MODEL_INDEX_ENV,
    UnknownModelError,
    find_card,
    lookup_card,
    model_cards,
    model_index_path,
)

ROOT = Path(__file__).resolve().parents[2]


def test_openmmlab_model_index_reader_sees_every_model():
    from modelindex.load_model_index import load
    index = load(str(model_index_path()))
    names = [m.name for m in index.models]
    assert names == list(model_cards())
    by_name = {m.name: m for m in index.models}
    card = find_card('sapiens2-pose-0.4b')
    assert by_name[card.name].weights == card.weights
    assert by_name[card.name].config == \
        'configs/sapiens2/pose/sapiens2_0.4b-goliath-1024x768.py'


def test_released_models_are_listed():
    cards = model_cards()
    v1 = {(c.task, c.size) for c in cards.values()
          if c.version == 1 and c.format == 'pth' and not c.third_party}
    assert v1 == {(t, s) for t in ('pretrain', 'depth', 'normal')
                  for s in ('0.3b', '0.6b', '1b', '2b')} | \
        {(t, s) for t in ('pose', 'seg') for s in ('0.3b', '0.6b', '1b')}
    for variant in ('torchscript', 'bfloat16'):
        assert {(c.task, c.size) for c in cards.values()
                if c.format == variant} == v1
    v2 = {(c.task, c.size) for c in cards.values() if c.version == 2}
    assert v2 == {('pretrain', s)
                  for s in ('0.1b', '0.4b', '0.8b', '1b', '1b-4k', '5b')} | \
        {(t, s) for t in ('pose', 'seg', 'normal', 'pointmap')
         for s in ('0.4b', '0.8b', '1b', '5b')} | {('matting', '1b')}
    coco = sorted(c.dataset for c in cards.values() if c.third_party)
    assert coco == ['coco'] * 4 + ['coco_wholebody'] * 4
    assert {c.repo_id for c in cards.values() if c.third_party} == \
        {'noahcao/sapiens-pose-coco'}
    detector = find_card('rtmdet-m')
    assert detector.filename == \
        'rtmdet_m_8xb32-100e_coco-obj365-person-235e8209.pth'
    assert detector.license == 'Apache-2.0'


def test_every_entry_is_consistent_with_its_hub_file_and_config():
    from sapiens_mm.apis.inference import task_of_config
    from sapiens_mm.apis.model_zoo import parse_checkpoint_name
    for card in model_cards().values():
        assert fnmatch.fnmatchcase(Path(card.filename).name, card.pattern), \
            card.name
        if card.publisher == 'facebook' and card.task != 'detection':
            # the registry name is the official repository's name
            assert card.repo_id == f'facebook/{card.name}'
        if card.config is None:
            continue
        assert card.config.is_file(), card.name
        if not card.runnable:
            continue
        cfg = Config.fromfile(str(card.config))
        assert task_of_config(cfg) == card.task, card.name
        assert cfg.model.backbone.arch.endswith('_' + card.size), card.name
        info = parse_checkpoint_name(card.filename)
        assert (info.task, info.size, info.version) == \
            (card.task, card.size, card.version), card.name


def test_lookup_by_name_alias_repository_and_case():
    card = find_card('sapiens2-pose-0.4b')
    assert card.repo_id == 'facebook/sapiens2-pose-0.4b'
    assert card.filename == 'sapiens2_0.4b_pose.safetensors'
    assert card.license == 'Sapiens2 License'
    for query in ('sapiens2_0.4b_pose', 'facebook/sapiens2-pose-0.4b',
                  'Sapiens2-Pose-0.4B'):
        assert lookup_card(query) is card
    assert find_card('sapiens-pose-bbox-detector') is find_card('rtmdet-m')
    with pytest.raises(UnknownModelError, match='sapiens-seg-0.6b'):
        find_card('sapiens-seg-0.6')
    # a repository holding several models selects none of them
    with pytest.raises(UnknownModelError, match='holds several models'):
        find_card('noahcao/sapiens-pose-coco')


def test_an_extra_index_adds_and_replaces_entries(tmp_path, monkeypatch):
    tiny = ROOT / 'configs/sapiens2/pose/sapiens2_tiny-goliath-256x192.py'
    (tmp_path / 'metafile.yml').write_text(f"""
Models:
  - Name: sapiens2-pose-0.4b
    Config: {tiny}
    Metadata:
      Task: pose
      Size: tiny
      Version: 2
      License: Sapiens2 License
    Weights: https://huggingface.co/facebook/sapiens2-pose-0.4b/resolve/main/sapiens2_0.4b_pose.safetensors
  - Name: my-pose
    Metadata: {{Task: pose, License: mine}}
    Weights: https://hf.co/me/pose/resolve/v1/sub/model.pth
""")
    monkeypatch.setenv(MODEL_INDEX_ENV, str(tmp_path / 'metafile.yml'))
    card = find_card('facebook/sapiens2-pose-0.4b')
    assert (card.config, card.size) == (tiny, 'tiny')
    mine = find_card('my-pose')
    assert (mine.repo_id, mine.revision, mine.filename, mine.pattern) == \
        ('me/pose', 'v1', 'sub/model.pth', 'model.pth')
    assert not mine.runnable
    monkeypatch.delenv(MODEL_INDEX_ENV)
    assert find_card('sapiens2-pose-0.4b').size == '0.4b'


def test_model_zoo_page_is_generated_from_the_metafiles():
    tool = load_tool('model_zoo_doc')
    page = (ROOT / 'docs' / 'model_zoo.md').read_text(encoding='utf-8')
    assert page == tool.render(model_cards().values())
    for card in model_cards().values():
        assert f'| `{card.name}` | {card.task} |' in page
