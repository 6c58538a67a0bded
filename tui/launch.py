"""Open a search hit outside the TUI: text in ``$VISUAL``/``$EDITOR`` at its line, PDFs and
other binary formats with the system opener (xdg-open / open). Without a desktop (Linux with
neither ``DISPLAY`` nor ``WAYLAND_DISPLAY``: a Pi over SSH) a binary format raises
:class:`NoDesktop` instead of starting an opener that has nowhere to show it; the TUI then shows
the document's indexed text in its own reader. A detached opener is waited for by a thread, so
it never lingers as a defunct child.

Always an argument list, never a shell: a file name with spaces, quotes or ``;`` stays one
argument. ``$EDITOR`` may hold options ("code --wait"); it is split with :func:`shlex.split`
(the same rules a shell would use for words, without running one).

A file name that is not valid UTF-8 is stored and shown with its odd bytes escaped
(``caf\\xe9.txt``); :func:`on_disk_path` turns that back into the name on disk before opening.

The launcher is injectable: the app opens a hit through its ``TuiSession``, which calls
``launcher(argv, terminal=...)``; tests give the session a function that records argv.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Protocol

from hefsearch.app.session import display_form, indexed_text
from hefsearch.base.errors import HefsearchError

#: editors that take "+LINE FILE"
_PLUS_LINE = {"vi", "vim", "nvim", "gvim", "view", "nano", "pico", "emacs", "emacsclient", "micro",
              "kak", "joe", "jed", "ne", "mg", "ed", "ex", "mcedit", "elvis", "nvi", "vis"}
#: editors that take "FILE:LINE"
_COLON_LINE = {"hx", "helix", "subl", "sublime_text", "zed", "mate"}
#: editors that take "--goto FILE:LINE"
_GOTO = {"code", "code-insiders", "codium", "vscodium", "cursor"}


#: how a stored path shows a byte that is not UTF-8 ("backslashreplace": only bytes >= 0x80)
_BYTE_ESCAPE = re.compile(r"\\x([89a-f][0-9a-f])")


class LaunchError(HefsearchError):
    title = "cannot open"


class NoDesktop(LaunchError):
    """The file needs a desktop program, and this session has no desktop to show it on."""

    title = "no desktop"


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    #: True when the program runs in this terminal (the TUI must step aside while it runs)
    terminal: bool


class Launcher(Protocol):
    def __call__(self, argv: list[str], *, terminal: bool) -> None: ...


def editor_command(env: Mapping[str, str] | None = None) -> list[str]:
    """``$VISUAL``, else ``$EDITOR``, else the first of nano/vi found on PATH, as argv words."""
    env = os.environ if env is None else env
    for var in ("VISUAL", "EDITOR"):
        value = (env.get(var) or "").strip()
        if value:
            return shlex.split(value)
    for fallback in ("nano", "vi"):
        if shutil.which(fallback):
            return [fallback]
    raise LaunchError("No editor configured.", "Set $EDITOR (e.g. export EDITOR=nano).")


def editor_argv(editor: list[str], path: str, line: int | None) -> list[str]:
    """The argv that opens ``path`` at ``line`` in ``editor`` (line syntax per editor family)."""
    name = Path(editor[0]).name.lower()
    if line is None or line < 1:
        return [*editor, path]
    if name in _GOTO:
        return [*editor, "--goto", f"{path}:{line}"]
    if name in _COLON_LINE:
        return [*editor, f"{path}:{line}"]
    if name in _PLUS_LINE:
        return [*editor, f"+{line}", path]
    # unknown editors: the "+LINE" convention is the most widely understood one
    return [*editor, f"+{line}", path]


def opener_argv(path: str, platform: str | None = None) -> list[str]:
    platform = sys.platform if platform is None else platform
    if platform == "darwin":
        return ["open", path]
    if platform.startswith("win"):
        # explorer.exe opens a file with its associated program; no cmd.exe involved
        return ["explorer", path]
    return ["xdg-open", path]


def has_desktop(env: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """Whether a desktop program can show a window here: always on macOS and Windows; on Linux
    and the BSDs only with an X11 or Wayland display (not over plain SSH, not on a console)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if platform == "darwin" or platform.startswith("win"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def on_disk_path(path: str) -> str:
    """The name to hand to a program for a stored ``path``: the same text, unless the file
    only exists with its ``\\xNN`` escapes as the raw bytes they stand for (a str holding
    those bytes as surrogates, which ``subprocess`` passes on as the original bytes)."""
    if "\\x" not in path or os.path.lexists(path):
        return path
    raw = _BYTE_ESCAPE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), path)
    return raw if os.path.lexists(raw) else path


def _container_of(path: str) -> str | None:
    """The file holding a document stored below it (a message of an mbox), else None."""
    if os.path.lexists(path):
        return None
    parent = os.path.dirname(path)
    return parent if parent and os.path.isfile(parent) else None


def plan_open(path: str, *, line: int | None = None, kind: str | None = None,
              env: Mapping[str, str] | None = None, platform: str | None = None) -> LaunchPlan:
    """Decide how to open a hit: the editor at ``line`` for text, the system opener otherwise.
    A compressed file (``NEWS.gz``, ``ls.1.gz``) or a manual page's roff opens as the text the
    library indexed (:func:`readable_copy`), so the editor shows words and the hit's line."""
    path = on_disk_path(path)
    container = _container_of(path)
    if container is not None:  # a mail message: its file, from the top (its lines are the message's)
        path, line = container, None
    form = display_form(path, kind)
    if form == "opener":  # a format an editor cannot show as text (the table of formats says which)
        if not has_desktop(env, platform):
            raise NoDesktop(
                f"{Path(path).name} needs a desktop program to open, and this session has no desktop "
                "(neither DISPLAY nor WAYLAND_DISPLAY is set: over SSH or on a console).",
                "The reader shows the text hefsearch indexed from it instead (Esc goes back). To see the "
                "file itself, open it on a machine with a desktop, or use 'ssh -X'.")
        return LaunchPlan(opener_argv(path, platform), terminal=False)
    if form == "text":
        path = readable_copy(path, kind) or path
    return LaunchPlan(editor_argv(editor_command(env), path, line), terminal=True)


_copies: list[str] = []


def readable_copy(path: str, kind: str | None) -> str | None:
    """The text hefsearch indexed from ``path`` (decompressed, a manual page rendered), written
    to a file of this user's only (a private temporary folder, removed when the TUI exits) and
    named like the document (``chsh.1.txt``); None when the file cannot be read now (the
    editor then shows it as it is, or says it is gone)."""
    import atexit
    import tempfile

    got = indexed_text(path, kind)
    if got is None:
        return None
    name, text = got
    if not _copies:
        _copies.append(tempfile.mkdtemp(prefix="hefsearch-open-"))  # mode 0700
        atexit.register(shutil.rmtree, _copies[0], True)
    copy = Path(_copies[0]) / (name + ".txt")
    copy.write_text(text, encoding="utf-8")
    return str(copy)


def run_argv(argv: list[str], *, terminal: bool) -> subprocess.Popen | None:
    """The default launcher. A terminal editor runs in the foreground (the app is suspended
    around it); a desktop opener is started detached so the TUI keeps running, and a thread
    waits for it (xdg-open exits once it has handed the file on; unwaited, it would stay a
    defunct child of the TUI until the TUI exits). Returns the detached process."""
    import threading

    if not argv or shutil.which(argv[0]) is None:
        raise LaunchError(f"Program not found: {argv[0] if argv else '(none)'}",
                          "Install it or set $EDITOR to an editor on your PATH.")
    if terminal:
        subprocess.run(argv, check=False)
        return None
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    threading.Thread(target=proc.wait, name=f"reap {argv[0]}", daemon=True).start()
    return proc

