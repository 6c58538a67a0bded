"""The core imports no ML framework, no TUI toolkit and no hardware SDK (checked in a fresh
interpreter, so other tests' imports cannot hide a leak)."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ["torch", "transformers", "textual", "hailo_platform", "hailo_sdk_client", "onnx",
             "sentence_transformers"]


def _loaded_after(stmt: str) -> set[str]:
    code = f"import sys, json\n{stmt}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_core_packages_import_no_heavy_or_hardware_modules():
    loaded = _loaded_after("import hefsearch.embed, hefsearch.index, hefsearch.search, hefsearch.cli.main")
    leaked = [m for m in FORBIDDEN if m in loaded]
    assert not leaked, f"importing the core loaded {leaked}"


def test_opening_a_cpu_encoder_imports_no_torch(tiny_bert_bundle):
    loaded = _loaded_after(
        "from hefsearch.embed import Encoder\n"
        f"Encoder.open({str(tiny_bert_bundle)!r}).encode(['hello'])"
    )
    leaked = [m for m in FORBIDDEN if m in loaded]
    assert not leaked, f"encoding on the CPU loaded {leaked}"
