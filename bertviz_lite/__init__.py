"""bertviz-lite: watch BERT compute, one formula line at a time.

    import bertviz_lite as bv
    model = bv.load("minilm")              # trained, offline; or "random", a folder, a Hub id
    tr = model.trace("I love machine learning")
    tr.get("attn.probs", layer=0)           # (head, query, key)
    print(tr.shapes()); print(bv.count_params(model).table()); print(bv.reconcile())

The engine (this package's top level) imports no widget library; views live in
`bertviz_lite.views` and are imported only when used.
"""

import os as _os
import sys as _sys

if "numpy" not in _sys.modules:
    # OpenBLAS keeps its worker threads spinning for 2^28 cycles (~0.1 s) after every matrix product,
    # so between products the second core is busy doing nothing and the threaded softmax and GELU of
    # the fast path (kernels.py) cannot use it: at 512 tokens they ran 108 and 89 ms per trace instead
    # of 52 and 52 (benchmarks/bench_engine.py). 2^4 cycles lets the workers sleep at once; the matrix
    # products did not slow down. OpenBLAS reads this when numpy loads, so it only applies when
    # bertviz_lite is imported first; a value you set yourself is kept. Once numpy has loaded, the
    # variable is taken out again, so child processes get the environment the user gave this one.
    _SET_TIMEOUT = "OPENBLAS_THREAD_TIMEOUT" not in _os.environ
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
else:
    _SET_TIMEOUT = False

from . import analysis, corpus  # noqa: E402 (the lines above must run before numpy loads)

if _SET_TIMEOUT:  # numpy, and with it OpenBLAS, has loaded and read it
    _os.environ.pop("OPENBLAS_THREAD_TIMEOUT", None)
from .batch import BatchTrace
from .config import BertConfig
from .comparison import Comparison, compare
from .edits import Edit, Edits, ablate, replace, scale
from .errors import (BackendError, BertVizError, CheckpointError, EditError, InputTooLongError, ModelTooLargeError,
                     NotARegularFileError, OutOfRangeError, PatternError, TraceTooLargeError, WeightsNotFoundError)
from .foreign import prettify_tokens
from .loading import load
from .model import Bert, MaskPrediction
from .params import component_counts, count_params, family_ledgers, reconcile
from .schema import STEPS, trace_keys
from .table import Table
from .trace import Trace

__version__ = "0.1.0"

_VIEWS_API = ("explore", "export_html", "head_view", "model_view", "neuron_view")  # in bertviz_lite.views
# the modules a user reaches into (bv.analysis.head_summary, bv.corpus.head_stats, bv.engine's formula lines,
# bv.schema.STEPS, bv.views); the others are the package's insides, importable but not listed by dir()
_USER_MODULES = ("analysis", "corpus", "engine", "schema", "views")

__all__ = [
    "BackendError", "BatchTrace", "Bert", "BertConfig", "BertVizError", "CheckpointError", "Comparison", "Edit",
    "EditError", "Edits", "InputTooLongError", "MaskPrediction", "ModelTooLargeError", "NotARegularFileError",
    "OutOfRangeError", "PatternError", "STEPS", "Table", "Trace", "TraceTooLargeError", "WeightsNotFoundError",
    "ablate", "compare", "component_counts", "count_params", "family_ledgers", "load", "prettify_tokens",
    "reconcile", "replace", "scale", "trace_keys", *_VIEWS_API, *_USER_MODULES,
]


def __dir__():  # what a user calls: __all__ (the views' entry points load on first use) and the version
    return sorted(set(__all__) | {"__version__"})


def __getattr__(name):
    # the views (and through them plotly, matplotlib, anywidget) load only when first used
    if name == "views":
        import importlib
        return importlib.import_module(".views", __name__)
    if name in _VIEWS_API:
        from . import views
        return getattr(views, name)
    if name in _USER_MODULES:  # engine and schema are loaded already; listed here for `from bertviz_lite import *`
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'bertviz_lite' has no attribute {name!r}")
