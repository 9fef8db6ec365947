"""The exported page in a real headless chromium: the explorer's own front-end draws every view
from the payloads in the page (the trace's values), the selectors change the map, and nothing
is requested from anywhere but file:, data: and blob:."""

from __future__ import annotations

import io

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views import export_html
from bertviz_lite.views.model import data

from ..helpers import browser_or_skip, chromium_context, real_map

pytestmark = pytest.mark.browser

sync_api = browser_or_skip()

# every tab (its view's record) draws its resolved panels (section.fig) into its section's panel grid
SECTION = ".bvl-x-section[data-tab='{}']"
DRAWN = "t => document.querySelector(`.bvl-x-section[data-tab='${t}']`)?.fig !== undefined"


def draw_tab(page, tab: str):
    """Open a tab and wait until its panels are drawn; returns its panel grid."""
    page.click(f".bvl-x-tab[data-tab='{tab}']")
    page.wait_for_function(DRAWN, arg=tab, timeout=20_000)
    return page.locator(SECTION.format(tab) + " .bvl-panels")


@pytest.fixture(scope="module")
def page_file(small, tmp_path_factory):
    tr = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=32)
    ablated = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=32, edits=bv.ablate(heads={1: [2]}))
    path = export_html(tr, tmp_path_factory.mktemp("export") / "page.html", ledger=bv.count_params(small),
                       compare=ablated)
    return tr, ablated, path


@pytest.fixture(scope="module")
def browser():
    yield from chromium_context(sync_api)


@pytest.fixture
def opened(browser, page_file):
    tr, ablated, path = page_file
    page = browser.new_page()
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined", timeout=30_000)
    yield tr, ablated, page, requests, errors
    page.close()


def distinct_colours(png: bytes) -> int:
    from PIL import Image
    return len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or [])


def drawn_map(page) -> tuple[dict, np.ndarray]:
    b = page.evaluate("() => { const b = document.querySelector('.bvl-attn-heat').bvl; return {layer: b.layer, "
                      "head: b.head, n: b.rows.length, m: b.cols.length, values: Array.from(b.values)}; }")
    return b, np.reshape(b["values"], (b["n"], b["m"]))


def test_the_map_draws_and_the_selectors_change_it(opened):
    tr, _, page, _, errors = opened
    sel, z = drawn_map(page)
    assert (sel["layer"], sel["head"]) == (0, 0)
    np.testing.assert_allclose(z, real_map(tr, 0, 0), atol=real_map(tr, 0, 0).max() / 65534 + 1e-7)
    before = page.locator(".bvl-attn-heat").screenshot()
    assert distinct_colours(before) > 16
    page.click(".bvl-x-section[data-tab='attention'] .bvl-head[data-head='3']")
    page.select_option(".bvl-layer", "1")
    page.wait_for_function("() => { const b = document.querySelector('.bvl-attn-heat').bvl;"
                           " return b.layer === 1 && b.head === 3; }")
    _, z = drawn_map(page)
    np.testing.assert_allclose(z, real_map(tr, 1, 3), atol=real_map(tr, 1, 3).max() / 65534 + 1e-7)
    assert page.locator(".bvl-attn-heat").screenshot() != before
    page.select_option(".bvl-pair", "A->B")
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat').bvl.pair === 'A->B'")
    sel, _ = drawn_map(page)
    segs = [s for s, m in zip(tr.segments, tr.mask) if m]
    assert (sel["n"], sel["m"]) == (segs.count(0), segs.count(1))
    assert not errors, errors


def test_every_tab_draws(opened):
    tr, _, page, _, errors = opened
    for tab in data.VIEWS:
        grid = draw_tab(page, tab)
        assert grid.is_visible(), tab
        assert distinct_colours(grid.screenshot()) > 8, tab
    # the neuron view's numbers are the trace's own weights (layer 1, head 3, query 0 as selected above)
    got = page.evaluate("() => document.querySelector('.bvl-neuron').bvl")
    np.testing.assert_allclose(got["weights"], real_map(tr, got["layer"], got["head"])[got["query"]], atol=2e-3)
    page.click(".bvl-x-tab[data-tab='compare']")
    assert "edits:" in page.inner_text(".bvl-x-section[data-tab='compare']")
    page.click(".bvl-x-tab[data-tab='step']")
    page.click(".bvl-next")
    page.wait_for_function("() => document.querySelector('.bvl-x-section[data-tab=step] .bvl-x-formula')"
                           ".innerText.includes('embed.position')")
    assert "This page keeps" in page.inner_text(".bvl-page-note")
    assert not errors, errors


def test_no_network_requests(opened):
    _, _, page, requests, _ = opened
    for tab in data.VIEWS:
        draw_tab(page, tab)
    page.wait_for_timeout(300)
    assert requests and all(u.startswith(("file:", "data:", "blob:")) for u in requests), requests


def test_the_neuron_view_prints_a_variants_recorded_scores_over_128_tokens(small, browser, tmp_path):
    """Above 128 tokens the front-end computed the scores from q and k with 1/sqrt(d_k), whatever the model's
    attention_scale; it now draws the recorded ones, and says the model's scale."""
    tr = small.variant(attention_scale=0.5).trace(" ".join(["cat"] * 150))
    page = browser.new_page()
    page.goto(export_html(tr, tmp_path / "page.html").as_uri())
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined", timeout=30_000)
    page.click(".bvl-x-tab[data-tab='neuron']")
    page.wait_for_function("() => document.querySelector('.bvl-neuron')?.bvl !== undefined", timeout=20_000)
    got = page.evaluate("() => document.querySelector('.bvl-neuron').bvl")
    recorded = real_map(tr, got["layer"], got["head"], name="attn.scores")
    np.testing.assert_allclose(got["scores"], recorded[got["query"]], atol=np.ptp(recorded) / 65534 + 1e-6)  # uint16
    assert "\u00d7 0.500 = " in page.inner_text(".bvl-x-section[data-tab='neuron']")
    page.close()


def test_each_tab_draws_the_controls_its_record_names(small, browser, tmp_path):
    """The front-end builds a tab's controls from its view record (facts' controls), not from a list of its
    own: move the layer selector from the attention tab to the one-token tab, and the page follows."""
    from bertviz_lite.views.wire import export
    tr = small.trace("The cat sat on the mat.", pair="It was tired.")
    info = data.facts(tr)
    assert "layer" in info["controls"]["attention"] and "layer" not in info["controls"]["token"]
    info["controls"] = dict(info["controls"], attention=[c for c in info["controls"]["attention"] if c != "layer"],
                            token=["layer", *info["controls"]["token"]])
    path = tmp_path / "page.html"
    path.write_text(export.build_page(tr, info=info), encoding="utf-8")
    page = browser.new_page()
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined", timeout=30_000)
    layers = {}
    for tab in ("attention", "token", "neuron"):
        page.click(f".bvl-x-tab[data-tab='{tab}']")
        layers[tab] = page.locator(f".bvl-x-section[data-tab='{tab}'] select[aria-label='layer']").count()
    assert layers == {"attention": 0, "token": 1, "neuron": 1}
    page.close()


def test_the_compare_tab_opens_where_the_facts_say_the_first_time(small, browser, tmp_path):
    # an edit of layer 1's scores leaves layer 0 of B - A blank: the tab opens on layer 1 (info.opens_at), once
    a = small.trace("The cat sat on the mat.")
    b = small.trace("The cat sat on the mat.", edits=bv.scale("layer.1.attn.scores", 3.0))
    first = data.first_differing_layer(a, b)
    assert first == 1 and data.facts(a, trace_b=b)["opens_at"] == {"compare": {"layer": first}}
    path = export_html(a, tmp_path / "page.html", compare=b)
    page = browser.new_page()
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl?.layer === 0", timeout=30_000)
    layer = "() => document.querySelector(\".bvl-x-section[data-tab='compare']\").bvl?.layer"
    draw_tab(page, "compare")
    page.wait_for_function(f"{layer} === {first}")
    draw_tab(page, "attention")
    page.select_option(".bvl-x-section[data-tab='attention'] select[aria-label='layer']", "0")
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat').bvl.layer === 0")
    draw_tab(page, "compare")
    page.wait_for_function(f"{layer} === 0")  # the second time it keeps the selected layer
    page.close()
