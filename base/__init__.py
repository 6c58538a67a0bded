"""hefsearch.base: the bottom layer, what every other package shares and nothing here imports.

- :mod:`~hefsearch.base.locations`: where the data, cache and config folders are (``HEFSEARCH_HOME``);
- :mod:`~hefsearch.base.settings`: every ``HEFSEARCH_*`` variable, declared once with its meaning;
- :mod:`~hefsearch.base.errors`: the errors written for humans, each with its exit code and HTTP status;
- :mod:`~hefsearch.base.terminal_text`: text made safe to print on a terminal;
- :mod:`~hefsearch.base.atomic_write`: files replaced so that a crash leaves the old or the new one;
- :mod:`~hefsearch.base.versions`: version strings, read one way.

Only the standard library is imported here.
"""
