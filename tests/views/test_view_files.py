"""Files the views write: every argument and the target checked before the page
is built; a page or PNG written whole or not at all; nothing but a regular file replaced, and no
setuid bit carried over; a NUL in a file name named. Device nodes and FIFOs are made inside tmp_path only."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import data
from bertviz_lite.views.wire import export, files

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def tr(small):
    return small.trace("The cat sat on the mat.")


def never_built(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("the page was built before the arguments were checked")
    monkeypatch.setattr(export, "build_payloads", fail)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(max_bytes="14e6"), TypeError, "max_bytes must be a number of bytes"),
    (dict(max_bytes=None), TypeError, "max_bytes must be a number of bytes"),
    (dict(max_bytes=float("nan")), ValueError, "finite.*switch the size budget off"),
    (dict(max_bytes=float("inf")), ValueError, "finite"),
    (dict(max_bytes=True), TypeError, "max_bytes"),
    (dict(max_bytes=10), ValueError, "at least 200,000"),
    (dict(title=123), TypeError, "title must be a string"),
    (dict(ledger="bogus"), TypeError, "ledger must be bv.count_params"),
    (dict(compare="bogus"), TypeError, r"export_html\(compare=...\) takes a Trace"),
    (dict(progress="no"), TypeError, "progress must be True, False or None"),
])
def test_export_checks_its_arguments_before_building(tr, tmp_path, monkeypatch, kwargs, error, match):
    if "progress" not in kwargs:
        never_built(monkeypatch)
    with pytest.raises(error, match=match):
        bv.export_html(tr, tmp_path / "page.html", **kwargs)
    assert not (tmp_path / "page.html").exists()


def test_export_of_something_else_names_export_html(tmp_path):
    with pytest.raises(TypeError, match=r"export_html\(\) takes a Trace.*export_html\("):
        bv.export_html("text", tmp_path / "page.html")


def test_a_missing_folder_is_said_before_building(tr, tmp_path, monkeypatch):
    never_built(monkeypatch)
    with pytest.raises(FileNotFoundError, match="folder .*does not exist"):
        bv.export_html(tr, tmp_path / "missing" / "page.html")
    with pytest.raises(FileNotFoundError, match="folder .*does not exist"):
        bv.views.save_png(tr, tmp_path / "missing" / "map.png")


def test_a_250_character_name_works(tr, tmp_path):
    name = "p" * 245 + ".html"
    out = bv.export_html(tr, tmp_path / name, progress=False)
    assert out.stat().st_size > 10_000 and [p.name for p in tmp_path.iterdir()] == [name]
    with pytest.raises(OSError, match="file name is 300 bytes long"):
        bv.export_html(tr, tmp_path / ("q" * 295 + ".html"))


def test_the_setuid_bit_is_not_copied(tr, tmp_path):
    page = tmp_path / "page.html"
    page.write_text("old")
    os.chmod(page, 0o4755)
    bv.export_html(tr, page, progress=False)
    mode = stat.S_IMODE(os.stat(page).st_mode)
    assert mode == 0o755 and page.read_text().startswith("<!DOCTYPE html>")


def test_a_fifo_made_at_the_path_while_building_is_not_replaced(tr, tmp_path, monkeypatch):
    page = tmp_path / "page.html"
    real = export.build_page

    def build_then_fifo(*a, **k):
        text = real(*a, **k)
        os.mkfifo(page)  # someone makes a FIFO at the path while the page is built
        return text
    monkeypatch.setattr(export, "build_page", build_then_fifo)
    with pytest.raises(bv.NotARegularFileError, match="stopped being a regular file"):
        bv.export_html(tr, page, progress=False)
    assert stat.S_ISFIFO(os.lstat(page).st_mode) and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_to_png_is_whole_or_nothing_and_refuses_devices(tr, tmp_path, monkeypatch):
    vd = data.view_data(tr, "attention", layer=0)
    out = bv.views.to_png(vd, tmp_path / "map.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    with pytest.raises(bv.NotARegularFileError, match="FIFO"):
        bv.views.to_png(vd, fifo)
    if hasattr(os, "mknod") and os.geteuid() == 0:
        dev = tmp_path / "null.png"
        os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        with pytest.raises(bv.NotARegularFileError, match="character device"):
            bv.views.to_png(vd, dev)
    # a failure while writing leaves the old picture as it was
    old = tmp_path / "old.png"
    old.write_bytes(b"old picture")

    def fail(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(files.os, "replace", fail)
    with pytest.raises(OSError, match="could not write the PNG"):
        bv.views.to_png(vd, old)
    assert old.read_bytes() == b"old picture" and sorted(p.name for p in tmp_path.iterdir()) == \
        sorted(["map.png", "fifo.png", "old.png"] + (["null.png"] if (tmp_path / "null.png").exists() else []))
    buf = __import__("io").BytesIO()
    assert bv.views.to_png(vd, buf) is buf and buf.getvalue()[:4] == b"\x89PNG"


def test_export_progress_is_quiet_when_asked(tr, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    bv.export_html(tr, tmp_path / "a.html", progress=False)
    monkeypatch.setenv("CI", "true")
    bv.export_html(tr, tmp_path / "b.html")  # None: quiet in CI
    assert capsys.readouterr().err == ""
    seen = []
    real = export.progress_bar

    def spy(total, progress, desc):
        bar = real(total, progress, desc)
        seen.append((total, bar.disable))
        return bar
    monkeypatch.setattr(export, "progress_bar", spy)
    monkeypatch.delenv("CI")
    bv.export_html(tr, tmp_path / "c.html")
    assert seen and seen[0][0] > 0 and seen[0][1] is False
    np.testing.assert_equal((tmp_path / "c.html").stat().st_size > 0, True)


def test_the_static_model_view_has_a_quiet_progress_bar(tr, monkeypatch, capsys):
    from bertviz_lite.views.wire import export
    from bertviz_lite.views.render import figures
    seen = []
    real = export.progress_bar

    def spy(total, progress, desc):
        bar = real(total, progress, desc)
        seen.append((total, bar.disable, desc))
        return bar
    monkeypatch.setattr(export, "progress_bar", spy)
    monkeypatch.delenv("CI", raising=False)
    figures.model_view(tr, progress=False)
    monkeypatch.setenv("CI", "1")
    figures.model_view(tr)
    assert [s[1] for s in seen] == [True, True] and seen[0][0] == tr.num_layers + 1
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        figures.model_view(tr, progress="no")


@pytest.mark.parametrize("write, kind", [(lambda tr, p: bv.export_html(tr, p), ".html"),
                                         (lambda tr, p: bv.views.save_png(tr, p), ".png")])
def test_a_file_name_with_nul_is_named(tmp_path, write, kind):
    # a NUL in the name was a raw ValueError "embedded null byte"; now the message names the character
    tiny = bv.Trace.from_attentions([np.full((1, 2, 4, 4), 0.25, dtype=np.float32)], ["[CLS]", "a", "b", "[SEP]"])
    for name in (str(tmp_path / f"a\x00b{kind}"), tmp_path / f"a\x00b{kind}"):
        with pytest.raises(ValueError, match=r"NUL character"):
            write(tiny, name)
    assert list(tmp_path.iterdir()) == []
