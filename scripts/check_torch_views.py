"""bertviz's README call with real torch tensors that track gradients (torch stays out of the test
dependencies; tests/test_bertviz_calls.py uses a stand-in that behaves the same way).

    /work/torchvenv/bin/python scripts/check_torch_views.py [SITE_PACKAGES_OF_THE_VIEWS_VENV]

Runs a small random transformers BertModel with output_attentions=True (no download), then passes
`outputs.attentions` (tensors with requires_grad=True, float32 and bfloat16) to
`Trace.from_attentions`, `explore`, `head_view` and `model_view`. The optional argument adds a
virtual environment's site-packages after this interpreter's own (for anywidget, scipy, ...).
Prints one line per check and exits 1 on the first failure.
"""

import argparse
import sys
from pathlib import Path

if __name__ == "__main__":  # the arguments first: --help or a wrong argument imports nothing and runs nothing
    _ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _ap.add_argument("site_packages", nargs="?", help="a virtual environment's site-packages, searched after this "
                     "interpreter's own (for anywidget, scipy, ...)")
    _SITE = _ap.parse_args().site_packages
else:
    _SITE = None

import torch  # noqa: E402, I001  (torch first: its own numpy wins)

if _SITE:
    sys.path.append(_SITE)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

import bertviz_lite as bv  # noqa: E402


def main() -> int:
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
    w = bv.views.head_view(att, tokens, sentence_b_start=6)
    assert w.tab == "head" and w.info["tokens"][3] == "##s" and w.info["has_pair"], (w.tab, w.info["tokens"])
    print(f"ok: head_view -> {w!r}")
    m = bv.views.model_view(att, tokens)
    assert m.tab == "model"
    print(f"ok: model_view -> {m!r}")
    e = bv.explore(att, tokens=tokens)
    assert "neuron" not in e.info["views"] and "params" not in e.info["views"]
    print("ok: explore(attention, tokens=) hides the tabs attention alone cannot fill:", e.info["views"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
