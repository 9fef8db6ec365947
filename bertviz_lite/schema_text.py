"""The schema's LaTeX formulas as text people read: Unicode sub- and superscripts for a terminal
and `tr.shapes()`, `<sub>`/`<sup>` tags for plotly and the pages. One converter, used by the
engine's tables, the CLI and every view."""

from __future__ import annotations

import re

_GREEK = {r"\gamma": "\u03b3", r"\beta": "\u03b2", r"\top": "\u1d40", r"\dots": "\u2026", r"\tanh": "tanh"}
_SUBS = str.maketrans("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")
_SUPS = str.maketrans("0123456789+-=()TOKVabdefghiklmnoprtuw",
                      "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ᵀᴼᴷⱽᵃᵇᵈᵉᶠᵍʰⁱᵏˡᵐⁿᵒᵖʳᵗᵘʷ")


def plain_formula(latex: str, html: bool = True, unicode: bool = False) -> str:
    """A schema formula without LaTeX: `<sub>`/`<sup>` tags (html=True, for plotly and the pages),
    Unicode sub/superscripts where they exist (unicode=True, for a terminal), or `_x`/`^x` text."""
    s = re.sub(r"\\mathrm\{([^{}]*)\}", r"\1", latex)
    s = re.sub(r"\\tilde\s*\{?(\w)\}?", "\\1\u0303", s)
    s = re.sub(r"\\bar\s*\{?(\w)\}?", "\\1\u0304", s)
    s = re.sub(r"\\sqrt\{([^{}]*)\}", "\u221a\\1", s)
    s = s.replace(r"^\top", "^T") if not unicode else s.replace(r"^\top", "\u1d40")
    for word, sym in list(_GREEK.items()) + [(r"\,", " "), ("{:}", ":")]:
        s = s.replace(word, sym)
    sub, sup = r"_\{([^{}]*)\}|_(\\?[A-Za-z0-9])", r"\^\{([^{}]*)\}|\^(\\?[A-Za-z0-9]+)"

    if html:
        s = re.sub(sub, lambda m: f"<sub>{m.group(1) or m.group(2)}</sub>", s)
        s = re.sub(sup, lambda m: f"<sup>{m.group(1) or m.group(2)}</sup>", s)
    elif unicode:
        def conv(m, table, mark):
            text = m.group(1) or m.group(2)
            out = text.translate(table)
            # a letter with no Unicode sub/superscript keeps the plain mark: d_k, not a half-converted mix
            return out if all(ord(c) in table for c in text) else f"{mark}{text}" if len(text) == 1 else \
                f"{mark}({text})"
        s = re.sub(sub, lambda m: conv(m, _SUBS, "_"), s)
        s = re.sub(sup, lambda m: conv(m, _SUPS, "^"), s)
    else:
        s = re.sub(sub, lambda m: "_" + (m.group(1) or m.group(2)), s)
        s = re.sub(sup, lambda m: "^" + (m.group(1) or m.group(2)), s)
    return s.replace("{", "").replace("}", "").replace("\\", "")


