"""The weights files that training/ ships in bertviz_lite/data/, read and checked: one reader, one checksum rule.

Two files, both made in NumPy by the scripts in training/ (training/README.md):
- "head": `minilm_mlm_head.safetensors`, the masked-LM head fitted on the frozen MiniLM
  (training/train_mlm_head.py), which load("minilm") attaches;
- "minilm-mlm": `minilm_mlm.safetensors`, MiniLM's last layers and the head trained together
  (training/train_minilm_mlm.py), which load("minilm-mlm") puts in.

Each is a safetensors file whose `bertviz_lite` metadata names its format, its encoder and where it sits (the
head: the layer it reads; minilm-mlm: its first trained layer), with the run's JSON beside it (same name, .json).
**The checksum rule**: that JSON's `file.sha256` is the sha256 of the weights file's bytes. A run replaces the
weights, then their JSON (training/private_files.write_pair), so weights the JSON does not record are taken
when the JSON waiting beside them (`.json.next`) records them: a run stopped between the two renames.

`read_trained` refuses, with one CheckpointError naming the file and how to restore it, a file that is missing,
larger than such a file can be, not the bytes its JSON records, unreadable, made for another encoder or layer,
or that holds missing, unexpected, mis-shaped, non-float or non-finite tensors. The writer is training's
(training/weights_files.py); the package only reads.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from . import backend
from . import weights as W
from .config import BertConfig
from .errors import CheckpointError
from .model import MINILM_REPO

DATA = Path(__file__).resolve().parent / "data"
MAX_METADATA = 1 << 16  # characters of a file's bertviz_lite metadata JSON: a few hundred are written


@dataclass(frozen=True)
class Trained:
    """One kind of trained file: its name in bertviz_lite/data/, the format its metadata declares, the metadata
    entry that says where it sits, the words messages use for it, and the script in training/ that makes it."""
    file: str
    format: str
    place: str  # "layer": the layer the head reads (the last); "first": the first trained layer
    what: str
    script: str
    instead: str = ""  # another way out, said when the file is missing


KINDS = {
    "head": Trained("minilm_mlm_head.safetensors", "bertviz-lite mlm head 1", "layer", "the masked-LM head file",
                    "training/train_mlm_head.py", instead="load('minilm', mlm=False)"),
    "minilm-mlm": Trained("minilm_mlm.safetensors", "bertviz-lite minilm-mlm 1", "first",
                          "the minilm-mlm weights file", "training/train_minilm_mlm.py"),
}


def packaged_path(kind: str) -> Path:
    """Where the package keeps the file of this kind."""
    return DATA / KINDS[kind].file


def packaged_head_path() -> Path:
    return packaged_path("head")


def packaged_minilm_mlm_path() -> Path:
    return packaged_path("minilm-mlm")


def file_sha256(path: Path) -> str:
    """The checksum rule: sha256 of the file's bytes (the JSON beside it records it as file.sha256)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def most_bytes(kind: str, config: BertConfig) -> int:
    """The most bytes a file of this kind can hold: every tensor it may hold as float32, and 1 MiB of header."""
    shapes = {k: W.mlm_shapes(config)[k] for k in W.MLM_LEARNED}
    if KINDS[kind].place == "first":
        shapes.update({k: s for k, s in W.param_shapes(config).items() if k.startswith("layer.")})
    return 4 * sum(math.prod(s) for s in shapes.values()) + 2**20


def _restore(kind: str, path: Path) -> str:
    t = KINDS[kind]
    if path.resolve() == packaged_path(kind).resolve():
        return (f"restore it with `git checkout -- bertviz_lite/data/{t.file}` (or reinstall bertviz-lite), or "
                f"make it again with {t.script}")
    return f"make it again with {t.script} --out, or give another {kind} file"  # the user's own file


def _recorded_sha256(info_path: Path, name: str, restore: str) -> str:
    """The file.sha256 a run's JSON records (64 hexadecimal digits), or one CheckpointError."""
    try:
        expected = json.loads(info_path.read_text(encoding="utf-8"))["file"]["sha256"]
        if not (isinstance(expected, str) and len(expected) == 64 and set(expected) <= set("0123456789abcdef")):
            raise ValueError(f"its file.sha256 is a {type(expected).__name__}, not 64 hexadecimal digits")
    except RecursionError:  # nested 100,000 deep
        raise CheckpointError(f"{info_path}, which records the sha256 of {name}, is nested too deeply to "
                              f"read: {restore}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{info_path}, which records the sha256 of {name}, could not be read ({e}): "
                              f"{restore}") from None
    return expected


def _read_safetensors(path: Path, cannot_read) -> tuple[dict, dict]:
    """(bertviz_lite metadata as a dict, every tensor); a file that cannot be read, or whose metadata is too
    long, nested too deeply or not a JSON object, is a CheckpointError with the message cannot_read(why)."""
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(str(path), framework="np") as f:
            about = (f.metadata() or {}).get("bertviz_lite", "{}")
            if not isinstance(about, str) or len(about) > MAX_METADATA:
                raise ValueError(f"its bertviz_lite metadata is longer than {MAX_METADATA:,} characters")
            meta = json.loads(about)
            state = {k: f.get_tensor(k) for k in f.keys()}
        if not isinstance(meta, dict):
            raise ValueError("its bertviz_lite metadata is not a JSON object")
    except RecursionError:
        raise CheckpointError(cannot_read("its metadata JSON is nested too deeply")) from None
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise CheckpointError(cannot_read(e)) from e
    return meta, state


def tensor_problems(state: dict, shapes: dict) -> list[str]:
    """What is wrong with a file's tensors against the shapes expected: missing, mis-shaped, not float16/32,
    non-finite, unexpected."""
    problems = []
    for k, shape in shapes.items():
        if k not in state:
            problems.append(f"missing tensor {k} (expected shape {tuple(shape)})")
        elif tuple(state[k].shape) != tuple(shape):
            problems.append(f"{k} has shape {tuple(state[k].shape)}, expected {tuple(shape)}")
        elif str(state[k].dtype) not in ("float16", "float32"):  # an integer tensor would become float silently
            problems.append(f"{k} has dtype {state[k].dtype}, expected float16 or float32")
        elif backend.host_bad_values(state[k]):
            problems.append(f"{k} holds {backend.host_bad_values(state[k])} NaN/Inf value(s)")
    return problems + [f"unexpected tensor {k}" for k in sorted(set(state) - set(shapes))]


def layer_number(value, num_layers: int) -> int | None:
    """A layer number as the writer stores it (a string of digits), or None when it is not one of 0..L-1."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and int(value) < num_layers:
        return int(value)
    return None


def _expected_shapes(kind: str, meta: dict, config: BertConfig, problems: list) -> dict:
    """The tensors a file of this kind must hold, from its metadata; what is wrong with the metadata goes to
    problems."""
    t, L = KINDS[kind], config.num_layers
    shapes = {k: W.mlm_shapes(config)[k] for k in W.MLM_LEARNED}
    if meta.get("format") != t.format or meta.get("encoder") != MINILM_REPO:
        problems.append(f"metadata format {meta.get('format')!r} for encoder {meta.get('encoder')!r}, expected "
                        f"{t.format!r} for {MINILM_REPO}")
        return shapes
    if t.place == "layer" and str(meta.get("layer")) != str(L - 1):
        problems.append(f"fitted on layer {meta.get('layer')!r}, but the head reads the last layer {L - 1}")
    if t.place == "first":
        at = layer_number(meta.get("first"), L)
        if at is None:  # "abc", "3.0" or [3]
            problems.append(f"metadata first {str(meta.get('first'))[:40]!r} is not a layer number "
                            f"0..{L - 1} (the first trained layer)")
        else:
            shapes.update({k: s for k, s in W.param_shapes(config).items()
                           if k.startswith("layer.") and int(k.split(".")[1]) >= at})
    return shapes


def read_trained(kind: str, path, config: BertConfig) -> dict:
    """The tensors of a trained file of this kind ("head" or "minilm-mlm") as float32, every one checked
    against `config` (MiniLM's): see the module's docstring for what is refused."""
    t, path = KINDS[kind], Path(path)
    restore = _restore(kind, path)
    if not path.is_file():
        also = f", or {t.instead}" if t.instead else ""
        raise CheckpointError(f"{t.what} {path} is missing: {restore}{also}")
    size, most = path.stat().st_size, most_bytes(kind, config)
    if size > most:  # a 4 GiB (sparse) file would be read whole before any check
        raise CheckpointError(f"{t.what} {path} is {size:,} bytes, more than the {most:,} that its tensors for "
                              f"{MINILM_REPO} take as float32: {restore}")
    info_path = path.with_suffix(".json")
    expected = _recorded_sha256(info_path, path.name, restore)
    digest = file_sha256(path)
    waiting = path.with_suffix(".json.next")
    if digest != expected and waiting.is_file() and not waiting.is_symlink() and \
            _recorded_sha256(waiting, path.name, restore) == digest:
        expected = digest  # a run was stopped between renaming the weights and renaming their JSON
    if digest != expected:
        raise CheckpointError(f"{t.what} {path} is corrupted: its sha256 is not the {expected[:16]}... that "
                              f"{info_path.name} records. {restore}")
    meta, state = _read_safetensors(path, lambda why: f"{t.what} {path} could not be read ({why}): {restore}")
    problems = []
    shapes = _expected_shapes(kind, meta, config, problems)
    problems += tensor_problems(state, shapes)
    if problems:
        raise CheckpointError(f"{t.what} {path} does not fit {MINILM_REPO} (hidden size {config.hidden_size}, "
                              f"vocabulary {config.vocab_size}):\n  - " + "\n  - ".join(problems) + f"\n{restore}")
    return {k: backend.host_float32(state[k]) for k in shapes}
