"""The TUI's widgets, one module per screen area."""

from .compare import CompareView
from .preview import PreviewPane
from .results import ResultsList
from .search_bar import QueryInput, SearchBar
from .status import NoticeBar, StatusBar

__all__ = ["CompareView", "NoticeBar", "PreviewPane", "QueryInput", "ResultsList", "SearchBar",
           "StatusBar"]
