"""bertviz's README example through `head_view` and `model_view` in a real headless chromium.

    outputs = model(inputs, output_attentions=True)
    head_view(outputs.attentions, tokens)

The attention is a stand-in for torch tensors that track gradients (tests/views/test_bertviz_calls.py:
`np.asarray` refuses it). The widget's own front-end is opened at its selection through the page a
saved notebook keeps (`Explorer.saved_page`: the same app.js and the same view data), and the
interactive features bertviz users rely on are checked: every head at the start, one colour box per
head, the layer select, hovering a token, click to toggle and double-click to solo a head, "all
heads", the sentence-pair filter in the head and model views, clicking a thumbnail.
"""

from __future__ import annotations


import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import records

from ..helpers import browser_or_skip, chromium_context
from .test_bertviz_calls import TOKENS, GradTensor, attentions

pytestmark = pytest.mark.browser

sync_api = browser_or_skip()
pytest.importorskip("anywidget")

HEAD = ".bvl-x-section[data-tab='head']"
MODEL = ".bvl-x-section[data-tab='model']"


@pytest.fixture(scope="module")
def browser():
    yield from chromium_context(sync_api)


def open_widget(browser, widget, tmp_path, name):
    path = tmp_path / f"{name}.html"
    path.write_text(widget.saved_page(), encoding="utf-8")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return page, errors


def head_record(page) -> dict:
    return page.evaluate(f"() => {{ const s = document.querySelector(\"{HEAD}\"); const f = s.fig.panels[0]; "
                         "return {heads: s.bvl.heads, layer: s.bvl.layer, pair: s.bvl.pair, left: f.left, "
                         "right: f.right}; }")


def wait_head(page, check: str):
    page.wait_for_function(f"() => {{ const s = document.querySelector(\"{HEAD}\"); return s && s.bvl && ({check}); }}",
                           timeout=20_000)


def test_head_view_of_bertvizs_readme_call(browser, tmp_path):
    att = [GradTensor(a) for a in attentions(layers=3, heads=4)]
    w = bv.explore(att, tokens=TOKENS, sentence_b_start=6, tab="head")  # what head_view(att, TOKENS, 6) shows
    page, errors = open_widget(browser, w, tmp_path, "head")
    try:
        wait_head(page, "s.bvl.heads.length === 4")
        assert page.evaluate("() => document.querySelector('.bvl-x-bvl, .bvl-x').dataset.tab") == "head"
        r = head_record(page)
        assert r["heads"] == [0, 1, 2, 3] and r["layer"] == 0  # every head at the start
        assert r["left"][1] == "1 the" and r["left"][3] == "3 ##s"  # prettified tokens (## kept)
        # one colour box per head, each its own colour, all on
        boxes = page.locator(f"{HEAD} .bvl-head")
        assert boxes.count() == 4
        colours = {boxes.nth(h).evaluate("b => getComputedStyle(b).getPropertyValue('--bvl-head-colour')")
                   for h in range(4)}
        assert len(colours) == 4
        assert all("bvl-on" in boxes.nth(h).get_attribute("class") for h in range(4))
        # the layer select
        page.select_option(f"{HEAD} select.bvl-head-layer", "2")
        wait_head(page, "s.bvl.layer === 2")
        # click toggles a head, double-click shows it alone, "all heads" brings them back
        boxes.nth(1).click()
        wait_head(page, "s.bvl.heads.join() === '0,2,3'")
        boxes.nth(2).dblclick()
        wait_head(page, "s.bvl.heads.join() === '2'")
        assert "bvl-on" not in boxes.nth(0).get_attribute("class")
        boxes.nth(2).dblclick()  # double-click on the head shown alone: every head again (bertviz's)
        wait_head(page, "s.bvl.heads.length === 4")
        boxes.nth(2).dblclick()
        wait_head(page, "s.bvl.heads.join() === '2'")
        page.click(f"{HEAD} .bvl-all-heads")
        wait_head(page, "s.bvl.heads.length === 4")
        # hovering a token draws only its lines (the canvas changes, and back when the mouse leaves)
        canvas = page.locator(f"{HEAD} canvas.bvl-headview")
        before = canvas.evaluate("c => c.toDataURL()")
        box = canvas.bounding_box()
        canvas.hover(position={"x": box["width"] * 0.25, "y": 24 + 18 * 2.5})  # the third query token
        hovered = canvas.evaluate("c => c.toDataURL()")
        page.mouse.move(1, 1)
        assert hovered != before and canvas.evaluate("c => c.toDataURL()") == before
        # the sentence-pair filter of the head view
        page.select_option(f"{HEAD} select.bvl-head-pair", "A->B")
        wait_head(page, "s.bvl.pair === 'A->B'")
        r = head_record(page)
        assert len(r["left"]) == 6 and r["right"] == ["6 it", "7 [SEP]"]
        page.screenshot(path=str(tmp_path / "head.png"), full_page=True)
        assert not errors, errors
    finally:
        page.close()


def test_model_view_of_bertvizs_readme_call(browser, tmp_path):
    att = [GradTensor(a) for a in attentions(layers=3, heads=4)]
    w = bv.explore(att, tokens=TOKENS, sentence_b_start=6, tab="model")  # what model_view(...) shows
    page, errors = open_widget(browser, w, tmp_path, "model")
    try:
        page.wait_for_function(f"() => document.querySelector(\"{MODEL}\")?.fig !== undefined", timeout=20_000)
        thumbs = page.locator(f"{MODEL} canvas.bvl-thumb")
        assert thumbs.count() == 3 * 4
        size = page.evaluate(f"() => document.querySelector(\"{MODEL}\").fig.panels[0].R")
        assert size == 8
        page.select_option(f"{MODEL} select.bvl-model-pair", "B->A")
        page.wait_for_function(f"() => document.querySelector(\"{MODEL}\").fig.panels[0].R === 2")
        assert page.evaluate(f"() => document.querySelector(\"{MODEL}\").fig.panels[0].C") == 6
        # a thumbnail opens its map in the attention tab
        page.locator(f"{MODEL} canvas.bvl-thumb[data-layer='2'][data-head='1']").click()
        page.wait_for_function("() => { const b = document.querySelector('.bvl-attn-heat')?.bvl; "
                               "return b && b.layer === 2 && b.head === 1; }", timeout=20_000)
        # bertviz's line thumbnails: a click opens one enlarged over the grid (the tab stays the model view)
        page.click(".bvl-x-tab[data-tab='model']")
        page.select_option(f"{MODEL} select.bvl-model-thumbs", "lines")
        page.wait_for_function(f"() => document.querySelectorAll(\"{MODEL} canvas.bvl-thumb-lines\").length === 12")
        page.locator(f"{MODEL} canvas.bvl-thumb[data-layer='1'][data-head='2']").click()
        page.wait_for_function(f"() => document.querySelector(\"{MODEL} .bvl-enlarged\")?.bvl?.head === 2")
        assert page.evaluate("() => document.querySelector('.bvl-x').dataset.tab") == "model"
        # attention alone: no neuron view, no step-through, no parameters tab
        tabs = page.evaluate("() => [...document.querySelectorAll('.bvl-x-tab')].map(b => b.dataset.tab)")
        assert tabs == list(records.ATTENTION_ONLY_VIEWS) and "neuron" not in tabs
        assert not errors, errors
    finally:
        page.close()


def test_hovering_a_head_view_token_shades_the_other_side_by_weight(browser, tmp_path):
    # bertviz's hover: behind each token on the other side, a box per head in the head's colour, its opacity
    # the weight. Hover query 3 (left): the keys' boxes; hover key 2 (right): the queries'. The pixels drawn
    # (the outermost head's box, clear of labels and lines) have alphas ordered as the weights.
    att = attentions(layers=3, heads=4)
    w = bv.explore([GradTensor(a) for a in att], tokens=TOKENS, sentence_b_start=6, tab="head")
    page, errors = open_widget(browser, w, tmp_path, "head-hover")
    try:
        wait_head(page, "s.bvl.heads.length === 4")
        canvas = page.locator(f"{HEAD} canvas.bvl-headview")
        box = canvas.bounding_box()
        maps = att[0][0]  # layer 0: [head, query, key]
        for side, i, x in (("q", 3, box["width"] * 0.1), ("k", 2, box["width"] * 0.9)):
            page.mouse.move(box["x"] + x, box["y"] + 24 + (i + 0.5) * 18)  # drawLines: 24 px of titles, rows of 18
            got = canvas.evaluate("""(c) => { const s = c.shades; if (!s) return null;
                const ctx = c.getContext('2d'), dpr = c.width / c.clientWidth;
                const x = s.side === 'k' ? s.x[1] - s.width / 2 : s.x[0] + s.width / 2;  // the outer edge's head
                const n = Math.max(...s.boxes.map((b) => b[0])) + 1;
                const alpha = Array.from({length: n}, (_, t) =>
                  ctx.getImageData(Math.round(x * dpr), Math.round((24 + (t + 0.5) * 18) * dpr), 1, 1).data[3]);
                return {...s, alpha}; }""")
            assert got is not None, side
            assert got["side"] == ("k" if side == "q" else "q") and got["i"] == i
            for h in range(4):
                want = maps[h, i] if side == "q" else maps[h, :, i]
                shaded = sorted((t, wt) for t, hh, wt in got["boxes"] if hh == h)
                np.testing.assert_allclose([wt for _, wt in shaded], want, atol=2e-3)
            want = maps[3, i] if side == "q" else maps[0, :, i]  # keys: head 3's box (right), queries: head 0's
            alpha = np.array(got["alpha"], float)
            np.testing.assert_allclose(alpha, 255 * want, atol=2.5)
            order = np.argsort(want, kind="stable")
            assert np.all(np.diff(alpha[order]) >= -1), (alpha[order], want[order])
            assert alpha.max() - alpha.min() > 50  # the weights differ, and so do the shades
            page.screenshot(path=str(tmp_path / f"hover-{side}.png"))
        page.mouse.move(1, 1)  # off the tokens: no shade
        assert canvas.evaluate("c => c.shades") is None
        assert not errors, errors
    finally:
        page.close()


def open_html(browser, html: str, tmp_path, name):
    path = tmp_path / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return page, errors


LINES_ALPHA = """(c) => { const ctx = c.getContext('2d'), d = ctx.getImageData(0, 0, c.width, c.height).data;
    const dpr = c.width / c.clientWidth, g = c.geometry;  // between the tokens: lines only
    const x0 = Math.round((g.xl + 6) * dpr), x1 = Math.round((g.xr - 6) * dpr);
    let sum = 0; for (let y = 0; y < c.height; y++) for (let x = x0; x < x1; x++) sum += d[4 * (y * c.width + x) + 3];
    return sum / (c.height * (x1 - x0)); }"""  # the lines' mean opacity (0-255)


def test_bertvizs_calls_look_like_bertvizs_and_explore_keeps_its_own(browser, tmp_path):
    # head_view(attention, tokens): every head's lines faint (bertviz's weight / heads shown, hovered or not);
    # model_view(...): bertviz's line thumbnails. bv.explore keeps its stronger lines and maps.
    att = [GradTensor(a) for a in attentions(layers=3, heads=4)]
    looks = {}
    for name, html in (("call", bv.head_view(att, TOKENS, 6, html_action="return").data),
                       ("explore", bv.explore(att, tokens=TOKENS, sentence_b_start=6, tab="head").page())):
        page, errors = open_html(browser, html, tmp_path, f"look-{name}")
        try:
            wait_head(page, "s.bvl.heads.length === 4")
            canvas = page.locator(f"{HEAD} canvas.bvl-headview")
            still = canvas.evaluate(LINES_ALPHA)
            page.screenshot(path=str(tmp_path / f"look-{name}-still.png"))
            box, g = canvas.bounding_box(), canvas.evaluate("c => c.geometry")
            page.mouse.move(box["x"] + g["xl"] - 10, box["y"] + g["top"] + g["row"] * 2.5)  # query 2
            hovered = canvas.evaluate(LINES_ALPHA)
            page.screenshot(path=str(tmp_path / f"look-{name}.png"))
            looks[name] = (still, hovered)
            assert not errors, errors
        finally:
            page.close()
    (call, call_hover), (ours, ours_hover) = looks["call"], looks["explore"]
    assert call < 0.5 * ours, looks  # faint at first glance
    assert call_hover < ours_hover, looks  # bertviz's hovered lines keep their opacity (its shades carry the weights)
    page, errors = open_html(browser, bv.model_view(att, TOKENS, 6, html_action="return").data, tmp_path, "look-model")
    try:
        page.wait_for_function(f"() => document.querySelectorAll(\"{MODEL} canvas.bvl-thumb-lines\").length === 12")
        page.locator(f"{MODEL} canvas.bvl-thumb[data-layer='1'][data-head='2']").click()  # enlarged over the grid
        page.wait_for_function(f"() => document.querySelector(\"{MODEL} .bvl-enlarged\")?.bvl?.head === 2")
        assert page.evaluate("() => document.querySelector('.bvl-x').dataset.tab") == "model"
        page.screenshot(path=str(tmp_path / "look-model.png"))
        assert not errors, errors
    finally:
        page.close()
