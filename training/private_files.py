"""Files the training scripts keep between runs and write as results, safely on a shared machine.

training/train_mlm_head.py and training/train_minilm_mlm.py both cache the frozen encoder's output (minutes of work)
under the shared temporary directory, where anyone could plant a folder, a file, a link or a FIFO first. So:
- the cache is a folder only this user can enter (`private_folder`: mode 0700, ours, not a link);
- a file is read without following a link or blocking on a FIFO (`open_regular`);
- a cached file is used only when everything about it checks out (`cached_arrays`), else made afresh;
- a file is written to a temporary name beside it and renamed onto it (`write_atomic`): whole or not at all,
  with the mode a new file or the replaced one should have (views.files.write_beside); the weights and their
  JSON are replaced as a pair (`write_pair`);
- an output path and the cache folder are checked with the arguments, before any work (`path_argument`,
  `output_problem`, `cache_problem`).
A path the scripts will not read or write through raises `UnsafePath`; the scripts exit 2 with its message.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from bertviz_lite.views.wire.files import check_folder, not_regular, write_beside

CACHE = Path(tempfile.gettempdir()) / f"bertviz-lite-mlm-{os.getuid()}"  # both scripts' default --cache
FREE_MARGIN = 16 * 2**20  # bytes left free on the disk after a write


class UnsafePath(Exception):
    """A path the script will not read or write through (a link, a FIFO, someone else's folder, ...)."""


def _kind(mode: int) -> str:
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else
            "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a regular file")


def private_folder(path: Path) -> Path:
    """`path` as a folder only this user can enter: made with mode 0700 if missing (its parent must exist);
    refused (UnsafePath) if it is a link, not a folder, someone else's, or open to group or others."""
    try:
        above = os.stat(path.parent)
    except FileNotFoundError:
        raise UnsafePath(f"the folder above {path} does not exist") from None
    # whoever may rename entries of the folder above (its owner; anyone, where it is open and not sticky as
    # /tmp is) can move the cache away and put a link in its place
    others = [] if above.st_uid in (0, os.getuid()) else [f"belongs to user id {above.st_uid}"]
    if above.st_mode & 0o022 and not above.st_mode & stat.S_ISVTX:
        others.append(f"is open to others without the sticky bit (mode {stat.S_IMODE(above.st_mode):o})")
    if others:
        raise UnsafePath(f"{path.parent}, the folder above {path.name}, {' and '.join(others)}: others can rename "
                         "the cache away and put a link in its place; pass a --cache in a folder of yours or in /tmp")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        raise UnsafePath(f"the folder above {path} does not exist") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is {_kind(st.st_mode)}, not a folder of yours")
    if st.st_uid != os.getuid():
        raise UnsafePath(f"{path} belongs to user id {st.st_uid}, not to you ({os.getuid()}): someone could have "
                         "planted features there")
    if st.st_mode & 0o077:
        raise UnsafePath(f"{path} is open to others (mode {stat.S_IMODE(st.st_mode):o}); chmod 700 it, or pass "
                         "another --cache")
    return path


@contextlib.contextmanager
def open_regular(path: Path, *, owned: bool = False):
    """A regular file opened for reading, without following a link and without blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise UnsafePath(f"{path} cannot be opened as a plain file ({e.strerror})") from None
    st = os.fstat(fd)  # before fdopen, which refuses a folder with a raw IsADirectoryError
    problem = (f"{path} is {_kind(st.st_mode)}, not a regular file" if not stat.S_ISREG(st.st_mode) else
               f"{path} belongs to user id {st.st_uid}, not to you" if owned and st.st_uid != os.getuid() else None)
    if problem:
        os.close(fd)
        raise UnsafePath(problem)
    with os.fdopen(fd, "rb") as f:
        yield f


def read_regular(path: Path) -> bytes:
    with open_regular(path) as f:
        return f.read()


def regular_or_absent(path: Path) -> None:
    """Writing onto `path` replaces a regular file or makes a new one; anything else is refused."""
    mode = not_regular(path)
    if mode is not None:
        raise UnsafePath(f"{path} exists and is {_kind(mode)}: the script writes only onto a regular file "
                         "or a new name; remove it or choose another --out")


def check_free_space(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed + FREE_MARGIN:
        raise OSError(errno.ENOSPC, f"{folder} has {free / 2**20:.1f} MiB free; writing needs "
                      f"{(needed + FREE_MARGIN) / 2**20:.1f} MiB (with a {FREE_MARGIN // 2**20} MiB margin)")


def write_atomic(path: Path, data, size: int | None = None) -> None:
    """`data` (bytes, or a function that writes into a binary file, `size` bytes about) into a temporary file
    beside `path` (views.files.write_beside: the mode a new file or the replaced one should have), flushed to
    disk, then renamed onto it (os.replace): a reader sees the old file or the whole new one, never a fragment;
    on any error the temporary file goes."""
    regular_or_absent(path)
    check_free_space(path.parent, len(data) if size is None else size)
    tmp = write_beside(path, data, sync=True)
    try:
        regular_or_absent(path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def pending(out: Path) -> Path:
    """Where write_pair puts the new JSON while it replaces the weights: `m.json.next` beside `m.safetensors`."""
    return out.with_suffix(".json.next")


def write_pair(out: Path, data: bytes, info: str) -> None:
    """The weights `out` and their JSON, replaced as a pair: both written whole to temporary files first (a
    full disk or any error leaves the earlier pair as it was), then the JSON renamed to pending(out), the
    weights onto `out`, and the JSON onto its name last. A reader that finds weights its JSON does not record
    takes the pending JSON's record (bertviz_lite.trained.read_trained): a kill between two renames leaves a pair that
    loads, the old one or the new."""
    text = info.encode("utf-8")
    json_path, next_path = out.with_suffix(".json"), pending(out)
    for path in (out, json_path, next_path):
        regular_or_absent(path)
    check_free_space(out.parent, len(data) + 2 * len(text))
    made = []
    try:
        made.append(write_beside(out, data, sync=True))
        made.append(write_beside(json_path, text, sync=True))
        for path in (out, json_path, next_path):
            regular_or_absent(path)
        os.replace(made[1], next_path)
        made[1] = next_path
        os.replace(made[0], out)
        made[0] = None
        os.replace(next_path, json_path)
    except BaseException:
        for tmp in made:
            if tmp is not None and tmp != next_path:
                tmp.unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------------------------
# arguments: an output path, the cache folder, checked before any work
# ------------------------------------------------------------------------------------------


def whole_number(lo: int, hi: int | None = None):
    """argparse's type for a whole number in lo..hi (hi None: no upper bound)."""
    import argparse

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {lo}..{hi}, got {v}" if hi else f"expected >= {lo}, got {v}")
        return v
    return parse


def path_argument(text: str) -> Path:
    """argparse's type for a file name: a NUL, or a part longer than a file name can be, is refused by name
    (the file system call gave a raw ValueError or OSError)."""
    import argparse
    if "\x00" in text:
        raise argparse.ArgumentTypeError("the file name contains a NUL character ('\\x00'), which no file name "
                                         "can hold; give another name")
    long = [part for part in Path(text).parts if len(os.fsencode(part)) > 255]
    if long:
        raise argparse.ArgumentTypeError(f"a part of the path is {len(os.fsencode(long[0])):,} bytes long; a file "
                                         "name holds at most 255: give a shorter name")
    return Path(text)


def output_problem(out: Path, reads: str | None = None) -> str | None:
    """Why the weights file `out` (and its .json) cannot be read (`reads`: the option that reads them) or
    written: said before any work, as one line; None when it can."""
    if out.suffix != ".safetensors":
        return f"--out must name a .safetensors file, got {out}"
    for path in (out, out.with_suffix(".json"), pending(out)):  # no link, FIFO or folder read or written through
        try:
            regular_or_absent(path)
        except UnsafePath as e:
            return str(e)
    if reads:
        need = out.with_suffix(".json") if reads == "--report" else out
        return None if need.is_file() else f"{reads} needs the file {need}, which does not exist"
    try:
        check_folder(out, out, what="--out")
    except OSError as e:
        return str(e)
    return None


class RunFileError(Exception):
    """A file the user named (--report's JSON, --init, --evaluate's --out) that is not what it should be."""


def read_run_json(path: Path, render: Callable[[dict], str]) -> str:
    """--report: a run's JSON, read without following a link or blocking on a FIFO (UnsafePath), rendered by
    `render`; a file that is no run's JSON (not JSON, nested too deeply, keys missing) is one RunFileError."""
    import json
    try:
        return render(json.loads(read_regular(path).decode("utf-8")))
    except RecursionError:
        raise RunFileError(f"--report: {path} is nested too deeply to be a run's JSON; give the --out of a run") \
            from None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise RunFileError(f"--report: {path} is not a run's JSON ({type(e).__name__}: {str(e)[:120]}); give the "
                           "--out of a run") from None


def one_line(message: str) -> str:
    """A CheckpointError's list of problems on one line."""
    return message.replace("\n  - ", "; ").replace("\n", " ")


def refusals_as_lines(work: Callable[[], int]) -> int:
    """work()'s exit code; a refusal (UnsafePath, RunFileError, a CheckpointError of a file the user named) is one
    line on stderr and exit code 2, a full disk one line and 1 (both scripts' mains)."""
    import sys

    from bertviz_lite.errors import CheckpointError
    try:
        return work()
    except (UnsafePath, RunFileError, CheckpointError) as e:
        print(f"refused: {one_line(str(e))}; nothing written", file=sys.stderr)
        return 2
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        print(f"not enough disk space: {e.strerror}; nothing written (any earlier file is unchanged)", file=sys.stderr)
        return 1


def cache_problem(cache: Path) -> str | None:
    """Why `cache` cannot hold the features (private_folder refuses it), as one line; None when it can."""
    try:
        private_folder(cache)
    except UnsafePath as e:
        return f"--cache {cache}: {e}"
    except OSError as e:
        return f"--cache {cache}: {e.strerror or e}; pass another --cache"
    return None


# ------------------------------------------------------------------------------------------
# a cache of arrays
# ------------------------------------------------------------------------------------------


def sha256_of(arrays: dict) -> str:
    """The sha256 of named arrays: each one's name, dtype, shape and bytes, in the order given."""
    h = hashlib.sha256()
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        h.update(f"{name} {a.dtype.str} {a.shape}\n".encode())
        h.update(a.data)
    return h.hexdigest()


def model_sha256(model) -> str:
    """The sha256 of a model's weights (sha256_of, in name order): what its features depend on besides the input."""
    from bertviz_lite.backend import to_host
    return sha256_of({k: to_host(model.weights[k]) for k in sorted(model.weights)})


def _stale(stored: dict, key: str, names, problem) -> str | None:
    """Why a cache file's arrays cannot be used (None: they can)."""
    if set(stored) != {"key", "sha256", *names}:
        return f"arrays {sorted(stored)}, expected {sorted(['key', 'sha256', *names])}"
    if str(stored["key"]) != key:
        return "made from other inputs (its key differs)"
    arrays = {name: stored[name] for name in names}  # in the order they were written
    why = problem(arrays) if problem is not None else None
    if why:
        return why
    for name, a in arrays.items():
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            return f"{name} holds NaN or infinite values"
    if sha256_of(arrays) != str(stored["sha256"]):
        return "the arrays' bytes do not match the sha256 stored with them"
    return None


def _oversized(raw) -> str | None:
    """Why an .npz file cannot be read within its own size (an array's header declares more bytes than its
    member holds: 10**12 rows was a raw MemoryError), or None; numpy's format versions 1 and 2 only."""
    import math
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    with zipfile.ZipFile(raw) as z:
        for info in z.infolist():
            with z.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version not in readers:
                    return f"{info.filename} is in .npy format {version}, not 1.0 or 2.0"
                shape, _, dtype = readers[version](member)
            if math.prod(shape) * dtype.itemsize > info.file_size:
                return f"{info.filename}'s header declares shape {shape}, more than its {info.file_size:,} bytes hold"
    return None


def cached_arrays(cache: Path, name: str, key: str, names: tuple[str, ...], make: Callable[[], dict],
                  problem: Callable[[dict], str | None] | None = None, say: Callable[[str], None] = print) -> dict:
    """The arrays `make()` returns ({name: array} with these `names`), stored once in the private folder `cache`
    (private_folder) as `{name}-{key[:16]}.npz` beside `key` and their sha256, written atomically. A stored file is
    used only if it is a regular file of ours (a link, a FIFO or someone else's file raises UnsafePath) holding
    `key` and exactly these arrays, finite where they are floats, whose sha256 matches and in which
    `problem(arrays)` finds nothing wrong (None, or a sentence saying why not); otherwise the arrays are made
    afresh and replace it. The cache only saves time: a write that fails (a full disk) is said, and the run goes
    on with the arrays just made."""
    path = private_folder(cache) / f"{name}-{key[:16]}.npz"
    if os.path.lexists(path):
        try:
            with open_regular(path, owned=True) as raw:
                why = _oversized(raw)
                if why is None:
                    raw.seek(0)
                    with np.load(raw, allow_pickle=False) as npz:
                        stored = {k: npz[k] for k in npz.files}  # each read once
            why = why or _stale(stored, key, names, problem)
            if why is None:
                return {k: stored[k] for k in names}
        except UnsafePath as e:
            raise UnsafePath(f"the feature cache: {e}; remove it, or pass another --cache") from None
        except (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile) as e:
            why = f"unreadable ({type(e).__name__}: {e})"
        say(f"  the cached features {path} cannot be used ({why}): made afresh")
    made = make()
    arrays = {k: made[k] for k in names}
    record = {"key": np.array(key), "sha256": np.array(sha256_of(arrays)), **arrays}
    try:
        write_atomic(path, lambda f: np.savez(f, **record), sum(a.nbytes for a in arrays.values()))
    except UnsafePath as e:  # something made at its name meanwhile
        raise UnsafePath(f"the feature cache: {e}; remove it, or pass another --cache".replace(
            "; remove it or choose another --out", "")) from None
    except OSError as e:
        say(f"  the features were not cached ({e})")
    return arrays


if __name__ == "__main__":  # every file in training/ answers --help (tests/training); this one runs nothing
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0] + " A module that train_mlm_head.py and "
                            "train_minilm_mlm.py import: it has nothing to run.").parse_args()
