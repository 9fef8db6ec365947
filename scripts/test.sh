#!/usr/bin/env bash
# Set up, then run every test: unit tests, parity against the committed Hugging Face
# reference values, the real-browser tests, and every lesson notebook under nbval. The browser
# tests need Debian's chromium and the corpus test WordNet's files: installed here (as root, with
# apt), not by setup.sh, which the main job runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# Debian packages only the tests use, installed when root with apt-get (otherwise those tests are skipped,
# and this says which):
# apt_install PACKAGE FILE-IT-PROVIDES WHAT-NEEDS-IT
apt_install() {
    [ -e "$2" ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get install -y -q "$1" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$1" >/dev/null; }) \
            || echo "test: could not install $1; $3 will be skipped" >&2
    else
        echo "test: $2 not found (install Debian's '$1'); $3 will be skipped" >&2
    fi
}
# a real browser for the browser tests (Debian's chromium; never `playwright install`)
command -v chromium >/dev/null 2>&1 || apt_install chromium /usr/bin/chromium "the browser tests"
# WordNet 3.0's data files, from which tests/test_corpus.py regenerates data/ byte for byte
apt_install wordnet-base /usr/share/wordnet/data.noun "the corpus regeneration test"
export OMP_WAIT_POLICY=PASSIVE PYTHONHASHSEED=0
exec .venv/bin/python -m pytest tests notebooks --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg "$@"
