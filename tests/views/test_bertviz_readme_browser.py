"""bertviz's README cells in a real JupyterLab 4 (headless chromium), in the three ways a bertviz user
calls a view that is not a cell's last expression: followed by a print, with a
trailing `;`, and inside a function. Each of head_view, model_view and neuron_view must be drawn in
its own cell's output in all three (bertviz draws all of them); the cells import the three calls as
bertviz's README does (`from bertviz import head_view` becomes `from bertviz_lite.views import ...`).
A last cell passes bertviz's include_layers / include_heads / display_mode to model_view.

The attention is the package's own (`outputs.attentions`' layout: L arrays [1, heads, n, n]): torch is
not a test dependency; scripts/check_torch_views.py runs the same calls on transformers' tensors.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .test_jupyterlab_browser import JupyterLab, opened

pytestmark = pytest.mark.browser

CONFIG = {"hidden_size": 96, "num_layers": 3, "num_heads": 6, "ffn_size": 384}
SETUP = (
    "import bertviz_lite as bv\n"
    "from bertviz_lite.views import head_view, model_view, neuron_view\n"
    f"model = bv.load('random', seed=5, config={CONFIG!r})\n"
    "sentence_a, sentence_b = 'The cat sat on the mat', 'It was tired'\n"
    "tr = model.trace(sentence_a, pair=sentence_b)\n"
    "attention = [tr.get('attn.probs', layer=layer)[None] for layer in range(tr.num_layers)]  # outputs.attentions\n"
    "tokens = list(tr.tokens)\n"
    "sentence_b_start = tr.segments.index(1)")
CALLS = {
    "head": "head_view(attention, tokens, sentence_b_start)",
    "model": "model_view(attention, tokens, sentence_b_start)",
    "neuron": "neuron_view(model, 'bert', None, sentence_a, sentence_b)",  # bertviz's signature
}
PATTERNS = {
    "print after": lambda call: f"{call}\nprint('printed after the view')",
    "trailing ;": lambda call: f"{call};",
    "inside a function": lambda call: f"def show():\n    {call}\n\nshow()",
}
CASES = [(pattern, view) for pattern in PATTERNS for view in CALLS]
CELLS = [SETUP] + [PATTERNS[p](CALLS[v]) for p, v in CASES] + [
    "model_view(attention, tokens, include_layers=[1, 2], include_heads=[0, 2, 4], display_mode='dark')"]

DRAWN = """([i, tab]) => {
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
  const s = cell && [...cell.querySelectorAll('.jp-OutputArea .bvl-x-section')].find((x) => x.dataset.tab === tab);
  return !!(s && s.bvl && s.style.display !== 'none' && s.offsetHeight > 50);
}"""


@pytest.fixture(scope="module")
def sync_api():
    from ..helpers import browser_or_skip
    return browser_or_skip()


@pytest.fixture(scope="module")
def lab(sync_api):
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    pytest.importorskip("anywidget")
    server = JupyterLab()
    yield server
    server.stop()


def test_bertvizs_readme_cells_draw_in_every_calling_pattern(lab, sync_api):
    name = lab.write_notebook("bertviz_readme.ipynb", CELLS)
    with opened(sync_api, lab, name) as (page, urls, errors):
        missing = []
        for i, (pattern, view) in enumerate(CASES, start=1):
            try:
                page.wait_for_function(DRAWN, arg=[i, view], timeout=90_000 if i == 1 else 30_000)
            except Exception:  # noqa: BLE001 (collected: the assertion names every case that failed)
                missing.append(f"{view} ({pattern})")
        assert not missing, f"not drawn: {missing}"
        outputs = page.locator(".jp-Notebook .jp-Cell")
        for i, (pattern, _view) in enumerate(CASES, start=1):
            if pattern == "print after":
                assert "printed after the view" in outputs.nth(i).locator(".jp-OutputArea").inner_text()
            # nothing but the view: the call returned None, so no Out[] line
            assert "None" not in outputs.nth(i).locator(".jp-OutputArea").inner_text()
        # bertviz's include_layers / include_heads / display_mode: a 2 x 3 grid of thumbnails on black
        last = len(CELLS) - 1
        page.wait_for_function(DRAWN, arg=[last, "model"], timeout=30_000)
        cell = outputs.nth(last)
        thumbs = cell.locator(".bvl-x-section[data-tab='model'] canvas.bvl-thumb")
        assert thumbs.count() == 6
        assert sorted({(t.get_attribute("data-layer"), t.get_attribute("data-head"))
                       for t in thumbs.all()}) == [(str(ly), str(h)) for ly in (1, 2) for h in (0, 2, 4)]
        assert cell.locator(".bvl-x.bvl-mode-dark").evaluate("e => getComputedStyle(e).backgroundColor") == \
            "rgb(0, 0, 0)"
        layers = cell.locator(".bvl-x-section[data-tab='head'] select.bvl-head-layer option")
        assert [o.get_attribute("value") for o in layers.all()] == ["1", "2"]
        folder = os.environ.get("BVL_SCREENSHOTS")  # each cell's output, to look at what was drawn
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            for i in range(1, len(CELLS)):
                outputs.nth(i).scroll_into_view_if_needed()
                outputs.nth(i).screenshot(path=str(Path(folder) / f"bertviz_readme_cell{i}.png"))
        assert not errors, errors
