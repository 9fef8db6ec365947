"""The explorer's selections (tab, query, the layers and heads shown, the colours), checked where they
are set: by `explore()` and bertviz's calls (explorer.py), and by the widget's traitlets (widget.py),
from Python or from the page. No widget library here: explore() checks its arguments before the
widget module (and anywidget) is imported."""

from __future__ import annotations

import numpy as np

from ...trace import Trace
from ..model import data

TABS = data.VIEWS
DISPLAY_MODES = ("light", "dark")  # bertviz's display_mode; None follows the notebook's theme


def check_tab(tab: str, compare: bool = True) -> str:
    tabs = TABS if compare else tuple(t for t in TABS if t != "compare")
    if tab not in tabs:
        hint = " (the compare tab needs compare=second_trace)" if tab == "compare" else ""
        raise ValueError(f"tab must be one of {tabs}, got {tab!r}{hint}")
    return tab


def check_query(trace: Trace, query) -> int:
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < trace.n_real:
        raise ValueError(f"query must be a token index 0..{trace.n_real - 1} (among the real tokens), got {query!r}")
    return query


def shown_indices(values, total: int, what: str) -> list[int] | None:
    """include_layers= / include_heads=: the indices to show, each once, in order (None: all of them)."""
    if values is None:
        return None
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = [values]
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"include_{what}s= takes a list of {what} indices (e.g. include_{what}s=[0, 5]), "
                        f"got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < total:
            raise ValueError(f"include_{what}s= holds {v!r}; each must be a {what} index 0..{total - 1}")
        out.append(int(v))
    if not out:
        raise ValueError(f"include_{what}s= is empty; leave it out to show every {what}")
    return sorted(set(out))


def shown_parts(trace, include_layers=None, include_heads=None, display_mode=None) -> dict:
    """The facts that restrict what the front-end shows (bertviz's include_layers, include_heads,
    display_mode): absent when everything is shown in the notebook's own colours."""
    if display_mode is not None and display_mode not in DISPLAY_MODES:
        raise ValueError(f"display_mode must be 'light' or 'dark' (bertviz's), or None to follow the notebook's "
                         f"theme; got {display_mode!r}")
    out = dict(layers_shown=shown_indices(include_layers, trace.num_layers, "layer"),
               heads_shown=shown_indices(include_heads, trace.num_heads, "head"), mode=display_mode)
    return {k: v for k, v in out.items() if v is not None}


def check_shown(index: int, shown, what: str) -> int:
    if shown is not None and index not in shown:
        raise ValueError(f"{what} {index} is not among those shown (include_{what}s={shown})")
    return index
