"""Size and speed of the self-contained HTML export, for n = 32, 128, 512 tokens (BERT-base,
random weights: the hardest case to compress, attention close to uniform noise).

    .venv/bin/python benchmarks/bench_export.py [--n 32 128 512] [--no-browser]

For each n it prints: the page size, how many layers are sent at full resolution, the time
to export (median of --reps), and the time for headless chromium to open the page from
file:// and draw the attention map (navigation to the drawn canvas, median of --reps), then
to open each other tab (the page's front-end is the explorer's own, assets/app.js). The browser part needs /usr/bin/chromium and playwright.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BUDGET = 15_000_000
TABS = ("model", "head", "token", "neuron", "step", "params")
# open a tab and resolve when it has drawn (its `bvl-drawn` event)
OPEN = """(tab) => new Promise((resolve) => {
  const x = document.querySelector('.bvl-x');
  const done = (ok) => (ev) => { if (ev.detail.view === tab) resolve(ok); };
  x.addEventListener('bvl-drawn', done(true));
  x.addEventListener('bvl-error', done(false));  // not in the page (over its size budget)
  x.querySelector(`.bvl-x-tab[data-tab="${tab}"]`).click();
})"""


def make_trace(model, n: int):
    tr = model.trace(" ".join(["word"] * (n - 2)), pad_to=n)
    assert tr.n_real == n, (tr.n_real, n)
    return tr


def time_export(tr, ledger, path: Path, reps: int) -> float:
    from bertviz_lite.views import export_html
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        export_html(tr, path, ledger=ledger)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_browser(path: Path, reps: int) -> dict:
    from playwright.sync_api import sync_playwright
    out: dict[str, list[float]] = {}
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(), executable_path=CHROMIUM, headless=True,
                                                   args=ARGS, viewport={"width": 1200, "height": 900})
        for _ in range(reps):
            page = ctx.new_page()
            t = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined",
                                   timeout=120_000)
            out.setdefault("load+heatmap", []).append(time.perf_counter() - t)
            for tab in TABS:
                t = time.perf_counter()
                drawn = page.evaluate(OPEN, tab)
                out.setdefault(tab, []).append(time.perf_counter() - t if drawn else float("nan"))
            page.close()
        ctx.close()
    return {k: statistics.median(v) for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args(argv)
    import bertviz_lite as bv
    model = bv.load("random", seed=0)
    ledger = bv.count_params(model)
    browser = not args.no_browser and os.path.exists(CHROMIUM)
    if not browser and not args.no_browser:
        print(f"(no {CHROMIUM}: browser timings skipped)")
    tmp = Path(tempfile.mkdtemp())
    print(f"{'n':>5} {'size MB':>8} {'full layers':>12} {'export s':>9} {'open+draw s':>12} "
          + " ".join(f"{t + ' s':>9}" for t in TABS))
    for n in args.n:
        tr = make_trace(model, n)
        path = tmp / f"export_{n}.html"
        t_export = time_export(tr, ledger, path, args.reps)
        size = path.stat().st_size
        text = path.read_text(encoding="utf-8")
        page = json.loads(text.split('id="bvl-data">')[1].split("</script>")[0])
        full = sum(1 for k, v in page["payloads"].items() if k.startswith("attention|") and v["header"]["edges"] is None
                   and '"probs"' in k)
        row = f"{n:>5} {size / 1e6:>8.2f} {f'{full}/{tr.num_layers}':>12} {t_export:>9.2f}"
        if browser:
            b = time_browser(path, args.reps)
            row += f" {b['load+heatmap']:>12.2f} " + " ".join(f"{b[t]:>9.2f}" for t in TABS)
        print(row + ("" if size < BUDGET else f"   OVER the {BUDGET / 1e6:.0f} MB budget"), flush=True)
        print(f"      the page says: {page['state']['info']['page_note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
