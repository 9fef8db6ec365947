"""First picture: the time from running a `head_view(attention, tokens)` cell to the head view drawn, in a
real JupyterLab 4 (headless chromium), for bertviz-lite and, in the same run, bertviz (the peer) in a
kernel of its own; the first call in a fresh kernel, then later calls.

    .venv/bin/python benchmarks/bench_first_picture.py --peer-python /path/to/venv/bin/python \\
        --cdn DIR [--calls 4] [--view head_view] [--json out.json]

The attention is MiniLM's (`bv.load("minilm")`, 6 layers x 12 heads) for one sentence pair, saved once and
read by both kernels (bertviz's as torch tensors). Each notebook's first cell imports the view function and
reads the attention (not timed); each later cell is one call, timed from Shift+Enter to the view drawn:
bertviz-lite's head view section has drawn (its record is set), bertviz's svg holds its lines.

The peer: an interpreter with bertviz 1.4, torch and ipykernel (`python -m venv peer; peer/bin/pip install
bertviz ipykernel`, torch from a CPU wheel). bertviz loads require.js, d3 5.7.0 and jQuery 2.0.0 from
cdnjs; offline, the page answers those requests from --cdn, a folder holding npm's packages of them
(`npm pack requirejs@2.3.6 d3@5.7.0 jquery@2.1.0` unpacked there: jQuery 2.0.0 is not on npm), which is what a
browser with the CDN files in its cache would see. Without --peer-python only bertviz-lite is measured.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.views.test_jupyterlab_browser import JupyterLab, launch_browser  # noqa: E402

TEXT, PAIR = "The cat sat on the mat.", "It was tired."
CDN = {"require.min.js": "requirejs*/package/require.js", "d3.min": "d3-*/package/dist/d3.min.js",
       "jquery.min": "jquery-*/package/dist/jquery.min.js"}
CELLS = ".jp-Notebook .jp-Cell"  # one notebook per JupyterLab server
OURS_DRAWN = """(i) => { const c = document.querySelectorAll('CELLS')[i];
  const s = c && [...c.querySelectorAll('.jp-OutputArea .bvl-x-section')].find((x) => x.dataset.tab === 'TAB');
  return !!(s && s.bvl); }""".replace("CELLS", CELLS)
PEER_DRAWN = """(i) => { const c = document.querySelectorAll('CELLS')[i];
  return !!(c && c.querySelectorAll('.jp-OutputArea svg line, .jp-OutputArea svg rect').length > 4); }""".replace(
    "CELLS", CELLS)


def attention_file(folder: Path) -> Path:
    import numpy as np

    import bertviz_lite as bv
    tr = bv.load("minilm").trace(TEXT, pair=PAIR)
    att = np.stack([tr.get("attn.probs", layer=ly)[None] for ly in range(tr.num_layers)])
    path = folder / "attention.npz"
    np.savez(path, att=att, tokens=np.array(tr.tokens), b=tr.segments.index(1))
    return path


def cells(peer: bool, view: str, npz: Path, calls: int) -> list[str]:
    load = (f"import numpy as np\nd = np.load({str(npz)!r})\ntokens = [str(t) for t in d['tokens']]\n"
            "sentence_b_start = int(d['b'])\n")
    if peer:
        setup = (f"import torch\nfrom bertviz import {view}\n" + load +
                 "attention = [torch.tensor(a) for a in d['att']]\nprint('ready')")
    else:
        setup = f"from bertviz_lite.views import {view}\n" + load + "attention = list(d['att'])\nprint('ready')"
    return [setup] + [f"{view}(attention, tokens, sentence_b_start)"] * calls


def serve_cdn(page, cdn: Path) -> None:
    files = {name: next(cdn.glob(pattern)) for name, pattern in CDN.items()}

    def answer(route):
        url = route.request.url
        for name, path in files.items():
            if name in url:
                return route.fulfill(path=str(path), content_type="application/javascript")
        return route.abort()
    page.route("https://cdnjs.cloudflare.com/**", answer)


def run_cell(page, i: int) -> None:
    cell = page.locator(CELLS).nth(i)
    cell.locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Shift+Enter")


def measure(sync_api, lab: JupyterLab, notebook: str, drawn: str, calls: int, cdn: Path | None) -> list[float]:
    with sync_api.sync_playwright() as p:
        ctx = launch_browser(p)
        try:
            page = ctx.new_page()
            if cdn is not None:
                serve_cdn(page, cdn)
            page.goto(lab.url(notebook), timeout=90_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=90_000)
            run_cell(page, 0)
            page.wait_for_function(f"() => (document.querySelectorAll('{CELLS}')[0]"
                                   ".querySelector('.jp-OutputArea')?.innerText || '').includes('ready')",
                                   timeout=180_000)
            page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=60_000)
            times = []
            for i in range(1, calls + 1):
                t0 = time.perf_counter()
                run_cell(page, i)
                try:
                    page.wait_for_function(drawn, arg=i, polling="raf", timeout=60_000)
                except Exception:
                    shot = Path(tempfile.gettempdir()) / f"bench_first_picture_{notebook}.png"
                    page.screenshot(path=str(shot))
                    raise RuntimeError(f"{notebook}: call {i} was not drawn in 60 s (screenshot: {shot})") from None
                times.append(time.perf_counter() - t0)
                page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=60_000)
            return times
        finally:
            ctx.close()


def peer_kernel(lab: JupyterLab, python: str) -> str:
    spec = lab.dir / "data" / "kernels" / "bvl-peer"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [python, "-m", "ipykernel_launcher", "-f",
                                                           "{connection_file}"],
                                                  "display_name": "peer", "language": "python"}))
    return "bvl-peer"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-python", default=None, help="an interpreter with bertviz, torch and ipykernel")
    ap.add_argument("--cdn", type=Path, default=None, help="the unpacked npm packages bertviz's CDN files come from")
    ap.add_argument("--calls", type=int, default=4, help="calls per kernel: the first, then later ones")
    ap.add_argument("--view", default="head_view", choices=("head_view", "model_view"))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.peer_python and args.cdn is None:
        ap.error("--peer-python needs --cdn (bertviz's require.js, d3 and jQuery; offline there is no CDN)")
    from playwright import sync_api
    tab = "head" if args.view == "head_view" else "model"
    results = {}
    with tempfile.TemporaryDirectory() as d:
        npz = attention_file(Path(d))
        import nbformat
        runs = [("bertviz-lite", False, OURS_DRAWN.replace("TAB", tab))]
        if args.peer_python:
            runs.append(("bertviz", True, PEER_DRAWN))
        for name, peer, drawn in runs:  # a server each: a fresh kernel, and no other notebook in the page
            lab = JupyterLab()
            try:
                kernel = peer_kernel(lab, args.peer_python) if peer else "python3"
                nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c)
                                                     for c in cells(peer, args.view, npz, args.calls)])
                nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
                nbformat.write(nb, lab.root / f"{name}.ipynb")
                results[name] = measure(sync_api, lab, f"{name}.ipynb", drawn, args.calls,
                                        args.cdn if peer else None)
            finally:
                lab.stop()
    load = os.getloadavg()[0]
    print(f"{args.view}: seconds from Shift+Enter to the view drawn (load average {load:.2f})")
    print(f"{'':14} {'first call':>10}  later calls (median [min - max])")
    for name, t in results.items():
        later = t[1:]
        print(f"{name:14} {t[0]:10.2f}  {statistics.median(later):.2f} [{min(later):.2f} - {max(later):.2f}]")
    if "bertviz" in results:
        ours, theirs = results["bertviz-lite"], results["bertviz"]
        print(f"ratio (bertviz-lite / bertviz): first {ours[0] / theirs[0]:.2f}, later "
              f"{statistics.median(ours[1:]) / statistics.median(theirs[1:]):.2f}")
    if args.json:
        args.json.write_text(json.dumps(dict(view=args.view, load=load, seconds=results), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
