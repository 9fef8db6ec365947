#!/usr/bin/env bash
# Set up, then run every test: unit tests, parity against the committed Hugging Face
# reference values, the real-browser tests, and every lesson notebook under nbval; then the training
# workspace's tests (tests/training, marked training) as their own step; then the
# engine-, edit-, batch-, analysis-, loading- and views-facing tests once more on the GPU stand-in;
# then every test but the browser's, the lessons under nbval and their solution replays once more under
# a second OpenBLAS kernel (another CPU's rounding), and which kernels ran.
# The browser tests need Debian's chromium and the corpus test WordNet's files: installed here (as
# root, with apt), not by setup.sh, which the main job runs.
set -euo pipefail
case "${1:-}" in
    -h|--help)
        echo "usage: bash scripts/test.sh [PYTEST ARGUMENTS...]"
        echo "Sets up .venv (scripts/setup.sh), installs chromium and wordnet-base when root with apt, then runs every"
        echo "test and lesson (the arguments go to the first test run), the training tests (tests/training) as their own"
        echo "step, the device-facing tests on the GPU stand-in,"
        echo "and every test but the browser's once more under a second OpenBLAS kernel. Prints which kernels ran."
        exit 0 ;;
esac
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
# WordNet 3.0's data files, from which tests/training/test_corpus_files.py regenerates the corpus byte for byte
apt_install wordnet-base /usr/share/wordnet/data.noun "the corpus regeneration test"
export OMP_WAIT_POLICY=PASSIVE PYTHONHASHSEED=0
OWN_KERNEL=$(.venv/bin/python scripts/blas_kernel.py | sed -n 's/^own: //p')
echo "test: first pass under OpenBLAS's $OWN_KERNEL kernel"
.venv/bin/python -m pytest tests notebooks --ignore=tests/training --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg "$@"

# The training workspace (training/: the scripts that make bertviz_lite/data/'s trained files, their corpus and
# their safe files), in one step of its own and nowhere else: tests/training, every test there marked training.
echo "test: training (tests/training)"
.venv/bin/python -m pytest -q tests/training -m training

# The GPU stand-in: every load() without backend= puts the model on array_api_strict's device1, whose arrays
# refuse np.asarray as CuPy's do, so an implicit host conversion (in the library or in a test) fails here
# as it would on a GPU. numpy-path facts (marked cpu_path) and float16 are skipped, each saying why.
# About 60 s of CPU (2 min 20 s wall on a busy 2-core machine).
mapfile -t DEVICE_TESTS < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/device_tests.txt)  # one list, shared with test_gpu.sh
BERTVIZ_LITE_BACKEND=gpu_standin .venv/bin/python -m pytest -q -m "not slow and not browser" "${DEVICE_TESTS[@]}"

# A second OpenBLAS kernel (OPENBLAS_CORETYPE): two kernels round one product apart, and a number a test or a
# lesson compares, or a training run amplifies, can hold on one and not on another (PITFALLS.md). Which one:
# scripts/blas_kernel.py (another this CPU runs: SkylakeX for an AVX2 kernel on an AVX-512 CPU, Haswell the other
# way round). What: every test but the browser's (they draw, and compare no float), every lesson under nbval, and
# the solution replays with 2 BLAS threads (the first pass ran 1 and 2). About as long as the first pass, less the browser.
SECOND_KERNEL=$(.venv/bin/python scripts/blas_kernel.py --second)
if [ -n "$SECOND_KERNEL" ]; then
    echo "test: second pass under OpenBLAS's $SECOND_KERNEL kernel (the first ran $OWN_KERNEL)"
    OPENBLAS_CORETYPE=$SECOND_KERNEL .venv/bin/python -m pytest -q tests notebooks --ignore=tests/training --nbval-lax \
        --nbval-sanitize-with notebooks/sanitize.cfg -m "not browser" -k "not 1-thread" -p no:cacheprovider
    echo "test: OpenBLAS kernels run: $OWN_KERNEL, then $SECOND_KERNEL"
else
    echo "test: OpenBLAS kernels run: $OWN_KERNEL only (this CPU runs no second one of Haswell, Zen, SkylakeX, Sandybridge)"
fi
