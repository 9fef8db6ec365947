"""The writer of the weights files training ships in bertviz_lite/data/; the package's reader is
bertviz_lite/trained.py (read_trained), which holds the format and the one checksum rule: the run's JSON records
the file's name, size and the sha256 of its bytes (`file_record`), and the two are replaced as a pair
(private_files.write_pair).

Both writers give the same bytes for the same tensors: tensors sorted by name, one metadata entry whose JSON has
sorted keys (safetensors writes several entries in hash order), so `--check` can compare a fresh run's bytes.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from safetensors.numpy import save_file

from bertviz_lite import backend
from bertviz_lite import weights as W
from bertviz_lite.model import MINILM_REPO
from bertviz_lite.trained import KINDS


def _save(path, tensors: dict, about: dict) -> None:
    save_file({k: tensors[k] for k in sorted(tensors)}, str(path),
              metadata={"bertviz_lite": json.dumps(about, sort_keys=True)})


def save_mlm_head(path, head: dict, *, encoder: str = MINILM_REPO, layer: int) -> None:
    """A fitted head (the five learned tensors, float32) with metadata naming its encoder and the layer it reads."""
    missing = sorted(set(W.MLM_LEARNED) - set(head))
    if missing:
        raise ValueError(f"a head needs {list(W.MLM_LEARNED)}; missing {missing}")
    _save(path, {k: backend.host_float32(head[k]) for k in W.MLM_LEARNED},
          {"format": KINDS["head"].format, "encoder": encoder, "layer": str(layer)})


def save_minilm_mlm(path, tensors: dict, *, first: int) -> None:
    """The trained layers (first .. L-1) and the head, float16 as given, with metadata naming the encoder and the
    first trained layer."""
    _save(path, tensors, {"format": KINDS["minilm-mlm"].format, "encoder": MINILM_REPO, "first": str(first)})


def as_bytes(save, *args, **kwargs) -> bytes:
    """What `save(path, *args, **kwargs)` writes, as bytes (written in a temporary folder)."""
    with tempfile.TemporaryDirectory() as d:
        fresh = Path(d) / "weights.safetensors"
        save(fresh, *args, **kwargs)
        return fresh.read_bytes()


def file_record(name: str, data: bytes) -> dict:
    """The JSON's `file` entry: what bertviz_lite.trained checks the weights' bytes against."""
    return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


if __name__ == "__main__":  # every file in training/ answers --help (tests/training); this one runs nothing
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0] + " A module the training scripts import: it has "
                            "nothing to run.").parse_args()
