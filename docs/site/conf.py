"""Sphinx configuration of the course's static site (built by `bash scripts/site.sh`, see docs/site.md).

The sources are staged by docs/site/build.py (the lessons as committed, with their stored outputs; nothing
is executed). Every page works offline: the theme (furo) loads no web font, the formulas are MathML written at
build time (mathml.py: no MathJax), the search index is a local script, and no notebook holds widget state, so
myst-nb adds no widget manager from a CDN."""

project = "bertviz-lite: BERT, one formula line at a time"
author = "bertviz-lite contributors"
copyright = "bertviz-lite contributors, MIT licence"

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mathml.py, staged beside this file

extensions = ["myst_nb", "mathml", "sphinx.ext.githubpages"]  # githubpages: writes .nojekyll

# the lessons are shown with the outputs they were committed with (scripts/refresh_notebooks.py stores them)
nb_execution_mode = "off"
# widget state is never stored (refresh_notebooks.py drops it); without it no page needs a widget manager,
# and an empty list makes sure myst-nb never adds require.js or the embed manager from a CDN
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
myst_update_mathjax = False  # no MathJax: the formulas are MathML (mathml.py)
suppress_warnings = ["mystnb.unknown_mime_type"]  # the explorer's widget output is not stored; nothing else is

exclude_patterns = ["notebooks/**", "_*.md", "_build", "**.ipynb_checkpoints"]

html_theme = "furo"
html_title = "BERT, one formula line at a time"
html_static_path = ["static"]
html_css_files = ["site.css"]
html_show_sourcelink = False
html_copy_source = False
# search results without a summary: a summary fetches the page, which a browser refuses on file://
html_show_search_summary = False
html_last_updated_fmt = None
html_theme_options = {"navigation_with_keys": True}

# formulas as MathML, written when the site is built (mathml.py): browsers draw it, nothing is loaded
html_math_renderer = "mathml"
