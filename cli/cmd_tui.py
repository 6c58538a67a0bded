"""``hefsearch tui``: the terminal app (search, read, compare NPU vs FP32, library status)."""

from __future__ import annotations

import click

from hefsearch.search.request import MODES

from .options import library_option, rerank_option


@click.command("tui")
@library_option("Library folder or name (default: the user data dir's library). Env: HEFSEARCH_LIBRARY.",
                metavar=None)
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True,
              help="Initial search mode (F2 cycles hybrid / vector / keyword).")
@click.option("-k", "--k", "k", type=click.IntRange(1, 200), default=10, show_default=True,
              help="Results per query (and per side in the compare view).")
@click.option("--live", is_flag=True, help="Search as you type (debounced), not only on Enter.")
@click.option("--light", is_flag=True, help="Start with the light theme (F6 toggles).")
@click.option("--all-chunks", is_flag=True,
              help="List every matching chunk (default: one hit per file, copies folded under it).")
@rerank_option()
def tui_cmd(library_path, mode, k, live, light, all_chunks, rerank):
    """Search your library in a terminal app.

    \b
    Keys: Enter search · Tab or Down: to the results (Shift+Tab: the filters) ·
          F2 mode · F3 compare NPU vs FP32 (Ctrl+R: NPU side re-ranked
          by FP32) · F4 library (r: re-index) · Ctrl+O open the hit in $EDITOR at its
          line (PDFs: system opener) · Up/Down query history · F6 light/dark · Ctrl+Q quit

    The compare view needs a library indexed into a quantised space (hef, npu-sim-*,
    cpu-int8) and the cpu-fp32 space; it runs each query in both and shows overlap@k and
    rank-biased overlap.
    """
    from hefsearch.tui.factory import make_app
    from hefsearch.tui.session import TuiSession
    from hefsearch.tui.settings import TuiSettings

    with TuiSession.open(library_path) as session:
        make_app(session, TuiSettings(k=k, mode=mode, live=live, light=light, all_chunks=all_chunks,
                                          rerank=rerank)).run()
