"""``python -m hefsearch``: the same command as ``hefsearch``."""

from hefsearch.cli.main import run

run(prog_name="hefsearch")
