"""The course's static site (docs/site, `bash scripts/site.sh`), opened in headless chromium from file://.

The module builds four lessons into a temporary folder with docs/site/build.py (as scripts/site.sh does, from the
committed notebooks, nothing executed; ~10 s) and opens each page as a student would, offline: no request may
leave the site, a stored picture must be shown, the saved explorer must redraw after a click, and the console
must stay free of errors. Also: the home page reaches every built lesson in order, search finds a word of a
lesson, the lesson links its notebook, the solutions are nowhere on the site, and a phone-wide screen is told
that the explorer wants a wider one.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import CHROMIUM, CHROMIUM_ARGS, browser_or_skip

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LESSONS = {"00": "00_quickstart", "04": "04_one_head", "11": "11_backward_and_training",
           "12": "12_exploring_attention"}
LOCAL = ("file:", "data:", "blob:", "about:srcdoc")  # the saved explorer is an iframe with srcdoc
FRAME = "iframe.bvl-saved-page"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("sphinx", "myst_nb", "furo"):
        pytest.importorskip(module, reason="the site builder (pip install -e '.[site]', in .[test]) is not installed")
    tmp = tmp_path_factory.mktemp("site")
    out = tmp / "site"
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "site" / "build.py"), "--out", str(out),
                          "--cache", str(tmp / "cache"), "--lessons", *LESSONS],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, f"the site build failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def sync_api():
    return browser_or_skip()


@pytest.fixture(scope="module")
def browser(sync_api):
    import tempfile
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="bvl-site-"), executable_path=CHROMIUM,
                                                   headless=True, args=CHROMIUM_ARGS,
                                                   viewport={"width": 1280, "height": 900})
        ctx.set_default_timeout(30_000)
        yield ctx
        ctx.close()


class Opened:
    """A page of the site with every request and every console error recorded (the iframes' included)."""

    def __init__(self, browser, path: Path):
        self.page = browser.new_page()
        self.requests, self.errors = [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.as_uri(), wait_until="load")

    def outside(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(LOCAL)]


def redraw_after_click(frame, lesson: str) -> None:
    """Click in the saved explorer and wait for the drawing to follow: a head in the attention tab, or (lesson 04
    opens on the neuron view) another query token."""
    if lesson == "04":
        section = frame.locator(".bvl-x-section[data-tab='neuron']")  # the section is the drawing (.bvl-neuron)
        section.wait_for()
        section.evaluate("s => new Promise(ok => { (function w() { s.bvl ? ok() : setTimeout(w, 50); })(); })")
        before = section.evaluate("s => ({query: s.bvl.query, weights: Array.from(s.bvl.weights)})")
        picture = section.locator(".bvl-neuron-prod-heat").screenshot()  # q of the query times each k
        select = section.locator(".bvl-neuron-token")
        options = select.locator("option").evaluate_all("os => os.filter(o => !o.disabled).map(o => o.value)")
        target = next(v for v in options if int(v) != before["query"])
        select.select_option(target)
        section.evaluate("(s, q) => new Promise((ok, no) => { const t0 = Date.now(); (function w() { "
                         "if (s.bvl.query === q) ok(); else if (Date.now() - t0 > 15000) no(new Error('not redrawn')); "
                         "else setTimeout(w, 50); })(); })", int(target))
        after = section.evaluate("s => Array.from(s.bvl.weights)")
        assert after != before["weights"], "the neuron view's weights stayed those of the first query"
        assert section.locator(".bvl-neuron-prod-heat").screenshot() != picture
        return
    section = frame.locator(".bvl-x-section[data-tab='attention']")
    frame.locator(".bvl-attn-heat").first.wait_for()
    section.evaluate("s => new Promise(ok => { (function w() { s.bvl ? ok() : setTimeout(w, 50); })(); })")
    head = section.evaluate("s => s.bvl.head")
    heat = frame.locator(".bvl-attn-heat").first
    picture = heat.screenshot()
    other = 0 if head != 0 else 1
    section.locator(f".bvl-head[data-head='{other}']").first.click()
    section.evaluate("(s, h) => new Promise((ok, no) => { const t0 = Date.now(); (function w() { "
                     "if (s.bvl.head === h) ok(); else if (Date.now() - t0 > 15000) no(new Error('not redrawn')); "
                     "else setTimeout(w, 50); })(); })", other)
    assert heat.screenshot() != picture, "the map looks the same after another head was clicked"


@pytest.mark.parametrize("lesson", list(LESSONS))
def test_a_lesson_page_works_offline(site, browser, lesson):
    opened = Opened(browser, site / f"{LESSONS[lesson]}.html")
    page = opened.page
    try:
        # formulas are MathML written at build time; at least one stored picture is shown (decoded, not broken)
        assert page.locator("article math").count() > 0
        shown = page.evaluate("() => Array.from(document.querySelectorAll('article .cell_output img'))"
                              ".filter(i => i.complete && i.naturalWidth > 0).length")
        assert shown >= 1, "no stored picture is shown"
        # the saved explorer: its page loads in the iframe (the PNG beside it hidden), and follows a click
        frame_el = page.locator(FRAME).first
        frame_el.wait_for(state="visible")
        box = frame_el.bounding_box()
        assert box and box["width"] > 600 and box["height"] > 300, box
        redraw_after_click(page.frame_locator(FRAME).first, lesson)
        # the page links its notebook, as committed
        link = page.locator("a.download", has_text="Download this notebook")
        assert link.count() == 1
        target = (site / page.evaluate("a => a.getAttribute('href')", link.element_handle())).resolve()
        assert target.read_bytes() == (ROOT / "notebooks" / f"{LESSONS[lesson]}.ipynb").read_bytes()
        page.wait_for_timeout(300)  # late requests (fonts, images below the fold)
        assert not opened.outside(), f"requests that leave the site: {opened.outside()}"
        assert not opened.errors, f"console errors: {opened.errors}"
    finally:
        page.close()


def test_home_search_and_order(site, browser):
    opened = Opened(browser, site / "index.html")
    page = opened.page
    try:
        hrefs = page.locator(".sidebar-tree a.reference").evaluate_all("as => as.map(a => a.getAttribute('href'))")
        lessons = [h for h in hrefs if re.match(r"\d\d_", h)]
        assert lessons == [f"{name}.html" for name in LESSONS.values()], hrefs
        assert any(h.startswith("reference") for h in hrefs), "the symbols and facts page is not in the sidebar"
        page.goto((site / f"{LESSONS['04']}.html").as_uri())
        assert page.locator(".prev-page").get_attribute("href").startswith(LESSONS["00"])
        assert page.locator(".next-page").get_attribute("href").startswith(LESSONS["11"])
        page.goto((site / "search.html").as_uri() + "?q=softmax")
        page.wait_for_selector("#search-results ul.search li", timeout=20_000)
        found = page.locator("#search-results ul.search li a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
        assert any(LESSONS["04"] in h for h in found), found
        page.goto((site / "reference.html").as_uri())
        assert "| symbol |" not in page.inner_text("article") and page.locator("article table").count() > 3
        assert not opened.outside(), opened.outside()
        assert not opened.errors, opened.errors
    finally:
        page.close()


def test_no_solution_is_on_the_site(site):
    assert not [p for p in site.rglob("*") if "solution" in p.name.lower()]
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in site.rglob("*.html"))
    text = re.sub(r"<[^>]+>", "", text)
    import html as html_
    text = html_.unescape(text)
    for name in LESSONS.values():
        lesson = (ROOT / "notebooks" / f"{name}.ipynb").read_text()  # lines the lesson itself gives are no answer
        lines = [ln.strip() for ln in (ROOT / "notebooks" / "solutions" / f"{name}.py").read_text().splitlines()]
        code = [ln for ln in lines if ln and not ln.startswith("#") and "=" in ln and len(ln) > 12
                and json.dumps(ln)[1:-1] not in lesson]
        assert code, name
        shown = [ln for ln in code if ln in text]
        assert not shown, f"{name}: solution lines on the site: {shown}"


def test_a_phone_is_told_the_explorer_wants_a_wider_screen(site, sync_api, browser):
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.goto((site / f"{LESSONS['00']}.html").as_uri())
        assert page.locator(".bvl-site-narrow").first.is_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390 + 1, "the page scrolls sideways"
        page.set_viewport_size({"width": 1280, "height": 900})
        assert not page.locator(".bvl-site-narrow").first.is_visible()
    finally:
        page.close()
