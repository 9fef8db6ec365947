"""Every script answers --help and refuses an unknown argument before it does any work, without torch.

scripts/make_unicode_table.py had no argument parser: `--help` ran the whole job and rewrote
bertviz_lite/data/unicode_overrides.json. scripts/check_torch_views.py and training/probe_mlm_adaptation.py
imported torch before reading their arguments, so even their help needed it (this venv has no torch:
a script that loads it before parsing fails here).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("scripts/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("tests/fixtures/make_*.py"),
                  ROOT / "tests" / "fixtures" / "parity_report.py"])
# what a script that ran its job would have rewritten
OUTPUTS = ("bertviz_lite/data", "data", "tests/fixtures", "training")  # (training/'s own: tests/training)

pytestmark = pytest.mark.slow  # a fresh interpreter per script


def stamps() -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for folder in OUTPUTS for p in (ROOT / folder).rglob("*") if p.is_file()}


def run(script: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}  # no torch here
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=env)


def test_every_script_is_found():
    names = {p.name for p in SCRIPTS}
    assert {"make_unicode_table.py", "check_torch_views.py", "make_reference.py",
            "bench_engine.py"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_help_and_an_unknown_argument_do_no_work(script):
    before = stamps()
    helped = run(script, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage:"), helped.stdout + helped.stderr
    refused = run(script, "--no-such-option")
    assert refused.returncode == 2 and "unrecognized arguments: --no-such-option" in refused.stderr, \
        refused.stdout + refused.stderr
    assert stamps() == before  # nothing written


def test_the_gpu_run_rehearsed_on_the_stand_in(tmp_path):
    # what a GPU session runs (scripts/test_gpu.sh) had never run whole: --dry-run takes every step through the GPU
    # stand-in, bench_gpu.py's --check (the kernel check over numpy's kernels, every trace key against numpy), its
    # cupy worker's code, the numpy worker, the table, the goals and --json, and the device-facing tests, so a first
    # run on a GPU does not fail on the scripts themselves
    import json
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test_gpu.sh"), "--dry-run", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "exit statuses: check 0, device-facing tests 0, gpu tests 0, whole suite skipped" in done.stdout
    check = (tmp_path / "check.log").read_text()
    assert "DRY RUN" in check and "to_host of a 16-token trace" in check and "PARITY HELD" in check
    assert " passed" in (tmp_path / "device-tests.log").read_text()
    result = json.loads((tmp_path / "gpu.json").read_text())
    assert result["dry_run"] is True and result["sizes"] == [8, 16] and result["torch"] is None
    assert result["cupy"]["backend"] == "gpu_standin" and result["numpy"]["backend"] == "numpy"
    assert result["parity_held"] is True and all(r["held"] for r in result["check"]["key_rows"])
    assert len(result["check"]["key_rows"]) == 8 and len(result["check"]["kernel_rows"]) > 20
    assert all(goal["met"] is None for goal in result["goals"])  # a dry run meets or misses nothing
    assert result["head_stats_max_difference"] < 1e-4  # the stand-in's statistics are numpy's


def test_the_gpu_run_says_it_needs_a_gpu(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable}
    if subprocess.run([sys.executable, "-c", "import cupy; assert cupy.is_available()"], capture_output=True,
                      env=env).returncode == 0:
        pytest.skip("a GPU is here")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test_gpu.sh"), str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env=env)
    assert done.returncode == 2 and "no cupy that sees a CUDA GPU" in done.stderr and "--dry-run" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing run, nothing written


@pytest.mark.parametrize("script", ["setup.sh", "test.sh", "site.sh"])
def test_the_two_commands_answer_help_without_doing_their_job(script, tmp_path):
    # `bash scripts/test.sh --help` once ran pip, apt-get (as root) and the whole suite. In a copy of scripts/ with
    # no .venv and no Python to make one, --help must answer at once and leave the folder as it was.
    (tmp_path / "scripts").mkdir()
    for name in ("setup.sh", "test.sh", "site.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    env = {"PATH": "/usr/bin:/bin", "PYTHON": "/nonexistent/python3"}
    out = subprocess.run(["bash", str(tmp_path / "scripts" / script), "--help"], capture_output=True, text=True,
                         timeout=30, cwd=tmp_path, env=env)
    assert out.returncode == 0 and out.stdout.startswith(f"usage: bash scripts/{script}"), out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]


def test_lesson11_seed_sweep_runs_and_writes_its_table(tmp_path):
    # a short run of scripts/sweep_lesson11_seeds.py (10 steps: the story needs the lesson's 300, so only its
    # machinery is checked here): every head and pair ablated, the table printed, every number in the JSON
    import json
    out = tmp_path / "sweep.json"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep_lesson11_seeds.py"), "--seeds", "0", "--steps",
                           "10", "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "| SEED | head(s) by ablation |" in done.stdout and "\n| 0 | " in done.stdout
    (result,) = json.loads(out.read_text())
    assert result["seed"] == 0 and len(result["without_one"]) == 8 and len(result["without_two"]) == 28
    assert 1 <= len(result["rule"]) <= 2 and result["pattern"] in ("diagonal", "previous token", "anti-diagonal", "[CLS]",
                                                                   "uniform")


def test_lesson11_seed_sweep_runs_the_lessons_constants():
    # scripts/sweep_lesson11_seeds.py repeats lesson 11's first cell (the small BERT, its task, BREAK and KEEP): the
    # table it prints is the lesson's story at other seeds only while the two agree
    import importlib.util
    import json

    nb = json.loads((ROOT / "notebooks" / "11_backward_and_training.ipynb").read_text(encoding="utf-8"))
    lesson: dict = {}
    exec("".join(nb["cells"][1]["source"]), lesson)  # plain assignments: the lesson's knobs
    spec = importlib.util.spec_from_file_location("sweep", ROOT / "scripts" / "sweep_lesson11_seeds.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    for name in ("HALF", "LETTERS", "WIDTH", "HEADS", "LAYERS", "BATCH", "EVERY", "TEST", "SGD_LR", "ADAM_LR", "BREAK",
                 "KEEP"):
        assert getattr(sweep, name) == lesson[name], name
    assert sweep.ADAM_STEPS == lesson["STEPS"]
