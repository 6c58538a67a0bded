"""What can go wrong in ``compile hef``: its error types, and the DFC's walls on record.

The walls are the two failures the public Hailo-10H report hit (DFC 5.3.0),
``BackendAllocatorException`` in compile() (or optimize()) and ``NegativeSlopeExponentNonFixable``
in optimize(). :func:`known_wall` recognises them by name, also wrapped in another exception or
named only in a message; the build steps down its fallback ladder on them
(:mod:`hefsearch.compile.hef_plan`), and at the last rung :func:`explain_wall` says what to do.
"""

from __future__ import annotations

from pathlib import Path

from hefsearch.embed.errors import BackendUnavailable, HefsearchError
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


def known_wall(exc: BaseException) -> str | None:
    """"allocator" or "negative_exponent" when ``exc`` is one of the report's walls, also when it is
    wrapped in another exception (as cause or context) or only named in a message; else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        names = [c.__name__ for c in type(exc).__mro__]
        for marker, wall in WALLS.items():
            if any(marker in n for n in names) or marker in str(exc):
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


