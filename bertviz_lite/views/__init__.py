"""Views of a trace: pure plotly figure builders, static PNGs, a self-contained HTML export,
and the notebook explorer.

    from bertviz_lite.views import attention_heatmap, model_view, head_view, step_view
    fig = attention_heatmap(tr, layer=0, head=3)        # a go.Figure; show it yourself

matplotlib (for PNGs) and the widget libraries (for the explorer) are imported only when first used.
"""

from .explorer import explore  # imports ipywidgets/anywidget only when called
from .export import export_html
from .figures import (PAIR_FILTERS, attention_heatmap, head_view, model_view, param_breakdown, step_view,
                      stepper_steps)

__all__ = ["PAIR_FILTERS", "attention_heatmap", "explore", "export_html", "head_view", "model_view",
           "param_breakdown", "save_png", "step_view", "stepper_steps", "to_png"]


def to_png(*args, **kwargs):
    """A static PNG of a view's figure (see `bertviz_lite.views.static.to_png`)."""
    from .static import to_png as _to_png
    return _to_png(*args, **kwargs)


def save_png(*args, **kwargs):
    """Build a view of a trace and save it as a PNG (see `bertviz_lite.views.static.save_png`)."""
    from .static import save_png as _save_png
    return _save_png(*args, **kwargs)
