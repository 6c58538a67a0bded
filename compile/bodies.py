"""Which encoder body a build starts from: the FP32 original (``encoder.onnx``) or the
8-bit-robust copy that ``compile robust`` trains (``encoder.robust.onnx``). Torch- and onnx-free.

``compile sim`` and ``compile hef`` take ``--body original|robust``; both ask
:func:`resolve_body`, so a build names the body it used and a missing robust body is one clear
message. The original always stays the FP32 reference (``cpu-fp32``, quality baselines).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hefsearch.embed.bundle import Bundle
from hefsearch.embed.errors import HefsearchError

ORIGINAL = "original"
ROBUST = "robust"
BODIES = (ORIGINAL, ROBUST)
#: manifest kind of the trained body (the original's kind is "onnx")
ROBUST_KIND = "onnx-robust"
ROBUST_FILE = "encoder.robust.onnx"


class BodyError(HefsearchError):
    title = "encoder body error"


@dataclass(frozen=True)
class Body:
    name: str  # "original" or "robust"
    file: str  # relative to the bundle
    sha256: str

    def path(self, bundle: Bundle) -> Path:
        return bundle.path / self.file

    @property
    def suffix(self) -> str:
        """Appended to the names of builds from this body (``a8-robust``); empty for the original."""
        return "" if self.name == ORIGINAL else f"-{self.name}"


def resolve_body(bundle: Bundle, body: str | None = None) -> Body:
    """The body a build uses (default: the original)."""
    name = (body or ORIGINAL).strip().lower()
    if name not in BODIES:
        raise BodyError(f"Unknown encoder body {body!r}.", f"Use one of: {', '.join(BODIES)}.")
    kind = "onnx" if name == ORIGINAL else ROBUST_KIND
    entries = bundle.encoder_entries(kind)
    if not entries:
        if name == ROBUST:
            raise BodyError(f"Bundle {bundle.path} has no 8-bit-robust body.",
                            f"Train one first: hefsearch compile robust {bundle.path}")
        raise BodyError(f"Bundle {bundle.path} has no FP32 encoder body.", "Re-export the bundle.")
    rel = entries[0].file
    return Body(name, rel, bundle.file_sha256(rel))
