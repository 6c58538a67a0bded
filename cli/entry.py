"""The ``hefsearch`` executable (console script and ``python -m hefsearch``).

It sets what has to be set before numpy is loaded, then runs :func:`hefsearch.cli.main.run`.
Nothing heavy is imported here; numpy loads later, with the verb that needs it.

A one-shot ``search`` gets ``OPENBLAS_NUM_THREADS=1`` (unless the environment says otherwise).
OpenBLAS starts a worker thread per core as numpy loads, and each spins for ~0.1 s waiting for
work; a single query gives it none (its vectors go through FAISS and ONNX Runtime, not numpy's
matrix products). On a 2-core machine that spinning took the core the query's encoder opens on:
measured on the 2-core build machine, ``import numpy`` 0.19 -> 0.14 s and a cold vector search
0.58 -> 0.51 s (medians of 5-6 runs). Long-running verbs keep OpenBLAS's default.
"""

from __future__ import annotations

import os
import sys

#: verbs that run one short job and exit: numpy's BLAS threads are of no use to them
ONE_SHOT = frozenset({"search"})


def command_of(args: list[str]) -> str | None:
    """The verb of a ``hefsearch`` command line (the group's own options take no value)."""
    return next((a for a in args if not a.startswith("-")), None)


def run(prog_name: str = "hefsearch") -> None:
    if command_of(sys.argv[1:]) in ONE_SHOT:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .main import run as run_cli

    run_cli(prog_name=prog_name)
