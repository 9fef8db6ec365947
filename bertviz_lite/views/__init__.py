"""Views of a trace, all drawn from one view model (`data.py`, packed by `codec.py`) as the panels
each view's layout names (`panels.py`: heatmap, lines, bars, table; one resolver in Python and one in
the front-end), by three renderers that only know those four primitives:

- the notebook explorer `explore(tr)` and the exported page `export_html(tr, path)` run one
  front-end (`assets/app.js`) over the same view data; bertviz's calls `head_view(attention, tokens)`,
  `model_view(attention, tokens)` and `neuron_view(tr)` open the explorer on that view (attention
  from any framework: torch tensors that track gradients included);
- plotly figures to restyle: `attention_heatmap`, `head_view_figure`, `token_view`, `model_view_figure`,
  `neuron_view_figure`, `step_view`, `param_breakdown`, `compare_view` (all in `figures`);
- PNGs for documents: `save_png(tr, path, view=...)` (matplotlib).

    import bertviz_lite as bv
    bv.views.head_view(outputs.attentions, tokens)                      # bertviz's README call
    bv.views.neuron_view_figure(tr, layer=2, head=5, query=3).show()    # a plotly figure

Views by name (one vocabulary, `VIEWS`): attention, model, head, token, neuron, step, params,
compare. plotly, matplotlib and the widget libraries are imported only when first used.
"""

from ..foreign import prettify_tokens
from .model.data import PAIR_FILTERS, VIEWS, stepper_steps, view_data
from .explorer import explore, head_view, model_view, neuron_view  # anywidget only when a widget is made (widget.py)
from .wire.export import export_html
from .model.records import RECORDS

_FIGURES = tuple(r.figure for r in RECORDS if r.figure)  # each view's plotly function (its record names it)

__all__ = ["PAIR_FILTERS", "VIEWS", "explore", "export_html", "head_view", "model_view", "neuron_view",
           "prettify_tokens", "save_png", "stepper_steps", "to_png", "view_data", *_FIGURES]


def __getattr__(name):
    if name in _FIGURES:  # plotly loads on first use
        from .render import figures
        return getattr(figures, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():  # what a user calls; the modules behind them (data, codec, panels, ...) stay importable
    return sorted(__all__)


def to_png(*args, **kwargs):
    """A PNG of view data (see `bertviz_lite.views.render.static.to_png`)."""
    from .render.static import to_png as _to_png
    return _to_png(*args, **kwargs)


def save_png(*args, **kwargs):
    """Build a view of a trace and save it as a PNG (see `bertviz_lite.views.render.static.save_png`)."""
    from .render.static import save_png as _save_png
    return _save_png(*args, **kwargs)
