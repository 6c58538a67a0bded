"""Errors of the library (index/): each says what went wrong, where, and what to do next."""

from __future__ import annotations

from hefsearch.base.errors import HefsearchError


class LibraryError(HefsearchError):
    """The library folder is missing, unreadable, or from a newer hefsearch."""

    title = "library error"
    #: the server cannot answer from its library now: not the request's fault
    http_status = 503


class SpaceError(HefsearchError):
    """A vector space is unknown or its files are unusable."""

    title = "space error"


class FingerprintMismatch(SpaceError):
    """An encoder does not produce the vectors a space holds: never mix them."""

    title = "fingerprint mismatch"


class LibraryBusy(LibraryError):
    """Another process is writing to the library."""

    title = "library busy"
