"""The exported page in a real headless chromium: it draws, the selectors change the map,
every tab renders, and nothing is requested from anywhere but file:, data: and blob:."""

from __future__ import annotations

import io
import os
import tempfile

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.backend import to_host
from bertviz_lite.views import export_html

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing: the browser tests drive the system chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")


@pytest.fixture(scope="module")
def page_file(small, tmp_path_factory):
    tr = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=32)
    path = export_html(tr, tmp_path_factory.mktemp("export") / "page.html", ledger=bv.count_params(small))
    return tr, path


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(), executable_path=CHROMIUM, headless=True,
                                                   args=ARGS, viewport={"width": 1200, "height": 900})
        yield ctx
        ctx.close()


@pytest.fixture
def opened(browser, page_file):
    tr, path = page_file
    page = browser.new_page()
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("window.bvl && document.querySelector('#bvl-heatmap .main-svg')", timeout=30_000)
    page.evaluate("window.bvl.ready")
    yield tr, page, requests, errors
    page.close()


def pixel_std(png: bytes) -> float:
    from PIL import Image
    return float(np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float).std())


def heatmap_z(page) -> np.ndarray:
    return np.asarray(page.evaluate("document.getElementById('bvl-heatmap').data[0].z"), dtype=float)


def real_map(tr, layer, head):
    idx = [i for i, m in enumerate(tr.mask) if m]
    return to_host(tr.get("attn.probs", layer=layer, head=head))[np.ix_(idx, idx)]


def test_heatmap_draws(opened):
    tr, page, requests, errors = opened
    assert page.query_selector("#bvl-heatmap .main-svg") is not None
    assert page.query_selector("#bvl-heatmap .hm image, #bvl-heatmap image") is not None  # the heatmap bitmap
    assert pixel_std(page.locator("#bvl-heatmap").screenshot()) > 10
    z = heatmap_z(page)
    np.testing.assert_allclose(z, real_map(tr, 0, 0), atol=real_map(tr, 0, 0).max() / 60000)
    labels = page.evaluate("document.getElementById('bvl-heatmap').data[0].x")
    assert [s.split(" ", 1)[1] for s in labels] == [t for t, m in zip(tr.tokens, tr.mask) if m]
    assert not errors


def test_head_and_layer_selectors_change_the_map(opened):
    tr, page, requests, errors = opened
    before = heatmap_z(page)
    shot_before = page.locator("#bvl-heatmap").screenshot()
    page.select_option("#bvl-head", "3")
    page.wait_for_function("document.getElementById('bvl-heatmap').layout.meta.head === 3")
    after = heatmap_z(page)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, real_map(tr, 0, 3), atol=real_map(tr, 0, 3).max() / 60000)
    assert page.locator("#bvl-heatmap").screenshot() != shot_before
    page.select_option("#bvl-layer", "1")
    page.wait_for_function("document.getElementById('bvl-heatmap').layout.meta.layer === 1")
    np.testing.assert_allclose(heatmap_z(page), real_map(tr, 1, 3), atol=real_map(tr, 1, 3).max() / 60000)
    page.select_option("#bvl-pair", "A->B")
    page.wait_for_function("document.getElementById('bvl-heatmap').layout.meta.pair_filter === 'A->B'")
    rows = [i for i, m in enumerate(tr.mask) if m and tr.segments[i] == 0]
    assert heatmap_z(page).shape == (len(rows), tr.n_real - len(rows))
    assert not errors


def test_every_tab_draws(opened):
    tr, page, requests, errors = opened
    for tab in ("model", "head", "steps", "params"):
        page.evaluate(f"window.bvl.open('{tab}')")
        page.wait_for_selector(f"#bvl-tab-{tab} .main-svg", timeout=20_000)
        assert pixel_std(page.locator(f"#bvl-tab-{tab}").screenshot()) > 10, tab
    panels = page.evaluate("document.getElementById('bvl-model').data.length")
    assert panels == tr.num_layers * tr.num_heads
    page.evaluate("window.bvl.open('steps')")
    first = page.inner_text("#bvl-tab-steps .formula")
    page.click("text=next \u25b6")
    page.wait_for_function(f"document.querySelector('#bvl-tab-steps .formula').innerText !== {first!r}")
    assert "embed.position" in page.inner_text("#bvl-tab-steps .formula")
    assert not errors


def test_no_network_requests(opened):
    tr, page, requests, errors = opened
    for tab in ("model", "head", "steps", "params"):
        page.evaluate(f"window.bvl.open('{tab}')")
    page.wait_for_timeout(500)
    assert requests, "the page request itself is recorded"
    assert all(u.split(":", 1)[0] in ("file", "data", "blob", "about") for u in requests), requests
