"""The course's live controls: a lesson's "Try it" (`try_it`), which redraws a function's output in place.

    from course.controls import try_it
"""
from __future__ import annotations

from typing import Any, Callable


def try_it(draw: Callable[..., Any], **controls) -> None:
    """A lesson's "Try it": the `controls` (ipywidgets with a `.value`, passed by the name of
    `draw`'s argument they set) above what `draw(**values)` prints and shows; moving a control
    redraws it in place.

        try_it(draw, layer=widgets.Dropdown(options=range(6), value=2), head=widgets.Dropdown(...))

    The first drawing is the cell's own output (a lesson run and saved shows it without a kernel);
    a redraw replaces each output through its display id. This is not
    `widgets.interactive`: that draws into an `Output` widget, and nbclient (as nbval's neighbours
    and `jupyter execute` run it) answers output captured by an Output widget with a message on the
    kernel's shell channel while it is waiting on that channel for the cell's reply. That write can
    swallow the reply's wake-up, and the run then sits idle for the whole cell timeout (lessons 01,
    03 and 06 took 300 s longer under `NotebookClient(nb, timeout=300)`). Here no Output widget
    ever holds output, so nbclient never writes while it waits.
    """
    from IPython.display import display

    import ipywidgets as widgets

    def values() -> dict:
        return {name: w.value for name, w in controls.items()}

    for name, w in controls.items():  # labelled by the argument they set, as interact labels them
        w.description = w.description or name
    display(widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")))
    handles = [display(data, metadata=md, raw=True, display_id=True) for data, md in _captured(draw, values())]

    def redraw(change) -> None:
        try:
            outputs = _captured(draw, values())
        except Exception as e:  # a live redraw shows the error where the picture was
            outputs = [({"text/plain": f"{type(e).__name__}: {e}"}, {})]
        if len(outputs) > len(handles):  # more outputs than the first drawing had slots: say so, lose none silently
            extra = len(outputs) - len(handles) + 1
            outputs = outputs[:len(handles) - 1] + [({"text/plain": f"({extra} outputs: run the cell again)"}, {})]
        blank = ({"text/plain": ""}, {})
        for i, handle in enumerate(handles):
            data, md = outputs[i] if i < len(outputs) else blank
            # plotly's JupyterLab renderer draws a figure once and ignores later updates of it, so each output is
            # first replaced by text: a change of mime type makes JupyterLab build a fresh renderer
            handle.update(blank[0], raw=True)
            handle.update(data, metadata=md, raw=True)

    for w in controls.values():
        w.observe(redraw, names="value")


def _captured(draw: Callable[..., Any], values: dict) -> list[tuple[dict, dict]]:
    """What `draw(**values)` prints and displays, as (mime bundle, metadata) pairs: printed text first."""
    from IPython.utils.capture import capture_output

    with capture_output(stdout=True, stderr=True, display=True) as cap:
        draw(**values)
    outputs = [({"text/plain": text}, {}) for text in (cap.stdout, cap.stderr) if text]
    return outputs + [(o.data, o.metadata or {}) for o in cap.outputs]
