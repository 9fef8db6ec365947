"""The front-end draws the view model's limits and the panels Python resolves (headless chromium on an exported page).

tests/views/test_views.py holds plotly and matplotlib to the limits `views/model/data.py` decides; this holds
the third renderer, `views/render/assets/app.js`, to the same numbers, tab by tab, with B of the compare
view edited so that its maps reach past A's.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import data
from bertviz_lite.views import export_html

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


@pytest.fixture(scope="module")
def sync_api():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api")


@contextlib.contextmanager
def opened_page(sync_api, path):
    """An exported page in a fresh headless chromium, its first map drawn; the browser always closes."""
    with sync_api.sync_playwright() as p, tempfile.TemporaryDirectory(prefix="bvl-chromium-",
                                                                      ignore_cleanup_errors=True) as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM,
                                                   headless=True, args=ARGS, viewport={"width": 1400, "height": 1000})
        try:
            page = ctx.new_page()
            page.goto(path.as_uri())
            page.wait_for_selector(".bvl-attn-heat")
            yield page
        finally:
            ctx.close()


def limits(page, selector: str) -> list:
    return page.evaluate(f"() => Array.from(document.querySelectorAll(\"{selector}\")).map((c) => c.limits)")


def test_the_page_draws_the_view_models_limits(small, sync_api, tmp_path):
    a = small.trace("The cat sat on the mat.", pair="It was tired.")
    b = small.trace("The cat sat on the mat.", pair="It was tired.", edits=bv.scale("layer.0.attn.scores", 3.0))
    path = export_html(a, tmp_path / "page.html", compare=b)
    want = {
        "attention": [data.view_data(a, "attention", layer=0)["scale"]["clim"][0]],
        "token": data.view_data(a, "token", query=0)["scale"]["clim"],
        "step": [data.view_data(a, "step", key=data.stepper_steps(a)[0])["scale"]["clim"][0]],
    }
    cmp = data.view_data(a, "compare", trace_b=b, layer=0)
    neuron = data.view_data(a, "neuron", layer=0)
    model = data.view_data(a, "model")
    with opened_page(sync_api, path) as page:
        got = {}
        for tab, sel in [("attention", ".bvl-attn-heat"), ("token", ".bvl-x-section[data-tab=token] .bvl-heat"),
                         ("step", ".bvl-x-section[data-tab=step] .bvl-heat"), ("model", ".bvl-thumb"),
                         ("neuron", ".bvl-neuron"), ("compare", ".bvl-compare-heat")]:
            page.click(f".bvl-x-tab[data-tab='{tab}']")
            page.wait_for_function(f"() => document.querySelector(\"{sel}\")?.limits")
            got[tab] = limits(page, sel)
        got["grid"] = limits(page, ".bvl-grid-heat")
    for tab in ("attention", "step"):
        np.testing.assert_allclose(got[tab][0], want[tab], rtol=1e-6)
    # the token view: every (layer, head) row divided by its own largest weight (the view model's limits), so 0..1
    np.testing.assert_allclose(got["token"][0], [[0.0, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(want["token"])[..., 1], data.view_data(a, "token", query=0)["arrays"]["rows"]
                               .max(axis=-1), rtol=1e-6)
    np.testing.assert_allclose([lim[0] for lim in got["model"]], np.reshape(model["scale"]["clim"], (-1, 2)), rtol=1e-6)
    lim, plim = neuron["scale"]["clim"][1], neuron["scale_prod"]["clim"][0][1]
    np.testing.assert_allclose(got["neuron"][0], [[-lim, lim], [-lim, lim], [-plim, plim]], rtol=1e-6)  # q, k, q*k
    # compare: A and B at the shared limit (it covers B's larger weights), B - A at its own
    shared = cmp["scale"]["clim"][0]
    np.testing.assert_allclose([m[0] for m in got["compare"]], [shared, shared, cmp["scale_diff"]["clim"][0]], rtol=1e-6)
    assert shared[1] == pytest.approx(max(cmp["arrays"]["a"][0].max(), cmp["arrays"]["b"][0].max()), rel=1e-6)
    np.testing.assert_allclose(got["grid"][0][0], cmp["scale_grid"]["clim"], rtol=1e-6)


FIG_SUMMARY = """(tab) => { const f = document.querySelector(`.bvl-x-section[data-tab=${tab}]`).fig;
  return {title: f.title, notes: f.notes, grid: f.grid, panels: f.panels.map((p) => ({type: p.type, name: p.name,
    at: p.at, clim: p.clim || null, title: p.title || "", x_labels: p.x_labels || null, y_labels: p.y_labels || null,
    R: p.R || null, C: p.C || null, labels: p.labels || null, rows: p.type === "table" ? p.rows : null,
    heads: p.series ? p.series.map((s) => s.head) : null, marked: p.marked || false}))}; }"""


def page_figs(sync_api, path, tabs) -> dict:
    """Each tab's resolved panels as the page drew them (`section.fig`), at the page's first selection."""
    got = {}
    with opened_page(sync_api, path) as page:
        for tab in tabs:
            page.click(f".bvl-x-tab[data-tab='{tab}']")
            page.wait_for_function("t => document.querySelector(`.bvl-x-section[data-tab=${t}]`)?.fig", arg=tab)
            got[tab] = page.evaluate(FIG_SUMMARY, tab)
    return got


def same_panels(js: dict, want: dict, tab: str) -> None:
    assert js["title"] == want["title"] and js["grid"] == want["grid"], tab
    assert js["notes"] == want["notes"], tab
    assert len(js["panels"]) == len(want["panels"]), tab
    for g, w in zip(js["panels"], want["panels"]):
        assert (g["type"], g["name"], g["at"], g["title"]) == (w["type"], w["name"], w["at"], w.get("title", "")), tab
        if w["type"] == "heatmap":
            np.testing.assert_allclose(g["clim"], w["clim"], rtol=1e-6, err_msg=tab)
            assert (g["R"], g["C"]) == w["z"].shape, tab
            assert g["x_labels"] == w["x_labels"] and g["y_labels"] == w["y_labels"], tab
            assert g["marked"] == w.get("marked", False), tab
        elif w["type"] == "table":
            assert g["rows"] == w["rows"], tab
        elif w["type"] == "bars":
            assert g["labels"] == w["labels"], tab
        else:
            assert g["heads"] == [s["head"] for s in w["series"]], tab


def test_the_page_draws_the_panels_python_resolves(small, sync_api, tmp_path):
    # one drawing rule per view: app.js resolves each tab's layout into the same panels (titles, limits,
    # labels, grid places, tables) as panels.resolve, which the plotly figures and the PNGs draw
    from bertviz_lite.views.model import panels
    a = small.trace("The cat sat on the mat.", pair="It was tired.")
    b = small.trace("The cat sat on the mat.", pair="It was tired.", edits=bv.scale("layer.0.attn.scores", 3.0))
    ledger = bv.count_params(small)
    path = export_html(a, tmp_path / "page.html", compare=b, ledger=ledger)
    sel = dict(layer=0, head=0, query=0, kind="probs", pair_filter="all", key=data.stepper_steps(a)[0], outline=True)
    got = page_figs(sync_api, path, data.VIEWS)
    for tab in data.VIEWS:
        view, args, fixed = data.REQUESTS[tab]
        vd = data.view_data(a, view, trace_b=b, ledger=ledger, **{w: sel[w] for w in args}, **fixed)
        same_panels(got[tab], panels.resolve(vd, tab, sel), tab)


def test_the_page_prints_numbers_and_tokens_as_python_does(sync_api, tmp_path):
    # an exact tie (uniform attention over 16 tokens: largest weight 0.0625) rounds to even on the page as
    # in Python ("0.062", not "0.063"), and a token written "{head}" stays as written, on both axes
    from bertviz_lite.views.model import panels
    tokens = ["[CLS]", "{head}", "{layer}"] + [f"w{i}" for i in range(12)] + ["[SEP]"]
    tr = bv.Trace.from_attentions([np.full((1, 2, 16, 16), 1 / 16, dtype=np.float32)] * 2, tokens)
    path = export_html(tr, tmp_path / "tie.html")
    got = page_figs(sync_api, path, ["attention", "token"])
    for tab, args in (("attention", dict(layer=0, kind="probs")), ("token", dict(query=0))):
        want = panels.resolve(data.view_data(tr, tab, **args), tab, dict(layer=0, head=0, query=0, outline=True))
        same_panels(got[tab], want, tab)
    assert "(0.062)" in got["attention"]["notes"][0]
    assert got["attention"]["panels"][0]["y_labels"][1:3] == ["1 {head}", "2 {layer}"]
