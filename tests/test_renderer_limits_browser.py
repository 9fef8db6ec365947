"""The front-end draws the view model's limits (headless chromium on an exported page).

tests/test_views.py holds plotly and matplotlib to the limits `views/data.py` decides; this holds
the third renderer, `views/assets/app.js`, to the same numbers, tab by tab, with B of the compare
view edited so that its maps reach past A's.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views import data, export_html

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


@pytest.fixture(scope="module")
def sync_api():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api")


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
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="bvl-chromium-"), executable_path=CHROMIUM,
                                                   headless=True, args=ARGS, viewport={"width": 1400, "height": 1000})
        try:
            page = ctx.new_page()
            page.goto(path.as_uri())
            page.wait_for_selector(".bvl-attn-heat")
            got = {}
            for tab, sel in [("attention", ".bvl-attn-heat"), ("token", ".bvl-x-section[data-tab=token] .bvl-heat"),
                             ("step", ".bvl-x-section[data-tab=step] .bvl-heat"), ("model", ".bvl-thumb"),
                             ("neuron", ".bvl-neuron"), ("compare", ".bvl-compare-heat")]:
                page.click(f".bvl-x-tab[data-tab='{tab}']")
                page.wait_for_function(f"() => document.querySelector(\"{sel}\")?.limits")
                got[tab] = limits(page, sel)
            got["grid"] = limits(page, ".bvl-grid-heat")
        finally:
            ctx.close()
    for tab in ("attention", "step"):
        np.testing.assert_allclose(got[tab][0], want[tab], rtol=1e-6)
    # the token view: one limit per (layer, head) row
    np.testing.assert_allclose(got["token"][0], np.reshape(want["token"], (-1, 2)), rtol=1e-6)
    np.testing.assert_allclose([lim[0] for lim in got["model"]], np.reshape(model["scale"]["clim"], (-1, 2)), rtol=1e-6)
    lim, plim = neuron["scale"]["clim"][1], neuron["scale_prod"]["clim"][0][1]
    np.testing.assert_allclose(got["neuron"][0], [[-lim, lim], [-plim, plim]], rtol=1e-6)
    # compare: A and B at the shared limit (it covers B's larger weights), B - A at its own
    shared = cmp["scale"]["clim"][0]
    np.testing.assert_allclose([m[0] for m in got["compare"]], [shared, shared, cmp["scale_diff"]["clim"][0]], rtol=1e-6)
    assert shared[1] == pytest.approx(max(cmp["arrays"]["a"][0].max(), cmp["arrays"]["b"][0].max()), rel=1e-6)
    np.testing.assert_allclose(got["grid"][0][0], cmp["scale_grid"]["clim"], rtol=1e-6)
