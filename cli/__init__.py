"""hefsearch.cli: the ``hefsearch`` command (click). Each verb lives in its own module and is
imported only when run, so ``hefsearch --help`` is fast and ``search`` never loads textual."""
