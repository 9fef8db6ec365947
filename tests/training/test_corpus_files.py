"""The WordNet corpus files, made by training/make_corpus.py: data/wordnet_examples.txt (which the lessons read
too) and training/corpus/ (the definitions and their headwords), each beside WordNet's licence; the script gives
the committed files byte for byte from Debian's wordnet-base."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.training  # scripts/test.sh runs this folder in its own step

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder", ["data", "training/corpus"])
def test_each_copy_of_wordnet_text_travels_with_its_licence(folder):
    assert (ROOT / folder / "LICENSE.WordNet-3.0.txt").read_text(encoding="utf-8").count("Princeton University") >= 3


def test_training_readme_names_every_corpus_file():
    readme = (ROOT / "training" / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "training" / "corpus").iterdir()):
        assert path.name in readme, path


@pytest.mark.parametrize("line, word", [
    ("02907082 06 n 01 broom 0 002 @ 03575240 n 0000 | a cleaning implement for sweeping", "broom"),
    ("08145553 14 n 02 post_office 1 local_post_office 0 002 @ 08401248 n 0000 | a local branch where postal "
     "services are available", "post office, local post office"),
    ("00014358 00 s 02 abounding 0 galore(ip) 0 001 & 00013887 a 0000 | existing in abundance",
     "abounding, galore")])
def test_a_synset_line_gives_its_words_as_written(line, word):
    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "training" / "make_corpus.py")
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    assert make_corpus.headwords(line) == word


@pytest.mark.skipif(not Path("/usr/share/wordnet/data.noun").exists() and not os.environ.get("CI"),
                    reason="needs Debian's wordnet-base (apt-get install wordnet-base; scripts/setup.sh installs it "
                           "when root) to regenerate the corpus; in CI it runs, and fails without it")
@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
def test_the_corpus_regenerates_byte_for_byte():
    out = subprocess.run([sys.executable, str(ROOT / "training" / "make_corpus.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


