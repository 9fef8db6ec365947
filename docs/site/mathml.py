"""Sphinx math renderer for the course site: LaTeX to MathML when the site is built, with docutils' converter
(docutils.utils.math.latex2mathml, already a dependency of Sphinx). Browsers draw MathML themselves (Chromium
since version 109, Firefox, Safari), so a page typesets its formulas with no script, no web font and no request.

docutils' converter lacks a few commands the lessons use; REWRITES gives each its nearest equivalent it knows.
A formula it cannot read stops the build, naming the formula and the page."""
from __future__ import annotations

import re

from docutils import nodes
from docutils.utils.math import latex2mathml

# command -> what docutils' converter reads instead (same look, or the plain delimiter)
REWRITES = [
    (re.compile(r"\\dots\b"), r"\\ldots"),
    (re.compile(r"\\[bB]ig[gl]?[lr]?\b\s*"), ""),  # \big( ... \big): the delimiter itself
    (re.compile(r"\\textstyle\b\s*"), ""),  # the formula is already set inline where it is used
]


def tex_to_mathml(tex: str, display: bool, where: str) -> str:
    for pattern, repl in REWRITES:
        tex = pattern.sub(repl, tex)
    try:
        return latex2mathml.tex2mathml(tex, as_block=display)
    except Exception as e:  # docutils raises SyntaxError and friends
        raise ValueError(f"{where}: the formula {tex!r} cannot be turned into MathML ({e}); write it with commands "
                         "docutils' latex2mathml knows, or add a rewrite to docs/site/mathml.py") from None


def visit_inline(self, node):
    self.body.append(tex_to_mathml(node.astext(), False, node.source or self.builder.current_docname))
    raise nodes.SkipNode


def visit_block(self, node):
    tex = node.astext()
    self.body.append('<div class="math-display">' + tex_to_mathml(tex, True, node.source or self.builder.current_docname)
                     + "</div>")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_inline, None), (visit_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
