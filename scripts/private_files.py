"""Files the training scripts keep between runs and write as results, safely on a shared machine.

scripts/train_mlm_head.py and scripts/train_minilm_mlm.py both cache the frozen encoder's output (minutes of work)
under the shared temporary directory, where anyone could plant a folder, a file, a link or a FIFO first. So:
- the cache is a folder only this user can enter (`private_folder`: mode 0700, ours, not a link);
- a file is read without following a link or blocking on a FIFO (`open_regular`);
- a cached file is used only when everything about it checks out (`cached_arrays`), else made afresh;
- a file is written to a temporary name beside it and renamed onto it (`write_atomic`): whole or not at all.
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

from bertviz_lite.views.files import not_regular

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
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path} is {_kind(st.st_mode)}, not a regular file")
        if owned and st.st_uid != os.getuid():
            raise UnsafePath(f"{path} belongs to user id {st.st_uid}, not to you")
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
    beside `path`, flushed to disk, then renamed onto it (os.replace): a reader sees the old file or the whole
    new one, never a fragment; on any error the temporary file goes."""
    regular_or_absent(path)
    check_free_space(path.parent, len(data) if size is None else size)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data) if isinstance(data, bytes) else data(f)
            f.flush()
            os.fsync(f.fileno())
        regular_or_absent(path)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
            with open_regular(path, owned=True) as raw, np.load(raw, allow_pickle=False) as npz:
                stored = {k: npz[k] for k in npz.files}  # each read once
            why = _stale(stored, key, names, problem)
            if why is None:
                return {k: stored[k] for k in names}
        except UnsafePath as e:
            raise UnsafePath(f"the feature cache: {e}; remove it, or pass another --cache") from None
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            why = f"unreadable ({type(e).__name__}: {e})"
        say(f"  the cached features {path} cannot be used ({why}): made afresh")
    made = make()
    arrays = {k: made[k] for k in names}
    record = {"key": np.array(key), "sha256": np.array(sha256_of(arrays)), **arrays}
    try:
        write_atomic(path, lambda f: np.savez(f, **record), sum(a.nbytes for a in arrays.values()))
    except OSError as e:
        say(f"  the features were not cached ({e})")
    return arrays


if __name__ == "__main__":  # every file in scripts/ answers --help (tests/test_scripts.py); this one runs nothing
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0] + " A module that train_mlm_head.py and "
                            "train_minilm_mlm.py import: it has nothing to run.").parse_args()
