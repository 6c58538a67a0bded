"""Which language a text is in: a thin wrapper over py3langid (offline, model inside the wheel).

Used by the language-neutral post-transform (``embed/post_transform.py``): every chunk and query
gets a language code (ISO 639, "de", "ja", ...) or ``None`` when the text says too little
("HX-4200", a single word): then nothing is shifted. Probabilities are normalised; a best guess
under :data:`MIN_CONFIDENCE` is no answer (codes and numbers score under 0.1, a short real query
0.3-1.0).

The model loads once per process, not at import: a language-neutral transform starts loading it
in a background thread when it is built (:func:`warm_up`), overlapping the encoder's opening, so
the first query does not wait. Why py3langid, with the comparison: docs/decisions.md,
docs/performance.md.
"""

from __future__ import annotations

import threading
from typing import Iterable

from hefsearch.base.errors import HefsearchError

#: the library that identifies languages (recorded in a space's fingerprint, see post_transform)
IDENTIFIER = "py3langid"
#: best-guess probability under which a text counts as "language unknown"
MIN_CONFIDENCE = 0.2
#: only the start of a long chunk is read: plenty for the language, and bounded time
MAX_CHARS = 2000

_lock = threading.Lock()
_identifier = None
_warming = False


class LanguageIdUnavailable(HefsearchError):
    title = "language identification unavailable"


def _get_identifier():
    global _identifier
    with _lock:
        if _identifier is None:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError as e:
                raise LanguageIdUnavailable(
                    f"The language-neutral transform needs the py3langid package ({e}).",
                    "Install it: pip install 'py3langid>=0.4' (it ships its model; no download).") from e
            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def warm_up() -> None:
    """Load the model in a background thread (once), so it overlaps with opening the encoder
    (seconds for an ONNX session) instead of delaying the first query; a caller of
    :func:`identify` meanwhile simply waits for it. Errors surface at the first identify."""
    global _warming
    with _lock:
        if _identifier is not None or _warming:
            return
        _warming = True

    def load():
        try:
            _get_identifier()
        except Exception:  # reported by the first identify()
            pass

    threading.Thread(target=load, name="hefsearch-langid", daemon=True).start()


def identify(text: str, *, min_confidence: float = MIN_CONFIDENCE) -> str | None:
    """The language code of ``text``, or None when empty or too uncertain."""
    if not text or text.isspace():
        return None
    lang, p = _get_identifier().classify(text[:MAX_CHARS])
    return lang if p >= min_confidence else None


def identify_all(texts: Iterable[str], *, min_confidence: float = MIN_CONFIDENCE) -> list[str | None]:
    return [identify(t, min_confidence=min_confidence) for t in texts]
