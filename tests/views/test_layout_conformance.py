"""One layout language, two interpreters, one table of cases: `panels.resolve` (Python: plotly figures, PNGs)
and app.js's `resolve` (the widget and the exported page) give the same panels for every conformance case
(tests/views/layout_cases.py: every view x every pair filter x several layers, heads and queries x a short
and a long input), app.js running the whole table in one page load of headless chromium."""

from __future__ import annotations

import base64
import collections
import json
import os
import tempfile

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import data, panels
from bertviz_lite.views.wire import codec, export

from .layout_cases import layout_cases

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
# JS multiplies and stores in float32 (q * k, a row times its scale); Python in float64
RTOL, ATOL = 1e-6, 1e-7
MIN_CASES = 20  # per view

# app.js's resolve over the table: each view data decoded as the front-end decodes it (float32 buffers), each
# case resolved, its typed arrays sent back as base64 float32
RUN = """async ({ src, vds, cases }) => {
  const m = await import(URL.createObjectURL(new Blob([src], { type: "text/javascript" })));
  const bytes = (s) => { const b = atob(s), u = new Uint8Array(b.length);
    for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i); return new DataView(u.buffer); };
  const decoded = {};
  for (const [id, v] of Object.entries(vds)) decoded[id] = m.decode(JSON.parse(v.header), v.buffers.map(bytes));
  const b64 = (a) => { const u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength); let s = "";
    for (let i = 0; i < u.length; i += 8192) s += String.fromCharCode(...u.subarray(i, i + 8192)); return btoa(s); };
  const plain = (x) => (ArrayBuffer.isView(x) ? { f4: b64(new Float32Array(x)) } : Array.isArray(x) ? x.map(plain)
    : x && typeof x === "object" ? Object.fromEntries(Object.entries(x).map(([k, v]) => [k, plain(v)])) : x);
  return JSON.stringify(cases.map((c) => plain(m.resolve(decoded[c.vd].layouts[c.view], decoded[c.vd], c.sel))));
}"""


@pytest.fixture(scope="module")
def table(small):
    vds, cases = layout_cases(small, bv.count_params(small))
    want = [panels.resolve(vds[c["vd"]], c["view"], dict(c["sel"])) for c in cases]
    return vds, cases, want


def test_every_view_has_enough_cases(table):
    _, cases, _ = table
    per_view = collections.Counter(c["view"] for c in cases)
    assert set(per_view) == set(data.VIEWS)
    assert min(per_view.values()) >= MIN_CASES, per_view
    assert {c["input"] for c in cases} == {"short", "long", "one"}
    assert {c["sel"]["pair_filter"] for c in cases if c["input"] == "one"} == {"all"}  # what one sentence offers


def js_resolve(vds, cases, want) -> list[dict]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    sent = {}
    for vid, vd in vds.items():
        header, buffers = codec.encode(vd)  # every array as float32, as the notebook gets short inputs
        sent[vid] = dict(header=codec.to_json(header), buffers=[base64.b64encode(b).decode("ascii") for b in buffers])
    js_cases = [dict(vd=c["vd"], view=c["view"], sel=w["selection"]) for c, w in zip(cases, want)]
    src = (export.ASSETS / "app.js").read_text(encoding="utf-8")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="bvl-chromium-"), executable_path=CHROMIUM,
                                                   headless=True, args=ARGS)
        try:
            page = ctx.new_page()
            page.set_content("<!DOCTYPE html><html><body></body></html>")
            return json.loads(page.evaluate(RUN, dict(src=src, vds=sent, cases=js_cases)))
        finally:
            ctx.close()


def as_python(x):
    """A value app.js gave back, with its float32 arrays as numpy."""
    if isinstance(x, dict) and set(x) == {"f4"}:
        return np.frombuffer(base64.b64decode(x["f4"]), dtype="<f4").astype(np.float64)
    if isinstance(x, dict):
        return {k: as_python(v) for k, v in x.items()}
    if isinstance(x, list):
        return [as_python(v) for v in x]
    return x


def js_panel(p: dict) -> dict:
    """app.js's panel in panels.resolve's form: a map as z [R, C] (the drawing reads it flat)."""
    p = dict(p)
    if "values" in p and p["type"] == "heatmap":
        shape = (p.pop("R"), p.pop("C"))
        p["z"] = np.reshape(p.pop("values"), shape)
        if p.get("raw") is not None:
            p["raw"] = np.reshape(p["raw"], shape)
    for s in p.get("series") or []:
        s["z"] = np.reshape(s["z"], (len(p["left"]), len(p["right"])))
    return p


def same(got, want, where: str) -> None:
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        want = np.asarray(want, dtype=np.float64)
        got = np.asarray([np.nan if v is None else v for v in np.ravel(got)] if isinstance(got, list) else got,
                         dtype=np.float64).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=where)
    elif isinstance(want, dict):
        keys = {k for k in set(got) | set(want) if not (got.get(k) is None and want.get(k) is None)}
        for k in keys:
            same(got.get(k), want.get(k), f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=RTOL, abs=ATOL, nan_ok=True), where
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.browser
def test_app_js_resolves_every_case_as_python_does(table):
    vds, cases, want = table
    got = [as_python(g) for g in js_resolve(vds, cases, want)]
    assert len(got) == len(cases)
    for c, g, w in zip(cases, got, want):
        where = f"{c['view']} {c['input']} {c['vd']} {c['sel']}"
        for k in panels.FIGURE:
            same(g[k], w[k], f"{where} {k}")
        assert len(g["panels"]) == len(w["panels"]), where
        for i, (gp, wp) in enumerate(zip(g["panels"], w["panels"])):
            same(js_panel(gp), wp, f"{where} panel {i}")


# numbers where printing can go two ways: ties (toFixed rounds them away from zero, Python to the even digit), the
# edges of the exponent form, a tiny number at 2 digits (Python prints 0.00), a quotient (the neuron view's q.k)
NUMBERS = [(0.0625, 3, 1), (-0.0625, 3, 1), (0.1875, 3, 1), (0.125, 2, 1), (2.5, 0, 1), (0.0005, 2, 1),
           (0.0005, 3, 1), (0.001, 3, 1), (-0.000123, 4, 1), (999.9995, 3, 1), (1000.0, 3, 1), (-123456.0, 3, 1),
           (1 / 3, 3, 1), (-2 / 3, 2, 1), (0.0, 3, 1), (7.0, 3, 0.5), (0.9, 3, 0.1767766952966369)]


@pytest.mark.browser
def test_numbers_print_the_same_in_both_interpreters():
    lay = dict(panels=[], summary=panels.join(*[p for x, d, over in NUMBERS for p in (panels.number(x, d, over), "|")]))
    vd = dict(view="params", layouts=dict(params=lay), arrays={})
    want = panels.resolve(vd, "params")
    assert want["summary"].split("|")[:3] == ["0.062", "-0.062", "0.188"]  # Python's own: to the even digit
    got = js_resolve({"numbers": vd}, [dict(vd="numbers", view="params")], [want])
    assert got[0]["summary"] == want["summary"]
