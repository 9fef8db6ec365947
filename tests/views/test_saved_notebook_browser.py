"""A saved notebook keeps every tab of the explorer, in JupyterLab 4 and Notebook 7 (headless chromium).

The explorer is shown as two outputs (`Explorer._ipython_display_`): its exported page (text/html:
an iframe with the view data and the front-end, a PNG for where HTML does not run), then the widget.
Both front-ends draw a widget output only while its model lives: a notebook reopened without its
kernel says "Error displaying widget: model not found" there, whatever else the bundle holds (the
output area takes the widget view of a trusted bundle and never falls back). So the test runs the
notebook, checks the saved page is hidden while the widget is live, saves it, shuts the kernel
down, closes the page, opens the notebook again and checks the saved page is on screen, above the
widget's placeholder, with every tab drawing without a kernel.
"""

from __future__ import annotations

import json
import time

import pytest

from bertviz_lite.views.model import records

from .test_jupyterlab_browser import (CONFIG, TEXT, JupyterLab, launch_browser, run_all, shoot, sync_api,  # noqa: F401
                                      wait_drawn)  # (sync_api: a fixture)

pytestmark = pytest.mark.browser

CELLS = ["import bertviz_lite as bv\n"
         f"model = bv.load('random', seed=5, config={CONFIG!r})\n"
         f"tr = model.trace({TEXT!r})\n"
         "bv.explore(tr, layer=1, head=2)"]
SAVED = ".jp-Notebook .jp-Cell .jp-OutputArea-child .bvl-saved"
FRAME = "iframe.bvl-saved-page"


@pytest.fixture(params=["lab", "notebook"])
def server(request, sync_api):
    pytest.importorskip("jupyterlab" if request.param == "lab" else "notebook")
    s = JupyterLab(app=request.param)
    yield s
    s.stop()


def wait_saved(server: JupyterLab, name: str, done, timeout_s: float = 60.0) -> list[dict]:
    """The first cell's outputs once the server has written the whole file and `done(outputs)` holds.

    The server writes a notebook in place, so a read can meet half a file (a JSONDecodeError) or the previous
    save: a file counts as whole when it parses and its size and modification time stay the same over two
    reads 0.5 s apart. On a busy machine a save can take seconds; the wait gives it a minute."""
    path, deadline, last, outputs = server.root / name, time.monotonic() + timeout_s, None, None
    while True:
        try:
            st = path.stat()
            now = (st.st_size, st.st_mtime_ns)
            outputs = json.loads(path.read_text())["cells"][0].get("outputs", [])
        except (OSError, ValueError, KeyError, IndexError):  # not there yet, or half written
            now, outputs = None, None
        if now is not None and now == last and done(outputs):
            return outputs
        assert time.monotonic() < deadline, f"{name} was not saved whole with what the test waits for"
        last = now
        time.sleep(0.5)


def test_the_wait_reads_a_whole_file_only(tmp_path):
    # a server that writes the notebook in two pieces, 1 s apart: the first read meets half a file (it once raised
    # JSONDecodeError in the test below), and the wait returns only what the whole file holds
    import threading
    from types import SimpleNamespace

    whole = json.dumps({"cells": [{"outputs": [{"data": {"text/html": "<p>saved</p>"}}]}]})
    path = tmp_path / "saved.ipynb"
    path.write_text(whole[: len(whole) // 2])
    writer = threading.Timer(1.0, path.write_text, args=(whole,))
    writer.start()
    try:
        outputs = wait_saved(SimpleNamespace(root=tmp_path), "saved.ipynb", lambda outs: bool(outs), timeout_s=30)
    finally:
        writer.join()
    assert outputs == [{"data": {"text/html": "<p>saved</p>"}}]
    with pytest.raises(AssertionError, match="not saved whole"):  # a file that never parses: a clear failure
        path.write_text(whole[:10])
        wait_saved(SimpleNamespace(root=tmp_path), "saved.ipynb", lambda outs: True, timeout_s=2)


def test_a_reopened_notebook_keeps_every_tab(server, sync_api):
    name = server.write_notebook("saved.ipynb", CELLS)
    with sync_api.sync_playwright() as p:
        ctx = launch_browser(p)
        ctx.set_default_timeout(30_000)
        try:
            page = ctx.new_page()
            run_all(page, server, name)
            wait_drawn(page, 1, 2, timeout_ms=60_000)
            # live: the widget draws and the saved page is hidden
            page.wait_for_selector(SAVED, state="attached")
            page.wait_for_selector(SAVED, state="hidden", timeout=10_000)  # once the widget is in the page
            # save, then the file holds the saved page (with its PNG) and the widget output
            page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputArea-prompt").click()
            page.keyboard.press("Control+s")
            outputs = wait_saved(server, name, lambda outs: any("text/html" in o.get("data", {}) for o in outs))
            kinds = [sorted(o.get("data", {})) for o in outputs]
            assert kinds[-2:] == [["image/png", "text/html", "text/plain"],
                                  ["application/vnd.jupyter.widget-view+json", "text/plain"]], kinds
            html = outputs[-2]["data"]["text/html"]
            html = "".join(html) if isinstance(html, list) else html
            assert len(html) < 2_500_000  # the stated cap (SAVED_PAGE_BYTES, escaped into srcdoc)
            page.close()
            # the kernel shut down, the notebook opened again: the saved page is on screen, every tab works
            for s in server.api("sessions") or []:
                server.api(f"sessions/{s['id']}", method="DELETE")
            assert not server.api("kernels")
            page = ctx.new_page()
            page.goto(server.url(name))
            frame_el = page.locator(f"{SAVED} {FRAME}").first
            frame_el.wait_for(state="visible", timeout=60_000)
            box = frame_el.bounding_box()
            assert box and box["width"] > 400 and box["height"] > 300, box
            # the widget's own output can only say "model not found" now: it is hidden, never under the page
            outputs = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-OutputArea-child")
            assert outputs.first.locator(".bvl-saved").count() == 1
            assert not page.get_by_text("model not found").is_visible()
            frame = page.frame_locator(f"{SAVED} {FRAME}").first
            frame.locator(".bvl-attn-heat").first.wait_for(timeout=30_000)
            assert frame.locator(".bvl-x-section[data-tab='attention']").evaluate("s => s.bvl.layer") == 1
            tabs = frame.locator(".bvl-x-tab")
            names = [tabs.nth(i).get_attribute("data-tab") for i in range(tabs.count())]
            assert names == list(records.ONE_TRACE_VIEWS), names
            for tab in names:
                frame.locator(f".bvl-x-tab[data-tab='{tab}']").click()
                frame.locator(f".bvl-x-section[data-tab='{tab}']").evaluate(
                    "s => new Promise((ok, no) => { const t0 = Date.now(); (function wait() { "
                    "if (s.fig) ok(true); else if (Date.now() - t0 > 15000) no(new Error('not drawn')); "
                    "else setTimeout(wait, 50); })(); })")
                assert frame.locator(".bvl-x-error").evaluate("e => e.textContent") == "", tab
            shoot(page, f"reopened-{server.app}")
        finally:
            ctx.close()
