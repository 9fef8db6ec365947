"""Files the views write (pages, PNGs): the target checked before any work, written whole or not at all.

    target = check_target(path)                  # refuses a folder, a device, a FIFO, a dangling link
    write_whole(target, text, shown=path)        # a temp file beside it, then os.replace
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ..errors import NotARegularFileError


def check_target(path, what: str = "export_html", kind: str = ".html") -> Path:
    """The file a page (or a PNG) at `path` is written to: `path`, or the regular file its symlink points to.

    Refuses, before any page is built, whatever is not a page's to replace: a folder, a device,
    a FIFO, a socket, a symlink to one of those or to nothing (a dangling link).
    """
    path = Path(path)
    if not os.path.lexists(path):
        return path  # a new file
    try:
        st = os.stat(path)  # follows symlinks
    except OSError as e:
        raise NotARegularFileError(f"{what} will not write to {str(path)!r}: it is a symlink whose target "
                                   f"cannot be reached ({e.strerror}); remove it or give another file name") from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{what} writes a file; {str(path)!r} is a folder (give a file name, e.g. "
                                f"{str(path / ('trace' + kind))!r})")
    if not stat.S_ISREG(st.st_mode):
        what_it_is = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO (named "
                "pipe)", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(st.st_mode), "not a regular file")
        via = " (through a symlink)" if path.is_symlink() else ""
        raise NotARegularFileError(f"{what} will not replace {str(path)!r}: it is {what_it_is}{via}, not a regular "
                                   f"file; give the name of a new or existing {kind} file")
    return Path(os.path.realpath(path))


def write_whole(target: Path, text: str | bytes, shown: Path, what: str = "the page") -> None:
    """Write text (or bytes) to target (a new or a regular file) whole or not at all: a temp file beside it, then
    os.replace. A new file follows the umask; a replaced one keeps its mode (and its owner, where we may
    set it: root overwriting another user's page). Errors name `shown`."""
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")
    try:
        # 0o666 & ~umask, as open() would make it; O_EXCL: never an existing file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as f:
                if old is not None:
                    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                        try:
                            os.fchown(f.fileno(), old.st_uid, old.st_gid)
                        except PermissionError:  # only root may give a file to another user
                            pass
                    os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                f.write(text)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        if e.errno is None:
            raise
        raise OSError(e.errno, f"could not write {what}: {e.strerror}", str(shown)) from None
