"""The layout language's conformance cases: every view x every pair filter x several layers, heads, queries
(and kinds, step keys, head sets) x a short and a long sentence pair (the long one above limits.LONG_INPUT tokens,
where the model and compare views send block means and the compare view stacks its maps) and one sentence (which
offers only the filter "all", and its layouts carry only that filter's tables). Python's `panels.resolve` and
app.js's `resolve` must give the same panels for each (tests/views/test_layout_conformance.py).

    vds, cases = layout_cases(model)   # vds: {id: view data}; cases: [{"vd": id, "view": ..., "sel": {...}}]
"""

from __future__ import annotations

import itertools

from bertviz_lite.views.model import data, limits, records
from bertviz_lite.views.model.panels import pair_filters

SHORT = ("The cat sat on the mat.", "It was tired.")
# long: past limits.LONG_INPUT tokens, sentence B included
LONG = (" ".join(["the cat sat on the mat and looked at the dog"] * 12), "It was tired of all that.")
ONE = ("The children walked to school in the rain.", None)


def inputs(model) -> dict:
    """name -> (trace, second trace for the compare view: an edited run of the same input)."""
    out = {}
    for name, (a, b) in (("short", SHORT), ("long", LONG), ("one", ONE)):
        tr = model.trace(a, pair=b)
        edited = model.trace(a, pair=b, edits=__import__("bertviz_lite").scale("layer.0.attn.scores", 3.0))
        out[name] = (tr, edited)
    assert out["long"][0].n_real > limits.LONG_INPUT
    return out


def step_keys(tr) -> list[str]:
    """A few step-through keys: per-head tensors, token x feature tensors, the first and the last step."""
    keys = data.stepper_steps(tr)
    picks = [keys[0], keys[-1], "layer.0.attn.probs", "layer.0.attn.q", "layer.1.ffn.out"]
    return [k for k in dict.fromkeys(picks) if k in keys]


def requests(view: str, tr) -> list[dict]:
    """The view data each view is drawn from, in several versions (its record's request words)."""
    L = tr.num_layers
    words = dict(layer=[0, L - 1], kind=data.recorded_kinds(tr), query=[0, 5, tr.n_real - 1], key=step_keys(tr))
    req = records.record(view).request
    return [dict(zip(req, combo)) for combo in itertools.product(*(words[w] for w in req))]


def selections(view: str, tr, args: dict) -> list[dict]:
    """Several selections of one view data: every pair filter, a few heads (or head sets) and queries."""
    H, n = tr.num_heads, tr.n_real
    heads = [[h for h in range(H)], [1], [0, H - 1]] if view == "head" else [None]
    out = []
    offered = pair_filters([tr.segments[i] for i in tr.real_positions])
    for pf, head, hs, q in itertools.product(offered, (0, H - 1), heads, (0, 4, n - 1)):
        if q != 0 and ("query" not in records.record(view).controls or "query" in args):
            continue  # the query is not a selection of this view (or its data's): one is enough
        out.append(dict(args, layer=args.get("layer", 1), head=head, heads=hs, query=args.get("query", q),
                        pair_filter=pf, outline=True))
    return out


def layout_cases(model, ledger=None) -> tuple[dict, list[dict]]:
    vds, cases = {}, []
    for name, (tr, tr_b) in inputs(model).items():
        for view in data.VIEWS:
            src, _, fixed = data.REQUESTS[view]
            for args in requests(view, tr):
                vid = f"{name}:{src}:{sorted(args.items())}:{sorted(fixed.items())}"
                if vid not in vds:
                    vds[vid] = data.view_data(tr, src, trace_b=tr_b, ledger=ledger, **args, **fixed)
                cases += [dict(vd=vid, view=view, sel=sel, input=name) for sel in selections(view, tr, args)]
    return vds, cases
