"""Sphinx configuration of carray's documentation (``sphinx-build -W -b html docs OUT``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The package from this checkout, whatever is installed; plot scripts beside this file.
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE / "plots"))

import carray  # noqa: E402

project = "carray"
author = "The carray authors"
copyright = "the carray authors"  # noqa: A001 - Sphinx's name for it
release = carray.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "matplotlib.sphinxext.plot_directive",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "api/generated/*.md"]
templates_path = ["_templates"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"          # the numpydoc sections say the types
autodoc_member_order = "groupwise"
numpydoc_show_class_members = False  # the class template lists the members
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

plot_basedir = str(HERE / "plots")
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 100)]
plot_rcparams = {"figure.autolayout": True}

html_theme = "pydata_sphinx_theme"
html_title = f"carray {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
