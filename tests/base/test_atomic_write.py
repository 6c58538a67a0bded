"""base/atomic_write.py: a replaced file is the old one or the new one, with the permissions the
umask gives it, or exactly those asked for."""

from __future__ import annotations

import json
import os
import stat

import pytest

from hefsearch.base.atomic_write import TMP_SUFFIX, create_bytes_atomic, write_atomic, write_json_atomic


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_umask_decides_unless_a_mode_is_asked_for(tmp_path):
    old = os.umask(0o002)
    try:
        write_json_atomic(tmp_path / "shared.json", {"a": 1})
        write_json_atomic(tmp_path / "state.json", {"b": 2}, mode=0o644)
    finally:
        os.umask(old)
    assert _mode(tmp_path / "shared.json") == 0o664  # a group sharing the library keeps access
    assert _mode(tmp_path / "state.json") == 0o644  # never group-writable, whatever the umask
    assert json.loads((tmp_path / "state.json").read_text()) == {"b": 2}


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "x.json"
    write_json_atomic(target, {"old": True}, mode=0o600)

    def fail(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomic(target, fail, mode=0o600)
    assert json.loads(target.read_text()) == {"old": True}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(TMP_SUFFIX)]


def test_create_makes_a_new_file_whole_and_never_replaces_one(tmp_path):
    """create_bytes_atomic (the serve token file): the file appears whole with its mode, and an
    existing file or a link at the name (dangling too) is left alone, with no temp file behind."""
    new = tmp_path / "token"
    create_bytes_atomic(new, b"secret\n", mode=0o600)
    assert new.read_bytes() == b"secret\n" and _mode(new) == 0o600
    with pytest.raises(FileExistsError):
        create_bytes_atomic(new, b"other\n", mode=0o600)
    assert new.read_bytes() == b"secret\n"
    link = tmp_path / "link"
    os.symlink(tmp_path / "elsewhere", link)
    with pytest.raises(FileExistsError):
        create_bytes_atomic(link, b"x", mode=0o600)
    assert not (tmp_path / "elsewhere").exists() and os.path.islink(link)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(TMP_SUFFIX)]
