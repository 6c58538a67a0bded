"""The sync's crawl and compare stages: what is under the roots (stat only, nothing read) against
the stored rows -> a :class:`Plan` (files to work on, rows to remove, failures to record).
Indexed data is only removed when its file is gone (or newly excluded): files under a folder
that could not be listed, and files unreadable or over ``--max-size`` now, keep what is indexed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hefsearch.base.terminal_text import printable

from .crawl import FAILED_SKIPS, LINK_SKIPS, NOTED_SKIPS
from .sync_types import Job, ProgressEvent, SyncOptions, SyncReport

#: examples of unsupported files a report keeps
UNSUPPORTED_EXAMPLES = 5


@dataclass
class Crawled:
    found: list  # crawl.FoundFile
    skipped: list  # crawl.SkippedFile


def crawl_stage(resolved: list[Path], opts: SyncOptions, emit, only: list[Path] | None = None) -> Crawled:
    """Consumes the roots (or ``only`` these paths below them); produces what is under them
    (stat only, nothing is read)."""
    from .crawl import FoundFile, crawl, crawl_paths

    out = Crawled([], [])
    emit(ProgressEvent("scan"))
    items = crawl(resolved, opts.crawl) if only is None else crawl_paths(resolved, only, opts.crawl)
    for item in items:
        (out.found if isinstance(item, FoundFile) else out.skipped).append(item)
    return out


@dataclass
class Plan:
    """The compare stage's result: what needs work and what goes."""

    found: list  # crawl.FoundFile, name clashes dropped
    todo: list[Job]  # new or changed files
    gone: list[str]  # real paths whose rows (and vectors) are removed
    existing: dict[str, tuple]  # real path -> stored row (sync._stored_documents)
    crawl_failures: list[tuple[str, str, str]]  # rows for the failures table


def compare(crawled: Crawled, existing: dict[str, tuple], report: SyncReport) -> Plan:
    """Consumes the crawl and the stored rows; produces the :class:`Plan`. Unchanged files
    (same size and mtime) are counted here; their earlier failures are reported again."""
    protected, crawl_failures = _account_skips(crawled.skipped, existing, report)
    found = _drop_name_clashes(crawled.found, report, crawl_failures)
    found_paths = {str(f.path) for f in found}
    todo: list[Job] = []
    for f in found:
        path = str(f.path)
        old = existing.get(path)
        if old is not None and old[1] == f.size and old[2] == f.mtime_ns:
            status, error = old[4], old[5]
            if status == "failed":
                report.failed.append((printable(path), error or "failed before"))
            elif status == "stale":
                report.stale.append((printable(path), error or "failed before"))
            else:
                report.unchanged += 1
            continue
        todo.append(Job(path, f.size, f.mtime_ns, f.kind, None if old is None else old[0],
                        None if old is None else old[4]))
    gone = [p for p in existing if p not in found_paths and not _is_protected(p, existing[p][4], protected)]
    return Plan(found, todo, gone, existing, crawl_failures)


def _account_skips(skipped: list, existing: dict[str, tuple], report: SyncReport
                   ) -> tuple[dict[str, bool], list[tuple[str, str, str]]]:
    """Sort the crawl's skips into the report and the failures table.

    Returns the paths whose indexed data must stay (real path -> True for a folder, whose
    whole subtree stays) and the failure rows (printable path, reason, kind). A file that is
    unreadable or over the size limit now keeps its indexed version: a mistyped --max-size
    must not empty the library.
    """
    protected: dict[str, bool] = {}
    rows: list[tuple[str, str, str]] = []
    for item in skipped:
        kind = item.counted_as
        report.skipped[kind] = report.skipped.get(kind, 0) + 1
        real, shown, reason = str(item.path), printable(item.path), printable(item.reason)
        if kind in FAILED_SKIPS:
            protected[real] = True
            old = existing.get(real)
            if old is not None and old[4] in ("ok", "stale"):
                report.stale.append((shown, reason))
                reason = f"{reason}; the previously indexed version is kept"
            else:
                report.failed.append((shown, reason))
        elif kind in LINK_SKIPS:
            report.links.append((shown, reason))
        elif kind in NOTED_SKIPS:
            report.notes.append((shown, reason))
        else:
            if kind == "unsupported":
                suffix = Path(shown).suffix.lower() or "(none)"
                report.unsupported[suffix] = report.unsupported.get(suffix, 0) + 1
                if len(report.unsupported_examples) < UNSUPPORTED_EXAMPLES:
                    report.unsupported_examples.append(Path(shown).name)
            continue
        rows.append((shown, reason, kind))
    return protected, rows


def _drop_name_clashes(found: list, report: SyncReport, failures: list[tuple[str, str, str]]) -> list:
    """Two files whose printable names are equal (``caf\\xe9.txt`` literally, and ``caf`` +
    byte 0xE9 + ``.txt``) would share one row: the second one is reported, not indexed."""
    kept, by_shown = [], {}
    for f in found:
        shown = printable(f.path)
        first = by_shown.setdefault(shown, f.path)
        if first != f.path:
            reason = "its name, made printable, is the same as another file's; rename one of them"
            report.failed.append((shown, reason))
            failures.append((shown, reason, "unreadable"))
            continue
        kept.append(f)
    return kept


def _is_protected(path: str, status: str, protected: dict[str, bool]) -> bool:
    """Keep ``path``'s row: it (or a folder above it) failed this time, and it holds an
    indexed version (a row that never indexed anything is replaced by the failure record)."""
    if not protected:
        return False
    if path in protected:
        return status in ("ok", "stale")
    parent = os.path.dirname(path)
    while True:
        if parent in protected:
            return True
        up = os.path.dirname(parent)
        if up == parent:
            return False
        parent = up
