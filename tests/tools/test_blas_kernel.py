"""scripts/blas_kernel.py picks the second OpenBLAS kernel that scripts/test.sh reruns the numeric tests under:
one this CPU has the instructions for, that OpenBLAS runs by that name, other than the own one, and that computes
a product right."""

from __future__ import annotations

import importlib.util

import pytest

from ..helpers import ROOT

spec = importlib.util.spec_from_file_location("blas_kernel", ROOT / "scripts" / "blas_kernel.py")
blas_kernel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(blas_kernel)

AVX512 = {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}


def fake_openblas(monkeypatch, reports, error=1e-7):
    """probe() as OpenBLAS would answer: `reports` maps a requested kernel to the one it runs (absent: a crash)."""
    asked = []

    def probe(coretype):
        asked.append(coretype)
        return {"architecture": reports[coretype], "error": error} if coretype in reports else None

    monkeypatch.setattr(blas_kernel, "probe", probe)
    return asked


ALL = {"SkylakeX": "SkylakeX", "Haswell": "Haswell", "Sandybridge": "Sandybridge", "Zen": "Haswell"}


@pytest.mark.parametrize("own, flags, second", [
    ("Haswell", AVX512, "SkylakeX"),  # an AVX2 kernel on an AVX-512 CPU (as OPENBLAS_CORETYPE sets it here)
    ("SkylakeX", AVX512, "Haswell"),
    ("Haswell", {"avx", "avx2", "fma"}, "Sandybridge"),  # no AVX-512: SkylakeX is never tried
    ("Sandybridge", {"avx"}, None),  # Sandybridge's own CPU runs no other of them
])
def test_the_second_kernel_is_another_one_this_cpu_runs(monkeypatch, own, flags, second):
    asked = fake_openblas(monkeypatch, ALL)
    assert blas_kernel.second_kernel(own, flags) == second
    if "avx512f" not in flags:
        assert "SkylakeX" not in asked


def test_a_kernel_that_reports_another_name_or_computes_wrong_is_passed_over(monkeypatch):
    # "Zen" runs the Haswell kernels (OpenBLAS reports Haswell): on a Haswell machine it is the same kernel
    fake_openblas(monkeypatch, {"Zen": "Haswell"})
    assert blas_kernel.second_kernel("Haswell", {"avx2", "fma"}) is None
    fake_openblas(monkeypatch, ALL, error=0.3)  # a kernel whose float32 product is wrong is never chosen
    assert blas_kernel.second_kernel("Haswell", AVX512) is None


@pytest.mark.slow  # child interpreters, one per kernel tried
def test_the_real_openblas_answers():
    own = blas_kernel.own_kernel()
    assert own, "numpy's OpenBLAS is not found by threadpoolctl"
    second = blas_kernel.second_kernel(own)
    assert second is None or second.lower() != own.lower()
