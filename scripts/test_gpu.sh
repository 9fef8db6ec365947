#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and CuPy: the GPU path's check and its tests, in one run (CI has no GPU; a GPU
# session runs this). Each step's output goes to the screen and to RESULTS_DIR:
#   1. benchmarks/bench_gpu.py --check: every cupy kernel against its formula line, every trace key against numpy,
#      then the timing table (torch as the peer when this python has torch and transformers)   check.log, gpu.json
#   2. the device-facing tests (tests/device_tests.txt, the GPU stand-in's list) with load() on cupy
#      (BERTVIZ_LITE_BACKEND=cupy) and the cupy kernels on                                      device-tests.log
#   3. every test marked gpu (they skip without a GPU)                                         gpu-tests.log
#   4. with --suite: the whole fast suite on cupy (not slow, browser or training); a test file whose imports
#      this machine lacks (dask, nbval, playwright, ...) is a collection error, named in the log  suite.log
# usage: bash scripts/test_gpu.sh [--suite] [RESULTS_DIR]   (python: $PYTHON, else .venv/bin/python, else python3)
set -uo pipefail
case "${1:-}" in
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
SUITE=0
if [ "${1:-}" = "--suite" ]; then SUITE=1; shift; fi
cd "$(dirname "$0")/.."
RESULTS=${1:-gpu-results}
mkdir -p "$RESULTS"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
if ! "$PY" -c "import cupy, sys; sys.exit(0 if cupy.is_available() else 1)" 2>/dev/null; then
    echo "test_gpu: $PY has no cupy that sees a CUDA GPU; nothing was run (this is the GPU machine's script)" >&2
    exit 2
fi
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=PASSIVE PYTHONHASHSEED=0
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -rfE)

echo "test_gpu: 1. bench_gpu.py --check"
timeout 420 "$PY" benchmarks/bench_gpu.py --check --json "$RESULTS/gpu.json" 2>&1 | tee "$RESULTS/check.log"
check=${PIPESTATUS[0]}

echo "test_gpu: 2. the device-facing tests on cupy"
mapfile -t DEVICE_TESTS < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/device_tests.txt)
BERTVIZ_LITE_BACKEND=cupy BERTVIZ_LITE_CUPY_KERNELS=1 timeout 300 "${PYTEST[@]}" -m "not slow and not browser" \
    "${DEVICE_TESTS[@]}" 2>&1 | tee "$RESULTS/device-tests.log"
device=${PIPESTATUS[0]}

echo "test_gpu: 3. the tests marked gpu"
BERTVIZ_LITE_BACKEND=cupy BERTVIZ_LITE_CUPY_KERNELS=1 timeout 120 "${PYTEST[@]}" -m gpu \
    tests/engine/test_cuda_kernels.py tests/engine/test_backends.py tests/engine/test_corpus.py 2>&1 | tee "$RESULTS/gpu-tests.log"
gpu=${PIPESTATUS[0]}

suite=skipped
if [ "$SUITE" = 1 ]; then
    echo "test_gpu: 4. the whole fast suite on cupy"
    BERTVIZ_LITE_BACKEND=cupy BERTVIZ_LITE_CUPY_KERNELS=1 timeout "${SUITE_TIMEOUT:-300}" "${PYTEST[@]}" \
        -m "not slow and not browser and not training" --continue-on-collection-errors tests 2>&1 | tee "$RESULTS/suite.log"
    suite=${PIPESTATUS[0]}
fi
echo "test_gpu: exit statuses: check $check, device-facing tests $device, gpu tests $gpu, whole suite $suite"
[ "$check" = 0 ] && [ "$device" = 0 ] && [ "$gpu" = 0 ] && { [ "$suite" = skipped ] || [ "$suite" = 0 ]; }
