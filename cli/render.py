"""How the CLI's human output looks: search hits, library status, the index summary and the
quality report, as rich tables. Pure formatting of what the library functions returned; the
verbs decide what to run and import this module only when they print (it loads rich).

Text, not markup, wherever a file name or chunk text is shown: either may hold "[/]" or "[bold]";
and each goes through :func:`~hefsearch.base.terminal_text.for_terminal` first: either may hold ESC,
BEL, a newline or a bidi override, which would otherwise drive the terminal.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hefsearch.base.terminal_text import for_terminal, printable

#: rows of a file/reason table after which the rest is summarised in one line
MAX_LISTED = 25


def num(x, digits: int = 3) -> str:
    """A metric with ``digits`` decimals; "–" for a missing one (None or NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def file_table(title: str, rows, style: str, limit: int | None = MAX_LISTED) -> Table:
    """(path, reason) rows; beyond ``limit`` one line points to 'hefsearch status'."""
    t = Table(title=title, title_justify="left", title_style=style, show_header=True,
              header_style="bold", expand=False)
    t.add_column("file", overflow="fold")
    t.add_column("reason", overflow="fold")
    shown = rows if limit is None else rows[:limit]
    for p, r in shown:
        t.add_row(escape(for_terminal(p)), escape(for_terminal(r)))
    if len(shown) < len(rows):
        t.add_row(f"... and {len(rows) - limit} more", "see: hefsearch status")
    return t


# -- search --------------------------------------------------------------------------------
def grouping_text(hit) -> str:
    """'3 more in this file · also in: fs.html, all.html' (empty when neither)."""
    parts = [f"{hit.more_in_file} more in this file"] if hit.more_in_file else []
    return " · ".join(parts + ([hit.also_in_text()] if hit.also_in else []))


def relevance_text(relevance: dict) -> str:
    """'weaker matches below (cosine under 0.812)': the row where relevance ends."""
    return f"weaker matches below (cosine under {relevance['threshold']:.3f})"


def hits_table(hits, relevance: dict | None = None) -> Table:
    """The hits, with a row where relevance ends (``relevance``: the answer's line) when some
    hits fall below it."""
    table = Table(show_lines=True, expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("file · where", overflow="fold", ratio=2)
    table.add_column("snippet", overflow="fold", ratio=3)
    line = relevance["above"] if relevance and relevance["above"] < len(hits) else None
    for i, h in enumerate(hits):
        if i == line:
            table.add_row("", "", Text(relevance_text(relevance), style="bold yellow"), "")
        extra = grouping_text(h)
        table.add_row(str(h.rank), score_text(h),
                      Text.assemble(for_terminal(h.path), "\n", (for_terminal(h.location()), "dim"),
                                    *(("\n", (for_terminal(extra), "cyan")) if extra else ())),
                      Text(for_terminal(" ".join(h.snippet.split()))))  # one line: breaks and blank runs as one space
    return table


def score_text(hit) -> str:
    """The cosine (vector, hybrid) or BM25 (keyword) to 3 decimals, '+kw' when keyword search
    also found the chunk in hybrid mode (it then ranks above a higher cosine)."""
    kw = "+kw" if hit.similarity is not None and "keyword" in (hit.sources or {}) else ""
    return f"{hit.shown_score:.3f}{kw}"


def search_footer(result) -> Text:
    """'hybrid · space cpu-fp32 (CPU FP32) · 12 ms (encode 8, search 0.4, snippets 1)', then
    '+ 85 ms semantic snippets' when they were computed after the search."""
    t = result.timings
    later = t.get("semantic_snippets")
    return Text(f"{result.mode}"
                + (f" · space {result.space} ({result.backend_label})" if result.space else "")
                + f" · {t.get('total', 0):.0f} ms (encode {t.get('encode', 0):.0f}, search "
                  f"{t.get('search', 0) + t.get('keyword', 0):.1f}, snippets {t.get('snippet', 0):.0f})"
                + (f" + {later:.0f} ms semantic snippets" if later is not None else "")
                + (f"\n{rerank_text(result.rerank, t.get('rerank'))}" if _rerank_worth_saying(result) else ""),
                style="dim")


def console(*, stderr: bool = False) -> Console:
    """A rich console for the command's output. Written to a file, a pipe or a service's journal
    (no terminal), a line is never broken mid-phrase at 80 columns (soft wrap) and tables get
    room for one row a line: such output is read by programs and in logs, not on a screen."""
    con = Console(stderr=stderr)
    if not con.is_terminal:
        con = Console(stderr=stderr, width=max(160, con.width), soft_wrap=True)
    return con


def _rerank_worth_saying(result) -> bool:
    from hefsearch.search.rerank import RerankInfo

    return bool(result.rerank) and RerankInfo(**result.rerank).worth_saying


def rerank_text(info: dict, ms: float | None) -> str:
    """'re-ranked 30 of the top 30 in cpu-fp32-neutral · 41 ms (budget 250 ms)', or why not."""
    from hefsearch.search.rerank import RerankInfo

    r = RerankInfo(**info)
    out = r.describe()
    if ms is not None:
        out += f" · {ms:.0f} ms" + (f" (budget {r.budget_ms:.0f} ms)" if r.budget_ms is not None else "")
    return out


def print_search(result) -> None:
    """Hits on stdout; the notice, an empty answer (with the result's filters) and the timings
    on stderr."""
    out, err = console(), console(stderr=True)
    if result.notice:
        err.print(Text(for_terminal(result.notice, multiline=True), style="yellow"))
    if not result.hits:
        shown = None if result.filters.empty else for_terminal(printable(result.filters.describe()))
        err.print(Text(f"No results. (filters: {shown})" if shown else "No results."))
        return
    out.print(hits_table(result.hits, result.relevance))
    err.print(search_footer(result))


# -- library -------------------------------------------------------------------------------
def print_status(st, limit: int | None, freshness: str | None = None) -> None:
    """``hefsearch status``: totals, freshness, the vector spaces and the first ``limit`` failures."""
    from hefsearch.app.indexing import secret_rule_text
    from hefsearch.index.crawl import IGNORE_FILE

    out = console()
    out.print(f"[bold]Library[/] {escape(for_terminal(st.path))}")
    bundle = st.settings.get("bundle")
    out.print(f"  bundle: {escape(for_terminal(str(bundle))) if bundle else '(none recorded)'}")
    out.print(f"  documents: [bold]{st.documents}[/]   chunks: [bold]{st.chunks}[/]   "
              f"cut mid-sentence to fit: {st.truncated_chunks}"
              + (f"   pages read by OCR: {st.ocr_pages}" if getattr(st, "ocr_pages", 0) else ""))
    fold = None if out.soft_wrap else "fold"  # a long path folds on a screen; in a log it stays whole
    out.print(f"  folders: {escape(for_terminal(', '.join(st.roots))) if st.roots else '(none yet)'}", overflow=fold)
    out.print(f"  last sync: {last_sync_text(st)}"
              + ("   skipped: " + st.skipped_text() if any(st.skipped.values()) else ""))
    if freshness:
        out.print(f"  freshness: {escape(freshness)}")
    out.print(f"  never indexed (secret files): {escape(secret_rule_text())}; "
              f"re-include one with '!NAME' in a {IGNORE_FILE}", overflow=fold)
    if st.spaces:
        out.print(spaces_table(st))
        if any(s.count < st.chunks for s in st.spaces):
            out.print("[yellow]A space holds fewer chunks than the library: run 'hefsearch index' "
                      "with its backend to fill it.[/]")
    if st.notes:
        out.print(file_table(f"{len(st.notes)} left out on purpose (not failures)", st.notes, "yellow",
                             limit=limit))
    if st.failures:
        rows = st.failures if limit is None else st.failures[:limit]
        out.print(file_table(f"{len(st.failures)} files not indexed", rows, "red", limit=None))
        if len(rows) < len(st.failures):
            out.print(f"... and {len(st.failures) - len(rows)} more (--all lists them)")


def last_sync_text(st) -> str:
    """'2026-01-02T10:00:00+00:00', 'never', or why the last run did not finish."""
    if st.writing:
        return "running now" + (f" (the last finished run: {st.last_sync})" if st.last_sync else "")
    if st.interrupted:
        folders = getattr(st, "unfinished", None)
        where = f"; not finished: {escape(for_terminal(', '.join(folders)))}" if folders else ""
        return (f"interrupted (the run started at {st.interrupted} did not finish{where}; every batch it "
                "committed is kept: run 'hefsearch index' to finish)")
    return st.last_sync or "never"


def spaces_table(st) -> Table:
    t = Table(title="Vector spaces", title_justify="left")
    for col in ("space", "backend", "chunks", "dim", "index", "memory", "recall@10", "fingerprint"):
        t.add_column(col, justify="right" if col in ("chunks", "dim", "memory", "recall@10") else "left")
    default = st.settings.get("default_space")
    for s in st.spaces:
        cover = f"{s.count}" if s.count == st.chunks else f"[yellow]{s.count}/{st.chunks}[/]"
        t.add_row(s.name + (" (default)" if s.name == default else ""), escape(s.label or s.backend),
                  cover, str(s.dim), escape(index_text(s)), size_text(s.index_stats.get("bytes")),
                  recall_text(s), s.fingerprint[:12])
    return t


def index_text(space) -> str:
    """'IVF1024,SQ4 (compressed, re-scored)': the index as built, else the recorded factory."""
    kind = space.index_stats.get("type") or space.index_factory
    return f"{kind} (compressed, re-scored)" if space.compressed else kind


def size_text(n) -> str:
    """'48.2 MiB' ('–' when unknown)."""
    from hefsearch.base.sizes import human_size

    return "–" if n is None else human_size(n)


def recall_text(space) -> str:
    """'0.991' (measured at build; ``status --json`` says on how many queries and vectors);
    exact indexes: 'exact'; unmeasured: '–'."""
    stats = space.index_stats
    if (stats.get("type") or space.index_factory) == "Flat":
        return "exact"
    r = stats.get("recall_at_10")
    return "–" if r is None else f"{r:.3f}"


def print_sync_summary(console: Console, report, library_path) -> None:
    """The end of ``hefsearch index``: counts, what was skipped or not followed, what failed."""
    rate = report.chunks_embedded / report.encode_seconds if report.encode_seconds else 0.0
    console.print(
        f"[bold]{report.added}[/] new, [bold]{report.changed}[/] changed, [bold]{report.removed}[/] "
        f"removed, {report.unchanged} unchanged files; [bold]{report.chunks_embedded}[/] chunks "
        f"embedded into {', '.join(report.spaces)} in {report.seconds:.1f} s"
        + (f" ({rate:.1f} chunks/s while encoding)" if report.chunks_embedded else "")
        + (f"; {report.backfilled} back-filled" if report.backfilled else "")
        + (f"; {report.chunks_cut} chunks cut mid-sentence to fit" if report.chunks_cut else ""))
    if any(report.skipped.values()):
        console.print("skipped: " + report.skipped_text())
    if report.notes:
        console.print(file_table("Not indexed (not regular documents)", report.notes, "yellow"))
    if report.links:
        console.print(file_table("Symlinks not followed (the target is outside the folders you named, "
                                 "or a system folder)", report.links, "yellow"))
    if report.stale:
        console.print(file_table("Now failing; the previously indexed version is kept",
                                 report.stale, "yellow"))
    empty = report.nothing_supported()
    if empty:
        console.print(Text(for_terminal(empty, multiline=True), style="yellow"))
        common = [k for k in sorted(report.unsupported, key=lambda k: -report.unsupported[k]) if k != "(none)"]
        if common:
            console.print(Text(for_terminal(f"hint: to index them as text: hefsearch index ... --ext {common[0]}"),
                               style="dim"))
    if report.failed:
        console.print(file_table(f"{len(report.failed)} files failed", report.failed, "red"))
        console.print(f"[yellow]Partial: every other file is indexed in {escape(for_terminal(library_path))}.[/]")
    elif report.unfinished:  # this run's folders are done, but an earlier run over others stopped
        console.print(f"[yellow]Not finished yet (an earlier run over them stopped):[/] "
                      f"{escape(for_terminal(', '.join(report.unfinished)))}; run 'hefsearch index' to finish.")
    else:
        console.print(f"[green]Library up to date:[/] {escape(for_terminal(library_path))}")


def print_interrupted(console: Console, report) -> None:
    """Ctrl+C in ``hefsearch index``: what was done, and how to finish."""
    console.print(f"[yellow]Interrupted[/] after {report.added} new and {report.changed} changed files "
                  f"({report.chunks_embedded} chunks embedded). Every committed batch is kept; run the "
                  "same command again (or 'hefsearch index' with no folders) to finish.")


# -- bench quality -------------------------------------------------------------------------
def print_quality(report) -> None:
    """``hefsearch bench quality``: build configuration, parallel set and library tables."""
    from hefsearch.evaluate.quality import config_line

    con, err = console(), console(stderr=True)
    for n in report.notices:
        err.print(f"[yellow]note: {escape(n)}[/]")
    b = report.bundle
    con.print(f"[bold]{escape(b['model'])}[/] · seq {b['seq_len']} · hidden {b['hidden']}")

    cfg = Table(title="Build configuration", title_justify="left", expand=False)
    cfg.add_column("space")
    cfg.add_column("encoder")
    cfg.add_column("configuration", overflow="fold")
    for s in report.spaces:
        cfg.add_row(escape(s.name), escape(s.label), escape(s.error and f"skipped: {s.error}" or config_line(s.config)))
    con.print(cfg)

    par = [s for s in report.spaces if s.parallel]
    if par:
        _print_parallel(con, report.parallel, par)
    lib = [s for s in report.spaces if s.library]
    if lib:
        _print_library_quality(con, report.library, lib)


def _print_parallel(con: Console, p: dict, par) -> None:
    t = Table(title=f"Parallel set: {p['pairs']} pairs, {len(p['languages'])} languages "
                    f"({p['near_duplicate_rows']} near-duplicate rows)", title_justify="left")
    for col in ("space", "top-1", "top-1 near-dup", "margin", "sim-corr vs FP32",
                "cos to FP32*", "mean pair cos", "ms/text"):
        t.add_column(col, justify="left" if col == "space" else "right")
    for s in par:
        r = s.parallel
        t.add_row(escape(s.name), num(r.top1), num(r.top1_near_duplicates), num(r.margin),
                  num(r.similarity_pearson), num(r.cosine_to_fp32), num(r.mean_pairwise_cosine),
                  num(r.ms_per_text, 1))
    con.print(t)
    lp = Table(title="Top-1 translation retrieval per language pair", title_justify="left")
    lp.add_column("pair")
    for s in par:
        lp.add_column(escape(s.name), justify="right")
    for pair in p["language_pairs"]:
        lp.add_row(pair, *[num(s.parallel.top1_by_pair.get(pair), 2) for s in par])
    con.print(lp)
    con.print("[dim]* paired cosine compares coordinates: meaningful only when both spaces share a basis.[/]")


def _print_library_quality(con: Console, info: dict, lib) -> None:
    depth = info["rerank_depth"]
    labelled = info.get("labelled")
    src = "queries from your file" if info["query_source"] == "file" else "pseudo-queries cut from random chunks"
    t = Table(title=f"Your library: {info['queries']} {src}, {info['chunks']} chunks; "
                    "ground truth = FP32's top-1 (a -neutral space: cpu-fp32-neutral's, when there)",
              title_justify="left")
    cols = ["space", "R@1", "R@5", "R@10", "MRR"]
    if depth:
        cols.append(f"in top {depth}")
    cols += ["overlap@10", "doc-doc cos", "hubs", "ms/query"]
    if labelled:
        cols.append("found@1/@10")
    for col in cols:
        t.add_column(col, justify="left" if col == "space" else "right")

    def row(name, rec, mrr, at_depth, found, shown=("", "", "", "")):
        """One line: recall@1/5/10, MRR (and at the re-rank depth), ``shown``: overlap, document
        cosine, hubs and ms, already formatted (a re-ranked line leaves them empty)."""
        cells = [name, num(rec["1"]), num(rec["5"]), num(rec["10"]), num(mrr)]
        if depth:
            cells.append(num(at_depth))
        cells += list(shown)
        if labelled:
            cells.append(f"{num(found['1'], 2)}/{num(found['10'], 2)}" if found else "–")
        t.add_row(*cells)

    for s in lib:
        r = s.library
        name = s.name + (f" (vs {r.reference})" if r.reference != "cpu-fp32" and r.reference != s.name else "")
        hubs = "–" if not r.hubness else f"{num(r.hubness['top1_share'], 2)} / {num(r.hubness['k10_skew'], 1)}"
        row(escape(name), r.recall, r.mrr, r.recall_at_depth, r.source_found,
            (num(r.overlap_at_10), num(r.doc_cosine), hubs, num(r.ms_per_query, 1)))
        if r.reranked:
            rr = r.reranked
            row(f"  + FP32 re-rank top {rr['depth']}", rr["recall"], rr["mrr"], None, rr["source_found"])
    con.print(t)
    con.print("[dim]hubs: share of top-1 places the 3 most frequent documents take among wrongly answered "
              "queries / skewness of each chunk's 10-occurrence (near 0: no hubs; 1+: a few chunks are "
              "near everything).[/]")
    if labelled:
        what = ("the chunk each pseudo-query was cut from" if info["query_source"] == "pseudo"
                else "a chunk of the expected document")
        con.print(f"[dim]found@k: {what} is in the top k (FP32 is measured against it too).[/]")
    by_file = [s for s in lib if s.library.file_found]
    if by_file:
        f = Table(title="By file: the source's file among the top k (found@1 / @5 / @10)", title_justify="left")
        for col in ("space", "top chunks as ranked", "one hit per file (search default)"):
            f.add_column(col, justify="left" if col == "space" else "right")
        for s in by_file:
            ff = s.library.file_found
            f.add_row(escape(s.name), *(" / ".join(num(ff[kind][k], 2) for k in ("1", "5", "10"))
                                        for kind in ("chunks", "per_file")))
        con.print(f)
