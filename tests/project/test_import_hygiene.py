"""The core imports no ML framework, no TUI toolkit and no hardware SDK (checked in a fresh
interpreter, so other tests' imports cannot hide a leak)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FORBIDDEN = ["torch", "transformers", "textual", "hailo_platform", "hailo_sdk_client", "onnx",
             "sentence_transformers"]


def _loaded_after(stmt: str) -> set[str]:
    code = f"import sys, json\n{stmt}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_core_packages_import_no_heavy_or_hardware_modules():
    """Every module of embed/ too, the backends and the Hailo device and HEF modules among them:
    they import HailoRT only when called."""
    embed = _modules("base") + _modules("embed") + _modules("readers")  # embed/backends/ included
    assert {"hefsearch.embed.hailo_device", "hefsearch.embed.hef_file", "hefsearch.embed.backends.hailo"} <= set(embed)
    loaded = _loaded_after("import hefsearch.embed, hefsearch.index, hefsearch.search, hefsearch.cli.main\n"
                           + "\n".join(f"import {m}" for m in embed))
    leaked = [m for m in FORBIDDEN if m in loaded]
    assert not leaked, f"importing the core loaded {leaked}"


def _modules(package: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """Every module of a package and its subpackages, by dotted name, less those in ``skip``
    (names relative to the package, e.g. ``export.bundle``)."""
    names = [".".join(p.relative_to(REPO / package).with_suffix("").parts)
             for p in sorted((REPO / package).rglob("*.py")) if p.stem != "__init__"]
    return [f"hefsearch.{package}.{name}" for name in names if name not in skip]


# Export builds the PyTorch model (torch_body.py is its graph): torch is their point, on the x86 host.
#: torch modules of compile steps (export, robust training), imported only inside those steps
TORCH_BY_DESIGN = frozenset({"export.bundle", "export.torch_body", "robust.onnx_torch", "robust.fake_quant",
                             "robust.train", "robust.sink_damping"})


def test_evaluation_diagnostics_and_compile_import_no_heavy_or_hardware_modules():
    """The vendor SDKs (the DFC, HailoRT) and matplotlib are imported only inside the functions
    that use them, so ``doctor``, ``bench`` and ``compile --help`` start on any machine."""
    modules = _modules("evaluate") + _modules("diagnose") + _modules("compile", TORCH_BY_DESIGN)
    loaded = _loaded_after("\n".join(f"import {m}" for m in modules))
    leaked = [m for m in [*FORBIDDEN, "matplotlib"] if m in loaded]
    assert not leaked, f"importing evaluate/diagnose/compile loaded {leaked}"


def test_the_cli_entry_loads_no_verb_and_no_tui():
    """Verbs are loaded when run (cli/main.py's LazyGroup); the Textual app only by ``tui``."""
    loaded = _loaded_after("import hefsearch.cli.main")
    early = sorted(m for m in loaded if m.startswith(("hefsearch.tui", "hefsearch.cli.cmd_")))
    assert not early, f"importing the CLI entry loaded {early}"


def test_opening_a_cpu_encoder_imports_no_torch(tiny_bert_bundle):
    loaded = _loaded_after(
        "from hefsearch.embed import Encoder\n"
        f"Encoder.open({str(tiny_bert_bundle)!r}).encode(['hello'])"
    )
    leaked = [m for m in FORBIDDEN if m in loaded]
    assert not leaked, f"encoding on the CPU loaded {leaked}"
