"""Array backends: array_api_strict, CuPy (or a clear refusal without a GPU), the engine without
widget libraries, and only the backend modules naming numpy/cupy/scipy.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.special

import bertviz_lite as bv
from bertviz_lite import backend, engine

from ..conftest import SMALL
from ..helpers import golden_keys


def test_engine_runs_under_array_api_strict(small):
    strict = bv.load("random", seed=3, config=SMALL, backend="array_api_strict")
    assert strict.backend == "array_api_strict"
    a, b = strict.trace("strict arrays only, please"), small.trace("strict arrays only, please")
    assert a.keys() == b.keys()
    for key in a.keys():
        np.testing.assert_allclose(backend.to_host(a[key]), backend.to_host(b[key]), atol=1e-5, err_msg=key)


@pytest.mark.gpu
@pytest.mark.skipif(not backend.cupy_available(), reason="needs cupy and a CUDA GPU (cupy.is_available() is False)")
def test_cupy_matches_numpy():
    text = "The same trace on a GPU."
    cpu = bv.load("random", seed=0, backend="numpy").trace(text)
    gpu = bv.load("random", seed=0, backend="cupy").trace(text)
    assert gpu.backend == "cupy"
    worst = max(float(np.max(np.abs(backend.to_host(gpu[k]) - cpu[k]))) for k in cpu.keys())
    assert worst < 1e-4, worst


def test_cupy_backend_refused_clearly_without_gpu():
    if backend.cupy_available():
        pytest.skip("a GPU is present")
    with pytest.raises(bv.BackendError, match="GPU"):
        bv.load("random", config=SMALL, backend="cupy")


@pytest.mark.slow  # a fresh interpreter imports the package
def test_engine_imports_and_runs_with_widget_libraries_blocked():
    code = textwrap.dedent("""
        import sys
        BLOCKED = ("plotly", "ipywidgets", "matplotlib", "IPython", "anywidget")
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{name} is blocked in this test")
        sys.meta_path.insert(0, Block())
        import bertviz_lite as bv
        m = bv.load("random", seed=0, config={"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256})
        tr = m.trace("no widgets here")
        print(len(tr.keys()), bv.count_params(m).total)
        assert not [k for k in sys.modules if k.split(".")[0] in BLOCKED]
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == str(len(golden_keys(2)))


def test_only_backend_module_names_numpy_cupy_or_scipy():
    import pathlib
    import re
    pkg = pathlib.Path(bv.__file__).parent
    offenders = []
    for path in pkg.glob("*.py"):  # the engine; views/ is the widget side
        if path.name in ("backend.py", "kernels.py", "cuda_kernels.py"):  # the namespaces, the fast path's kernels
            continue
        for line in path.read_text().splitlines():
            if re.match(r"\s*(import|from)\s+(numpy|cupy|cupyx|scipy)\b", line):
                offenders.append(f"{path.name}: {line.strip()}")
    assert not offenders, offenders
