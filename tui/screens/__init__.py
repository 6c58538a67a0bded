"""Screens pushed over the main search view."""

from .library import LibraryScreen

__all__ = ["LibraryScreen"]
