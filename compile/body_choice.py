"""Which encoder body a build starts from: the FP32 original (``encoder.onnx``) or the
8-bit-robust copy that ``compile robust`` trains (``encoder.robust.onnx``). Torch- and onnx-free.

``compile sim`` and ``compile hef`` take ``--body original|robust``; both ask
:func:`resolve_body`, so a build names the body it used and a missing robust body is one clear
message. ``compile hef`` defaults to ``auto`` (:func:`choose_body`): on a chip whose builds end
all-8-bit (Hailo-10H) the robust body when its own measurements say it helps, else the original.
The original always stays the FP32 reference (``cpu-fp32``, quality baselines).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hefsearch.embed.bundle import Bundle
from hefsearch.base.errors import HefsearchError

ORIGINAL = "original"
ROBUST = "robust"
AUTO = "auto"
BODIES = (ORIGINAL, ROBUST)
#: chips whose builds end all-8-bit: on Hailo-10H every 16-bit configuration of the one public report
#: crashed DFC 5.3.0's allocator (BackendAllocatorException, section 5; a user report on the Hailo
#: Community forum, community.hailo.ai), and its author's follow-up (community thread 19530) met a
#: cascade of other failures when pushing 16 bits further, so a16 profiles fall back to a8 there
ALL_8BIT_CHIPS = ("hailo10h",)
#: what "helps" means for ``auto``: the held-out 8-bit cosine to the original FP32 vectors gained
#: at least this much, and the robust body's own FP32 vectors kept at least this cosine, or,
#: below it, ranked the bundled parallel set in FP32 at least as well as the original (MRR
#: within :data:`PARALLEL_TOLERANCE`): damping moves the special tokens' vectors, which the
#: cosine counts and the ranking shrugs off (e5 damped: cosine 0.9944, parallel MRR 0.816 -> 0.833)
MIN_GAIN = 0.005
MIN_FP32_COSINE = 0.995
PARALLEL_TOLERANCE = 0.002
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


def stale_builds(bundle: Bundle, body: Body) -> list[str]:
    """The names of the builds (``npu-sim`` and ``hef`` entries) made from an earlier version of
    ``body``: their recorded body hash is not the body's hash now (``compile robust`` run again,
    or longer). They still work, as the body they were built from; they no longer show it."""
    out = []
    for kind in ("npu-sim", "hef"):
        for e in bundle.encoder_entries(kind):
            rec = (e.extra or {}).get("body") or {}
            if rec.get("name") == body.name and rec.get("sha256") and rec["sha256"] != body.sha256:
                out.append(str((e.extra or {}).get("name") or e.file))
    return out


def robust_gain(bundle: Bundle) -> tuple[bool, str]:
    """Whether the bundle's robust body measurably helps an all-8-bit build, by what
    ``compile robust`` recorded: (it helps, why in one line)."""
    entries = bundle.encoder_entries(ROBUST_KIND)
    if not entries:
        return False, f"no 8-bit-robust body (train one: hefsearch compile robust {bundle.path})"
    x = entries[0].extra or {}
    src = (x.get("source") or {}).get("sha256")
    if src and src != bundle.file_sha256(bundle.encoder_entries("onnx")[0].file):
        return False, "the 8-bit-robust body was trained from another encoder.onnx (re-run compile robust)"
    held = x.get("holdout_cos") or {}
    before, after = held.get("before"), held.get("after")
    fp32 = (x.get("fp32_check") or {}).get("cosine_mean")
    if before is None or after is None or fp32 is None:
        return False, "the 8-bit-robust body has no recorded measurements (re-run compile robust)"
    par = x.get("parallel") or {}
    mrr = (par.get("original") or {}).get("mrr"), (par.get("robust") or {}).get("mrr")
    return _judged(before, after, fp32, mrr if None not in mrr else None)


def _judged(before: float, after: float, fp32: float, mrr: tuple[float, float] | None) -> tuple[bool, str]:
    """The verdict on recorded measurements: the held-out 8-bit cosine must rise by MIN_GAIN,
    and the FP32 vectors stay near the original's (or, measured, the parallel set rank as well)."""
    what = (f"held-out 8-bit cosine to FP32 {before:.4f} -> {after:.4f}, "
            f"its FP32 vectors at cosine {fp32:.4f} to the original")
    if mrr is not None:
        what += f", parallel-set FP32 MRR {mrr[0]:.4f} -> {mrr[1]:.4f}"
    if after - before < MIN_GAIN:
        return False, f"the 8-bit-robust body does not measurably help ({what})"
    kept = mrr is not None and mrr[1] >= mrr[0] - PARALLEL_TOLERANCE
    if fp32 < MIN_FP32_COSINE and not kept:
        return False, f"the 8-bit-robust body moved its FP32 vectors too far ({what})"
    if mrr is not None and not kept:
        return False, f"the 8-bit-robust body ranks the parallel set worse in FP32 ({what})"
    return True, what


def choose_body(bundle: Bundle, body: str | None, hw_arch: str | None, all_8bit: bool,
                make_damped=None) -> tuple[Body, str]:
    """The body a build (HEF or simulation) starts from, and why. ``auto`` (or None) takes the
    robust body, when it helps, for a chip whose builds end all-8-bit or a requested all-8-bit
    profile (``all_8bit``). A multilingual bundle without a robust body first gets the damped
    one (``make_damped(bundle)``: ``compile robust --steps 0``, minutes, no training) when a
    caller passes it; the choice is then made on its recorded measurements like any other."""
    name = (body or AUTO).strip().lower()
    if name != AUTO:
        return resolve_body(bundle, name), f"--body {name}"
    if hw_arch not in ALL_8BIT_CHIPS and not all_8bit:
        return resolve_body(bundle), f"auto: {hw_arch or 'this profile'} keeps 16-bit layers; the original body"
    if make_damped is not None and not bundle.encoder_entries(ROBUST_KIND) and bundle.multilingual:
        make_damped(bundle)
    helps, why = robust_gain(bundle)
    if helps:
        return resolve_body(bundle, ROBUST), f"auto: the 8-bit-robust body ({why})"
    return resolve_body(bundle), f"auto: the original body; {why}"
