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
class SpaceReach:
    """Whether this machine can search a space, and how (or what to do instead)."""

    name: str
    backend: str
    searchable: bool
    how: str


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
        reach = space_reach(lib, request.bundle)
    return ImportResult(report, reach)


def space_reach(library: "Library", bundle: str | None = None) -> list[SpaceReach]:
    """Each space: searchable here (its backend runs and the bundle holds its model), else why
    and what searches use instead. The fingerprint itself is checked by the first search: an
    encoder that differs is refused, never mixed."""
    from hefsearch.embed.backends import load_backend_class
    from hefsearch.embed.bundle import Bundle
    from hefsearch.index.encoders import choose_bundle

    from .spaces import is_fp32_space, space_label

    infos = library.spaces()
    if not infos:
        return []
    try:
        opened = Bundle.open(choose_bundle(library, bundle).path)
    except Exception as e:  # no bundle here: keyword search only
        why = getattr(e, "message", str(e)).rstrip(".")
        return [SpaceReach(i.name, i.backend, False, f"no model bundle here ({why}); keyword search still works; "
                           "give --bundle with a copy of the bundle that built it") for i in infos]
    fp32 = next((i.name for i in infos if is_fp32_space(i)), None)
    out = []
    for info in infos:
        if (info.parts or {}).get("model_hash") not in (None, opened.model_hash):
            out.append(SpaceReach(info.name, info.backend, False,
                                  f"the bundle {opened.path} holds another model; give --bundle with the one "
                                  "that built this space"))
            continue
        ok, why = True, "on the CPU"
        if info.backend == "hailo":
            try:
                ok, why = load_backend_class("hailo").available(opened)
            except Exception as e:
                ok, why = False, str(e)
            why = f"on the {space_label(info)} ({why})" if ok else why
        if ok:
            out.append(SpaceReach(info.name, info.backend, True, why))
        elif fp32:
            out.append(SpaceReach(info.name, info.backend, False,
                                  f"{why}; searches use the FP32 space {fp32} on the CPU instead"))
        else:
            out.append(SpaceReach(info.name, info.backend, False,
                                  f"{why}; run 'hefsearch backfill' to make an FP32 space the CPU can search"))
    return out


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
