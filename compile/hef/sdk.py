"""The Dataflow Compiler on this host: importing it, its version, and what that version builds.

``hailo_sdk_client`` is imported only by :func:`load_sdk`, at call time, so ``compile --help``,
``doctor`` and everything but ``compile hef`` itself start without it. Before anything slow,
:func:`check_dfc_target` stops a DFC line that cannot build for the chip asked for (5.x builds
Hailo-10H, 3.x Hailo-8/8L), and :func:`probe_mask_command` tries the softmax mask command on the
parsed network, which a DFC 3.x older than 3.34 may not have.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass

from hefsearch.embed.mask_layout import hef_mask_mode
from hefsearch.base.versions import major_version

from .errors import CompileError, DfcUnavailable, MaskCommandMissing
from .model_script import MASK_COMMAND


@dataclass
class Sdk:
    ClientRunner: type
    InferenceContext: object
    Dims: object | None
    version: str


def load_sdk() -> Sdk:
    """Import the DFC now; a missing SDK becomes a plain :class:`DfcUnavailable`."""
    try:
        import hailo_sdk_client
        from hailo_sdk_client import ClientRunner
        from hailo_sdk_client.exposed_definitions import InferenceContext
    except ImportError as e:
        here = f"{platform.system()} {platform.machine()}, Python {sys.version_info.major}.{sys.version_info.minor}"
        raise DfcUnavailable(
            f"The Hailo Dataflow Compiler (Python package hailo_sdk_client) is not installed here "
            f"({here}; import failed: {e}).",
            "Compiling a HEF needs an x86_64 Linux host (Ubuntu 22.04/24.04) with Python 3.10-3.12 and "
            "either the Hailo AI Software Suite (Docker image) or the Dataflow Compiler wheel "
            "(hailo_dataflow_compiler-<ver>-py3-none-linux_x86_64.whl) from Hailo's Developer Zone "
            "(free account). DFC 5.x builds for Hailo-10H, DFC 3.x for Hailo-8/8L. Everything else "
            "(export, calibration, search) works without it.",
        ) from None
    try:
        from hailo_sdk_client.exposed_definitions import Dims
    except ImportError:
        Dims = None
    return Sdk(ClientRunner, InferenceContext, Dims, str(getattr(hailo_sdk_client, "__version__", "unknown")))


#: the first DFC 3.x with set_input_mask_to_softmax() in a public recipe (model zoo v2.19 MiniLM)
DFC3_MASK_COMMAND = (3, 34)
#: DFC major version -> the chips it builds for (zoo base_parsers.py on master vs v2.18)
DFC_TARGETS = {5: ("hailo10h", "hailo15h", "hailo15m", "hailo15l"), 3: ("hailo8", "hailo8l", "hailo8r")}


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in str(version).split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def dfc_has_mask_command(version: str) -> bool | None:
    """Whether this DFC line is known to have set_input_mask_to_softmax(): True for 5.x and for
    3.34+ (the zoo's MiniLM), None where only the probe on the parsed network can tell."""
    v = version_tuple(version)
    if not v:
        return None
    if v[0] >= 5 or (v[0] == 3 and v[:2] >= DFC3_MASK_COMMAND):
        return True
    return None


def check_dfc_target(version: str, hw_arch: str, mask_mode: str) -> list[str]:
    """Stop before parsing when this DFC cannot build for ``hw_arch``.

    Returns notes: a DFC line hefsearch does not know is tried; on a DFC 3.x older than 3.34 the
    mask command is probed on the parsed network (a user report found it absent in 3.33).
    """
    major = major_version(version)
    if major is None or major not in DFC_TARGETS:
        return [f"warning: Dataflow Compiler {version} is not a line hefsearch knows (3.x builds for Hailo-8/8L, "
                "5.x for Hailo-10H); trying anyway."]
    if hw_arch not in DFC_TARGETS[major]:
        need = next(m for m, archs in DFC_TARGETS.items() if hw_arch in archs)
        chips = "Hailo-10H" if major == 5 else "Hailo-8/8L"
        raise CompileError(
            f"Dataflow Compiler {version} builds for {chips} only; --hw-arch {hw_arch} needs DFC {need}.x.",
            f"Install the DFC {need}.x wheel (or the matching Hailo AI Software Suite) in another venv for "
            f"{hw_arch}; keep DFC {major}.x for {', '.join(DFC_TARGETS[major][:1])}.")
    if hef_mask_mode(mask_mode).softmax_command and not dfc_has_mask_command(version):
        return [f"note: Dataflow Compiler {version} predates the model zoo's first use of {MASK_COMMAND} (DFC 3.34); "
                "probing it on the parsed network."]
    return []


def probe_mask_command(runner, mask_mode: str) -> None:
    """Load the mask command alone into a parsed runner: a DFC without it fails here, in
    seconds, instead of at optimize()."""
    try:
        runner.load_model_script(MASK_COMMAND + "\n")
    except Exception as e:
        raise MaskCommandMissing(
            f"The Dataflow Compiler refused {MASK_COMMAND} (needed by the {mask_mode} mask mode) on the parsed "
            f"network: {type(e).__name__}: {e}",
            "Compile with --mask additive (the zoo's BERT recipe: the additive mask goes in as an input), or use a "
            "DFC that has the command (3.34+ for Hailo-8/8L, 5.x for Hailo-10H).") from e


