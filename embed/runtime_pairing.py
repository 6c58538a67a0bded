"""Which Dataflow Compiler (DFC) built a HEF, and whether the HailoRT on this machine is its pair.

A HEF is made by one DFC release and read by one HailoRT release; Hailo ships them in pairs
(:data:`KNOWN_PAIRS`, each row with its public source). :func:`pairing` compares the DFC a
bundle's manifest records for a HEF with the installed HailoRT: a known pair, a release line
whose pair is known but differs (a mismatch), or a line nobody has published (unknown).
:func:`ways_out` is what to do about a mismatch, said the same by ``hefsearch doctor`` and by
the hailo backend when HailoRT refuses a HEF (:func:`is_hef_refused`: status 92,
``HAILO_HEF_NOT_SUPPORTED``, whose description in ``hailort.h`` reads "Make sure the DFC version
is compatible"). Sources and what is left for hardware: docs/hailo-facts.md, "Versions".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: (DFC major.minor, HailoRT major.minor, the public source that pairs them). A release line is
#: major.minor: patch releases of one line (HailoRT 5.1.1 after 5.1.0) are taken as the same pair,
#: which no public source states outright.
KNOWN_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("3.33", "4.23", "hailo-ai/hailo_model_zoo v2.17 and v2.18 README.rst badges (DFC 3.33.0, HailoRT 4.23.0)"),
    ("3.34", "4.24", "hailo-ai/hailo_model_zoo v2.19 (commit 3f19ede, the MiniLM release): DFC 3.34.0, HailoRT 4.24.0"),
    ("5.0", "5.0", "hailo-ai/hailo_model_zoo v5.0.0 README.rst badges (DFC 5.0.0, HailoRT 5.0.0)"),
    ("5.1", "5.1", "hailo-ai/hailo_model_zoo v5.1.0 README.rst badges (DFC 5.1.0, HailoRT 5.1.0); hailo-ai/hailo-apps "
                   "defines.py pairs HailoRT 5.1.1 with Model Zoo v5.1.0"),
    ("5.2", "5.2", "hailo-ai/hailo_model_zoo v5.2.0 README.rst badges (DFC 5.2.0, HailoRT 5.2.0)"),
    ("5.3", "5.3", "the public Hailo-10H sentence-encoder report: DFC 5.3.0 (hailo_ai_sw_suite_2026-04) built the "
                   "HEF that ran on HailoRT 5.3.0"),
)
#: what the Raspberry Pi archive installs for the AI HAT+ 2 (Hailo-10H), by public reports
RPI_ARCHIVE_HAILO10H = "5.1.1"
#: the HailoRT status for a HEF this runtime cannot read (hailort.h: "HEF file is not supported.
#: Make sure the DFC version is compatible."); hef.cpp raises it for HEF extensions it does not know
STATUS_HEF_NOT_SUPPORTED = 92


def release_line(version: str | None) -> str | None:
    """``"5.3.0+fake"`` -> ``"5.3"``; None when no major.minor can be read."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", str(version or ""))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def runtime_for(dfc: str | None) -> tuple[str, str] | None:
    """(HailoRT release line, source) paired with this DFC, or None when no public source pairs it."""
    line = release_line(dfc)
    return next(((rt, src) for d, rt, src in KNOWN_PAIRS if d == line), None)


def dfc_for(runtime: str | None) -> tuple[str, str] | None:
    """(DFC release line, source) paired with this HailoRT, or None when no public source pairs it."""
    line = release_line(runtime)
    return next(((d, src) for d, rt, src in KNOWN_PAIRS if rt == line), None)


def hailort_pair(dfc: str | None) -> dict:
    """What a build records of the runtime its HEF needs (manifest ``hailort_pair``): the HailoRT
    release line paired with ``dfc`` and the source, or ``release`` None when nobody says."""
    found = runtime_for(dfc)
    if found is None:
        return {"release": None, "source": f"no public source pairs DFC {dfc} with a HailoRT release"}
    return {"release": found[0], "source": found[1]}


@dataclass(frozen=True)
class Pairing:
    """A HEF's DFC against the installed HailoRT. ``known``: True (a known pair), False (each
    side's pair is known, and it is not this one), None (no public source says either way)."""

    dfc: str | None
    runtime: str | None
    known: bool | None
    detail: str

    @property
    def mismatch(self) -> bool:
        return self.known is False


def pairing(dfc: str | None, runtime: str | None) -> Pairing:
    """Is the HEF of DFC ``dfc`` a known pair with HailoRT ``runtime``?"""
    if not dfc:
        return Pairing(dfc, runtime, None, "the manifest does not record which DFC built this HEF")
    if not runtime:
        want = runtime_for(dfc)
        return Pairing(dfc, runtime, None, f"DFC {dfc} HEFs pair with HailoRT {want[0]}.x" if want else
                       f"no public source pairs DFC {dfc} with a HailoRT release")
    want, have = runtime_for(dfc), dfc_for(runtime)
    if want and release_line(runtime) == want[0]:
        return Pairing(dfc, runtime, True, f"DFC {dfc} and HailoRT {runtime} are a known pair ({want[1]})")
    if want or have:
        said = [f"DFC {dfc} pairs with HailoRT {want[0]}.x ({want[1]})" if want else
                f"no public source pairs DFC {dfc} with a HailoRT release",
                f"HailoRT {runtime} pairs with DFC {have[0]}.x ({have[1]})" if have else
                f"no public source pairs HailoRT {runtime} with a DFC release"]
        return Pairing(dfc, runtime, False if want and have else None,
                       f"DFC {dfc} and HailoRT {runtime} are not a known pair: " + "; ".join(said))
    return Pairing(dfc, runtime, None, f"no public source pairs DFC {dfc} or HailoRT {runtime} with anything")


def ways_out(dfc: str | None, runtime: str | None) -> str:
    """The two ways out of a DFC/HailoRT mismatch; one of them, never both."""
    have = dfc_for(runtime)
    want = runtime_for(dfc)
    compile_with = f"DFC {have[0]}.x" if have else f"the DFC released with HailoRT {runtime}"
    runtime_to = f"HailoRT {want[0]}.x" if want else f"the HailoRT released with DFC {dfc}"
    return (f"Either (1) recompile the HEF with {compile_with}, the DFC of this Pi's HailoRT {runtime} release "
            f"('hefsearch compile hef BUNDLE' on the x86 host with that DFC installed), or (2) install Hailo's own "
            f"{runtime_to} runtime (driver, firmware, HailoRT and its Python binding, from Hailo's Developer Zone) "
            f"instead of the Raspberry Pi archive's packages. Do one, never both: a user's report warns against "
            f"mixing the Raspberry Pi OS 5.1.1 packages with Hailo's 5.3.0 ones (hailo-ai/hailo_model_zoo_genai PR 11).")


def is_hef_refused(exc: BaseException) -> bool:
    """HailoRT's refusal of a HEF it cannot read: status 92 (HAILO_HEF_NOT_SUPPORTED), which the
    Python binding raises as ``HailoRTException("libhailort failed with error: 92 (...)")``."""
    text = str(exc)
    return "HAILO_HEF_NOT_SUPPORTED" in text or re.search(rf"error:?\s*{STATUS_HEF_NOT_SUPPORTED}\b", text) is not None


def refused_hef(path, dfc: str | None, runtime: str | None, exc: BaseException) -> tuple[str, str]:
    """(message, hint) for HailoRT refusing the HEF at ``path``: both versions and the ways out."""
    pair = pairing(dfc, runtime)
    what = (f"HailoRT {runtime or '(version unknown)'} refused {path} ({exc}): it cannot read a HEF made by DFC "
            f"{dfc or '(not recorded in the manifest)'}. {pair.detail}.")
    return what, ways_out(dfc, runtime)
