"""The requests of the application's operations, one type per operation, each importable from
here only; front ends turn their flags, keys or arguments into one and hand it to the app.
(A search request lives with the layer that runs it: :mod:`hefsearch.search.request`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hefsearch.search.filters import Filters
from hefsearch.search.request import BadRequest, SearchRequest


@dataclass
class IndexRequest:
    """One ``hefsearch index`` run (:func:`hefsearch.app.indexing.run_index`)."""

    #: the folders (or files) to index; none: the library's own folders
    paths: Sequence[str] = ()
    #: a library name or path; None: the default library
    library_path: str | None = None
    #: the model bundle; None: the library's, else the remembered default
    bundle: str | None = None
    backend: str | None = "auto"
    #: the Hailo chip of this machine to use (not with ``ray_address``)
    device: str | None = None
    also_fp32: bool = False
    #: embed on a Ray cluster: "auto", "local", HOST:6379, ray://HOST:10001
    ray_address: str | None = None
    #: with ``ray_address`` and a CPU backend: how many actors
    ray_actors: int | None = None
    #: keep a language-neutral copy of the FP32 space (None: decided by the library)
    language_neutral: bool | None = None
    #: the crawl options given (:class:`~hefsearch.index.crawl_options.CrawlOptions` field ->
    #: value); those left out are the library's, ``extra_suffixes`` are added to its own
    crawl: dict = field(default_factory=dict)
    #: start from the default crawl options instead of the remembered ones
    forget_options: bool = False
    #: chunks embedded per commit (None: the sync's default)
    batch_chunks: int | None = None
    #: cut passages scored with their sections (``index/passages.py``) or chunks that fill the
    #: window; None: as the library was made (a new one: passages where the window allows)
    passages: bool | None = None


@dataclass
class BackfillRequest:
    """One ``hefsearch backfill`` run (:func:`hefsearch.app.backfill.run_backfill`)."""

    library_path: str | None = None
    bundle: str | None = None
    #: encode at most this many chunks (None: all that lack an FP32 vector)
    limit: int | None = None
    #: chunks per batch, each committed on its own
    batch: int = 64


@dataclass
class EmbedRequest:
    """One ``hefsearch embed`` run (:func:`hefsearch.app.embedding.embed_texts`)."""

    #: the bundle's path (:func:`hefsearch.app.embedding.choose_embed_bundle` picks it)
    bundle: str
    backend: str | None = "auto"
    #: encode as queries (the bundle's query prefix) instead of passages
    query: bool = False
    batch_size: int = 32
    #: CPU threads (None: all cores)
    threads: int | None = None


@dataclass(frozen=True)
class SimilarRequest:
    """"More like this": chunks of other documents nearest to a chunk or a whole document."""

    chunk_id: int | None = None
    doc_id: int | None = None
    k: int = 10
    space: str | None = None
    filters: Filters = field(default_factory=Filters)

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise BadRequest(f"k must be a whole number from 1, not {self.k!r}.")


@dataclass(frozen=True)
class GetRequest:
    """Chunks (``123``) and documents (``"doc:45"``) by id, in the order asked."""

    ids: tuple[Any, ...] = ()


@dataclass(frozen=True)
class CompareRequest:
    """One query in two vector spaces side by side (the TUI's compare view, ``/compare``)."""

    search: SearchRequest
    #: the two spaces (None: the library's NPU or 8-bit space and FP32)
    spaces: tuple[str, str] | None = None
    #: let the NPU side be re-ranked with FP32 vectors (default: its own ranking, what 8 bits cost)
    rerank: bool = False


@dataclass
class ExportRequest:
    """One ``hefsearch export`` (:func:`hefsearch.app.archives.export_archive`)."""

    out: Path
    library: str | None = None
    #: only these spaces (empty: all)
    spaces: Sequence[str] = ()
    #: False: no vectors at all (the other end embeds again)
    vectors: bool = True


@dataclass
class ImportRequest:
    """One ``hefsearch import`` (:func:`hefsearch.app.archives.import_archive`)."""

    archive: Path
    library: str | None = None
    #: "OLD=NEW" folder maps
    maps: Sequence[str] = ()
    replace: bool = False
    #: the bundle to judge the spaces with (None: the library's, $HEFSEARCH_BUNDLE, the default)
    bundle: str | None = None
