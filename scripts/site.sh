#!/usr/bin/env bash
# Build the course's static site into _site/ from the committed lessons (nothing is executed; see docs/site.md).
set -euo pipefail
case "${1:-}" in
    -h|--help)
        echo "usage: bash scripts/site.sh [--lessons NN ...]"
        echo "Builds the lessons (notebooks/NN_*.ipynb, with their stored outputs), a home page and a reference page"
        echo "into _site/ (static, offline: open _site/index.html or serve the folder). Staged sources and Sphinx's"
        echo "cache go to build/site/. Needs the site extra: bash scripts/setup.sh installs it."
        exit 0 ;;
esac
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || { echo "site: $PY not found: run bash scripts/setup.sh first (or set PYTHON)" >&2; exit 2; }
"$PY" -c "import sphinx, myst_nb, furo" 2>/dev/null || {
    echo "site: the site builder is not installed in $PY: run bash scripts/setup.sh (it installs .[test], which includes .[site])" >&2
    exit 2; }
exec "$PY" docs/site/build.py "$@"
