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
# With --dry-run no GPU is needed: the same steps on the CPU's GPU stand-in (bench_gpu.py --dry-run --check, the
# tests on BERTVIZ_LITE_BACKEND=gpu_standin), a rehearsal of this script (tests/tools/test_scripts.py runs it).
# usage: bash scripts/test_gpu.sh [--suite] [--dry-run] [RESULTS_DIR]   (python: $PYTHON, else .venv/bin/python,
#        else python3)
set -uo pipefail
case "${1:-}" in
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
SUITE=0 DRY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --suite) SUITE=1 ;;
        --dry-run) DRY=1 ;;
        -*) echo "test_gpu: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
cd "$(dirname "$0")/.."
RESULTS=${1:-gpu-results}
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
if [ "$DRY" = 1 ]; then
    BACKEND=gpu_standin BENCH=(--dry-run --check)
elif "$PY" -c "import cupy, sys; sys.exit(0 if cupy.is_available() else 1)" 2>/dev/null; then
    BACKEND=cupy BENCH=(--check)
else
    echo "test_gpu: $PY has no cupy that sees a CUDA GPU; nothing was run (this is the GPU machine's script;" \
         "--dry-run rehearses it on the CPU's GPU stand-in)" >&2
    exit 2
fi
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=PASSIVE PYTHONHASHSEED=0 BERTVIZ_LITE_BACKEND=$BACKEND BERTVIZ_LITE_CUPY_KERNELS=1
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -rfE)

echo "test_gpu: 1. bench_gpu.py --check"
timeout 420 "$PY" benchmarks/bench_gpu.py "${BENCH[@]}" --json "$RESULTS/gpu.json" 2>&1 | tee "$RESULTS/check.log"
check=${PIPESTATUS[0]}

echo "test_gpu: 2. the device-facing tests on $BACKEND"
mapfile -t DEVICE_TESTS < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/device_tests.txt)
timeout 300 "${PYTEST[@]}" -m "not slow and not browser" \
    "${DEVICE_TESTS[@]}" 2>&1 | tee "$RESULTS/device-tests.log"
device=${PIPESTATUS[0]}

echo "test_gpu: 3. the tests marked gpu"
timeout 120 "${PYTEST[@]}" -m gpu \
    tests/engine/test_cuda_kernels.py tests/engine/test_backends.py tests/engine/test_corpus.py 2>&1 | tee "$RESULTS/gpu-tests.log"
gpu=${PIPESTATUS[0]}

suite=skipped
if [ "$SUITE" = 1 ]; then
    echo "test_gpu: 4. the whole fast suite on $BACKEND"
    timeout "${SUITE_TIMEOUT:-300}" "${PYTEST[@]}" \
        -m "not slow and not browser and not training" --continue-on-collection-errors tests 2>&1 | tee "$RESULTS/suite.log"
    suite=${PIPESTATUS[0]}
fi
echo "test_gpu: exit statuses: check $check, device-facing tests $device, gpu tests $gpu, whole suite $suite"
[ "$check" = 0 ] && [ "$device" = 0 ] && [ "$gpu" = 0 ] && { [ "$suite" = skipped ] || [ "$suite" = 0 ]; }
