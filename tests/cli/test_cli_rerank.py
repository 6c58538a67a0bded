"""The CLI's re-ranking verbs and switch: ``hefsearch backfill`` fills the FP32 space, ``search
--rerank N|off`` says what it did (the re-ranking itself: tests/search/test_rerank.py)."""

from __future__ import annotations

from hefsearch.search import rerank as R
from tests.support.library_helpers import TOPICS

QUERY = TOPICS[0][1]


def test_cli_backfill(npu_only_library, tmp_path):
    from click.testing import CliRunner

    from hefsearch.cli.main import main

    path = str(npu_only_library.path)
    total = len(npu_only_library.chunk_ids())
    npu_only_library.close()
    runner = CliRunner()
    res = runner.invoke(main, ["backfill", "--library", path, "--limit", "5", "--batch", "2"])
    assert res.exit_code == 0, res.output
    assert "Added 5 FP32 vectors" in res.output and f"{total - 5} of {total}" in res.output
    res = runner.invoke(main, ["backfill", "--library", path])
    assert res.exit_code == 0 and f"0 of {total} chunks still without one" in res.output
    res = runner.invoke(main, ["backfill", "--library", path])
    assert "Nothing to do" in res.output


def test_cli_search_rerank_switch_and_what_the_answer_says(npu_only_library):
    """`hefsearch search --rerank N|off` on a library whose FP32 space is empty: the answer
    says the depth asked, that nothing was re-scored and how many candidates were left; off
    says off; a bad value is a usage error."""
    import json

    from click.testing import CliRunner

    from hefsearch.cli.main import main

    path = str(npu_only_library.path)
    npu_only_library.close()
    run = CliRunner().invoke
    res = run(main, ["search", QUERY, "--library", path, "--rerank", "20", "--json"])
    assert res.exit_code == 0, res.output
    rr = json.loads(res.stdout)["rerank"]
    assert rr["depth"] == 20 and rr["rescored"] == 0 and rr["deferred"] == 20 and rr["budget_ms"] == R.DEFAULT_BUDGET_MS
    res = run(main, ["search", QUERY, "--library", path, "--rerank", "off", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["rerank"]["note"] == "off"
    res = run(main, ["search", QUERY, "--library", path, "--rerank", "20"])
    assert res.exit_code == 0 and "not re-ranked (top 20 asked" in res.stderr
    res = run(main, ["search", QUERY, "--library", path, "--rerank", "deep"])
    assert res.exit_code == 2 and "not a depth" in res.output
