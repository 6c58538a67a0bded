"""Where hefsearch keeps its files: the one place that decides the data, cache and config folders.

``$HEFSEARCH_HOME`` moves them all under one folder (``<home>``, ``<home>/cache``,
``<home>/config``); unset, they are the platform's user folders from ``platformdirs`` (which
honour ``XDG_DATA_HOME``/``XDG_CACHE_HOME``/``XDG_CONFIG_HOME`` on Linux). Read at each call, so a
test or a bench script that sets the variable later is obeyed.
"""

from __future__ import annotations

from pathlib import Path

from . import settings

APP_NAME = "hefsearch"


def _home() -> Path | None:
    home = settings.HOME.value()
    return Path(home).expanduser() if home else None


def data_dir() -> Path:
    """The data folder (libraries, the server's token): ``$HEFSEARCH_HOME``, else the user data dir."""
    home = _home()
    if home is not None:
        return home
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    """The cache folder (hashes, ORT and tokenizer caches): ``$HEFSEARCH_HOME/cache``, else the user cache dir."""
    home = _home()
    if home is not None:
        return home / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def config_dir() -> Path:
    """The config folder: ``$HEFSEARCH_HOME/config``, else the user config dir."""
    home = _home()
    if home is not None:
        return home / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
