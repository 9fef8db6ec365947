"""The neuron view's sentence-pair filter and hover in a real headless chromium: on an
exported page of a pair, "A->B" draws only sentence B's tokens as keys and offers only A's as queries;
hovering a query token's label selects it (bertviz's hover), and the select still does. A single sentence
gets no filter."""

from __future__ import annotations

import pytest

from bertviz_lite.views.model import data
from bertviz_lite.views import export_html

from ..helpers import browser_or_skip, chromium_context

pytestmark = pytest.mark.browser

sync_api = browser_or_skip()
DRAWN = "() => { const s = document.querySelector('.bvl-x-section[data-tab=neuron]'); " \
        "return s.fig && {query: s.bvl.query, pair: s.bvl.pair, panels: s.fig.panels.map((p) => " \
        "({name: p.name, rows: p.rows, labels: p.y_labels || p.labels}))}; }"


@pytest.fixture(scope="module")
def browser():
    yield from chromium_context(sync_api)


def open_neuron(browser, path):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined", timeout=30_000)
    page.click(".bvl-x-tab[data-tab='neuron']")
    page.wait_for_function("() => document.querySelector('.bvl-neuron')?.bvl !== undefined", timeout=20_000)
    return page, errors


def test_a_to_b_draws_only_bs_keys_and_a_hover_picks_the_query(small, browser, tmp_path):
    tr = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=24)
    segs = [tr.segments[i] for i in data.real_positions(tr)]
    a, b = ([i for i, s in enumerate(segs) if s == side] for side in (0, 1))
    labels = data.token_labels(tr)
    page, errors = open_neuron(browser, export_html(tr, tmp_path / "pair.html"))
    page.select_option(".bvl-neuron-token", str(b[0]))  # a query in B: A->B leaves it out
    page.select_option(".bvl-neuron-pair", "A->B")
    page.wait_for_function(DRAWN.replace("return s.fig &&", "return s.bvl.pair === 'A->B' &&"))
    got = page.evaluate(DRAWN)
    by = {p["name"]: p for p in got["panels"]}
    assert by["neuron-k"]["rows"] == b and by["neuron-k"]["labels"] == [labels[j] for j in b]
    assert by["neuron-weights"]["labels"] == [labels[j] for j in b]
    assert by["neuron-q"]["rows"] == a and got["query"] == a[0]  # the filter's first query
    offered = page.evaluate("() => [...document.querySelectorAll('.bvl-neuron-token option')]"
                            ".filter((o) => !o.hidden).map((o) => +o.value)")
    assert offered == a
    # hover the label of A's fourth token in the queries' map: it becomes the query
    box = page.locator(".bvl-neuron-q-heat").bounding_box()
    labels_box = page.locator(".bvl-x-section[data-tab=neuron] .bvl-row-labels").first.bounding_box()
    cell = box["height"] / len(a)
    page.mouse.move(labels_box["x"] + labels_box["width"] / 2, box["y"] + 3.5 * cell)
    page.wait_for_function(f"() => document.querySelector('.bvl-x-section[data-tab=neuron]').bvl.query === {a[3]}")
    assert f"query {labels[a[3]]}" in page.inner_text(".bvl-x-section[data-tab='neuron'] .bvl-x-formula-title")
    page.select_option(".bvl-neuron-token", str(a[1]))  # the select still picks one (keyboard users)
    page.wait_for_function(f"() => document.querySelector('.bvl-x-section[data-tab=neuron]').bvl.query === {a[1]}")
    assert not errors, errors
    page.close()


def test_a_single_sentence_has_no_filter(small, browser, tmp_path):
    page, errors = open_neuron(browser, export_html(small.trace("The cat sat on the mat."), tmp_path / "one.html"))
    assert page.locator(".bvl-neuron-pair").count() == 0 and page.locator(".bvl-neuron-token").count() == 1
    assert not errors, errors
    page.close()
