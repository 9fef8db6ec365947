#!/usr/bin/env bash
# Set up, then run every test: unit tests, parity against the committed Hugging Face
# reference values, the real-browser tests, and every lesson notebook under nbval.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_WAIT_POLICY=PASSIVE PYTHONHASHSEED=0
exec .venv/bin/python -m pytest tests notebooks --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg "$@"
