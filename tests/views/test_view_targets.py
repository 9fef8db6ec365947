"""What the views write to: a file name of the right kind, checked before anything is built (a reviewer's finds:
export_html(tr, None) was a raw TypeError, 'page.html/' wrote the file 'page.html', PNG bytes went into x.jpg)."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

import bertviz_lite as bv  # noqa: E402


@pytest.mark.parametrize("path", [None, 3, 3.5])
def test_export_html_names_a_path_that_is_not_a_file_name(small, path):
    with pytest.raises(TypeError, match="export_html takes a file name"):
        bv.export_html(small.trace("the cat"), path)


def test_a_trailing_slash_is_a_folder_not_a_file(small, tmp_path):
    target = str(tmp_path / "page.html") + "/"
    with pytest.raises(IsADirectoryError, match="ends with a slash"):
        bv.export_html(small.trace("the cat"), target)
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("name", ["x.jpg", "x.JPEG", "x.pdf"])
def test_png_writers_refuse_another_image_type(small, tmp_path, name):
    with pytest.raises(ValueError, match="writes PNG images"):
        bv.views.save_png(small.trace("the cat"), tmp_path / name)
    assert not (tmp_path / name).exists()
