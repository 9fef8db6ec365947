"""The neuron view's sentence-pair filter (bertviz's "Sentence A -> Sentence B"): its record
offers the filter, a trace shows it only for a pair, and each filter keeps the key tokens (k, q*k, scores,
weights) and offers the query tokens of its sentences, computed here from the trace's own segments. A filter
that leaves the selected query out picks its first query. The numbers shown are the model's, never recomputed."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lite.views.model import data, panels, records

from ..helpers import real_map


@pytest.fixture(scope="module")
def pair(small):
    return small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=24)


def sides(trace) -> dict[str, list[int]]:
    """Each sentence's positions among the real tokens, from the trace's segments."""
    segs = [trace.segments[i] for i in data.real_positions(trace)]
    return {s: [i for i, g in enumerate(segs) if g == side] for s, side in (("A", 0), ("B", 1))}


def test_the_neuron_record_offers_the_filter_and_a_trace_shows_it_only_for_a_pair(small, pair):
    assert "pair_filter" in records.record("neuron").controls
    assert data.facts(pair)["controls"]["neuron"].count("pair_filter") == 1
    assert data.facts(pair)["has_pair"] and len(data.facts(pair)["pair_filters"]) == 5
    one = small.trace("The cat sat on the mat.")
    assert not data.facts(one)["has_pair"] and data.facts(one)["pair_filters"] == ["all"]
    fig = panels.resolve(data.view_data(one, "neuron", layer=0), "neuron", head=1, query=3)
    assert [p["rows"] for p in fig["panels"][:3]] == [list(range(one.n_real))] * 3


@pytest.mark.parametrize("pair_filter", ["all", "A->A", "A->B", "B->A", "B->B"])
def test_each_filter_keeps_its_sentences_keys_and_queries(pair, pair_filter):
    side = sides(pair)
    every = side["A"] + side["B"]
    queries, keys = (every, every) if pair_filter == "all" else (side[s] for s in pair_filter.split("->"))
    vd = data.view_data(pair, "neuron", layer=1)
    labels = data.token_labels(pair)
    asked = side["B"][1]  # a query in B: kept by B->*, "all"; else the filter's first query
    fig = panels.resolve(vd, "neuron", head=2, query=asked, pair_filter=pair_filter)
    q = fig["selection"]["query"]
    assert q == (asked if asked in queries else queries[0])
    by = {p["name"]: p for p in fig["panels"]}
    assert by["neuron-q"]["rows"] == queries and by["neuron-q"]["y_labels"] == [labels[i] for i in queries]
    assert by["neuron-q"]["mark_row"] == queries.index(q)  # the selected query's row, outlined by every renderer
    assert by["neuron-k"]["rows"] == keys == by["neuron-prod"]["rows"]
    assert by["neuron-k"]["y_labels"] == [labels[j] for j in keys]
    for name, key in (("neuron-scores", "attn.scores"), ("neuron-weights", "attn.probs")):
        assert by[name]["labels"] == [labels[j] for j in keys]
        np.testing.assert_allclose(by[name]["values"], real_map(pair, 1, 2, name=key)[q][keys], rtol=1e-6)
    # the summary's strongest key is one of those shown
    shown_best = labels[keys[int(np.argmax(real_map(pair, 1, 2)[q][keys]))]]
    assert f"\u2192 {shown_best}:" in fig["summary"]
