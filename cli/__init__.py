"""hefsearch.cli: the ``hefsearch`` command (click), a thin adapter over the library packages.

Each verb lives in its own ``cmd_*`` module and is imported only when run (``main.LazyGroup``),
so ``hefsearch --help`` is fast and ``search`` never loads textual; every ``compile`` subverb is
in ``cmd_compile``. Options several verbs share are declared in ``options``; tables and hit
locations are drawn by ``render``, live progress bars by ``progress``."""
