"""An encoder opened on a background thread while the caller does other work.

A one-shot ``hefsearch search`` spends about as long creating the encoder's ONNX Runtime
session (or loading a HEF onto the NPU) as it does reading the space's FAISS index and
importing the table renderer. Session creation runs in native code without the GIL, so the
two overlap on a second core: :meth:`Searcher.prefetch
<hefsearch.search.searcher.Searcher.prefetch>` starts one of these, and the first
``encoder_for`` of that space waits for it. Whatever the open raises is raised there, in the
caller's thread, as if it had opened the encoder itself.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder


class PendingEncoder:
    """``open()`` running on a daemon thread; :meth:`result` joins it."""

    def __init__(self, open: Callable[[], "Encoder"], name: str = "hefsearch-encoder-open"):
        self._open = open
        self._encoder: "Encoder | None" = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._encoder = self._open()
        except BaseException as e:  # handed to the thread that asks for the encoder
            self._error = e

    def result(self) -> "Encoder":
        """The opened encoder, or the open's own exception raised here."""
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._encoder

    def discard(self) -> None:
        """Wait for the open and close what it opened (the search never asked for it)."""
        self._thread.join()
        if self._encoder is not None:
            self._encoder.close()
        self._encoder = self._error = None
