"""``hefsearch doctor``: check this machine's setup; ``--verify``: the NPU against FP32."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hefsearch.base.terminal_text import for_terminal

from .options import bundle_option, echo_json, json_option, library_option

MARKS = {"ok": ("ok  ", "green"), "warn": ("WARN", "yellow"), "fail": ("FAIL", "red"), "skip": ("skip", None)}
#: what makes 'doctor --verify' fail; another channel basis (permuted, rotation, basis) is the
#: compiled network's own and searches fine
BAD_CAUSES = {"transposed", "broken"}
SHOWN = 36  # per-sentence lines printed: the built-in samples


@click.command("doctor")
@bundle_option("Model bundle to check (default: the one the library was built with). Env: HEFSEARCH_BUNDLE.")
@library_option("Library folder to check (default: your data dir's library). Env: HEFSEARCH_LIBRARY.",
                dest="library", metavar=None)
@click.option("--verify", is_flag=True,
              help="Also encode built-in multilingual sentences on the NPU and on the CPU and compare them "
                   "(cosines, top-1 retrieval, similarity correlation, layout diagnosis).")
# not the shared --backend: it names what --verify compares with the CPU, and has no env variable
@click.option("--backend", "verify_backend", default="hailo", show_default=True,
              help="What --verify compares with the CPU FP32 encoder: hailo, npu-sim (the 8-bit simulation) or cpu-int8.")
@json_option("Print the results as JSON.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
              help="Write one JSON file to share about this NPU setup: versions, device and firmware, every HEF "
                   "stream as HailoRT reports it, the stream contract check, the --verify metrics and frames/s "
                   "at device batch 1 and 8. Please send it when you report how hefsearch runs on your device.")
def doctor_cmd(bundle, library, verify, verify_backend, as_json, report_file):
    """Check Python, packages, HailoRT, the Hailo device, the bundle's HEFs and the library.

    Every failed check says how to fix it. Exit code 2 when the bundle cannot be opened at all
    (missing, or a damaged manifest: the other checks are still printed), 1 when a check fails
    (or --verify finds a layout bug or a broken output), 0 otherwise.
    """
    from hefsearch.diagnose.doctor import run_doctor

    if report_file:
        _write_hardware_report(report_file, bundle, library)
        return
    report = run_doctor(bundle, library)
    result = None
    if verify and report.bundle_error is None:
        from hefsearch.evaluate.npu_verify import verify_npu

        target = report.bundle  # the one given, else the library's: opened once, by run_doctor
        if target is None:
            raise click.UsageError("--verify needs a bundle: pass --bundle BUNDLE.")
        result = verify_npu(target, backend=verify_backend)
    if as_json:
        out = report.to_dict()
        if result is not None:
            out["verify"] = result.to_dict()
        echo_json(out)
    else:
        for c in report.checks:
            mark, color = MARKS[c.status]
            # details name folders, files and the library's failures: escaped like every other front end
            click.echo(click.style(mark, fg=color, bold=True) + f" {c.name}: {for_terminal(c.detail, multiline=True)}")
            if c.fix and c.status in ("fail", "warn"):
                click.echo(f"      fix: {for_terminal(c.fix, multiline=True)}")
        if result is not None:
            _print_verify(result)
    if report.bundle_error is not None:
        sys.exit(2)
    failed = not report.ok or (result is not None and result.cause in BAD_CAUSES)
    sys.exit(1 if failed else 0)


def _write_hardware_report(path, bundle, library) -> None:
    from hefsearch.base.atomic_write import write_json_atomic
    from hefsearch.diagnose.hardware_report import build_report, json_default, summary

    report = build_report(bundle, library, say=lambda m: click.echo(f"report: {for_terminal(m)} ...", err=True))
    write_json_atomic(Path(path), json.loads(json.dumps(report, default=json_default)))
    for line in summary(report):
        click.echo(for_terminal(line))
    click.echo(f"wrote {for_terminal(str(path))}: please attach it to your report (it holds no document text).")


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_verify(r) -> None:
    c = r.comparison
    click.echo()
    click.secho(f"verify: {r.backend} vs {r.reference} on {len(r.texts)} built-in sentences", bold=True)
    click.echo("  cosine  text")
    shown = min(len(r.texts), SHOWN)
    for cos, text in zip(r.cosines[:shown], r.texts[:shown]):
        color = None if cos >= 0.98 else ("yellow" if cos >= 0.9 else "red")
        click.echo("  " + click.style(f"{cos:6.4f}", fg=color) + f"  {_short(text)}")
    if len(r.texts) > shown:
        click.echo(f"  ... and {len(r.texts) - shown} sentences of the parallel set (--json lists all)")
    click.echo(f"  median cosine {r.median_cosine:.4f}, min {min(r.cosines):.4f} (all {len(r.texts)})")
    click.echo(f"  similarity-matrix correlation: pearson {c['similarity_pearson']:.4f}, "
               f"spearman {c['similarity_spearman']:.4f}")
    if c.get("top1_ref") is not None:
        click.echo(f"  top-1 translation retrieval: {r.reference} {c['top1_ref']:.1%}, {r.backend} {c['top1_test']:.1%}"
                   f"  (margin {c['margin_ref']:.3f} vs {c['margin_test']:.3f})")
    click.echo(f"  cross-space top-1 (each NPU vector nearest its own FP32 vector): {r.cross_top1:.0%}")
    click.echo("  token cosine under layout hypotheses:")
    for f in r.fits:
        value = f"{f.token_cosine:7.4f}" if f.token_cosine == f.token_cosine else "      -"
        click.echo(f"    {f.name:24s} {value}  {f.detail}")
    for n in r.notes:
        click.echo(f"  note: {n}")
    color = "green" if r.cause == "match" else ("red" if r.cause in BAD_CAUSES else "yellow")
    click.secho(f"  verdict: {r.verdict}", fg=color)
