"""Screenshots of every tab of the explorer, from its exported page in headless chromium: to look at what
the views draw, and README's picture (docs/explorer.png: MiniLM's head view of a sentence pair).

    .venv/bin/python scripts/screenshot_views.py                  # every tab -> /tmp/bertviz-lite-shots/
    .venv/bin/python scripts/screenshot_views.py --readme         # the head view -> docs/explorer.png
    .venv/bin/python scripts/screenshot_views.py --mode dark      # bertviz's display_mode

Needs the trained MiniLM (setup installs it), playwright and Debian's chromium (/usr/bin/chromium; never
`playwright install`).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
TEXT, PAIR = "The cat sat on the mat.", "It was tired."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bertviz-lite-shots")
    ap.add_argument("--readme", action="store_true", help="only the head view, into docs/explorer.png")
    ap.add_argument("--mode", choices=("light", "dark"), default=None, help="bertviz's display_mode")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import bertviz_lite as bv
    from playwright.sync_api import sync_playwright

    model = bv.load("minilm")
    tr = model.trace(TEXT, pair=PAIR)
    w = bv.explore(tr, model=model, tab="head", layer=2, display_mode=args.mode)
    tabs = ["head"] if args.readme else list(w.info["views"])
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d, sync_playwright() as p:
        page_file = Path(d) / "page.html"
        page_file.write_text(w.page(), encoding="utf-8")
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 700}, device_scale_factor=1)
        page.goto(page_file.as_uri())
        for tab in tabs:
            page.click(f".bvl-x-tab[data-tab='{tab}']")
            page.wait_for_function(f"() => document.querySelector(\".bvl-x-section[data-tab='{tab}']\").bvl",
                                   timeout=30_000)
            page.wait_for_timeout(200)
            out = ROOT / "docs" / "explorer.png" if args.readme else args.out / f"{tab}{'-' + args.mode if args.mode else ''}.png"
            page.locator(".bvl-x").screenshot(path=str(out))
            print(f"wrote {out}")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
