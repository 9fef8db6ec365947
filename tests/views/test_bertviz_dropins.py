"""bertviz's three calls as drop-ins: they display themselves where
they are called and return None, html_action="return" gives the page's HTML, include_layers /
include_heads / display_mode / heads work, neuron_view takes bertviz's signature, a model left in train
mode is told to call model.eval(), attention alone does not claim H and d_k, and a batch of 2 is refused.
The browser side (the three calling patterns in JupyterLab 4) is tests/views/test_bertviz_readme_browser.py."""

from __future__ import annotations

import json
import re
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv

from ..helpers import host

pytest.importorskip("anywidget")

FAMILY = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints" / "family"
TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]", "it", "slept", "[SEP]"]


def attentions(layers=3, heads=4, n=len(TOKENS), batch=1, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((layers, batch, heads, n, n)) ** 3
    return list((a / a.sum(-1, keepdims=True)).astype(np.float32))


@pytest.fixture
def shown(monkeypatch):
    import IPython.display
    out = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: out.append(obj))
    return out


def page_state(page: str) -> dict:
    return json.loads(re.search(r'id="bvl-data">(.*?)</script>', page, re.S).group(1))["state"]


@pytest.mark.parametrize("call", ["head_view", "model_view"])
def test_each_call_displays_itself_and_returns_none(call, shown):
    assert getattr(bv.views, call)(attentions(), TOKENS) is None
    assert len(shown) == 1 and type(shown[0]).__name__ == "Explorer"
    assert shown[0].tab == call.split("_")[0]


def test_html_action_return_gives_the_page_and_displays_nothing(shown):
    out = bv.views.head_view(attentions(), TOKENS, layer=2, html_action="return")
    assert not shown
    assert out.data.startswith("<!DOCTYPE html>") and "</html>" in out.data
    state = page_state(out.data)
    assert (state["tab"], state["layer"]) == ("head", 2)
    assert "srcdoc=" in out._repr_html_()  # displayed, it shows the page in an iframe
    with pytest.raises(ValueError, match="html_action must be 'view'.*or 'return'"):
        bv.views.model_view(attentions(), TOKENS, html_action="show")


def test_include_layers_and_heads_restrict_what_the_page_shows(shown):
    bv.views.model_view(attentions(), TOKENS, include_layers=[1, 2], include_heads=[0, 3], display_mode="light")
    w = shown.pop()
    assert (w.info["layers_shown"], w.info["heads_shown"], w.info["mode"]) == ([1, 2], [0, 3], "light")
    assert w.layer == 1  # the first layer shown
    with pytest.raises(ValueError, match="layer 0 is not among those shown"):
        w.layer = 0
    bv.views.head_view(attentions(), TOKENS, include_layers=[2], heads=[1])
    w = shown.pop()
    assert (w.layer, w.heads) == (2, [1])
    with pytest.raises(ValueError, match="include_layers= holds 7; each must be a layer index 0..2"):
        bv.views.head_view(attentions(), TOKENS, include_layers=[0, 7])
    with pytest.raises(ValueError, match="head 2 is not among those shown"):
        bv.views.head_view(attentions(), TOKENS, include_heads=[0, 1], heads=[2])
    with pytest.raises(ValueError, match="display_mode must be 'light' or 'dark'"):
        bv.views.model_view(attentions(), TOKENS, display_mode="dim")
    assert not shown  # nothing is displayed when the call is refused


def test_neuron_view_takes_bertvizs_signature_with_a_bertviz_lite_model(small, shown):
    assert bv.views.neuron_view(small, "bert", None, "the cat sat", "it slept", "dark", 1, 2) is None
    w = shown.pop()
    assert (w.tab, w.layer, w.head, w.info["mode"]) == ("neuron", 1, 2, "dark") and w.trace.has_pair
    with pytest.raises(ValueError, match="needs sentence_a"):
        bv.views.neuron_view(small, "bert", None, "")


class FakeHF:
    """A transformers model or tokenizer as neuron_view reads it: save_pretrained writes its files (here a
    checkpoint transformers saved, tests/fixtures/checkpoints/family)."""

    def __init__(self, folder, files):
        self.folder, self.files = folder, files

    def save_pretrained(self, target):
        for name in self.files:
            if (self.folder / name).exists():
                shutil.copy(self.folder / name, Path(target) / name)


def test_neuron_view_traces_a_transformers_model_through_the_package(shown):
    folder = FAMILY / "bert_seqcls"
    model = FakeHF(folder, ["config.json", "model.safetensors"])
    tokenizer = FakeHF(folder, ["vocab.txt", "tokenizer.json", "tokenizer_config.json"])
    bv.views.neuron_view(model, "bert", tokenizer, "the cat sat", "it slept", layer=1)
    w = shown.pop()
    ours = bv.load(folder).trace("the cat sat", pair="it slept")
    np.testing.assert_array_equal(host(w.trace.get("attn.q", layer=1)), host(ours.get("attn.q", layer=1)))
    with pytest.raises(bv.BertVizError, match="runs the model types albert, bert.*got model_type 'gpt2'"):
        bv.views.neuron_view(model, "gpt2", tokenizer, "hi")
    broken = FakeHF(folder, ["model.safetensors"])  # no config.json: not a checkpoint the package can load
    with pytest.raises(bv.BertVizError, match="cannot load this FakeHF"):
        bv.views.neuron_view(broken, "bert", tokenizer, "hi")
    with pytest.raises(TypeError, match="tokenizer must be a Hugging Face transformers tokenizer"):
        bv.views.neuron_view(model, "bert", None, "hi")


@pytest.fixture
def fake_transformers(monkeypatch):
    """transformers' progress-bar switch as its save_pretrained reads it (transformers.utils.logging: tqdm,
    is_progress_bar_enabled, enable_progress_bar, disable_progress_bar, the last two also switching
    huggingface_hub's bars), installed in sys.modules; transformers itself is never a test dependency."""
    import huggingface_hub.utils as hub
    import tqdm as tqdm_lib
    logging = types.ModuleType("transformers.utils.logging")
    state = {"on": True}
    logging.is_progress_bar_enabled = lambda: state["on"]

    def switch(on):
        state["on"] = on
        (hub.enable_progress_bars if on else hub.disable_progress_bars)()
    logging.enable_progress_bar = lambda: switch(True)
    logging.disable_progress_bar = lambda: switch(False)
    logging.tqdm = lambda it, **kw: tqdm_lib.tqdm(it, file=sys.stderr, **kw) if state["on"] else it
    utils = types.ModuleType("transformers.utils")
    utils.logging = logging
    package = types.ModuleType("transformers")
    package.utils = utils
    for name, module in (("transformers", package), ("transformers.utils", utils),
                         ("transformers.utils.logging", logging)):
        monkeypatch.setitem(sys.modules, name, module)
    hub_was_off = hub.are_progress_bars_disabled()
    yield logging
    (hub.disable_progress_bars if hub_was_off else hub.enable_progress_bars)()


class FakeHFModel(FakeHF):
    """A transformers model: save_pretrained draws transformers' bar ("Writing model shards") through
    transformers.utils.logging.tqdm, as PreTrainedModel.save_pretrained does; name_or_path and config as
    transformers sets them (either may be missing or empty)."""

    def __init__(self, folder, files, name_or_path=None, config=None):
        super().__init__(folder, files)
        if name_or_path is not None:
            self.name_or_path = name_or_path
        if config is not None:
            self.config = config

    def save_pretrained(self, target):
        from transformers.utils import logging
        for _ in logging.tqdm(["model.safetensors"], desc="Writing model shards"):
            super().save_pretrained(target)


def hf_pair(**model):
    folder = FAMILY / "bert_seqcls"
    return (FakeHFModel(folder, ["config.json", "model.safetensors"], **model),
            FakeHF(folder, ["vocab.txt", "tokenizer.json", "tokenizer_config.json"]))


def test_neuron_view_leaves_no_progress_bar_and_puts_the_switches_back(shown, fake_transformers, capsys, tmp_path):
    import huggingface_hub.utils as hub
    model, tokenizer = hf_pair()
    model.save_pretrained(tmp_path)  # the fake draws the bar as transformers does
    assert "Writing model shards" in capsys.readouterr().err
    bv.views.neuron_view(model, "bert", tokenizer, "the cat sat")
    captured = capsys.readouterr()
    assert "Writing model shards" not in captured.err + captured.out and len(shown) == 1
    assert fake_transformers.is_progress_bar_enabled() and not hub.are_progress_bars_disabled()
    hub.disable_progress_bars()  # the user's own choices are kept: huggingface_hub's bars off ...
    bv.views.neuron_view(model, "bert", tokenizer, "the cat sat")
    assert fake_transformers.is_progress_bar_enabled() and hub.are_progress_bars_disabled()
    fake_transformers.disable_progress_bar()  # ... and transformers' off
    bv.views.neuron_view(model, "bert", tokenizer, "the cat sat")
    assert not fake_transformers.is_progress_bar_enabled() and hub.are_progress_bars_disabled()
    assert "Writing model shards" not in capsys.readouterr().err


@pytest.mark.parametrize("model, name", [
    (dict(name_or_path="google-bert/bert-base-uncased"), "google-bert/bert-base-uncased"),
    (dict(name_or_path="", config=types.SimpleNamespace(name_or_path="prajjwal1/bert-tiny", model_type="bert")),
     "prajjwal1/bert-tiny"),
    (dict(config=types.SimpleNamespace(_name_or_path="my-bert", model_type="bert")), "my-bert"),
    (dict(config=types.SimpleNamespace(_name_or_path="", model_type="bert")), "bert"),  # made from a config
    ({}, "bert"),
])
def test_neuron_view_is_titled_with_the_models_own_name(shown, fake_transformers, model, name):
    model, tokenizer = hf_pair(**model)
    bv.views.neuron_view(model, "bert", tokenizer, "the cat sat", "it slept")
    w = shown.pop()
    assert w.info["title"] == f"{name}: the cat sat | it slept" and w.info["model"] == name
    page = bv.views.neuron_view(model, "bert", tokenizer, "the cat sat", html_action="return")
    assert page.title == f"{name}: the cat sat" and "bertviz-lite-hf-" not in page.data


def test_bertviz_neuron_view_show_is_a_drop_in(shown):
    import inspect

    from bertviz_lite.neuron_view import show  # bertviz: from bertviz.neuron_view import show
    bertviz = [("model", inspect.Parameter.empty), ("model_type", inspect.Parameter.empty),
               ("tokenizer", inspect.Parameter.empty), ("sentence_a", inspect.Parameter.empty),
               ("sentence_b", None), ("display_mode", "dark"), ("layer", None), ("head", None),
               ("html_action", "view")]
    assert [(p.name, p.default) for p in inspect.signature(show).parameters.values()] == bertviz
    model, tokenizer = FakeHF(FAMILY / "bert_seqcls", ["config.json", "model.safetensors"]), \
        FakeHF(FAMILY / "bert_seqcls", ["vocab.txt", "tokenizer.json", "tokenizer_config.json"])
    assert show(model, "bert", tokenizer, "the cat sat", "it slept", layer=1, head=1) is None
    w = shown.pop()
    assert (w.tab, w.layer, w.head, w.info["mode"]) == ("neuron", 1, 1, "dark")
    page = show(model, "bert", tokenizer, "the cat sat", display_mode="light", html_action="return")
    assert page.data.startswith("<!DOCTYPE html>") and not shown


def test_bv_neuron_view_still_calls_after_the_module_is_imported(shown):
    # importing bertviz_lite.neuron_view binds the module to bv.neuron_view, where the function was
    import bertviz_lite.neuron_view  # noqa: F401
    tr = bv.load("random", seed=0, config={"hidden_size": 32, "num_layers": 2, "num_heads": 2,
                                           "ffn_size": 64}).trace("the cat sat")
    assert bv.neuron_view(tr, layer=1) is None
    assert (shown[-1].tab, shown[-1].layer) == ("neuron", 1)
    from bertviz_lite import neuron_view
    assert neuron_view(tr, head=1) is None and shown[-1].head == 1


@pytest.mark.parametrize("call", ["head_view", "model_view", "from_attentions"])
def test_train_mode_attention_is_told_to_call_model_eval(call):
    # dropout (p = 0.1) zeroes some weights and scales the rest by 1 / 0.9: rows non-negative, summing to 1 on
    # average but not each; that is a model left in train mode, not scores, and the message must say which
    run = {"head_view": bv.views.head_view, "model_view": bv.views.model_view,
           "from_attentions": bv.Trace.from_attentions}[call]
    rng = np.random.default_rng(1)
    att = attentions()
    dropped = [np.where(rng.random(a.shape) < 0.1, 0, a / 0.9).astype(np.float32) for a in att]
    sums = dropped[0].sum(-1)
    assert dropped[0].min() >= 0 and abs(sums - 1).max() > 1e-2 and abs(sums.mean() - 1) < 0.1  # what dropout gives
    with pytest.raises(ValueError, match=r"dropout.*call model\.eval\(\)") as told:
        run(dropped, TOKENS)
    assert "after the softmax" not in str(told.value) and "scores" not in str(told.value)
    with pytest.raises(ValueError, match=r"after the softmax, not the scores") as told:  # scores: named as such
        run([np.log(a) for a in att], TOKENS)
    assert "eval()" not in str(told.value)


def test_attention_alone_does_not_state_h_or_d_k(shown):
    bv.views.head_view(attentions(heads=12), TOKENS)
    bundle = shown.pop()._repr_mimebundle_()
    text = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/plain"]
    assert "H = " not in text and "d_k =" not in text and "H and d_k unknown" in text
    assert "3 layers, 12 heads" in text


def test_a_batch_of_two_is_refused_unless_an_example_is_named():
    att = attentions(batch=2)
    with pytest.raises(ValueError, match=r"batch of 2 examples.*batch_index=i"):
        bv.views.model_view(att, TOKENS)
    second = bv.Trace.from_attentions(att, TOKENS, batch_index=1)
    np.testing.assert_array_equal(np.asarray(second.get("attn.probs", layer=0)), att[0][1])


def test_the_all_heads_head_view_draws_the_strongest_weights_last_and_shares_the_faint_floor():
    from bertviz_lite.views.model import panels
    rng = np.random.default_rng(2)
    series = [dict(z=rng.random((5, 5)).astype(np.float32)) for _ in range(12)]
    order = panels.line_order(series, 0.02)
    weights = [w for w, *_ in order]
    assert weights == sorted(weights) and len(order) == sum(int((s["z"] >= 0.02).sum()) for s in series)
    assert order[-1][0] == max(float(s["z"].max()) for s in series)  # the strongest of any head is on top
    a0, a1 = panels.LINE_ALPHA
    assert panels.line_alpha(panels.LINE_ALPHA, 0.0, 12) == pytest.approx(a0 / 12)  # faint lines fade with 12 heads
    assert panels.line_alpha(panels.LINE_ALPHA, 0.0, 1) == pytest.approx(a0)  # one head: as before
    assert panels.line_alpha(panels.LINE_ALPHA, 1.0, 12) == pytest.approx(min(1.0, a0 / 12 + a1))
