"""bertviz's README call with real torch tensors that track gradients (torch stays out of the test
dependencies; tests/views/test_bertviz_calls.py uses a stand-in that behaves the same way). A manual check:

    /path/to/python-with-torch scripts/check_torch_views.py [SITE_PACKAGES_OF_THE_VIEWS_VENV]

or, through the test suite, `BVL_TORCH_PYTHON=/path/to/python-with-torch .venv/bin/python -m pytest
tests/views/test_bertviz_calls.py -m slow -k real_torch` (skipped, saying so, where BVL_TORCH_PYTHON is not set).

Runs a small random transformers BertModel with output_attentions=True (no download), then passes
`outputs.attentions` (tensors with requires_grad=True, float32 and bfloat16) to
`Trace.from_attentions`, `explore`, `head_view` and `model_view`. The optional argument adds a
virtual environment's site-packages after this interpreter's own (for anywidget, scipy, ...).
Prints one line per check and exits 1 on the first failure.
"""

import argparse
import sys
from pathlib import Path


def arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site_packages", nargs="?", help="a virtual environment's site-packages, added after this "
                                                     "interpreter's own (for anywidget, scipy, ...)")
    return ap.parse_args(argv)


def fail(what: str) -> int:
    print(f"FAILED: {what}")
    return 1


def main(argv=None) -> int:
    args = arguments(argv)  # first: --help and a wrong argument need no torch
    import torch  # before the rest: its own numpy wins
    if args.site_packages:
        sys.path.append(args.site_packages)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import numpy as np
    from transformers import BertConfig, BertModel

    import bertviz_lite as bv
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, attn_implementation="eager")
    model = BertModel(cfg)  # training mode off, gradients on: what bertviz's README example passes
    model.eval()
    tokens = ["[CLS]", "the", "cat", "##s", "sat", "[SEP]", "it", "[SEP]"]
    ids = torch.randint(5, 100, (1, len(tokens)))
    outputs = model(ids, output_attentions=True)
    att = outputs.attentions
    assert att[0].requires_grad, "the attention should track gradients (the case bertviz users hit)"
    try:
        np.asarray(att[0])
        print("note: this torch lets np.asarray read a tensor that requires grad")
    except (TypeError, RuntimeError) as e:
        print(f"ok: np.asarray refuses it as expected ({type(e).__name__})")
    tr = bv.Trace.from_attentions(att, tokens, sentence_b_start=6)
    np.testing.assert_allclose(tr.get("attn.probs", layer=1), att[1][0].detach().numpy(), rtol=1e-6)
    print("ok: Trace.from_attentions reads grad-tracking tensors")
    tr16 = bv.Trace.from_attentions([a.to(torch.bfloat16) for a in att], tokens)
    np.testing.assert_allclose(tr16.get("attn.probs", layer=0), att[0][0].detach().numpy(), atol=1e-2)
    print("ok: bfloat16 tensors (NumPy has no bfloat16) are widened")
    try:
        import anywidget  # noqa: F401
    except ImportError:
        print("skipped: head_view/model_view need anywidget (pass the views venv's site-packages)")
        return 0
    import IPython.display
    shown = []
    IPython.display.display = lambda obj, **kw: shown.append(obj)  # what bertviz's calls display
    assert bv.views.head_view(att, tokens, sentence_b_start=6) is None  # bertviz's: displayed, returns None
    w = shown[-1]
    assert w.tab == "head" and w.info["tokens"][3] == "##s" and w.info["has_pair"], (w.tab, w.info["tokens"])
    print(f"ok: head_view displays {w!r}")
    assert bv.views.model_view(att, tokens) is None and shown[-1].tab == "model"
    print(f"ok: model_view displays {shown[-1]!r}")
    page = bv.views.model_view(att, tokens, html_action="return")
    assert page.data.startswith("<!DOCTYPE html>")
    print("ok: html_action='return' gives the page's HTML")
    # a model left in training mode: dropout on the weights is named as such
    model.train()
    cfg_drop = model(ids, output_attentions=True).attentions
    try:
        bv.views.head_view(cfg_drop, tokens)
        return fail("train-mode attention was accepted")
    except ValueError as e:
        assert "model.eval()" in str(e), e
        print("ok: train mode ->", str(e)[:100])
    model.eval()
    # bertviz's neuron_view call with the transformers model and its tokenizer, traced through bertviz-lite
    import tempfile
    from transformers import BertTokenizerFast
    with tempfile.TemporaryDirectory() as d:
        vocab = Path(d) / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "it", "slept"]
                                    + [f"w{i}" for i in range(90)]) + "\n")
        tok = BertTokenizerFast(vocab=str(vocab))  # transformers 5 ignores vocab_file=
        assert bv.views.neuron_view(model, "bert", tok, "the cat sat", "it slept", layer=1, head=2) is None
        nv = shown[-1]
        assert (nv.tab, nv.layer, nv.head) == ("neuron", 1, 2), (nv.tab, nv.layer, nv.head)
        enc = tok("the cat sat", "it slept", return_tensors="pt")
        ref = model(**enc, output_attentions=True).attentions
        np.testing.assert_allclose(nv.trace.get("attn.probs", layer=1), ref[1][0].detach().numpy(), atol=1e-5)
        print("ok: neuron_view(model, 'bert', tokenizer, a, b) traces it; attention equals transformers' to 1e-5")
    from transformers import GPT2Config, GPT2Model
    try:
        bv.views.neuron_view(GPT2Model(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)), "gpt2", tok, "hi")
        return fail("gpt2 accepted")
    except bv.BertVizError as e:
        print("ok: gpt2 ->", str(e)[:120])
    e = bv.explore(att, tokens=tokens)
    assert "neuron" not in e.info["views"] and "params" not in e.info["views"]
    print("ok: explore(attention, tokens=) hides the tabs attention alone cannot fill:", e.info["views"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
