"""doctor's one line about how the CPU encoder runs on this processor (embed/cpu_plan.py)."""

from __future__ import annotations

from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.diagnose.doctor import OK, run_doctor
from hefsearch.embed.cpu_plan import current_plan


def test_doctor_names_the_processor_family_and_the_chosen_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("HEFSEARCH_ORT_PARALLEL", "operators")
    monkeypatch.setenv("HEFSEARCH_THREADS", "2")
    (check,) = [c for c in run_doctor(library=tmp_path / "nolib").checks if c.name == "CPU encoder"]
    assert check.status == OK and check.detail == current_plan().line()
    assert "2 ONNX Runtime thread(s) per operator" in check.detail and "int8 kernel" in check.detail
    monkeypatch.setenv("HEFSEARCH_ORT_PARALLEL", "batches")
    r = CliRunner().invoke(main, ["doctor", "--library", str(tmp_path / "nolib")])
    assert "CPU encoder" in r.output and "each batch in pieces, 2 at once" in r.output
