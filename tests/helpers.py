"""Helpers the test files share (defined once): where the repository is, the shipped vocabulary,
a tensor on the host as float64, one head's attention map over the real tokens, and a checkpoint
folder in Hugging Face layout."""

from __future__ import annotations

import contextlib
import json
import shutil
import traceback
import tracemalloc
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

import bertviz_lite as bv
from bertviz_lite.backend import to_host
from bertviz_lite.weights import to_hf_state

ROOT = Path(__file__).resolve().parents[1]
VOCAB = Path(bv.__file__).parent / "data" / "vocab.txt"

# the golden key list: the order of one layer's steps, written out by hand
LAYER_KEYS = ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.probs", "attn.context", "attn.concat",
              "attn.out", "attn.resid", "attn.ln", "ffn.up", "ffn.act", "ffn.down", "ffn.resid", "ffn.ln"]
EMBED_KEYS = ["embed.token", "embed.position", "embed.segment", "embed.sum", "embed.ln"]

# Named tolerances for two computations of one value (never bit for bit: PITFALLS, "The BLAS kernel is a
# property of the CPU"). Two float32 BLAS products of the same numbers (one product against a packed one, a batch
# of one against a batch of many, one BLAS thread against two, OpenBLAS's Haswell kernels against SkylakeX's)
# round apart by a few units in the last place of what they sum: 1e-7 seen on BERT-sized layers.
FLOAT32_PRODUCT_ATOL = 1e-5


def peak_bytes(call) -> int:
    """The most memory Python's allocators (numpy's included) held at once during `call()`, over what was held
    before it: the work a call did, the same on any machine however busy (a unit test counts work, never time)."""
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def rewrite_npz(path: Path, **changes) -> None:
    """An .npz file with some of its arrays replaced or added (a planted or damaged cache file)."""
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    arrays.update(changes)
    with open(path, "wb") as out:
        np.savez(out, **arrays)


FOLDER_PLANTS = ["symlink", "open to others", "a file", "someone else's"]


def write_trained(path: Path, tensors: dict, about) -> Path:
    """A trained weights file as bertviz_lite.trained reads it, written here without training's writer: the
    tensors with `about` as their bertviz_lite metadata (a dict, or the raw text), and the JSON beside them that
    records the sha256 of the file's bytes."""
    import hashlib
    save_file(tensors, str(path), metadata={"bertviz_lite": about if isinstance(about, str) else json.dumps(about)})
    record = {"name": path.name, "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    path.with_suffix(".json").write_text(json.dumps({"file": record}), encoding="utf-8")
    return path


def plant_folder(path: Path, plant: str) -> Path:
    """Something other than a private folder of ours at `path` (one of FOLDER_PLANTS); returns the folder a
    symlink points to, which must stay empty. Giving a folder to another user needs root (CI runs as root)."""
    import os

    import pytest

    elsewhere = path.parent / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if plant == "symlink":
        path.symlink_to(elsewhere)
    elif plant == "open to others":
        path.mkdir()
        path.chmod(0o755)
    elif plant == "a file":
        path.write_bytes(b"")
    else:
        if os.getuid() != 0:
            pytest.skip("giving a folder to another user needs root (CI runs as root)")
        path.mkdir(mode=0o700)
        os.chown(path, 12345, 12345)
    return elsewhere


OUT_PLANTS = ["fifo", "symlink", "folder"]


def plant_at_out(out: Path, which: str, plant: str) -> Path:
    """Something no script may write onto (one of OUT_PLANTS) at a weights file `out` (which="weights") or at
    its .json, inside tmp_path only; returns the file a symlink points to, which must keep b"keep me"."""
    import os

    path = out if which == "weights" else out.with_suffix(".json")
    victim = out.parent / "victim"
    victim.write_bytes(b"keep me")
    if plant == "fifo":
        os.mkfifo(path)
    elif plant == "symlink":
        path.symlink_to(victim)
    else:
        path.mkdir()
    return victim


def golden_keys(L, mlm=False):
    keys = EMBED_KEYS + [f"layer.{l}.{k}" for l in range(L) for k in LAYER_KEYS] + ["pooler.out"]
    return keys + (["mlm.logits"] if mlm else [])


def host(x) -> np.ndarray:
    """A recorded tensor or weight (NumPy, CuPy, the GPU stand-in) as a float64 NumPy array: the one way
    tests read a device array (an implicit np.asarray fails on cupy and on the stand-in)."""
    return np.asarray(to_host(x), dtype=np.float64)


def host_weights(model) -> dict[str, np.ndarray]:
    """A model's weights on the host, in their own dtype."""
    return {k: to_host(v) for k, v in model.weights.items()}


# every way python reads an array's values on the host: bool(x), float(x), int(x), complex(x), x as an index,
# np.asarray(x), and dlpack (to_host's own read). On a GPU each one waits for the device.
HOST_READS = ("__bool__", "__float__", "__int__", "__complex__", "__index__", "__array__", "__dlpack__")


@contextlib.contextmanager
def host_reads():
    """Records every host read of an array_api_strict array (the GPU stand-in's) made inside the block, as
    ("__bool__", "engine.py:254") pairs in a list the block receives. (array_api_strict's device1 allows
    bool() and float(), which cupy allows too, each a sync; counting them is how a test says there are none.)"""
    import array_api_strict
    cls = type(array_api_strict.asarray(0.0))
    reads, saved = [], {name: cls.__dict__[name] for name in HOST_READS}

    def counted(name, method):
        def read(self, *args, **kwargs):
            caller = traceback.extract_stack(limit=2)[0]
            reads.append((name, f"{Path(caller.filename).name}:{caller.lineno}"))
            return method(self, *args, **kwargs)
        return read

    for name, method in saved.items():
        setattr(cls, name, counted(name, method))
    try:
        yield reads
    finally:
        for name, method in saved.items():
            setattr(cls, name, method)


def real_idx(tr) -> list[int]:
    """The positions of the real (unpadded) tokens."""
    return [i for i, m in enumerate(tr.mask) if m]


def real_map(tr, layer, head=None, *, name="attn.probs", rows=None, cols=None) -> np.ndarray:
    """`name`'s maps of one layer ([head, query, key]) or one head ([query, key]) over the real tokens;
    rows / cols: token positions to keep instead (default: every real token)."""
    idx = real_idx(tr)
    rows, cols = (idx if rows is None else rows), (idx if cols is None else cols)
    a = to_host(tr.get(name, layer=layer))[:, rows][:, :, cols]
    return a if head is None else a[head]


def cli_run(capsys, argv) -> tuple[int, str, str]:
    """The bertviz-lite command run in this process: its exit status, stdout and stderr (argparse's own refusals,
    a SystemExit, give their status too)."""
    from bertviz_lite.cli import main
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def write_folder(folder: Path, model, *, config: dict | None = None, state: dict | None = None) -> Path:
    """A BertModel-layout folder of `model` (float32 safetensors, config.json, vocab.txt)."""
    folder.mkdir(parents=True, exist_ok=True)
    if state is None:
        state = {k.removeprefix("bert."): v for k, v in to_hf_state(host_weights(model)).items()}
    save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config or model.config.to_hf_dict()))
    shutil.copy(VOCAB, folder / "vocab.txt")
    return folder


# ------------------------------------------------------------------------------------------
# gradients and the browser, shared by several test files
# ------------------------------------------------------------------------------------------


def numeric_grad(f, x, h=1e-6):
    """Central finite differences of the scalar f() in every entry of x (changed in place, restored)."""
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + h
        up = f()
        x[i] = old - h
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * h)
    return g


CHROMIUM = "/usr/bin/chromium"  # Debian's, never `playwright install`
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser_or_skip():
    """playwright's sync_api, or the calling test module skipped with the reason (no chromium, no playwright)."""
    import os

    import pytest
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: the browser tests drive the system chromium (apt-get install chromium)",
                    allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")


def chromium_context(sync_api, width: int = 1300, height: int = 1000):
    """A headless chromium context for a module's `browser` fixture (`yield from chromium_context(sync_api)`)."""
    import tempfile
    with sync_api.sync_playwright() as p, tempfile.TemporaryDirectory(prefix="bvl-chromium-",
                                                                      ignore_cleanup_errors=True) as profile:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_ARGS, viewport={"width": width, "height": height})
        yield ctx
        ctx.close()


MINILM_MLM_SHIPPED = bv.loading.packaged_minilm_mlm_path()  # read once: tests point the package's data folder elsewhere


def copy_minilm_mlm(tmp_path):
    """The shipped minilm-mlm weights and their JSON, copied into tmp_path (to break or rewrite)."""
    import shutil
    path = tmp_path / MINILM_MLM_SHIPPED.name
    shutil.copy(MINILM_MLM_SHIPPED, path)
    shutil.copy(MINILM_MLM_SHIPPED.with_suffix(".json"), path.with_suffix(".json"))
    return path
