"""Two lessons' "Try it" controls in a real JupyterLab, driven by headless chromium: the lesson
runs, its control cell draws, moving a control (a dropdown) redraws the plotly figure, and the
drawn values and the answer line are the engine's new values, computed here from the same model.

The server (127.0.0.1, its own token and temporary root) comes from test_jupyterlab_browser.py;
the lesson, notebooks/course/ and notebooks/exercises/ are copied into its root.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

from ..views.test_jupyterlab_browser import (JupyterLab, foreign, launch_browser, record_requests, shoot,  # noqa: F401
                                      sync_api)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SENTENCE = "The cat sat on the mat because it was tired."
# the cells of the notebook in front: JupyterLab keeps an earlier lesson open in a hidden tab
CELLS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"


@pytest.fixture(scope="module")
def lab(sync_api):
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    server = JupyterLab()
    for folder in ("course", "exercises"):
        shutil.copytree(NOTEBOOKS / folder, server.root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def trace():
    import bertviz_lite as bv
    return bv.load("minilm").trace(SENTENCE)


def copy_lesson(lab: JupyterLab, name: str) -> tuple[str, int]:
    """Copy a lesson into the server's root; return its name and the index of its Try-it control cell
    (the code cell right after the '### Try it' heading)."""
    shutil.copy(NOTEBOOKS / name, lab.root / name)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    heading = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "### Try it" in c.source)
    control = next(i for i in range(heading + 1, len(nb.cells)) if nb.cells[i].cell_type == "code")
    assert "try_it(draw" in nb.cells[control].source
    return name, control


def run_lesson(page, lab: JupyterLab, notebook: str, timeout_ms: int = 90_000) -> None:
    """Open a lesson, wait until ITS kernel is idle (the status bar may still show the previous
    lesson's), run every cell from the Run menu."""
    page.goto(lab.url(notebook), timeout=timeout_ms)
    page.wait_for_selector(CELLS, timeout=timeout_ms)
    lab.wait_kernel_idle(notebook, timeout_ms / 1000)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')", timeout=10_000)
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')", timeout=10_000)


def wait_text(page, index: int, text: str, timeout_ms: int = 60_000) -> None:
    page.wait_for_function(
        "([i, s, c]) => (document.querySelectorAll(c)[i]?.querySelector('.jp-OutputArea')"
        "?.innerText || '').includes(s)", arg=[index, text, CELLS], timeout=timeout_ms)


def plotted(page, index: int) -> dict:
    """The plotly figure drawn in a cell's output: its first trace's data, as plotly holds it."""
    page.wait_for_function(
        "([i, c]) => { const g = document.querySelectorAll(c)[i]?.querySelector('.js-plotly-plot');"
        " return g && g._fullData && g._fullData.length > 0; }", arg=[index, CELLS], timeout=30_000)
    # _fullData: plotly.js's decoded arrays (data[0] may still hold plotly.py's base64 typed-array spec)
    return page.evaluate(
        "([i, c]) => { const g = document.querySelectorAll(c)[i].querySelector('.js-plotly-plot');"
        " const t = g._fullData[0]; const flat = a => a ? Array.from(a, r => (r && r.length !== undefined) ?"
        " Array.from(r) : r) : null;"
        " return {type: t.type, z: flat(t.z), x: flat(t.x), title: (g.layout.title && g.layout.title.text) || ''}; }",
        [index, CELLS])


def replotted(page, index: int, before: dict, timeout_s: float = 20.0) -> dict:
    """The cell's plotly figure once it differs from `before` (a redraw replaces the output by display id;
    plotly.js re-renders it asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = plotted(page, index)
        if now != before or time.monotonic() > deadline:
            return now
        page.wait_for_timeout(200)


def choose(page, index: int, which: int, label: str) -> None:
    """Pick `label` in the `which`-th dropdown of a cell's control."""
    cell = page.locator(CELLS).nth(index)
    cell.locator(".widget-dropdown select").nth(which).select_option(label=label)


def test_try_it_controls_redraw_from_the_engine(lab, sync_api, trace):
    lesson03, cell03 = copy_lesson(lab, "04_one_head.ipynb")
    lesson06, cell06 = copy_lesson(lab, "07_feed_forward.ipynb")
    it, cat = trace.tokens.index("it"), trace.tokens.index("cat")
    with sync_api.sync_playwright() as p:
        ctx = launch_browser(p)
        ctx.set_default_timeout(30_000)
        try:
            page = ctx.new_page()
            urls = record_requests(page, lab)

            # lesson 04: the head picker starts at the head where 'it' looks hardest at 'cat'
            run_lesson(page, lab, lesson03)
            A = trace.stack("attn.probs")[:, :, it, cat]
            layer, head = (int(i) for i in np.unravel_index(A.argmax(), A.shape))
            wait_text(page, cell03, f"layer {layer}, head {head}: 'it' -> 'cat' {A[layer, head]:.2f}", 90_000)
            first = plotted(page, cell03)
            np.testing.assert_allclose(first["z"], trace.get("attn.probs", layer=layer, head=head), atol=1e-6)

            # move the head dropdown: the line and the drawn map become that head's
            new_head = 3
            choose(page, cell03, 1, str(new_head))
            probs = trace.get("attn.probs", layer=layer, head=new_head)
            j = int(np.argmax(probs[it]))
            wait_text(page, cell03, f"layer {layer}, head {new_head}: 'it' -> '{trace.tokens[j]}' {probs[it, j]:.2f}")
            moved = replotted(page, cell03, first)
            np.testing.assert_allclose(moved["z"], probs, atol=1e-6)
            assert not np.allclose(moved["z"], first["z"])
            page.locator(CELLS).nth(cell03).scroll_into_view_if_needed()
            shoot(page, "lesson03-try-it")

            # lesson 07: the layer dropdown redraws the histogram of that layer's pre-activations
            run_lesson(page, lab, lesson06)
            try:
                wait_text(page, cell06, "of the pre-activations are negative", 90_000)
            except Exception:
                shoot(page, "lesson06-failed")
                raise
            before06 = plotted(page, cell06)
            new_layer = 4
            choose(page, cell06, 0, str(new_layer))
            up = np.asarray(trace.get("ffn.up", layer=new_layer), dtype=np.float64)
            wait_text(page, cell06, f"layer {new_layer}: {(up < 0).mean():.1%} of the pre-activations are negative")
            hist = replotted(page, cell06, before06)
            assert hist["type"] == "histogram" and f"layer {new_layer}" in hist["title"]
            np.testing.assert_allclose(np.asarray(hist["x"], dtype=np.float64), up.ravel(), rtol=1e-5, atol=1e-5)
            page.locator(CELLS).nth(cell06).scroll_into_view_if_needed()
            shoot(page, "lesson06-try-it")
            assert not foreign(urls, lab), foreign(urls, lab)
        finally:
            ctx.close()


def test_an_opened_lesson_is_not_marked_modified(sync_api):
    # JupyterLab writes the running kernel's spec (and language_info) into a notebook it opens; a lesson
    # stored in another form is marked modified before any run, and closing it asks whether to save
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    server = JupyterLab()  # its own: no lesson of another test restored in a hidden tab
    try:
        name = "12_exploring_attention.ipynb"
        shutil.copy(NOTEBOOKS / name, server.root / name)
        with sync_api.sync_playwright() as p:
            ctx = launch_browser(p)
            try:
                page = ctx.new_page()
                page.goto(server.url(name), timeout=90_000)
                page.wait_for_selector(CELLS, timeout=90_000)
                server.wait_kernel_idle(name, 90)
                page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=30_000)
                page.wait_for_timeout(1500)  # the kernel's spec and language_info are written on connect
                tabs = page.evaluate("n => Array.from(document.querySelectorAll('.lm-TabBar-tab'))"
                                     ".filter((t) => t.innerText.trim() === n).map((t) => t.className)", name)
                assert len(tabs) == 1, tabs
                shoot(page, "lesson-12-opened")
                assert "jp-mod-dirty" not in tabs[0], "the lesson is marked modified as it opens"
            finally:
                ctx.close()
    finally:
        server.stop()
