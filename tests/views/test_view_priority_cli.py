"""Views as records: the exported page's build order is the records' priority, cli's --view choices are the
records'; tokens the command line prints are prettified."""

from types import SimpleNamespace

from bertviz_lite import cli
from bertviz_lite.foreign import prettify_token
from bertviz_lite.model import MaskPrediction
from bertviz_lite.views.wire import export
from bertviz_lite.views.model import records


def test_page_order_is_the_records_priority():
    prios = [records.record(v).priority for v in records.PAGE_ORDER]
    assert prios == sorted(prios)
    assert set(records.PAGE_ORDER) == {r.name for r in records.RECORDS if r.priority is not None}
    assert set(export.BUILD) == set(records.PAGE_ORDER)  # one builder per record the page builds


def test_build_payloads_follows_the_records(monkeypatch, small):
    tr = small.trace("The cat sat on the mat.")  # the order is the records', whatever the model's size
    items, _, _ = export.build_payloads(tr)
    first_seen = list(dict.fromkeys(k.split("|")[0] for k in items))
    always = [v for v in records.PAGE_ORDER if records.record(v).priority == 0 and v in first_seen]
    assert first_seen[:len(always)] == always
    # reorder the records: the page follows
    order = ("params",) + tuple(v for v in records.PAGE_ORDER if v != "params")
    monkeypatch.setattr(records, "PAGE_ORDER", order)
    items, _, _ = export.build_payloads(tr)
    assert next(iter(items)).startswith("params|")


def test_cli_views_are_the_records():
    assert cli.VIEWS == tuple(r.name for r in records.RECORDS if not r.second_trace)
    assert "compare" not in cli.VIEWS and "head" in cli.VIEWS
    view = next(a for a in cli._parser()._subparsers._group_actions[0].choices["trace"]._actions if a.dest == "view")
    assert tuple(view.choices) == cli.VIEWS


def test_mask_prediction_reads_as_a_word():
    for raw in ("\u0120Paris", "\u2581Paris", "##ris", "Paris", "[UNK]"):
        p = MaskPrediction(raw, 7, 0.25, 3)
        assert p.token == raw  # the vocabulary's token stays
        assert p.word == prettify_token(raw)
        assert str(p) == f"{prettify_token(raw)} {0.25:.3f}"


def test_cli_prints_prettified_tokens(capsys, monkeypatch):
    raw = ["[CLS]", "\u0120the", "\u2581cat", "##s", "[SEP]"]
    tr = SimpleNamespace(tokens=raw, segments=[0] * 5, mask=[1] * 5, n=5, n_real=5, has_pair=False)
    text = cli.tokens_text(tr, 200)
    for i, t in enumerate(raw):
        assert f"{i}:{prettify_token(t)}" in text
    assert "\u0120" not in text and "\u2581" not in text

    class Stub:
        has_mlm = True

        def fill_mask(self, text, top_k):
            return [[MaskPrediction("\u0120Paris", 11, 0.5, 6), MaskPrediction("\u0120Lyon", 12, 0.25, 6)]]

    monkeypatch.setattr(cli, "_load", lambda args: Stub())
    cli.cmd_fill_mask(SimpleNamespace(text="x", top_k=2), __import__("sys").stdout)
    out = capsys.readouterr().out
    assert out.strip() == f"[MASK] at 6: Paris {0.5:.3f}, Lyon {0.25:.3f}"
