"""A Hugging Face endpoint that accepts the connection and never answers fails within seconds, with
the advice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

import bertviz_lite as bv

from ..helpers import ROOT


@pytest.fixture
def silent_server(silent_port):
    """A Hugging Face endpoint that accepts every connection and never answers (conftest's silent_port)."""
    port, held = silent_port
    return f"http://127.0.0.1:{port}", held


@pytest.mark.slow  # a fresh interpreter waits for the Hub timeouts
def test_hub_that_never_answers_fails_within_seconds_with_the_advice(tmp_path, silent_server):
    url, held = silent_server
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=url, HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(ROOT))
    code = textwrap.dedent("""
        import time, bertviz_lite as bv
        t = time.monotonic()
        try:
            bv.load("someone/never-answers")
        except bv.WeightsNotFoundError as e:
            print(f"{time.monotonic() - t:.1f}"); print(e)
        else:
            print("loaded?!")
    """)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=40)
    assert time.monotonic() - start < 20, "the load did not fail within 20 s"
    assert out.returncode == 0, out.stderr
    seconds, message = out.stdout.split("\n", 1)
    assert float(seconds) < 20
    assert held, "the test server saw no connection: the test did not exercise the hang"
    assert "huggingface-cli download someone/never-answers" in message and "minilm" in message
