"""Screens pushed over the main search view."""

from .library import LibraryScreen
from .reader import ReaderScreen

__all__ = ["LibraryScreen", "ReaderScreen"]
