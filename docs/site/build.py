"""Build the course's static site: the twenty lessons, as committed, with a home page and a reference page.

    .venv/bin/python docs/site/build.py                      # what `bash scripts/site.sh` runs: every lesson
    .venv/bin/python docs/site/build.py --lessons 00 04      # two lessons (the browser test builds four)

Nothing is executed: each page shows the outputs the lesson was committed with (scripts/refresh_notebooks.py
stores the checked numbers, the pictures and the saved explorer pages). The sources are staged under --cache
(default build/site/, ignored by git) and Sphinx (myst-nb, the furo theme) writes the site to --out (default
_site/); nothing else is written. Staging adds to each lesson, and to nothing in notebooks/:
- a note under the title: how to run the lesson, and a link to download its notebook as committed;
- after each exercise's check cell, its hints (from notebooks/exercises/exNN.py) and how to check an answer
  (run the lesson in JupyterLab); the worked solutions (notebooks/solutions/) are never on the site;
- before each saved explorer (a `# SAVED VIEW` cell), what to click, and on a narrow screen that it wants a
  wider one; after each live control (`try_it`), that it runs in JupyterLab.
Formulas are written as MathML when the site is built (mathml.py): no MathJax, nothing to load.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOTEBOOKS = ROOT / "notebooks"
SAVED_VIEW = "# SAVED VIEW"


def lesson_paths(only: list[str] | None) -> list[Path]:
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if only:
        unknown = sorted(set(only) - {p.name[:2] for p in paths})
        if unknown:
            raise SystemExit(f"build.py: no lesson {', '.join(unknown)} in notebooks/ "
                             f"(the lessons are {paths[0].name[:2]} to {paths[-1].name[:2]})")
        paths = [p for p in paths if p.name[:2] in only]
    return paths


def markdown(text: str):
    import nbformat
    cell = nbformat.v4.new_markdown_cell(text)
    cell.pop("id", None)  # ids are normalised below
    return cell


def run_note(lesson: Path) -> str:
    return (":::{admonition} Read it here, run it in JupyterLab\n:class: note\n"
            "This page is the lesson as committed, with the outputs it stores: the checked numbers, the pictures "
            "and the saved explorer. The live controls (**Try it**) and the exercise checkers need a running "
            f"kernel. {{download}}`Download this notebook <notebooks/{lesson.name}>`; it runs inside the course's "
            "repository: `bash scripts/setup.sh` once, then `.venv/bin/jupyter lab notebooks/` "
            f"and open `{lesson.name}`.\n:::")


def exercise_note(ex) -> str:
    kind = ("Predict first: write your guess in the cell before you run the cells that show the answer."
            if ex.prediction else
            "Many answers are right: the checker says whether yours is one." if ex.open_ended else
            "Replace the `...` with your answer.")
    hints = "\n".join(f"{i}. {h}" for i, h in enumerate(ex.hints, 1))
    return (f":::{{admonition}} Exercise {ex.id}: hints, and how to check your answer\n:class: tip\n"
            f"{kind}\n\n**Hints** (read one at a time; the checker shows them too, one per wrong try):\n\n{hints}\n\n"
            "**Check it:** run this lesson in JupyterLab, fill in the stub and run the "
            f"`check(\"{ex.id}\", ...)` cell under it: it answers \"✅ correct\" or \"❌ not yet\", naming the "
            "mistake it sees.\n:::")


SAVED_VIEW_NOTE = (
    '<p class="bvl-site-narrow">The explorer below wants a screen at least 800 px wide: turn your phone '
    "sideways or open this page on a computer. Until then it may need scrolling sideways.</p>\n\n"
    "*The saved explorer:* its tabs, layers, heads and query tokens respond to clicks on this page, drawn from "
    "the data the lesson stored (no kernel runs here).")

TRY_IT_NOTE = ("*In JupyterLab this cell draws a live control that redraws from the engine; this page shows "
               "the first drawing where the lesson stores one.*")


def stage_lesson(src: Path, dest: Path) -> dict:
    """The lesson with the site's notes added (see the module docstring); returns what was added."""
    import nbformat
    from course import checks

    nb = nbformat.read(src, as_version=4)
    cells, added = [], {"exercises": 0, "views": 0, "controls": 0}
    stubs = {}  # exercise id -> waiting for its check cell
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.lstrip().startswith(SAVED_VIEW):
            cells.append(markdown(SAVED_VIEW_NOTE))
            added["views"] += 1
        cells.append(cell)
        if i == 0:
            cells.append(markdown(run_note(src)))
        if cell.cell_type != "code":
            continue
        for tag in cell.metadata.get("tags", []):
            if tag.startswith("exercise-"):
                stubs[tag[len("exercise-"):]] = True
        for ex_id in [e for e in stubs if f'check("{e}"' in cell.source]:
            cells.append(markdown(exercise_note(checks._lookup(ex_id))))
            added["exercises"] += 1
            del stubs[ex_id]
        if "try_it(" in cell.source and "def try_it" not in cell.source:
            cells.append(markdown(TRY_IT_NOTE))
            added["controls"] += 1
    if stubs:
        raise SystemExit(f"{src.name}: no cell checks exercise(s) {sorted(stubs)} (a `check(\"NN.k\", ...)` cell)")
    nb.cells = cells
    for k, cell in enumerate(nb.cells):
        cell["id"] = f"site-{k}"
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, dest)
    return added


def readme_section(text: str, start: str, end: str | None) -> str:
    """The part of notebooks/README.md from the heading `start` up to (not with) the heading `end`."""
    a = text.index(start)
    b = text.index(end, a) if end else len(text)
    return text[a:b]


def site_links(text: str) -> str:
    """Links of notebooks/README.md that point into the repository (not at a lesson) become plain text: the site
    holds the lessons only (never notebooks/solutions/)."""
    return re.sub(r"\[([^\]]*)\]\((?!\d\d_[a-z_]+\.ipynb)([^)]*)\)", r"\1 (`notebooks/\2` in the repository)", text)


def stage_pages(src_dir: Path, lessons: list[Path]) -> None:
    from course.pictures import symbol_table

    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    table = readme_section(readme, "## The lessons", "## The sources").split("\n", 1)[1]
    built = {p.name for p in lessons}
    rows = [r for r in table.strip().splitlines()
            if not re.search(r"\]\((\d\d_[a-z_]+\.ipynb)\)", r) or re.search(r"\]\((\d\d_[a-z_]+\.ipynb)\)", r)[1] in built]
    toctree = "\n".join(p.stem for p in lessons)
    (src_dir / "_lessons.md").write_text(
        "\n".join(rows) + "\n\n```{toctree}\n:hidden:\n:caption: Lessons\n:maxdepth: 1\n\n" + toctree + "\n```\n\n"
        "```{toctree}\n:hidden:\n:caption: Reference\n:maxdepth: 1\n\nreference\n```\n", encoding="utf-8")
    skeleton = readme_section(readme, "## The skeleton", "## Tests").split("\n", 1)[1]
    (src_dir / "_skeleton.md").write_text(site_links(skeleton), encoding="utf-8")
    facts = readme_section(readme, "## The sources", None)
    (src_dir / "reference.md").write_text(
        "# Symbols and facts\n\nThe course's one table of symbols and, for every fact it teaches, the lesson and "
        "cell that computes it. Both are kept in the repository (`bertviz_lite.schema.SYMBOLS`, "
        "`notebooks/README.md`); this page is built from them.\n\n## Symbols\n\n" + symbol_table() + "\n\n"
        + site_links(facts).replace("\n## ", "\n## ", 1), encoding="utf-8")


def site_size(out: Path) -> tuple[int, int]:
    files = [p for p in out.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "_site", help="where the site goes (default _site/)")
    p.add_argument("--cache", type=Path, default=ROOT / "build" / "site",
                   help="staged sources and Sphinx's cache (default build/site/)")
    p.add_argument("--lessons", nargs="+", metavar="NN", help="build only these lessons (default: all)")
    p.add_argument("--jobs", default="1", help="Sphinx's parallel jobs (default 1; 'auto' for every core)")
    args = p.parse_args(argv)
    lessons = lesson_paths(args.lessons)
    for target in (args.out, args.cache):
        if target.exists() and not target.is_dir():
            raise SystemExit(f"build.py: {target} exists and is not a folder")

    t0 = time.perf_counter()
    sys.path.insert(0, str(NOTEBOOKS))  # course.checks (the hints) and course.pictures (the symbol table)
    src_dir = args.cache / "src"
    shutil.rmtree(src_dir, ignore_errors=True)
    (src_dir / "notebooks").mkdir(parents=True)
    shutil.copytree(HERE / "static", src_dir / "static")
    for name in ("conf.py", "mathml.py", "index.md"):
        shutil.copy2(HERE / name, src_dir / name)
    counts = {"exercises": 0, "views": 0, "controls": 0}
    for lesson in lessons:
        shutil.copy2(lesson, src_dir / "notebooks" / lesson.name)  # the download: the notebook as committed
        for k, v in stage_lesson(lesson, src_dir / lesson.name).items():
            counts[k] += v
    stage_pages(src_dir, lessons)

    from sphinx.cmd.build import build_main
    # Sphinx writes into the cache, then the finished site moves to --out: myst-nb keeps the outputs it extracts
    # in a folder beside Sphinx's output folder (jupyter_execute/), which must not be the repository's root
    html = args.cache / "html"
    shutil.rmtree(html, ignore_errors=True)
    rc = build_main([str(src_dir), str(html), "-b", "html", "-d", str(args.cache / "doctrees"), "-q",
                     "-j", str(args.jobs)])
    if rc:
        raise SystemExit(f"build.py: sphinx-build failed ({rc}); its messages are above")
    shutil.rmtree(args.out, ignore_errors=True)
    shutil.move(html, args.out)
    n_files, size = site_size(args.out)
    print(f"site: {len(lessons)} lessons ({counts['exercises']} exercises, {counts['views']} saved explorers, "
          f"{counts['controls']} live controls) in {args.out}: {n_files} files, {size / 1e6:.1f} MB, "
          f"built in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
