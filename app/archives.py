"""Export and import of whole libraries (``hefsearch export`` / ``import``, the server's
``/export``), and which spaces this machine can search (``status``, ``doctor``, an import).

The archive format and the snapshot live in the index layer (:mod:`hefsearch.index.archive`,
``export``, ``restore``, ``remap``); this module resolves names, turns reports into the JSON
every front end shows and adds what this machine can do with each space.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from hefsearch.index.archive import ArchiveError  # noqa: F401  (front ends catch it by class)
from hefsearch.index.space_reach import SpaceReach, library_reach

from .requests import ExportRequest, ImportRequest

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.export import ExportReport
    from hefsearch.index.library import Library
    from hefsearch.index.restore import ImportReport


@dataclass
class ImportResult:
    report: "ImportReport"
    reach: list[SpaceReach] = field(default_factory=list)


def export_archive(request: ExportRequest) -> "ExportReport":
    from hefsearch.index.export import export_library

    from .folders import library_location

    return export_library(library_location(request.library), Path(request.out),
                          spaces=list(request.spaces), vectors=request.vectors)


def stream_export(library: str | Path | None, spaces: Sequence[str] = (), vectors: bool = True
                  ) -> tuple[str, Iterator[bytes]]:
    """(file name, the archive's bytes as they are written) of a library that stays in use (the
    server's ``/export``). The snapshot is taken here, so a bad request fails before a byte is
    sent; the writing runs on a thread and stops when the reader stops reading."""
    from hefsearch.index.export import take_snapshot

    from .folders import library_location

    folder = library_location(library)
    work = Path(tempfile.mkdtemp(prefix="hefsearch-export-"))
    try:
        snap, _attempts = take_snapshot(folder, work, list(spaces), vectors)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in folder.name)
    name = f"hefsearch-{safe}-{time.strftime('%Y%m%d-%H%M%S')}.tar"
    return name, _pipe(snap, work)


def _pipe(snap, work: Path) -> Iterator[bytes]:
    from hefsearch.index.export import write_archive

    blocks: queue.Queue = queue.Queue(maxsize=16)
    stop = threading.Event()

    class Sink:  # tarfile's stream mode writes here; a reader that went away stops it
        def write(self, data) -> int:
            while not stop.is_set():
                try:
                    blocks.put(bytes(data), timeout=0.5)
                    return len(data)
                except queue.Full:
                    continue
            raise OSError("the reader went away")

    def produce():
        try:
            write_archive(Sink(), "w|", snap)
            blocks.put(None)
        except BaseException as e:  # handed to the reader, which raises it
            if not stop.is_set():
                blocks.put(e)
        finally:
            snap.close()
            shutil.rmtree(work, ignore_errors=True)

    thread = threading.Thread(target=produce, name="hefsearch-export", daemon=True)
    thread.start()
    try:
        while (item := blocks.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


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
