"""Export and import of whole libraries (``hefsearch export`` / ``import``, the server's
``/export``), and which spaces this machine can search (``status``, ``doctor``, an import).

The archive format and the snapshot live in the index layer (:mod:`hefsearch.index.archive`,
``export``, ``restore``, ``remap``); this module resolves names, turns reports into the JSON
every front end shows and adds what this machine can do with each space.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from hefsearch.index.archive import ArchiveError  # noqa: F401  (front ends catch it by class)
from hefsearch.index.space_reach import SpaceReach, library_reach

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.export import ExportReport
    from hefsearch.index.library import Library
    from hefsearch.index.restore import ImportReport


@dataclass
class ExportRequest:
    out: Path
    library: str | None = None
    #: only these spaces (empty: all)
    spaces: Sequence[str] = ()
    #: False: no vectors at all (the other end embeds again)
    vectors: bool = True


@dataclass
class ImportRequest:
    archive: Path
    library: str | None = None
    #: "OLD=NEW" folder maps
    maps: Sequence[str] = ()
    replace: bool = False
    #: the bundle to judge the spaces with (None: the library's, $HEFSEARCH_BUNDLE, the default)
    bundle: str | None = None


@dataclass
class ImportResult:
    report: "ImportReport"
    reach: list[SpaceReach] = field(default_factory=list)


def export_archive(request: ExportRequest) -> "ExportReport":
    from hefsearch.index.export import export_library

    from .folders import library_location

    return export_library(library_location(request.library), Path(request.out),
                          spaces=list(request.spaces), vectors=request.vectors)


def import_archive(request: ImportRequest) -> ImportResult:
    from hefsearch.index.library import Library
    from hefsearch.index.remap import FolderMap
    from hefsearch.index.restore import import_library

    from .folders import library_location

    maps = [FolderMap.parse(m) for m in request.maps]
    report = import_library(Path(request.archive), library_location(request.library), maps=maps,
                            replace=request.replace)
    with Library.open(report.path, create=False) as lib:
        reach = library_reach(lib, request.bundle)
    return ImportResult(report, reach)


def export_json(report: "ExportReport") -> dict:
    out = asdict(report)
    out["path"] = str(report.path)
    return out


def import_json(result: ImportResult) -> dict:
    r = result.report
    m = r.manifest
    return {
        "path": str(r.path), "replaced": r.replaced, "documents": m.documents, "chunks": m.chunks,
        "archive": {"format": m.format, "hefsearch": m.hefsearch, "created_at": m.created_at, "source": m.source,
                    "vectors": m.vectors, "bytes": m.total_bytes},
        "spaces": [{"name": s["name"], "fingerprint": s["fingerprint"], "count": s["count"],
                    "opened": r.spaces.get(s["name"], {})} for s in m.spaces],
        "remap": asdict(r.remap),
        "reach": [asdict(x) for x in result.reach],
    }
