"""The documentation site (docs/, Sphinx + MyST) builds with warnings as
errors: every page in a toctree, every MyST link to a page or heading anchor
resolvable, every docstring of the API reference parseable. (Nitpicky mode
is off, see docs/conf.py; test_doc_references.py checks the references to
sapiens_mm objects.)"""
from pathlib import Path
from typing import Tuple

import pytest
from sphinx.cmd.build import build_main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / 'docs'

# myst-parser and napoleon still use Sphinx APIs that Sphinx 11 removes; their
# deprecation warnings say nothing about these docs.
pytestmark = pytest.mark.filterwarnings(
    'ignore::sphinx.deprecation.RemovedInSphinx11Warning')


def sphinx_build(src: Path, out: Path) -> Tuple[int, str]:
    """``sphinx-build -W --keep-going`` of ``src`` with the project's
    docs/conf.py, into ``out``; returns the exit code and the warnings."""
    warnings = out / 'warnings.txt'
    out.mkdir(parents=True, exist_ok=True)
    code = build_main([
        '-W', '--keep-going', '-q', '-b', 'html',
        '-c', str(DOCS), '-d', str(out / 'doctrees'), '-w', str(warnings),
        str(src), str(out / 'html')
    ])
    return code, warnings.read_text() if warnings.exists() else ''


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    code, warnings = sphinx_build(DOCS, tmp_path)
    assert code == 0, warnings
    html = tmp_path / 'html'
    # the API reference holds the documented objects, not just titles
    apis = (html / 'api' / 'apis.html').read_text(encoding='utf-8')
    assert 'sapiens_mm.apis.SapiensInferencer' in apis
    assert 'sapiens_mm.apis.init_model' in apis
    # every Markdown page of docs/ became a page of the site
    pages = {p.relative_to(DOCS).with_suffix('') for p in DOCS.rglob('*.md')}
    built = {p.relative_to(html).with_suffix('')
             for p in html.rglob('*.html')}
    assert pages <= built


def test_broken_links_fail_the_build(tmp_path):
    """A link to a missing heading or page, and a page outside every
    toctree, are errors under the project's settings."""
    src = tmp_path / 'src'
    src.mkdir()
    (src / 'index.md').write_text(
        '# Home\n\n```{toctree}\npage\n```\n', encoding='utf-8')
    (src / 'page.md').write_text(
        '# Page\n\n## A section\n\n[fine](index.md#home), '
        '[fine too](#a-section), [bad anchor](index.md#no-such-heading), '
        '[bad page](missing.md)\n', encoding='utf-8')
    (src / 'lost.md').write_text('# Lost\n', encoding='utf-8')
    code, warnings = sphinx_build(src, tmp_path / 'out')
    assert code != 0
    assert "'no-such-heading'" in warnings
    assert 'missing.md' in warnings
    assert 'lost' in warnings and 'toctree' in warnings
    assert 'a-section' not in warnings and "'home'" not in warnings
