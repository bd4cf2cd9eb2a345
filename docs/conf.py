"""Sphinx configuration of the sapiens_mm documentation.

Build (from the repository root, with the project's environment)::

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

``-W`` turns every warning into an error: a MyST link to a missing page or
heading anchor, a page outside every toctree, or a docstring that does not
parse fails the build (``tests/docs/test_docs_build.py`` runs it).

Nitpicky mode (``-n``) is off: the API reference documents each package's
public names (its ``__all__``), while the docstrings also name internal
classes and helpers (``BaseTaskInferencer``, ``_inputs_to_list``) and
upstream types (torch, mmengine, ...), whose inventories would need a
download; those references render as plain text. References that name a
``sapiens_mm`` object in full are checked by
``tests/docs/test_doc_references.py`` instead, by importing them.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# autodoc documents the checkout's package, not another installed copy.
sys.path.insert(0, str(ROOT))

project = 'sapiens_mm'
author = 'sapiens_mm contributors'
copyright = 'sapiens_mm contributors'
release = re.search(r"__version__ = '([^']+)'",
                    (ROOT / 'sapiens_mm' / 'version.py').read_text()).group(1)
version = release

extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.autosummary',
    'sphinx.ext.napoleon',
]

source_suffix = {'.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build']

# MyST: GitHub-style anchors for headings down to ###, so that
# [text](page.md#a-heading) links are checked like page links.
myst_heading_anchors = 3
myst_enable_extensions = ['colon_fence', 'deflist']

# API reference: the packages' public names (their ``__all__``), Google-style
# docstrings, signatures in the order of the source.
autodoc_default_options = {
    'members': True,
    'show-inheritance': True,
    'member-order': 'bysource',
}
autodoc_typehints = 'description'
autodoc_typehints_description_target = 'documented'
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# Attributes sections render as fields of their class (no second object
# description of the same attribute next to autodoc's own).
napoleon_use_ivar = True

html_theme = 'furo'
html_title = f'sapiens_mm {release}'
html_static_path = []
