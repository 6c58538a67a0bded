"""Errors written for humans: what went wrong, where, and what to do next.

Every error hefsearch raises on purpose derives from :class:`HefsearchError`. The CLI prints
``message`` and ``hint`` on stderr and exits with the error's ``exit_code``, never a traceback;
the server answers with its ``http_status`` and the same message and hint. Both are decided here,
by the error's class, and nowhere else.
"""

from __future__ import annotations


class HefsearchError(Exception):
    """Base error: ``message`` says what happened, ``hint`` what to do about it."""

    title = "error"
    #: the CLI's exit status for this error (2: the run could not do what was asked)
    exit_code = 2
    #: the HTTP status the server answers with (400: the request cannot be served as asked)
    http_status = 400

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class NotFound(HefsearchError):
    """What was asked for is not there: a chunk or document id the library does not have."""

    title = "not found"
    http_status = 404


class BundleError(HefsearchError):
    """A model bundle is missing, incomplete, corrupt or of an unknown schema."""

    title = "bundle error"
    #: the server cannot answer now: not the request's fault
    http_status = 503


class BackendUnavailable(HefsearchError):
    """A backend cannot run here (missing SDK, no device, no compiled encoder)."""

    title = "backend unavailable"
    #: the server cannot answer now: not the request's fault
    http_status = 503


class DeviceError(HefsearchError):
    """The accelerator failed or timed out while running."""

    title = "device error"
    #: the server cannot answer now: not the request's fault
    http_status = 503


class ModelNotFound(HefsearchError):
    """A model id or folder could not be resolved offline."""

    title = "model not found"


class ExportError(HefsearchError):
    """Export of a model into a bundle failed or did not verify."""

    title = "export error"
