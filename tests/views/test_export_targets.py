"""export_html and save_png replace only a regular file (or write through a symlink to one), follow
the umask, keep mode and owner, leave the old page when interrupted; `$` in PNG titles is text.

Device nodes, FIFOs, sockets and symlinks are made inside tmp_path, never in the real /dev
(CI runs as root: a mistake there would replace a system file).
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

import bertviz_lite as bv
from bertviz_lite import cli
from bertviz_lite.errors import NotARegularFileError
from bertviz_lite.views.wire import export, files
from bertviz_lite.views import export_html, save_png


@pytest.fixture(scope="module")
def tr(small):
    return small.trace("Pages are written whole or not at all.")


def make_target(tmp_path: Path, kind: str) -> Path:
    """Something that is not a regular file, made in tmp_path (never the real /dev)."""
    if kind in ("device", "link-to-device"):
        node = tmp_path / "null"
        try:  # a private character device with /dev/null's numbers (1, 3)
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root (CI runs as root)")
    elif kind in ("fifo", "link-to-fifo"):
        node = tmp_path / "pipe"
        os.mkfifo(node)
    elif kind == "socket":
        node = tmp_path / "sock"
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(str(node))
        except OSError as e:  # a path over the 107 bytes AF_UNIX allows
            pytest.skip(f"cannot bind a unix socket in tmp_path ({e})")
        finally:
            s.close()
    elif kind == "dangling-link":
        node = tmp_path / "nothing-here"
    if kind.startswith(("link", "dangling")):
        link = tmp_path / "page.html"
        link.symlink_to(node)
        return link
    return node


NOT_FILES = ["device", "fifo", "socket", "link-to-device", "link-to-fifo", "dangling-link"]


def _snapshot(tmp_path: Path) -> dict:
    return {p.name: (os.lstat(p).st_mode, os.lstat(p).st_ino, os.lstat(p).st_rdev) for p in tmp_path.iterdir()}


@pytest.mark.parametrize("writer", ["export_html", "save_png"])
@pytest.mark.parametrize("kind", NOT_FILES)
def test_writers_refuse_what_is_not_a_regular_file_before_any_work(tr, tmp_path, monkeypatch, kind, writer):
    # a page or a PNG written into a FIFO nobody reads would block for ever: both are refused before work
    from bertviz_lite.views.render import static
    module, stage, write = {"export_html": (export, "build_payloads", export_html),
                            "save_png": (static, "to_png", static.save_png)}[writer]
    target = make_target(tmp_path, kind)
    before = _snapshot(tmp_path)
    monkeypatch.setattr(module, stage, lambda *a, **k: pytest.fail(f"{writer} started its work"))
    with pytest.raises(NotARegularFileError) as e:
        write(tr, target)
    assert str(target) in str(e.value) and writer in str(e.value) and len(str(e.value)) < 300
    assert isinstance(e.value, bv.BertVizError) and isinstance(e.value, OSError)
    assert _snapshot(tmp_path) == before  # nothing replaced, nothing left behind


def test_export_refuses_a_folder_and_a_link_to_one(tr, tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "folder")
    for target in (tmp_path / "folder", tmp_path / "link"):
        with pytest.raises(IsADirectoryError, match="is a folder"):
            export_html(tr, target)
    assert list((tmp_path / "folder").iterdir()) == []


def test_export_writes_through_a_symlink_and_keeps_the_mode(tr, tmp_path):
    real = tmp_path / "pages" / "real.html"
    real.parent.mkdir()
    real.write_text("the page from before")
    real.chmod(0o640)
    link = tmp_path / "page.html"
    link.symlink_to(real)
    assert export_html(tr, link) == link
    assert link.is_symlink() and os.readlink(link) == str(real)  # the link is still the link
    assert real.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.html"]  # no temp file left


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_page_follows_the_umask(tr, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = export_html(tr, tmp_path / "new.html")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_an_overwritten_page_keeps_its_mode(tr, tmp_path):
    path = tmp_path / "page.html"
    path.write_text("old")
    path.chmod(0o604)
    export_html(tr, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o604 and path.read_text().startswith("<!DOCTYPE html>")


def test_root_overwriting_another_users_page_keeps_its_owner(tr, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user (CI runs as root)")
    path = tmp_path / "page.html"
    path.write_text("old")
    os.chown(path, 12345, 23456)
    export_html(tr, path)
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456)


def test_export_errors_name_the_target_not_the_temp_file(tr, tmp_path):
    target = tmp_path / "missing-folder" / "page.html"
    with pytest.raises(FileNotFoundError) as e:
        export_html(tr, target)
    assert str(target) in str(e.value) and ".part" not in str(e.value)


def test_an_interrupted_export_keeps_the_old_page(tr, tmp_path, monkeypatch):
    path = tmp_path / "page.html"
    path.write_text("the page from before")

    def interrupt(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(files.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        export_html(tr, path)
    assert path.read_text() == "the page from before"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_cli_html_refuses_a_fifo_before_loading_the_model(tmp_path, monkeypatch, capsys):
    fifo = make_target(tmp_path, "fifo")
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("the model was loaded"))
    assert cli.main(["trace", "hi", "--html", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(fifo) in err and "FIFO" in err and "Traceback" not in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_save_png_writes_whole_through_a_symlink(tr, tmp_path):
    from bertviz_lite.views.render import static
    real = tmp_path / "real.png"
    real.write_bytes(b"old")
    link = tmp_path / "view.png"
    link.symlink_to(real)
    assert static.save_png(tr, link, view="attention") == link
    assert link.is_symlink() and real.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.png", "view.png"]  # no temp file left


def test_cli_png_refuses_a_fifo_before_loading_the_model(tmp_path, monkeypatch, capsys):
    fifo = make_target(tmp_path, "fifo")
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("the model was loaded"))
    assert cli.main(["trace", "hi", "--png", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(fifo) in err and "FIFO" in err and "--png" in err


@pytest.mark.parametrize("sentence", ["half is $\\frac{1}{2}$ here", "$" + "{" * 60 + "$", "costs $5 and $6"])
def test_dollar_signs_in_png_titles_are_text(small, tmp_path, monkeypatch, sentence):
    import matplotlib.mathtext

    def parse(*args, **kwargs):
        raise AssertionError("a sentence went through mathtext")
    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", parse)
    a = small.trace(sentence)
    b = small.trace(sentence, edits=bv.ablate(heads={0: [1]}))
    # the compare view's title holds both sentences (the other views label single tokens: one `$` is text)
    path = save_png(a, tmp_path / "compare.png", view="compare", compare=b)
    assert path.stat().st_size > 1000
