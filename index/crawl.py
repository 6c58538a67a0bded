"""Find the documents under a set of folders, safely.

Nothing here opens a file but to look at the first 8 KB of a regular file whose name has no
file-type suffix (``NEWS``, ``README.Debian``, ``changelog.gz``: text or not, see
:mod:`hefsearch.readers.filetypes`), through the extractor's non-blocking guard; the crawler
otherwise only lists directories and stats entries, so FIFOs, sockets and devices are
reported ("special") without ever being touched. Directories are
followed through symlinks once; a directory reached again (a symlink loop, or a second route
to the same folder) is reported as "loop" by its (st_dev, st_ino). Hidden entries are skipped
silently unless asked for, ``.hefsearchignore`` files (gitignore syntax) apply to their folder
and everything below it, and ``--exclude`` patterns (same syntax) apply relative to each root.

Indexing stays inside what the user named: a symlink (to a file or a folder) whose target lies
outside every root is reported ("outside_link", with its target) and not followed unless
``follow_links``; ``/proc``, ``/sys`` and ``/dev`` are never read, whatever leads there (their
files look like regular 0-byte files, and ``/proc/self/environ`` holds the indexer's secrets).
Common secret files (keys, ``.env``, ``.netrc``, ``.ssh/`` ...) are ignored by a built-in rule
that a ``!pattern`` line in a ``.hefsearchignore`` can override.

Names are kept as the operating system gives them (undecodable bytes as lone surrogates, so the
file can be opened again); ``hefsearch.base.terminal_text.printable`` turns one into text that is
safe to store (SQLite, JSON), ``for_terminal`` there into text that is safe to print.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hefsearch.base.sizes import human_size
from hefsearch.base.terminal_text import printable
from hefsearch.readers.formats import STREAMED_KINDS, SUPPORTED_SUFFIXES

from hefsearch.readers import filetypes

from .crawl_options import CrawlOptions

if TYPE_CHECKING:  # pragma: no cover
    import pathspec  # loaded by the first ignore rules, not by a search that only prints paths

IGNORE_FILE = ".hefsearchignore"
_MAX_IGNORE_FILE_BYTES = 1024 * 1024

#: never read, whatever link or root leads there: their "files" are live kernel state
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")

#: secret files ignored by default (gitignore syntax); a ``!pattern`` in .hefsearchignore
#: re-includes one
SECRET_FILE_PATTERNS = (
    ".env", ".env.*", "*.env",
    ".netrc", "_netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".htpasswd",
    "credentials", "credentials.*",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
    ".ssh/", ".gnupg/", ".aws/", ".password-store/",
)
SECRET_RULE_NAME = "the built-in secret-file rule"

#: skip kinds that mean "a document we should have indexed could not be": a failure
FAILED_SKIPS = ("unreadable", "too_large")
#: skip kinds worth a line in the summary but not a failure
NOTED_SKIPS = ("special", "loop", "broken_link")
#: symlinks not followed (out of the roots, or into /proc /sys /dev): listed with their target
LINK_SKIPS = ("outside_link", "system_file")
#: how each skip kind reads for a person (status, the index summary, the TUI)
SKIP_LABELS = {
    "unsupported": "unsupported", "too_large": "too large", "special": "special files",
    "loop": "symlink loops", "broken_link": "broken symlinks", "unreadable": "unreadable",
    "ignored": "ignored (--exclude, .hefsearchignore, secret files)",
    "duplicate": "links to files indexed under another name",
    "outside_link": "symlinks not followed (outside the folders)",
    "system_file": "system files (never read)",
}


def skipped_text(skipped: dict) -> str:
    """"3 symlinks not followed (outside the folders), 1 too large": the non-zero skip
    counters, in words."""
    return ", ".join(f"{v} {SKIP_LABELS.get(k, k.replace('_', ' '))}" for k, v in sorted(skipped.items()) if v)


@dataclass(frozen=True)
class FoundFile:
    path: Path
    size: int
    mtime_ns: int
    kind: str  # from SUPPORTED_SUFFIXES, the extra suffixes, or "text" by content


@dataclass(frozen=True)
class SkippedFile:
    path: Path
    reason: str
    #: "unsupported", "too_large", "special", "loop", "broken_link", "unreadable", "ignored",
    #: "duplicate" (a link to a file indexed under another name, or the same file reached twice),
    #: "outside_link" (a symlink leading out of the roots), "system_file" (/proc, /sys, /dev)
    counted_as: str


def crawl(roots: Sequence[Path], options: CrawlOptions = CrawlOptions()) -> Iterator[FoundFile | SkippedFile]:
    """Yield every supported document under ``roots`` and a SkippedFile for everything that was
    looked at and left out (except hidden entries, which are skipped silently).

    Roots are made absolute and resolved; entries below a root keep the path they were found
    at (a symlinked file is reported under the link's path). Within a folder, entries come in
    name order, so two crawls of an unchanged tree agree. Symlinks leading outside every root
    are followed only with ``options.follow_links``; system folders never. ``options``
    (:class:`~hefsearch.index.crawl_options.CrawlOptions`): hidden files, excludes, the size
    limit, the suffixes added to those hefsearch reads.
    """
    roots = [Path(os.path.expanduser(os.fspath(r))) for r in roots]
    state = _CrawlState.of(roots, options)
    for root in roots:
        yield from state.crawl_root(root)


def crawl_paths(roots: Sequence[Path], paths: Sequence[Path],
                options: CrawlOptions = CrawlOptions()) -> Iterator[FoundFile | SkippedFile]:
    """What :func:`crawl` of ``roots`` would yield for ``paths`` only (files or folders below
    a root; others are ignored): the same rules, without listing the rest of the tree. For
    ``hefsearch watch``, which re-indexes only what changed."""
    state = _CrawlState.of([Path(os.path.expanduser(os.fspath(r))) for r in roots], options)
    real_roots = state.inside
    done: list[str] = []
    for path in sorted({os.path.abspath(os.fspath(p)) for p in paths}):
        if any(is_under(path, d) for d in done):
            continue  # inside a folder already crawled here
        if path in real_roots and not os.path.isdir(path):  # a file given as a root
            done.append(path)
            yield from state.crawl_root(Path(path))
            continue
        root = max((r for r in real_roots if is_under(path, r) and path != r), key=len, default=None)
        if root is None:
            continue
        done.append(path)
        yield from state.crawl_below(Path(root), Path(path))


def secret_rule_text() -> str:
    """The built-in secret-file rule in one line, for ``status``."""
    return ", ".join(SECRET_FILE_PATTERNS)


def system_folder(real_path: str) -> str | None:
    """The system folder (/proc, /sys, /dev) holding ``real_path``, if any."""
    for top in SYSTEM_FOLDERS:
        if real_path == top or real_path.startswith(top + "/"):
            return top
    return None


def _system_devices() -> frozenset[int]:
    """st_dev of the system filesystems, to catch them mounted or bind-mounted elsewhere.
    A folder on the root filesystem itself (a chroot without its own /dev) is not counted, or
    everything would look like a system file."""
    try:
        root_dev = os.stat("/").st_dev
    except OSError:  # pragma: no cover
        return frozenset()
    devs = set()
    for top in SYSTEM_FOLDERS:
        try:
            dev = os.stat(top).st_dev
        except OSError:
            continue
        if dev != root_dev:
            devs.add(dev)
    return frozenset(devs)


def is_under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (as strings: nothing is resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _inside(real_path: str, folders: Sequence[str]) -> bool:
    return any(is_under(real_path, f) for f in folders)


@dataclass
class _Rules:
    """One set of gitignore-style patterns and where they apply from."""

    spec: pathspec.GitIgnoreSpec
    origin: str  # "--exclude" or the ignore file's path, for the reason text
    base: str = ""  # folder (relative to the root, posix) the patterns are relative to

    @classmethod
    def from_lines(cls, lines: list[str], origin: str, base: str = "") -> _Rules:
        import pathspec

        return cls(pathspec.GitIgnoreSpec.from_lines(lines), origin, base)

    def describe(self, pattern: str) -> str:
        if self.origin == SECRET_RULE_NAME:
            return (f"secret file: matches '{pattern}' in {SECRET_RULE_NAME} (to index it anyway, "
                    f"add '!{pattern.rstrip('/')}' to a {IGNORE_FILE})")
        return f"matches '{pattern}' in {self.origin}"

    def check(self, rel: str) -> tuple[bool | None, str]:
        """(True = ignore / False = re-included / None = no pattern matched, the pattern)."""
        if self.base:
            rel = rel[len(self.base) + 1:]
        result = self.spec.check_file(rel)
        if result.include is None:
            return None, ""
        return bool(result.include), str(self.spec.patterns[result.index].pattern)


@dataclass
class _Dir:
    path: Path
    rel: str  # relative to the root, posix, "" for the root
    rules: tuple[_Rules, ...]
    ancestors: dict[tuple[int, int], Path]


@functools.lru_cache(maxsize=1)
def _secret_rules() -> _Rules:
    """The built-in secret-file rule, compiled on first use (not by a search that only prints
    paths: pathspec costs a cold start ~10 ms)."""
    return _Rules.from_lines(list(SECRET_FILE_PATTERNS), origin=SECRET_RULE_NAME)


@dataclass
class _CrawlState:
    options: CrawlOptions
    exclude: _Rules | None
    inside: list[str] = field(default_factory=list)  # real paths of the roots
    seen_dirs: dict[tuple[int, int], Path] = field(default_factory=dict)
    seen_files: dict[tuple[int, int], Path] = field(default_factory=dict)
    system_devs: frozenset[int] = field(default_factory=_system_devices)
    supported: dict[str, str] = field(default_factory=lambda: dict(SUPPORTED_SUFFIXES))
    #: folders entered on the way down to a target of crawl_below (entered again for the next)
    walked: set = field(default_factory=set)

    @classmethod
    def of(cls, roots: Sequence[Path], options: CrawlOptions) -> "_CrawlState":
        """The state of one crawl of ``roots`` (crawl and crawl_paths share it)."""
        excludes = options.excludes
        exclude = _Rules.from_lines(list(excludes), origin="--exclude") if excludes else None
        return cls(options=options, exclude=exclude, inside=[os.path.realpath(r) for r in roots],
                   supported=filetypes.indexed_suffixes(options.extra_suffixes))

    def crawl_root(self, root: Path) -> Iterator[FoundFile | SkippedFile]:
        try:
            root = root.resolve()
            top = system_folder(str(root))
            if top is not None:
                yield SkippedFile(root, f"inside {top}: system files are never read", "system_file")
                return
            st = os.stat(root)
        except FileNotFoundError:
            yield SkippedFile(Path(os.path.abspath(root)), "does not exist", "unreadable")
            return
        except RuntimeError:  # Path.resolve on Python < 3.13 raises this for a symlink loop
            yield SkippedFile(Path(os.path.abspath(root)), "symlink loop", "loop")
            return
        except OSError as e:
            yield _stat_failure(Path(os.path.abspath(root)), e, is_link=os.path.islink(root))
            return
        if st.st_dev in self.system_devs:
            yield SkippedFile(root, "on a system filesystem (/proc, /sys or /dev): never read", "system_file")
            return
        if not stat.S_ISDIR(st.st_mode):
            # A file given explicitly is indexed even if hidden or matched by --exclude.
            yield self._file(root, st, rel=None)
            return
        key = (st.st_dev, st.st_ino)
        if key in self.seen_dirs:
            yield SkippedFile(root, f"already crawled as {self.seen_dirs[key]}", "loop")
            return
        self.seen_dirs[key] = root
        stack = [_Dir(root, "", (_secret_rules(),), {key: root})]
        while stack:
            folder = stack.pop()
            subdirs: list[_Dir] = []
            for item in self._scan(folder, subdirs):
                yield item
            stack.extend(reversed(subdirs))  # depth-first, in name order

    def _scan(self, folder: _Dir, subdirs: list[_Dir]) -> Iterator[FoundFile | SkippedFile]:
        try:
            with os.scandir(folder.path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            yield SkippedFile(folder.path, f"cannot list folder: {e.strerror or e}", "unreadable")
            return
        rules = folder.rules
        for entry in entries:
            if entry.name == IGNORE_FILE:
                loaded = self._load_ignore_file(entry, folder.rel)
                if isinstance(loaded, SkippedFile):
                    yield loaded
                elif loaded is not None:
                    rules = rules + (loaded,)
        for entry in entries:
            name = entry.name
            if name == IGNORE_FILE or (not self.options.include_hidden and name.startswith(".")):
                continue
            yield from self._visit(_Dir(folder.path, folder.rel, rules, folder.ancestors), name,
                                   entry.is_symlink(), entry.stat, subdirs)

    def _visit(self, folder: _Dir, name: str, is_link: bool, stat_entry, subdirs: list[_Dir]
               ) -> Iterator[FoundFile | SkippedFile]:
        """One entry of ``folder`` (its rules already loaded): a file found or skipped, or a
        folder appended to ``subdirs``. ``stat_entry()`` stats it, following symlinks."""
        path = folder.path / name
        try:
            st = stat_entry()  # follows symlinks; never opens the file
        except FileNotFoundError as e:
            if is_link:
                yield _stat_failure(path, e, is_link=True)
            return  # otherwise it was deleted while we were listing: it is simply gone
        except OSError as e:
            yield _stat_failure(path, e, is_link=is_link)
            return
        rel = f"{folder.rel}/{name}" if folder.rel else name
        is_dir = stat.S_ISDIR(st.st_mode)
        ignored = self._ignored(rel + "/" if is_dir else rel, folder.rules)
        if not ignored:
            ignored = self._leaves(path, st, is_link, is_dir)
            if isinstance(ignored, SkippedFile):
                yield ignored
                return
        if not ignored and is_link and not is_dir:
            own_name = self._indexed_under_own_name(path)
            if own_name:
                yield SkippedFile(path, own_name, "duplicate")
                return
        if ignored:
            yield SkippedFile(path, ignored, "ignored")
            return
        if is_dir:
            key = (st.st_dev, st.st_ino)
            if key in folder.ancestors:
                yield SkippedFile(path, f"symlink loop: leads back to {folder.ancestors[key]}", "loop")
            elif key in self.seen_dirs:
                yield SkippedFile(path, f"already crawled as {self.seen_dirs[key]}", "loop")
            else:
                self.seen_dirs[key] = path
                subdirs.append(_Dir(path, rel, folder.rules, {**folder.ancestors, key: path}))
            return
        yield self._file(path, st, rel=rel)

    def crawl_below(self, root: Path, target: Path) -> Iterator[FoundFile | SkippedFile]:
        """What a crawl of ``root`` would yield for ``target`` (a file or folder below it),
        without listing anything else: the folders from the root down are checked as the crawl
        checks them (hidden names, ignore files, secret rule, --exclude, links out of the roots),
        then the target is visited and, if a folder, crawled. Nothing when a folder on the way
        is left out or ``target`` is gone."""
        root = Path(os.path.realpath(root))
        rel_parts = Path(os.path.relpath(target, root)).parts
        if not rel_parts or rel_parts[0] == os.pardir or rel_parts == (".",):
            return
        if system_folder(str(root)):
            return
        try:
            st = os.stat(root)
        except OSError:
            return
        folder = _Dir(root, "", (_secret_rules(),), {(st.st_dev, st.st_ino): root})
        for i, name in enumerate(rel_parts):
            if name == IGNORE_FILE or (not self.options.include_hidden and name.startswith(".")):
                return
            folder = self._with_ignore_file(folder)
            path = folder.path / name
            subdirs: list[_Dir] = []
            last = i == len(rel_parts) - 1
            if not last:  # a folder passed on the way to an earlier target may be passed again
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    if (st.st_dev, st.st_ino) in self.walked:
                        self.seen_dirs.pop((st.st_dev, st.st_ino), None)
            items = list(self._visit(folder, name, os.path.islink(path), lambda: os.stat(path), subdirs))
            if not last:
                if not subdirs:  # the folder on the way is left out (or gone): so is the target
                    return
                folder = subdirs[0]
                self.walked.add(next(reversed(folder.ancestors)))
                continue
            yield from items
            stack = subdirs
            while stack:
                below = stack.pop()
                found: list[_Dir] = []
                yield from self._scan(below, found)
                stack.extend(reversed(found))

    def _with_ignore_file(self, folder: _Dir) -> _Dir:
        """``folder`` with its own .hefsearchignore added to its rules (as _scan adds it)."""
        try:
            entry = next((e for e in os.scandir(folder.path) if e.name == IGNORE_FILE), None)
        except OSError:
            return folder
        loaded = self._load_ignore_file(entry, folder.rel) if entry is not None else None
        if isinstance(loaded, _Rules):
            return _Dir(folder.path, folder.rel, folder.rules + (loaded,), folder.ancestors)
        return folder

    def _leaves(self, path: Path, st: os.stat_result, is_link: bool, is_dir: bool) -> SkippedFile | str | None:
        """Why an entry must not be followed: a SkippedFile for a system file or a link out of
        the roots, a reason string for a link onto a secret file, or None."""
        if not is_link:
            if st.st_dev in self.system_devs:  # e.g. proc mounted elsewhere
                return SkippedFile(path, "on a system filesystem (/proc, /sys or /dev): never read", "system_file")
            return None
        real = os.path.realpath(path)
        shown = printable(real)
        top = system_folder(real)
        if top is None and st.st_dev in self.system_devs:
            top = "a system filesystem (/proc, /sys or /dev)"
        if top is not None:
            return SkippedFile(path, f"symlink to {shown}: files in {top} are never read", "system_file")
        if not self.options.follow_links and not _inside(real, self.inside):
            what = "folder" if is_dir else "file"
            return SkippedFile(path, f"symlink to {shown}, a {what} outside the folders being indexed; "
                                     "not followed (--follow-links follows it)", "outside_link")
        hit, pattern = _secret_rules().check(self._relative_to_root(real) + ("/" if is_dir else ""))
        if hit:
            return f"symlink to {shown}, a secret file (matches '{pattern}' in {SECRET_RULE_NAME})"
        return None

    def _indexed_under_own_name(self, link: Path) -> str | None:
        """Why a symlink to a file inside the roots is left out (the file is indexed under its
        own name, so ``similar GPL-3`` finds /usr/share/common-licenses/GPL-3 rather than its
        alias GPL), or None when the file itself would not be crawled (hidden, excluded)."""
        real = os.path.realpath(link)
        root = next((r for r in self.inside if real != r and is_under(real, r)), None)
        if root is None:
            return None
        rel = os.path.relpath(real, root)
        if not self.options.include_hidden and any(part.startswith(".") for part in rel.split(os.sep)):
            return None
        if self.exclude is not None and self.exclude.check(Path(rel).as_posix())[0]:
            return None
        return f"symlink to {printable(real)}, indexed under that name"

    def _relative_to_root(self, real: str) -> str:
        """``real`` relative to the root holding it (the secret rule looks below the roots
        only, as for entries reached directly), or the whole path for a followed link."""
        for root in self.inside:
            if real != root and is_under(real, root):
                return os.path.relpath(real, root)
        return real.lstrip(os.sep)

    def _file(self, path: Path, st: os.stat_result, rel: str | None) -> FoundFile | SkippedFile:
        if not stat.S_ISREG(st.st_mode):
            return SkippedFile(path, f"special file ({_special_kind(st.st_mode)}); not opened", "special")
        kind, why = document_kind(path, self.supported)
        if kind is None and why != UNREADABLE:  # an unreadable file is reported below, after its size
            return SkippedFile(path, why, "unsupported")
        if st.st_size > self.options.max_bytes and kind not in STREAMED_KINDS:  # an mbox: capped per message
            return SkippedFile(
                path,
                f"too large: {human_size(st.st_size)} ({st.st_size} bytes), over the "
                f"{human_size(self.options.max_bytes)} limit per file (raise it with --max-size)",
                "too_large",
            )
        key = (st.st_dev, st.st_ino)
        if st.st_ino:
            first = self.seen_files.get(key)
            if first is not None and first != path:
                return SkippedFile(path, f"same file as {first} (reached twice through a link)", "duplicate")
            self.seen_files[key] = path
        if not os.access(path, os.R_OK):
            return SkippedFile(path, "permission denied", "unreadable")
        return FoundFile(path=path, size=st.st_size, mtime_ns=st.st_mtime_ns, kind=kind)

    def _ignored(self, rel: str, rules: tuple[_Rules, ...]) -> str | None:
        """The reason ``rel`` is ignored, or None. Deeper ignore files override outer ones."""
        if self.exclude is not None:
            hit, pattern = self.exclude.check(rel)
            if hit:
                return f"matches --exclude '{pattern}'"
        verdict: str | None = None
        for r in rules:
            hit, pattern = r.check(rel)
            if hit is True:
                verdict = r.describe(pattern)
            elif hit is False:
                verdict = None
        return verdict

    def _load_ignore_file(self, entry: os.DirEntry, rel: str) -> _Rules | SkippedFile | None:
        path = Path(entry.path)
        try:
            st = entry.stat()
            if not stat.S_ISREG(st.st_mode):
                return SkippedFile(path, "ignore file is not a regular file; not read", "special")
            if st.st_size > _MAX_IGNORE_FILE_BYTES:
                return SkippedFile(path, f"ignore file is too large ({human_size(st.st_size)}); not read", "too_large")
            with open(path, "rb") as f:
                lines = f.read().decode("utf-8", errors="replace").splitlines()
        except OSError as e:
            return SkippedFile(path, f"cannot read ignore file: {e.strerror or e}", "unreadable")
        return _Rules.from_lines(lines, origin=str(path), base=rel)


UNREADABLE = "permission denied"


def document_kind(path: str | os.PathLike, supported: Mapping[str, str]) -> tuple[str | None, str]:
    """Whether ``hefsearch index`` reads the regular file ``path`` as a document: (its kind, "")
    or (None, why not). The crawler's decision (``compile calib --from`` takes the crawl's; the
    watcher applies its name stage, :func:`~hefsearch.readers.filetypes.may_be_indexed`): a known
    suffix (``supported``: :func:`~hefsearch.readers.filetypes.indexed_suffixes`) gives the kind,
    ``NAME.gz`` is judged by ``NAME``, and a name without a file-type suffix (``NEWS``,
    ``Apache-2.0``, ``ls.1.gz``) is text when its first bytes are."""
    path = Path(path)
    kind, look = filetypes.kind_by_name(path, supported)
    if kind is not None:
        return kind, ""
    if not look:
        suffix = path.suffix.lower()
        return None, f"unsupported file type '{suffix}' (index --ext {suffix} reads it as text)"
    if not os.access(path, os.R_OK):
        return None, UNREADABLE
    kind = _kind_by_content(path)  # no file-type suffix: the content decides
    return (kind, "") if kind else (None, "no file-type suffix, and the content is not text")


def _kind_by_content(path: Path) -> str | None:
    """"man" when the start of the file (decompressed for ls.1.gz) is a manual page's roff,
    "mbox" when it starts as a mailbox does, "text" when it is other text, else None."""
    from hefsearch.readers.extract import ExtractionError, looks_like_text, read_regular_file
    from hefsearch.readers.extract_man import looks_like_roff

    compression = filetypes.compression_of(path)
    try:  # compressed: enough input for SNIFF_BYTES of output, even at a high ratio
        data = read_regular_file(path, head=filetypes.SNIFF_BYTES * (8 if compression else 1))
    except ExtractionError:
        return None
    head = filetypes.head(data, compression)
    if not looks_like_text(head):
        return None
    return "man" if looks_like_roff(head) else filetypes.kind_of_text(head, compression is not None)


def _stat_failure(path: Path, e: OSError, *, is_link: bool) -> SkippedFile:
    if e.errno == errno.ELOOP:
        return SkippedFile(path, "symlink loop (the link resolves to itself)", "loop")
    if is_link and e.errno in (errno.ENOENT, errno.ENOTDIR):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return SkippedFile(path, f"broken symlink: target {target} does not exist", "broken_link")
    return SkippedFile(path, f"cannot stat: {e.strerror or e}", "unreadable")


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "not a regular file"

