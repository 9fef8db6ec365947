"""Run lesson notebooks and store only the outputs nbval checks.

    .venv/bin/python scripts/refresh_notebooks.py                 # every notebooks/NN_*.ipynb
    .venv/bin/python scripts/refresh_notebooks.py notebooks/04_one_head.ipynb
    .venv/bin/python scripts/refresh_notebooks.py --form-only      # the stored form alone, nothing run

Each notebook is executed top to bottom in notebooks/ (as nbval does), and its widget state is
dropped (plotly's FigureWidget would add ~5 MB of JavaScript per widget). Then every output is
cleared except
- those of cells marked `# NBVAL_CHECK_OUTPUT`: the numbers a lesson teaches, which nbval
  (`pytest --nbval-lax`) compares on every CI run;
- the image/png outputs of cells whose first line is `# PICTURE`: the static pictures of a
  lesson's "Look" section, so that it reads on GitHub and nbviewer without running (nbval does
  not compare images). Each picture must stay under --max-picture KiB;
- the saved explorer of cells whose first line is `# SAVED VIEW`: the text/html output holding the
  explorer's exported page (every tab drawing without a kernel, in JupyterLab, nbviewer and the course's
  static site) with its PNG, the widget output itself dropped. Each must stay under --max-view KiB.
Committed notebooks stay small and deterministic. A notebook that takes longer than --budget
seconds fails the run, and so does a `# PICTURE` cell that stored no picture.

Notebooks are stored in the form JupyterLab writes, so that a lesson opened there is not marked
modified (and closing it asks nothing): its kernelspec as ipykernel's `python3` kernel names itself
(JupyterLab writes the running kernel's spec on open; "Python 3" became "Python 3 (ipykernel)"),
the kernel's language_info (nbclient stores it), nbformat 4.5 with cell ids, and nbformat's own
serialisation. A language_info.version other than the student's Python still marks it modified:
JupyterLab writes the running kernel's, and leaving it out marks it modified too.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CHECK = "NBVAL_CHECK_OUTPUT"
PICTURE = "# PICTURE"
SAVED_VIEW = "# SAVED VIEW"
SAVED_CLASS = 'class="bvl-saved"'  # the saved explorer's HTML (bertviz_lite.views.widget.saved_html)
PNG = "image/png"
# what JupyterLab writes on open: the spec of the kernel it starts (ipykernel.kernelspec.get_kernel_dict)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def jupyterlab_form(nb):
    """The notebook as JupyterLab would save it unchanged: its kernelspec, nbformat 4.5 (cell ids).
    Only metadata and format; sources and outputs are left as they are."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.nbformat, nb.nbformat_minor = 4, max(5, nb.nbformat_minor)
    for cell in nb.cells:
        if "id" not in cell:
            raise SystemExit("a cell without an id: add ids with nbformat.validator.normalize first")
    return nb


def store(nb, path: Path) -> None:
    """Write as jupyter_server saves (nbformat.writes and a newline), through a temporary file beside it."""
    if not path.is_file():
        raise SystemExit(f"{path}: not a regular file")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(nbformat.writes(jupyterlab_form(nb)) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def is_picture(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith(PICTURE)


def is_saved_view(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith(SAVED_VIEW)


def saved_views_only(cell, max_kib: float, name: str) -> list:
    """The saved explorer outputs of a `# SAVED VIEW` cell (text/html with the exported page, its PNG and text),
    the widget output and everything else dropped."""
    kept = []
    for out in cell.outputs:
        data = out.get("data", {})
        html = data.get("text/html", "")
        html = "".join(html) if isinstance(html, list) else html
        if out.get("output_type") in ("display_data", "execute_result") and SAVED_CLASS in html:
            size = sum(len(v) for v in data.values()) / 1024
            if size > max_kib:
                raise SystemExit(f"{name}: a saved view of {size:.0f} KiB, more than {max_kib:.0f} KiB; "
                                 "show a shorter input or fewer layers (include_layers=)")
            kept.append(nbformat.v4.new_output("display_data", data=dict(data), metadata=out.get("metadata", {})))
    if not kept:
        raise SystemExit(f"{name}: a '# SAVED VIEW' cell stored no saved explorer:\n{cell.source[:200]}")
    return kept


def pictures_only(cell, max_kib: float, name: str) -> list:
    """The image/png outputs of a `# PICTURE` cell, every other output and mime type dropped."""
    kept = []
    for out in cell.outputs:
        if out.get("output_type") in ("display_data", "execute_result") and PNG in out.get("data", {}):
            png = out["data"][PNG]
            size = len(png) * 3 / 4 / 1024  # base64 -> bytes
            if size > max_kib:
                raise SystemExit(f"{name}: a picture of {size:.0f} KiB, more than {max_kib:.0f} KiB; "
                                 "draw it smaller (dpi, figsize)")
            kept.append(nbformat.v4.new_output("display_data", data={PNG: png},
                                               metadata=out.get("metadata", {})))
    if not kept:
        raise SystemExit(f"{name}: a '# PICTURE' cell stored no image/png output:\n{cell.source[:200]}")
    return kept


def refresh(path: Path, budget: float, max_picture: float = 200.0, max_view: float = 1024.0) -> float:
    nb = nbformat.read(path, as_version=4)
    # store_widget_state=True only because nbclient's Output-widget hook (ipywidgets.interactive)
    # raises KeyError without it; the state is dropped below and never written
    cell_times: list[tuple[float, int]] = []
    clock = [time.perf_counter()]

    def timed(cell, cell_index, **_):
        now = time.perf_counter()
        cell_times.append((now - clock[0], cell_index))
        clock[0] = now

    client = NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}}, on_cell_executed=timed)
    t0 = time.perf_counter()
    client.execute()
    took = time.perf_counter() - t0
    slowest = sorted(cell_times, reverse=True)[:3]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if is_picture(cell):
            cell.outputs = pictures_only(cell, max_picture, path.name)  # keeps its execution_count: nbval
            # fails a cell with outputs and no count ("Unrun reference cell has outputs")
        elif is_saved_view(cell):
            cell.outputs = saved_views_only(cell, max_view, path.name)
        elif CHECK not in cell.source:
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    nbformat.validate(nb)
    store(nb, path)
    if took > budget:
        cells = ", ".join(f"cell {i} {t:.1f} s" for t, i in slowest)
        raise SystemExit(f"{path.name} took {took:.1f} s, more than the {budget:.0f} s budget of a lesson "
                         f"(slowest: {cells}; cells in all {sum(t for t, _ in cell_times):.1f} s)")
    return took


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", type=Path)
    p.add_argument("--budget", type=float, default=90.0, help="seconds one lesson may take (default 90)")
    p.add_argument("--max-picture", type=float, default=200.0, help="KiB one stored picture may take (default 200)")
    p.add_argument("--max-view", type=float, default=1024.0,
                   help="KiB one stored saved explorer may take (default 1024)")
    p.add_argument("--form-only", action="store_true",
                   help="run nothing: store each notebook in the form JupyterLab writes (metadata and format only)")
    args = p.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    paths = args.paths or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.form_only:
        for path in paths:
            store(nbformat.read(path, as_version=4), path.resolve())
            print(f"{path.name:40s} stored in JupyterLab's form")
        return 0
    total = 0.0
    for path in paths:
        took = refresh(path.resolve(), args.budget, args.max_picture, args.max_view)
        total += took
        print(f"{path.name:40s} {took:6.1f} s  {path.stat().st_size / 1024:7.1f} KiB")
    print(f"{'total':40s} {total:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
