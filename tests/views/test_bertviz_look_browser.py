"""bertviz's calls look like bertviz 1.4.1 at first glance, in a real headless chromium at 1000 px.

What bertviz's JavaScript does (head_view.js, model_view.js) and what is checked here, read from the page:
- head view: every line 2 px, its opacity the weight over the heads shown (faint with every head on, the weight
  itself for one head; the same when a token is hovered), head colours d3.schemeCategory10, 15 px tokens;
- model view: line thumbnails on black tiles, each line's opacity the raw weight (not each map to its own
  largest); a click opens the thumbnail enlarged over the grid, titled "Layer L, Head H" with its tokens, and
  outlines that thumbnail only; a second click, its close button or Esc closes it; all of it within 1000 px;
- bv.explore keeps its own look (heat-map thumbnails, its stronger lines, its colours).
"""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import data, panels

from ..helpers import browser_or_skip, chromium_context
from .test_bertviz_calls_browser import open_html

pytestmark = pytest.mark.browser

sync_api = browser_or_skip()
pytest.importorskip("anywidget")

HEAD = ".bvl-x-section[data-tab='head']"
MODEL = ".bvl-x-section[data-tab='model']"
TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]", "it", "purred", "[SEP]"]
LAYERS, HEADS = 4, 12
WIDTH = 1000  # bertviz's own page is 970 px wide


def attentions(seed=0):
    """[1, heads, n, n] per layer: softmax rows of random scores; layer 0 head 0 uniform (every weight 1 / n)."""
    rng = np.random.default_rng(seed)
    n = len(TOKENS)
    out = []
    for _ in range(LAYERS):
        s = rng.normal(0.0, 2.0, (1, HEADS, n, n))
        e = np.exp(s - s.max(-1, keepdims=True))
        out.append((e / e.sum(-1, keepdims=True)).astype(np.float32))
    out[0][0, 0] = 1.0 / n
    return out


@pytest.fixture(scope="module")
def browser():
    yield from chromium_context(sync_api, width=WIDTH, height=800)


def wait_head(page, check: str):
    page.wait_for_function(f"() => {{ const s = document.querySelector(\"{HEAD}\"); return s && s.bvl && ({check}); }}",
                           timeout=20_000)


def drawn_lines(page) -> dict:
    return page.locator(f"{HEAD} canvas.bvl-headview").evaluate("c => ({...c.lines, geometry: c.geometry})")


def test_head_view_lines_are_faint_until_one_head_is_chosen(browser, tmp_path):
    att = attentions()
    page, errors = open_html(browser, bv.head_view(att, TOKENS, 5, html_action="return").data, tmp_path, "head")
    try:
        wait_head(page, f"s.bvl.heads.length === {HEADS}")
        w = att[0][0]  # layer 0: [head, query, key]
        floor = data.MIN_WEIGHT
        rest = drawn_lines(page)
        # bertviz's rule: each line's opacity its weight over the heads shown
        assert rest["heads"] == HEADS and rest["count"] == int((w >= floor).sum())
        np.testing.assert_allclose(rest["mean"], w[w >= floor].mean() / HEADS, rtol=1e-3)
        assert rest["max"] <= 1 / HEADS + 1e-6
        # hovering a query: only its lines, at the same opacity; the keys shaded per head by their weights
        canvas = page.locator(f"{HEAD} canvas.bvl-headview")
        box, g = canvas.bounding_box(), rest["geometry"]
        page.mouse.move(box["x"] + g["xl"] - 10, box["y"] + g["top"] + 2.5 * g["row"])  # query 2
        hovered = drawn_lines(page)
        row = w[:, 2]
        assert hovered["count"] == int((row >= floor).sum())
        np.testing.assert_allclose(hovered["mean"], row[row >= floor].mean() / HEADS, rtol=1e-3)
        shades = canvas.evaluate("c => c.shades")
        assert shades["side"] == "k" and len(shades["boxes"]) == int((row > 0).sum())
        page.screenshot(path=str(tmp_path / "head-hover.png"))
        page.mouse.move(1, 1)
        # one head alone (double-click its box): its lines at their weights, far stronger than at rest
        page.locator(f"{HEAD} .bvl-head[data-head='3']").dblclick()
        wait_head(page, "s.bvl.heads.join() === '3'")
        alone = drawn_lines(page)
        np.testing.assert_allclose(alone["mean"], w[3][w[3] >= floor].mean(), rtol=1e-3)
        assert alone["mean"] > (HEADS / 2) * rest["mean"], (alone, rest)
        assert not errors, errors
    finally:
        page.close()


def test_head_view_takes_bertviz_colours_boxes_and_font(browser, tmp_path):
    page, errors = open_html(browser, bv.head_view(attentions(), TOKENS, 5, html_action="return").data, tmp_path,
                             "head-look")
    try:
        wait_head(page, f"s.bvl.heads.length === {HEADS}")
        boxes = page.locator(f"{HEAD} .bvl-head")
        got = boxes.evaluate_all("bs => bs.map((b) => [getComputedStyle(b).getPropertyValue('--bvl-head-colour')"
                                 ".trim(), b.getBoundingClientRect().width, b.getBoundingClientRect().height])")
        want = [data.BERTVIZ_COLOURS[h % len(data.BERTVIZ_COLOURS)] for h in range(HEADS)]
        assert [c for c, _, _ in got] == want
        assert {(round(wd), round(ht)) for _, wd, ht in got} == {(20, 20)}  # bertviz's 20 px squares
        geometry = drawn_lines(page)["geometry"]
        assert geometry["font"].startswith("15px") and geometry["row"] == 22.5  # bertviz's TEXT_SIZE, BOXHEIGHT
        # an unchosen head's box is lighter than a chosen one's (bertviz's lighten)
        boxes.nth(4).click()
        wait_head(page, "!s.bvl.heads.includes(4)")
        light = boxes.evaluate_all("bs => bs.map((b) => getComputedStyle(b).backgroundColor)")
        assert light[4] != light[0] and light[4] != light[3]
        assert not errors, errors
    finally:
        page.close()


def rgb_sum(css: str) -> int:
    return sum(int(v) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])


def test_model_view_line_thumbnails_use_raw_weights_on_black_tiles(browser, tmp_path):
    att = attentions()
    page, errors = open_html(browser, bv.model_view(att, TOKENS, 5, html_action="return").data, tmp_path, "model")
    try:
        page.wait_for_function(f"() => document.querySelectorAll(\"{MODEL} canvas.bvl-thumb-lines\").length === "
                               f"{LAYERS * HEADS}", timeout=20_000)
        thumbs = page.locator(f"{MODEL} canvas.bvl-thumb")
        assert thumbs.first.evaluate("c => getComputedStyle(c).backgroundColor") == "rgb(0, 0, 0)"  # bertviz's dark
        # the uniform head (every weight 1 / n): its brightest pixel is where n lines of opacity 1 / n meet (a
        # query's start, a key's end), 1 - (1 - 1/n)^n; a map scaled to its own largest weight would be opaque there
        n = len(TOKENS)
        meet = 255 * (1 - (1 - 1 / n) ** n)
        brightest = page.locator(f"{MODEL} canvas.bvl-thumb[data-layer='0'][data-head='0']").evaluate(
            "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let m = 0; "
            "for (let i = 3; i < d.length; i += 4) m = Math.max(m, d[i]); return m; }")
        assert meet - 20 <= brightest <= meet + 6, (brightest, meet)
        # the last head of the grid on screen at 1000 px, nothing wider than the page
        right = page.locator(f"{MODEL} canvas.bvl-thumb[data-layer='0'][data-head='{HEADS - 1}']").bounding_box()
        assert right["x"] + right["width"] <= WIDTH
        assert page.evaluate("() => document.documentElement.scrollWidth") <= WIDTH
        assert not errors, errors
    finally:
        page.close()


def enlarged(page):
    return page.evaluate(f"""() => {{ const b = document.querySelector("{MODEL} .bvl-enlarged"); if (!b) return null;
        const r = b.getBoundingClientRect();
        return {{...b.bvl, text: b.querySelector('.bvl-enlarged-title').textContent,
          left_shown: [...b.querySelectorAll('.bvl-enlarged-left .bvl-enlarged-token')].map((t) => t.textContent),
          right_shown: [...b.querySelectorAll('.bvl-enlarged-right .bvl-enlarged-token')].map((t) => t.textContent),
          rect: [r.left, r.top, r.right, r.bottom], close: !!b.querySelector('.bvl-enlarged-close')}}; }}""")


def outlined(page):
    return page.evaluate(f"() => [...document.querySelectorAll(\"{MODEL} canvas.bvl-thumb\")]"
                         ".filter((c) => getComputedStyle(c).outlineStyle !== 'none' && "
                         "parseFloat(getComputedStyle(c).outlineWidth) > 0).map((c) => [c.bvl.layer, c.bvl.head])")


def test_model_view_click_opens_a_labelled_enlarged_thumbnail_over_the_grid(browser, tmp_path):
    page, errors = open_html(browser, bv.model_view(attentions(), TOKENS, 5, html_action="return").data, tmp_path,
                             "model-click")
    try:
        page.wait_for_function(f"() => document.querySelectorAll(\"{MODEL} canvas.bvl-thumb-lines\").length === "
                               f"{LAYERS * HEADS}", timeout=20_000)
        assert outlined(page) == []  # nothing outlined at rest (bertviz's)
        last = f"{MODEL} canvas.bvl-thumb[data-layer='1'][data-head='{HEADS - 1}']"
        for layer, head in ((1, 2), (2, HEADS - 1)):  # one in the middle, the last head (it opens to the left)
            thumb = f"{MODEL} canvas.bvl-thumb[data-layer='{layer}'][data-head='{head}']"
            page.locator(thumb).click()
            page.wait_for_function(f"() => document.querySelector(\"{MODEL} .bvl-enlarged\")?.bvl?.head === {head}")
            e = enlarged(page)
            assert e["layer"] == layer and e["text"] == f"Layer {layer}, Head {head}"
            assert e["left_shown"] == TOKENS and e["right_shown"] == TOKENS and e["close"]
            assert 0 <= e["rect"][0] and e["rect"][2] <= WIDTH  # fits the page
            assert page.evaluate("() => document.documentElement.scrollWidth") <= WIDTH
            # the grid's last head is still on screen, or under the enlarged panel (which has its close button)
            r = page.locator(last).bounding_box()
            on_screen = r["x"] + r["width"] <= WIDTH
            covered = e["rect"][0] <= r["x"] and r["x"] + r["width"] <= e["rect"][2]
            assert on_screen or covered
            assert outlined(page) == [[layer, head]]  # the outline follows the open thumbnail
            page.screenshot(path=str(tmp_path / f"model-click-{layer}-{head}.png"))
        page.locator(f"{MODEL} .bvl-enlarged-close").click()
        page.wait_for_function(f"() => !document.querySelector(\"{MODEL} .bvl-enlarged\")")
        assert outlined(page) == []
        page.locator(last).click()  # open, then a second click on the same thumbnail closes it
        page.wait_for_function(f"() => document.querySelector(\"{MODEL} .bvl-enlarged\")?.bvl?.layer === 1")
        page.keyboard.press("Escape")
        page.wait_for_function(f"() => !document.querySelector(\"{MODEL} .bvl-enlarged\")")
        page.locator(last).click()
        page.wait_for_function(f"() => !!document.querySelector(\"{MODEL} .bvl-enlarged\")")
        page.locator(last).click(force=True, position={"x": 3, "y": 3})
        page.wait_for_function(f"() => !document.querySelector(\"{MODEL} .bvl-enlarged\")")
        assert page.evaluate("() => document.querySelector('.bvl-x').dataset.tab") == "model"
        assert not errors, errors
    finally:
        page.close()


def test_model_view_light_tiles_and_explore_keeps_its_own_look(browser, tmp_path):
    att = attentions()
    page, errors = open_html(browser, bv.model_view(att, TOKENS, 5, display_mode="light", html_action="return").data,
                             tmp_path, "model-light")
    try:
        page.wait_for_selector(f"{MODEL} canvas.bvl-thumb-lines")
        bg = page.locator(f"{MODEL} canvas.bvl-thumb").first.evaluate("c => getComputedStyle(c).backgroundColor")
        assert bg == "rgb(255, 255, 255)"
        assert not errors, errors
    finally:
        page.close()
    # bv.explore: heat-map thumbnails that open the attention tab, its own head colours and lines, no bertviz look
    for tab in ("model", "head"):
        page, errors = open_html(browser, bv.explore(att, tokens=TOKENS, sentence_b_start=5, tab=tab).page(), tmp_path,
                                 f"explore-{tab}")
        try:
            page.wait_for_function(f"() => document.querySelector(\".bvl-x-section[data-tab='{tab}']\")?.fig",
                                   timeout=20_000)
            assert page.evaluate("() => document.querySelector('.bvl-x').classList.contains('bvl-look-bertviz')") \
                is False
            if tab == "model":
                assert page.locator(f"{MODEL} canvas.bvl-thumb-lines").count() == 0
                assert page.locator(f"{MODEL} canvas.bvl-thumb").count() == LAYERS * HEADS
            else:
                colours = page.locator(f"{HEAD} .bvl-head").evaluate_all(
                    "bs => bs.map((b) => getComputedStyle(b).getPropertyValue('--bvl-head-colour').trim())")
                assert colours == [panels.HEAD_COLOURS[h % len(panels.HEAD_COLOURS)] for h in range(HEADS)]
                assert page.locator(f"{HEAD} .bvl-head").first.inner_text() == "0"  # numbered boxes
                lines = page.locator(f"{HEAD} canvas.bvl-headview").evaluate("c => c.lines")
                assert lines["max"] > 1 / HEADS  # its own rule: stronger than bertviz's weight / heads
            assert not errors, errors
        finally:
            page.close()
