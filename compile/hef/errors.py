"""What can go wrong in ``compile hef``: its error types, and the DFC's walls on record.

The walls are the two failures the public Hailo-10H report hit (DFC 5.3.0),
``BackendAllocatorException`` in compile() (or optimize()) and ``NegativeSlopeExponentNonFixable``
in optimize(). :func:`known_wall` recognises them by name, also wrapped in another exception or
named only in a message; the build steps down its fallback ladder on them
(:mod:`hefsearch.compile.hef.plan`), and at the last rung :func:`explain_wall` says what to do.

They are not the only ones: the report's author later saw a cascade on the same chip and DFC
(community thread 19530: an attention crash, then an a16 conv failing with a "nan exponent", then
"needs super-defuse"), under exception classes that are not public. So on Hailo-10H any failure
of a 16-bit rung steps down whatever its class, and a failure of the last rung, the report's own
8-bit script, stops with :func:`report_script_failed`: the report's context and what to send
upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hefsearch.base.errors import BackendUnavailable, HefsearchError
from hefsearch.embed.precision import PrecisionProfile


class DfcUnavailable(BackendUnavailable):
    """The Hailo Dataflow Compiler (hailo_sdk_client) cannot be imported."""

    title = "Dataflow Compiler not installed"


class CompileError(HefsearchError):
    title = "compile error"


class AllocatorCrash(CompileError):
    """The DFC allocator could not place the network (BackendAllocatorException)."""

    title = "allocator failure"


class NegativeExponentWall(CompileError):
    """optimize() could not fix a negative slope exponent (NegativeSlopeExponentNonFixable)."""

    title = "quantisation failure"


class MaskCommandMissing(CompileError):
    """The DFC refused set_input_mask_to_softmax() on the parsed network."""


#: the DFC failures the public Hailo-10H report hit, by the exception name it printed
WALLS = {"BackendAllocatorException": "allocator", "NegativeSlopeExponentNonFixable": "negative_exponent"}


#: what is never a DFC failure, whatever stage it arrives in: the user's Ctrl+C, an exit asked for
NOT_A_DFC_FAILURE = (KeyboardInterrupt, SystemExit, GeneratorExit)


def message_of(exc: BaseException) -> str:
    """``str(exc)``, or what can be said of it when even that fails (an SDK exception whose
    ``__str__`` raises must not turn a step down the ladder into a traceback)."""
    try:
        return str(exc)
    except Exception as e:  # noqa: BLE001 (anything: this runs while handling a failure)
        return f"<message unreadable: {type(e).__name__}>"


def known_wall(exc: BaseException) -> str | None:
    """"allocator" or "negative_exponent" when ``exc`` is one of the report's walls, also when it is
    wrapped in another exception (as cause or context) or only named in a message; else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        names = [c.__name__ for c in type(exc).__mro__]
        for marker, wall in WALLS.items():
            if any(marker in n for n in names) or marker in message_of(exc):
                return wall
        exc = exc.__cause__ or exc.__context__
    return None


def is_allocator_crash(exc: BaseException) -> bool:
    """True for the DFC's BackendAllocatorException, also when wrapped in another exception."""
    return known_wall(exc) == "allocator"


def explain_wall(wall: str, profile: PrecisionProfile, work: Path, fallback: bool) -> CompileError:
    if wall == "allocator":
        return _explain_allocator(profile, work, fallback)
    why = (f"optimize() failed with profile {profile.describe()}: NegativeSlopeExponentNonFixable. The model "
           "script's negative_exponent line cannot be met with an 8-bit softmax (the public Hailo-10H report hit "
           "exactly this on DFC 5.3.0: 'Desired shift is 8.0, but op has only 8 data bits').")
    hint = ("Remove model_optimization_config(negative_exponent, ...) from your --alls-extra lines; hefsearch writes "
            "it only for a 16-bit softmax. " if profile.bits_for("softmax") != 16 else
            "Use a profile without a 16-bit softmax, or --fallback to step down. ")
    hint += f"Finished stages are kept in {work}; a re-run resumes there."
    return NegativeExponentWall(why, hint)


def _explain_allocator(profile: PrecisionProfile, work: Path, fallback: bool) -> AllocatorCrash:
    attention = profile.attention_sixteen_bit
    why = (
        f"The Dataflow Compiler's allocator could not place the network with precision profile "
        f"{profile.describe()} (BackendAllocatorException). 16-bit (a16_w16) layers need twice the "
        "on-chip memory and not every layer can be placed at 16 bits"
    )
    why += (f"; 16 bits on the attention path ({', '.join(attention)}) is known to fail this way on DFC 5.3.0."
            if attention else ".")
    hint = ("Re-run with --fallback to step down to 8 bits, or choose --precision a8. " if not fallback else "")
    hint += f"Finished stages are kept in {work}; a re-run resumes there."
    return AllocatorCrash(why, hint)


#: said before a 16-bit attempt on Hailo-10H (docs/compiling.md has the reasoning)
SIXTEEN_BIT_COST = (
    "note: this 16-bit attempt may cost tens of minutes to an hour of CPU on a compile host without a GPU "
    "(optimize() and compile() each; community thread 19530 reports 8 min 20 s for compile() alone with one a16 "
    "conv, DFC 5.3.0). If it fails, whatever the error, the build steps down to the public Hailo-10H report's "
    "8-bit script; --precision a8 goes straight to that script, the one build on record for this chip.")

#: the one sentence-encoder build on record for Hailo-10H (a user report on the Hailo Community forum,
#: community.hailo.ai; model_script.REPORT_SOURCE)
REPORT_CONTEXT = (
    "The public Hailo-10H report built exactly this script: paraphrase-multilingual-MiniLM-L12-v2 (12 layers, "
    "hidden 384) at SEQ 256, DFC 5.3.0 on a CPU-only x86_64 host, HailoRT 5.3.0; 13 contexts, about 19.4 MB.")


@dataclass(frozen=True)
class BuildContext:
    """Which build a failure happened in, as its message names it: the chip, the sequence
    length, the DFC version and the work folder (where build-report.json and the scripts lie)."""

    hw_arch: str
    seq: int
    dfc_version: str
    work: Path


def report_script_failed(stage: str, exc: BaseException, wall: str | None, script: str | None,
                         where: BuildContext) -> CompileError:
    """The last rung on Hailo-10H, the report's own 8-bit script (``script``, its file in the work
    folder), failed: nothing lower is on record. Says what failed, the report's context, and
    what to send upstream."""
    hw_arch, seq, work, dfc_version = where.hw_arch, where.seq, where.work, where.dfc_version
    what = f"{type(exc).__name__}: {message_of(exc).strip()[:600]}"
    why = (f"The public Hailo-10H report's 8-bit model script failed in {stage}() for {hw_arch} at SEQ {seq} "
           f"(DFC {dfc_version}): {what}. {REPORT_CONTEXT} There is no lower rung to step down to.")
    hint = ""
    if wall == "allocator":
        hint = "It may not fit at this SEQ: try a shorter --seq-len (and 'hefsearch compile calib --seq-len'). "
    hint += (f"Please send upstream (the Hailo community forum, community.hailo.ai, beside thread 19530; and "
             f"hefsearch's issue tracker): {work / 'build-report.json'} (every attempt: stage, exception, message, "
             f"time), the model script {work / script if script else 'in ' + str(work)}, the DFC version "
             f"({dfc_version}; 'hailo --version'), the bundle's manifest.json and the DFC's own log files from the "
             f"folder you ran in. Finished stages are kept in {work}; a re-run resumes there.")
    cls = AllocatorCrash if wall == "allocator" else NegativeExponentWall if wall == "negative_exponent" else CompileError
    if wall == "allocator":
        why = why.replace("There is no lower", "The allocator could not place it even at 8 bits. There is no lower")
    return cls(why, hint)
