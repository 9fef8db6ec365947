"""Files the views write (pages, PNGs): the target checked before any work, written whole or not at all.

    target = check_target(path)                  # refuses a folder, a device, a FIFO, a dangling link
    write_whole(target, text, shown=path)        # a temp file beside it, then os.replace
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ...errors import NotARegularFileError


def check_target(path, what: str = "export_html", kind: str = ".html") -> Path:
    """The file a page (or a PNG) at `path` is written to: `path`, or the regular file its symlink points to.

    Refuses, before any page is built, whatever is not a page's to replace: a folder, a device,
    a FIFO, a socket, a symlink to one of those or to nothing (a dangling link).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} takes a file name (a str or a path), got {type(path).__name__}: e.g. "
                        f"{what}(tr, 'trace{kind}')")
    if "\x00" in str(path):  # L8: a raw "embedded null byte" from the file system call before
        raise ValueError(f"{what}: the file name contains a NUL character ('\\x00'), which no file name can hold; "
                         f"give another name, e.g. 'trace{kind}'")
    if str(path).endswith(("/", os.sep)):  # a trailing slash names a folder, not a file
        raise IsADirectoryError(f"{what} writes a file; {str(path)!r} ends with a slash, which names a folder "
                                f"(give a file name, e.g. {str(Path(path) / ('trace' + kind))!r})")
    other = {".jpg", ".jpeg", ".gif", ".webp", ".svg", ".pdf", ".bmp", ".tif", ".tiff"}
    if kind == ".png" and Path(path).suffix.lower() in other:
        raise ValueError(f"{what} writes PNG images; {str(path)!r} names a {Path(path).suffix} file (give e.g. "
                         f"{str(Path(path).with_suffix('.png'))!r}, or convert the PNG afterwards)")
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


def check_folder(target: Path, shown, what: str = "export_html") -> None:
    """The folder a file goes to exists and can be written, and the name fits the file system: said
    before any work (a page of 512 tokens takes many seconds to build)."""
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"{what}: the folder {str(folder)!r} of {str(shown)!r} does not exist; "
                                "create it first or give another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{what}: cannot write into the folder {str(folder)!r} (no write permission); "
                              "give a path in a folder you can write to")
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(target.name)) > limit:
        raise OSError(f"{what}: the file name is {len(os.fsencode(target.name))} bytes long; this file system "
                      f"takes at most {limit}: give a shorter name")


def not_regular(path) -> int | None:
    """The st_mode of what stands at `path` (not following a link) when it is not a regular file; None when
    nothing is there or a regular file is (what a writer may replace)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return None if stat.S_ISREG(mode) else mode


def _still_replaceable(target: Path, shown, what: str) -> None:
    """Refuse, just before the rename, a target that became something other than a regular file while
    the file was built (a FIFO or a device made at the path meanwhile is never replaced)."""
    if not_regular(target) is not None:
        raise NotARegularFileError(f"{str(shown)!r} stopped being a regular file while {what} was written "
                                   "(something else was made at that path); nothing was replaced")


def write_beside(target: Path, data, sync: bool = False) -> Path:
    """A temporary file beside target holding data (str, bytes, or a function that writes into a binary file),
    with the mode the target should end with: a new file follows the umask; a replaced one keeps its mode (and
    its owner, where we may set it: root overwriting another user's page). Returns its path; the caller renames
    it onto target (or removes it). On any error it is removed and the error raised."""
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    # the temporary name fits wherever the name fits (a 250-character name plus a suffix would not)
    stem = target.name if len(os.fsencode(target.name)) <= 200 else os.fsencode(target.name)[:180].decode(
        "utf-8", "ignore")
    tmp = target.with_name(f".{stem}.{secrets.token_hex(6)}.part")
    # 0o666 & ~umask, as open() would make it; O_EXCL: never an existing file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with (os.fdopen(fd, "w", encoding="utf-8") if isinstance(data, str) else os.fdopen(fd, "wb")) as f:
            if old is not None:
                if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                    try:
                        os.fchown(f.fileno(), old.st_uid, old.st_gid)
                    except PermissionError:  # only root may give a file to another user
                        pass
                # the old file's permissions, never its setuid, setgid or sticky bit
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode) & 0o777)
            f.write(data) if isinstance(data, (str, bytes)) else data(f)
            if sync:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_whole(target: Path, text: str | bytes, shown: Path, what: str = "the page") -> None:
    """Write text (or bytes) to target (a new or a regular file) whole or not at all: a temp file beside it
    (write_beside: the mode and owner a new or replaced file should have), then os.replace. Errors name
    `shown`."""
    try:
        tmp = write_beside(target, text)
        try:
            _still_replaceable(target, shown, what)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        if e.errno is None:
            raise
        raise OSError(e.errno, f"could not write {what}: {e.strerror}", str(shown)) from None
