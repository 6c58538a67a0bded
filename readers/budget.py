"""One budget for every document, whatever reads it: the wall time its reading may take, the
memory a reader may hold for it, its parts (chapters, sheets, slides, pages, attachments), the
text it may yield (the ``--max-size`` cap) and, read by OCR, its pages and OCR time.

A reader opens the document's budget with :func:`reading` (the active one when a reader calls
another, as a message does for its attachments) and reports as it goes: ``add_part``,
``add_text``, ``hold`` (bytes it keeps, by their real cost), ``tick`` (in any loop). Past a
limit they raise :class:`OverBudget`, an ``ExtractionError`` whose message names the limit and
how to raise it. A reader of parts catches it, keeps the parts read and says so with
:meth:`Budget.kept` (the note the run reports); any other reader lets it fail the document.
Either way the run goes on.

The limits are :class:`Limits` (defaults below, chosen so every real document of the test
corpora reads whole, with room); ``HEFSEARCH_DOCUMENT_LIMITS`` raises them for a run, e.g.
``seconds=600,memory_mb=1024,ocr_pages=2000`` (docs/indexing.md)."""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Iterator

from hefsearch.base import settings

from .extract_base import ExtractionError

log = logging.getLogger("hefsearch.readers")


@dataclass(frozen=True)
class Limits:
    """What one document may cost; the names are those ``HEFSEARCH_DOCUMENT_LIMITS`` takes."""

    #: wall time reading it may take (OCR has its own, below)
    seconds: float = 120.0
    #: memory a reader may hold for it besides the file's bytes (decoded pixels, string tables)
    memory_mb: int = 256
    #: chapters, sheets, slides, pages or attachments
    parts: int = 10_000
    #: pages read by OCR
    ocr_pages: int = 500
    #: wall time of its OCR (a page takes 1-3 s here, 2-5 s on a Pi 5)
    ocr_seconds: float = 1800.0

    @classmethod
    def from_env(cls) -> "Limits":
        """The defaults, with what ``HEFSEARCH_DOCUMENT_LIMITS`` raises (a bad entry is
        logged once and ignored: a typo must not stop an index run)."""
        return _parsed(settings.DOCUMENT_LIMITS.value() or "")

    @classmethod
    def parse(cls, text: str) -> "Limits":
        known = {f.name: f.type for f in fields(cls)}
        changes: dict[str, float | int] = {}
        for entry in filter(None, (e.strip() for e in text.split(","))):
            name, _, value = entry.partition("=")
            name = name.strip().replace("-", "_")
            try:
                number = float(value) if known[name] == "float" else int(value.replace("_", ""))
                if number <= 0:
                    raise ValueError
            except (KeyError, ValueError):
                log.warning("%s: ignoring %r (use NAME=NUMBER with NAME one of %s)",
                            settings.DOCUMENT_LIMITS.name, entry, ", ".join(known))
                continue
            changes[name] = number
        return replace(cls(), **changes)


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> Limits:
    return Limits.parse(text)


class OverBudget(ExtractionError):
    """A document passed one of its limits; ``message`` says which and how to raise it,
    ``limit`` names it (a field of :class:`Limits`)."""

    title = "document over budget"
    limit = ""


#: how often (calls of :meth:`Budget.tick`) the clock is read in a tight loop
_TICKS_PER_CHECK = 256
_current: contextvars.ContextVar["Budget | None"] = contextvars.ContextVar("hefsearch_budget", default=None)


class Budget:
    """One document's use of its :class:`Limits`, counted from its creation."""

    def __init__(self, what: str, limits: Limits | None = None, max_chars: int | None = None, *,
                 ocr: bool = False):
        self.what, self.limits, self.max_chars, self.ocr = what, limits or Limits.from_env(), max_chars, ocr
        self.started = time.monotonic()
        self.parts = self.pages = self.chars = self.held = 0
        self._ticks = 0
        #: what the run should report beside the document (a library's warning, in our words)
        self.notes: list[str] = []
        #: the language pack the document's last OCR page was read in (the next starts with it)
        self.ocr_language: str | None = None

    # -- the checks a reader calls ------------------------------------------------------------
    @property
    def seconds(self) -> float:
        return self.limits.ocr_seconds if self.ocr else self.limits.seconds

    def check_time(self) -> None:
        if time.monotonic() - self.started > self.seconds:
            name = "ocr_seconds" if self.ocr else "seconds"
            raise self._over(f"{'OCR of ' if self.ocr else 'reading '}{self.what} took more than {self.seconds:.0f} s",
                             name, self.seconds)

    def tick(self) -> None:
        """Call in any loop: the clock is read every few hundred calls."""
        self._ticks += 1
        if self._ticks >= _TICKS_PER_CHECK:
            self._ticks = 0
            self.check_time()

    def add_part(self, count: int = 1) -> None:
        """One more chapter, sheet, slide, page or attachment (checked before it is read)."""
        self.parts += count
        if self.parts > self.limits.parts:
            raise self._over(f"{self.what} has more than {self.limits.parts:,} parts", "parts", self.limits.parts)
        self.check_time()

    def add_page(self) -> None:
        """One more page to read by OCR (checked before it is read)."""
        self.pages += 1
        if self.pages > self.limits.ocr_pages:
            raise self._over(f"{self.what} has more than {self.limits.ocr_pages:,} pages to read by OCR",
                             "ocr_pages", self.limits.ocr_pages)
        self.check_time()

    def add_text(self, chars: int) -> None:
        """Characters of text out: past ``max_chars`` (``--max-size``) the document is refused."""
        from .extract_base import too_much_text

        self.chars += chars
        if self.max_chars is not None and self.chars > self.max_chars:
            raise too_much_text(self.what, self.max_chars)
        self.tick()

    def hold(self, nbytes: int, purpose: str = "") -> None:
        """``nbytes`` more held for this document (its real cost: objects, not characters)."""
        self.held += nbytes
        if self.held > self.limits.memory_mb * 2**20:
            what = f"{self.what}{' ' + purpose if purpose else ''}"
            raise self._over(f"{what} needs more than {self.limits.memory_mb:,} MB of memory to read",
                             "memory_mb", self.limits.memory_mb)
        self.tick()

    def release(self, nbytes: int) -> None:
        self.held = max(0, self.held - nbytes)

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more could be held."""
        return self.held + nbytes <= self.limits.memory_mb * 2**20

    # -- reporting ------------------------------------------------------------------------------
    def kept(self, e: OverBudget, read: int, of: int | None, unit: str) -> str:
        """The note for a document cut short: its reason and what was kept."""
        total = f" of {of:,}" if of is not None else ""
        return f"{e.message}; kept the first {read:,}{total} {unit}"

    def _over(self, reason: str, name: str, value: float) -> OverBudget:
        raised = f"{settings.DOCUMENT_LIMITS.name}={name}={value * 4:g}"
        e = OverBudget(f"{reason}, its limit ({raised} raises it)")
        e.limit = name
        return e


def current() -> Budget | None:
    """The budget of the document being read in this thread, if any."""
    return _current.get()


@contextmanager
def reading(what: str, max_chars: int | None = None, *, ocr: bool = False, limits: Limits | None = None
            ) -> Iterator[Budget]:
    """The budget of the document being read: the active one (a reader called by another, or
    OCR of a document already opened with ``ocr=True``), else a new one active inside."""
    active = _current.get()
    if active is not None and (active.ocr or not ocr):
        if max_chars is not None and active.max_chars is None:
            active.max_chars = max_chars
        yield active
        return
    budget = Budget(what, limits, max_chars, ocr=ocr)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)
