"""The exported page's size: a 13-token MiniLM page with the ledger is at most 0.5 MB.

The page packs every payload in one gzip stream (codec.pack_page), keeps each buffer once (the model view's
maps are the attention view's, the step-through's q, k, scores and weights are the neuron and attention
views'), filters rows losslessly, and the neuron view prints the model's own scores and weights (so its q
and k travel at 8 bits, drawn as colours)."""

from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.backend import to_host
from bertviz_lite.views.wire import codec, export
from bertviz_lite.views.model import data, panels

PAGE_BUDGET = 500_000  # bytes: at most 0.5 MB for this page
SENTENCE = "The children walked to school in the rain every day."  # 13 MiniLM tokens with [CLS] and [SEP]


@pytest.fixture(scope="module")
def minilm_page(minilm, tmp_path_factory):
    tr = minilm.trace(SENTENCE)
    path = bv.export_html(tr, tmp_path_factory.mktemp("page") / "page.html", ledger=bv.count_params(minilm),
                          progress=False)
    return tr, path, export.read_page(path.read_text(encoding="utf-8"))


def test_a_13_token_minilm_page_is_at_most_half_a_megabyte(minilm_page):
    tr, path, page = minilm_page
    assert tr.n_real == 13
    assert path.stat().st_size <= PAGE_BUDGET, path.stat().st_size
    # it still holds every view: every step, every layer's neuron view, every token
    keys = set(page["payloads"])
    for step in data.stepper_steps(tr):
        assert codec.request_key("step", {"key": step}) in keys
    for layer in range(tr.num_layers):
        assert codec.request_key("neuron", {"layer": layer}) in keys
    for q in range(tr.n_real):
        assert codec.request_key("token", {"query": q}) in keys


def test_the_packed_page_gives_back_what_was_encoded(minilm_page):
    tr, _, page = minilm_page
    for view, args in [("attention", dict(layer=2, kind="probs")), ("model", dict(kind="scores")),
                       ("neuron", dict(layer=3)), ("step", dict(key="layer.1.attn.q")), ("token", dict(query=4))]:
        vd = codec.from_text(page["payloads"][codec.request_key(view, args)])
        want = data.view_data(tr, view, **args)["arrays"]
        for name, a in vd["arrays"].items():
            spec = next(s for s in page["payloads"][codec.request_key(view, args)]["header"]["arrays"]
                        if s["name"] == name)
            top = codec.TOPS.get(spec["dtype"])
            span = np.nanmax(want[name]) - np.nanmin(want[name])
            atol = span / (top - 1) + 1e-6 * max(1.0, np.nanmax(np.abs(want[name]))) if top else 1e-6
            np.testing.assert_allclose(a, want[name], atol=atol, err_msg=f"{view} {name}")


def test_each_buffer_is_kept_once(minilm_page):
    """The model view's maps are every layer's attention maps back to back; the neuron view's scores and
    weights are the attention maps too; the step-through's q and k are the neuron view's."""
    tr, path, _ = minilm_page
    text = path.read_text(encoding="utf-8")
    part = json.loads(text.split('id="bvl-data">', 1)[1].split("</script>", 1)[0])
    blob = gzip.decompress(base64.b64decode(part["page"]))
    n = int.from_bytes(blob[:4], "little")
    spans = {k: p["data"] for k, p in json.loads(blob[4:4 + n])["payloads"].items()}
    stored = len(blob) - 4 - n
    assert stored < sum(size for s in spans.values() for _, size in s)

    def inside(span, outer):
        return outer[0] <= span[0] and span[0] + span[1] <= outer[0] + outer[1]

    model = spans[codec.request_key("model", {"kind": "probs"})][0]
    for layer in range(tr.num_layers):
        att = spans[codec.request_key("attention", {"layer": layer, "kind": "probs"})][0]
        assert inside(att, model)
        neuron = dict(zip(("q", "k", "scores", "weights"), spans[codec.request_key("neuron", {"layer": layer})]))
        assert neuron["weights"] == att
        assert neuron["q"] == spans[codec.request_key("step", {"key": f"layer.{layer}.attn.q"})][0]


@pytest.mark.parametrize("dtype, shape", [("u1", (3, 5, 7)), ("u2", (2, 4, 4)), ("u2", (9,)), ("f4", (3, 3))])
def test_the_rows_filter_is_lossless(dtype, shape):
    rng = np.random.default_rng(len(shape))
    top = codec.TOPS.get(dtype, 2**16)
    raw = rng.integers(0, top, size=shape).astype(codec.NUMPY[dtype]).tobytes()
    spec = dict(dtype=dtype, shape=list(shape))
    assert codec.rows_filter(codec.rows_filter(raw, spec), spec, undo=True) == raw


def test_the_neuron_view_prints_the_models_own_numbers(minilm_page):
    tr, _, page = minilm_page
    vd = codec.from_text(page["payloads"][codec.request_key("neuron", {"layer": 1})])
    header = page["payloads"][codec.request_key("neuron", {"layer": 1})]["header"]
    spec = {s["name"]: s["dtype"] for s in header["arrays"]}
    assert spec == {"q": "u1", "k": "u1", "scores": "u2", "weights": "u2"}
    num = panels.neuron_numbers(vd, head=2, query=3)
    probs = to_host(tr.get("attn.probs", 1))
    want = probs.reshape(-1, *probs.shape[-3:])[0][2, 3, :tr.n_real]
    np.testing.assert_allclose(num["weights"], want, atol=1 / 65534 + 1e-7)


def test_a_long_page_packs_smaller_than_its_payloads_one_by_one(small):
    """Above 128 tokens (block means, 8-bit maps) the packed stream is still smaller than the payloads
    compressed one by one (the page's former format), so a long page never grows."""
    tr = small.trace(" ".join(["the cat sat on the mat"] * 25), pad_to=160)
    assert tr.n_real > export.FULL_UP_TO
    payloads, layouts, _ = export.build_payloads(tr)
    packed = len(codec.pack_page(payloads, layouts))
    assert packed < len(codec.to_json(dict(payloads=payloads, layouts=layouts)))
    back, back_layouts, _ = codec.unpack_page(codec.pack_page(payloads, layouts))
    assert back_layouts == json.loads(codec.to_json(codec.float32_text(layouts)))
    for key in (codec.request_key("attention", {"layer": 1, "kind": "probs"}),
                codec.request_key("token", {"query": 2})):
        a, b = codec.from_text(payloads[key]), codec.from_text(back[key])
        for name in a["arrays"]:
            np.testing.assert_allclose(b["arrays"][name], a["arrays"][name], rtol=1e-6, atol=1e-6)


def test_the_page_inlines_every_code_line_of_app_js_in_order(minilm_page):
    # the page drops app.js's comments and indentation (its size budget), nothing else
    _, path, _ = minilm_page
    text = path.read_text(encoding="utf-8")
    script = text.split('<script type="module">', 1)[1].split("</script>", 1)[0]
    text = (export.ASSETS / "app.js").read_text(encoding="utf-8")
    source = text.split("*/", 1)[1].split("\n")  # after the opening comment block
    assert text.startswith("/*") and "/*" not in text.split("*/", 1)[1]
    code = [export.without_comment(line.strip()) for line in source
            if line.strip() and not line.strip().startswith("//")]
    assert [line for line in script.split("\n") if line][:len(code)] == code
    assert sum(" // " in line for line in code) < 0.1 * sum(" // " in line for line in source)  # trailing ones too
    assert sum(map(len, code)) > 0.75 * len(script)  # most of the page's script is app.js's code



@pytest.mark.parametrize("line, kept", [
    ("let a = 1; // one", "let a = 1;"),
    ('const u = "a // b"; // a string holding one', 'const u = "a // b"; // a string holding one'),
    ("s.replace(/'/g, \"\"); // an odd quote before", "s.replace(/'/g, \"\"); // an odd quote before"),
    ("x = `a // b`;", "x = `a // b`;"),
])
def test_a_trailing_comment_goes_only_where_no_string_is_open(line, kept):
    assert export.without_comment(line) == kept


def test_the_inlined_style_sheet_keeps_every_rule():
    # comments and spaces go; every selector and declaration stays, in order
    source = (export.ASSETS / "app.css").read_text(encoding="utf-8")
    rules = [r for r in re.sub(r"/\*.*?\*/", "", source, flags=re.S).split("}") if r.strip()]
    inlined = [r for r in export.style_sheet().split("}") if r.strip()]
    squash = lambda r: re.sub(r"\s+", "", r)  # noqa: E731
    assert [squash(r) for r in inlined] == [squash(r) for r in rules]
    assert len(export.style_sheet()) < 0.95 * len(source)
