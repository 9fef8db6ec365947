"""No script injected through a sentence runs in the exported page (chromium).
"""

from __future__ import annotations

import pytest

import bertviz_lite as bv
from bertviz_lite.views import export_html
from bertviz_lite.views.model import data

from ..helpers import browser_or_skip, chromium_context


HOSTILE = ('x </script><script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> '
           '<b onmouseover="window.__pwned = 3">bold</b> $1 & "quotes" \u2028 y')


@pytest.fixture(scope="module")
def browser():
    yield from chromium_context(browser_or_skip())


@pytest.mark.browser
def test_no_injected_script_runs_in_the_exported_page(small, tmp_path, browser):
    model = small.variant(name='<img src=x onerror="window.__pwned = 4">')
    tr = model.trace(HOSTILE, pair='<svg onload="window.__pwned = 5">', pad_to=128)
    other = model.trace(HOSTILE, pair='<svg onload="window.__pwned = 5">', pad_to=128, edits=bv.ablate(heads={0: [1]}))
    path = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(model), compare=other,
                       title='</title><script>window.__pwned = 6</script>')
    page = browser.new_page()
    dialogs, errors = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined",
                           timeout=30_000)
    for tab in data.VIEWS:
        page.click(f".bvl-x-tab[data-tab='{tab}']")
        page.wait_for_timeout(150)
        page.mouse.move(400, 400)
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__pwned") is None
    assert page.evaluate("() => document.querySelectorAll('#bvl-app img, #bvl-app svg[onload], "
                         "#bvl-app b[onmouseover], body > script:not([type])').length") == 0
    shown = page.inner_text("body")  # the compare tab's sentences, the model's name: drawn as text
    assert 'onerror="window.__pwned = 2"' in shown and "<svg onload=" in shown, shown[:2000]
    assert not dialogs and not errors, (dialogs, errors)
