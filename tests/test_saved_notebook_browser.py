"""A saved notebook keeps its picture, in JupyterLab 4 and Notebook 7 (headless chromium).

The explorer is shown as two outputs (`Explorer._ipython_display_`): a PNG of it, then the widget.
Both front-ends draw a widget output only while its model lives: a notebook reopened without its
kernel says "Error displaying widget: model not found" there, whatever else the bundle holds (the
output area takes the widget view of a trusted bundle and never falls back). So the test runs the
notebook, checks the PNG is hidden while the widget is live, saves it, shuts the kernel down,
closes the page, opens the notebook again and checks the saved picture is on screen.
"""

from __future__ import annotations

import json
import time

import pytest

from .test_jupyterlab_browser import (CONFIG, TEXT, JupyterLab, distinct_colours, launch_browser, run_all, shoot,
                                      sync_api, wait_drawn)  # noqa: F401  (sync_api: a fixture)

pytestmark = pytest.mark.browser

CELLS = ["import bertviz_lite as bv\n"
         f"model = bv.load('random', seed=5, config={CONFIG!r})\n"
         f"tr = model.trace({TEXT!r})\n"
         "bv.explore(tr, layer=1, head=2)"]
PICTURE = ".jp-Notebook .jp-Cell .jp-OutputArea-child .jp-RenderedImage img"


@pytest.fixture(params=["lab", "notebook"])
def server(request, sync_api):
    pytest.importorskip("jupyterlab" if request.param == "lab" else "notebook")
    s = JupyterLab(app=request.param)
    yield s
    s.stop()


def saved_outputs(server: JupyterLab, name: str) -> list[dict]:
    return json.loads((server.root / name).read_text())["cells"][0].get("outputs", [])


def test_a_reopened_notebook_shows_its_picture(server, sync_api):
    name = server.write_notebook("saved.ipynb", CELLS)
    with sync_api.sync_playwright() as p:
        ctx = launch_browser(p)
        ctx.set_default_timeout(30_000)
        try:
            page = ctx.new_page()
            run_all(page, server, name)
            wait_drawn(page, 1, 2, timeout_ms=60_000)
            # live: the widget draws and its picture is hidden
            page.wait_for_selector(PICTURE, state="attached")
            page.wait_for_selector(PICTURE, state="hidden", timeout=10_000)  # once the widget is in the page
            # save, then the file holds the widget output and the picture
            page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputArea-prompt").click()
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 20
            while not any("image/png" in o.get("data", {}) for o in saved_outputs(server, name)):
                assert time.monotonic() < deadline, "the notebook was not saved with its picture"
                time.sleep(0.25)
            kinds = [sorted(o.get("data", {})) for o in saved_outputs(server, name)]
            assert ["application/vnd.jupyter.widget-view+json", "text/plain"] in kinds, kinds
            page.close()
            # the kernel shut down, the notebook opened again: the picture is on screen
            for s in server.api("sessions") or []:
                server.api(f"sessions/{s['id']}", method="DELETE")
            assert not server.api("kernels")
            page = ctx.new_page()
            page.goto(server.url(name))
            page.wait_for_selector(PICTURE, state="visible", timeout=60_000)
            img = page.locator(PICTURE).first
            box = img.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 200, box
            assert img.evaluate("i => i.complete && i.naturalWidth") > 200
            assert distinct_colours(img.screenshot()) > 16  # a map, not a blank box
            shoot(page, f"reopened-{server.app}")
        finally:
            ctx.close()
