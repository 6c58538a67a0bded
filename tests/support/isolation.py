"""Keeping the test suite out of the user's own folders.

``isolate_process`` points hefsearch's home and the platform's data, cache, config and state
folders (the XDG variables platformdirs, Hugging Face, matplotlib and textual read) at a fresh
temporary root; tests/conftest.py calls it at import, before any fixture runs. ``real_user_dirs``
records, before that, the folders a run could damage: hefsearch's own data/cache/config/state
folders, and any data/cache/config/state root the caller set explicitly to an empty or missing
folder (so a run with those pointed at an empty sentinel folder checks that the sentinel stays
empty; a busy shared root such as ~/.cache is left to other programs). ``touched`` lists
what changed in them since.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

XDG_VARS = ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
HOME_VAR = "HEFSEARCH_HOME"
#: Set in the environment of xdist workers (which inherit the isolated variables) so a worker
#: neither re-records the isolated folders as "real" nor checks them.
ISOLATED_MARK = "HEFSEARCH_TESTS_ISOLATED"
#: The guarded folders, for the workers' own checks (tests/project/test_isolation.py).
GUARDED = "HEFSEARCH_TESTS_GUARDED"

Snapshot = dict[str, tuple[int, int]]


def _listing(folder: Path) -> Snapshot:
    """Every entry under ``folder`` with its size and modification time (empty if absent)."""
    out: Snapshot = {}
    if not folder.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def real_user_dirs() -> dict[Path, Snapshot]:
    """The folders the suite must leave as they are, each with its current listing."""
    if os.environ.get(ISOLATED_MARK):
        return {}
    import platformdirs

    folders = {Path(platformdirs.user_data_dir("hefsearch", appauthor=False)),
               Path(platformdirs.user_cache_dir("hefsearch", appauthor=False)),
               Path(platformdirs.user_config_dir("hefsearch", appauthor=False)),
               Path(platformdirs.user_state_dir("hefsearch", appauthor=False))}
    if os.environ.get(HOME_VAR):
        folders.add(Path(os.environ[HOME_VAR]).expanduser())
    for var in XDG_VARS:
        root = Path(os.environ.get(var) or "").expanduser()
        if os.environ.get(var) and (not root.exists() or (root.is_dir() and not any(root.iterdir()))):
            folders.add(root)
    return {f: _listing(f) for f in sorted(folders)}


def guarded_folders() -> list[Path]:
    """The folders ``real_user_dirs`` recorded in the first pytest process (also in workers)."""
    return [Path(p) for p in os.environ.get(GUARDED, "").split(os.pathsep) if p]


def isolate_process(guarded: dict[Path, Snapshot]) -> Path:
    """Point every user folder of this process (and its children) into a new temporary root."""
    if guarded:
        os.environ[GUARDED] = os.pathsep.join(map(str, guarded))
    root = Path(tempfile.mkdtemp(prefix="hefsearch-tests-"))
    atexit.register(shutil.rmtree, root, True)
    os.environ[HOME_VAR] = str(root / "home")
    for var in XDG_VARS:
        os.environ[var] = str(root / var.lower())
    os.environ[ISOLATED_MARK] = "1"
    return root


def touched(before: dict[Path, Snapshot]) -> list[str]:
    """The entries created, changed or removed under the recorded folders since ``before``."""
    changes = []
    for folder, listing in before.items():
        now = _listing(folder)
        changes += [f"new: {p}" for p in sorted(now.keys() - listing.keys())]
        changes += [f"removed: {p}" for p in sorted(listing.keys() - now.keys())]
        changes += [f"changed: {p}" for p in sorted(now.keys() & listing.keys())
                    if now[p] != listing[p] and not os.path.isdir(p)]
    return changes
