"""``python -m hefsearch``: the same command as ``hefsearch``."""

from hefsearch.cli.main import main

main(prog_name="hefsearch")
