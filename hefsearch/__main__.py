"""``python -m hefsearch``: the same command as ``hefsearch``."""

from hefsearch.cli.entry import run

run(prog_name="hefsearch")
