"""Version strings (hefsearch's own and the vendor tools'), read the one way every check needs them."""

from __future__ import annotations


def major_version(version: str | None) -> int | None:
    """``"5.3.0+fake"`` -> 5; None for a missing or unreadable version."""
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        return None


def hefsearch_version() -> str:
    """This package's installed version ("unknown" when run from a tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hefsearch")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"

