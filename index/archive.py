"""The library archive format, shared by export and import: one tar file (stdlib ``tarfile``).

Members, in this order:

- ``hefsearch-archive.json``: the archive format and the versions that wrote it (read first, so
  an archive from a newer hefsearch is refused before anything else is read);
- ``library.db``: an online backup of SQLite (one read transaction), journal mode DELETE;
- ``spaces/<name>/seg-*.npy``: the committed segments of each exported space; a trained (not
  flat) FAISS index (``index.faiss``, ``index.json``) rides along as a cache;
- ``manifest.json``: the spaces and their fingerprints, the remembered folders and settings,
  counts, and the size and SHA-256 of every other member.

:func:`verify` reads an archive once without writing anything: every member a plain file under
a name of this layout (no links, devices, absolute paths or ``..``; ``tarfile``'s ``data``
filter agrees), no name twice, the format known, and every size and checksum equal to the
manifest's. Import extracts only after that, and checks the checksums again as it writes.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from hefsearch.base.errors import HefsearchError

#: the archive layout this hefsearch writes and reads; a newer one is refused
FORMAT = 1
HEADER = "hefsearch-archive.json"
MANIFEST = "manifest.json"
DB_MEMBER = "library.db"
#: a space's member: its segments, and its FAISS index when trained
SPACE_MEMBER_RE = re.compile(
    r"^spaces/([A-Za-z0-9][A-Za-z0-9_.-]{0,99})/(seg-\d{10}-[0-9a-f]+\.npy|index\.faiss|index\.json)$")
BLOCK = 1 << 20
#: the most a header or manifest may hold (a manifest lists every segment: about 150 bytes each)
MAX_JSON = 64 << 20
#: archive errors tarfile and its decompressors raise on damaged or cut input
READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError, ValueError)


class ArchiveError(HefsearchError):
    """An archive that cannot be written or restored: damaged, hostile, too new, no room."""

    title = "archive error"


def write_mode(path: Path) -> str:
    """The tarfile mode for an archive named ``path``: gzip for ``.tar.gz``/``.tgz``, xz for
    ``.tar.xz``, else a plain tar (vectors hardly compress; the database does)."""
    name = path.name.lower()
    if name.endswith((".tar.gz", ".tgz")):
        return "w:gz"
    if name.endswith(".tar.xz"):
        return "w:xz"
    return "w"


class HashingReader:
    """A file object that hashes what is read through it (tarfile copies members with it)."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.sha = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.sha.update(data)
        self.size += len(data)
        return data


def allowed_name(name: str) -> bool:
    return name in (HEADER, MANIFEST, DB_MEMBER) or SPACE_MEMBER_RE.match(name) is not None


def check_member(member: tarfile.TarInfo, archive: Path) -> None:
    """Refuse a member that is no plain file of this layout (links, devices, folders, names
    that are absolute or climb out): nothing of such an archive is written."""
    name = member.name
    if not member.isreg():
        kind = ("a symbolic link" if member.issym() else "a hard link" if member.islnk()
                else "a folder" if member.isdir() else "a device or special file")
        raise ArchiveError(f"{archive} holds {kind} ({name!r}); a hefsearch archive holds plain files "
                           "only. Nothing was written.", "Use an archive made by 'hefsearch export'.")
    if not allowed_name(name):
        raise ArchiveError(f"{archive} holds {name!r}, which is not part of a hefsearch library "
                           "(or would be written outside it). Nothing was written.",
                           "Use an archive made by 'hefsearch export'.")
    try:  # the stdlib's own rules as well (absolute names, '..', odd modes)
        tarfile.data_filter(member, "/nonexistent-target")
    except tarfile.FilterError as e:
        raise ArchiveError(f"{archive}: member {name!r} refused: {e}. Nothing was written.") from None


@dataclass
class Manifest:
    """What an archive says about itself (``manifest.json`` with the header's versions)."""

    format: int
    hefsearch: str
    schema: int
    files: dict[str, dict]
    spaces: list[dict] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)
    documents: int = 0
    chunks: int = 0
    vectors: bool = True
    created_at: str = ""
    source: str = ""

    @classmethod
    def of(cls, header: dict, body: dict) -> "Manifest":
        return cls(format=header["format"], hefsearch=header.get("hefsearch", "?"), schema=header["schema"],
                   files=body["files"], spaces=body.get("spaces", []), settings=body.get("settings", {}),
                   roots=body.get("roots", []), documents=body.get("documents", 0),
                   chunks=body.get("chunks", 0), vectors=body.get("vectors", True),
                   created_at=body.get("created_at", ""), source=body.get("source", ""))

    @property
    def total_bytes(self) -> int:
        return sum(int(f["size"]) for f in self.files.values())


def damaged(archive: Path, why: object) -> ArchiveError:
    return ArchiveError(f"{archive} is damaged or not a hefsearch archive ({why}). Nothing was written.",
                        "Copy the archive again (it may be cut short), or export the library again.")


def check_header(header: dict, archive: Path, schema_known: int) -> None:
    fmt, schema = header.get("format"), header.get("schema")
    if not isinstance(fmt, int) or not isinstance(schema, int):
        raise damaged(archive, f"{HEADER} has no format or schema number")
    if fmt > FORMAT or schema > schema_known:
        raise ArchiveError(
            f"{archive} was written by a newer hefsearch ({header.get('hefsearch', '?')}: archive format "
            f"{fmt}, library schema {schema}; this one reads format {FORMAT}, schema {schema_known}). "
            "Nothing was written.", "Upgrade hefsearch here (pip install -U hefsearch), then import again.")


def _json(data: bytes, name: str, archive: Path) -> dict:
    try:
        out = json.loads(data)
    except ValueError as e:
        raise damaged(archive, f"{name} is not JSON: {e}") from None
    if not isinstance(out, dict):
        raise damaged(archive, f"{name} is not a JSON object")
    return out


def verify(archive: Path, schema_known: int) -> Manifest:
    """Read the whole archive once, writing nothing; its :class:`Manifest` when every member
    checks out, else :class:`ArchiveError` saying what is wrong."""
    archive = Path(archive)
    if not archive.is_file():
        raise ArchiveError(f"No archive at {archive}.", "Give the file 'hefsearch export' wrote.")
    seen: dict[str, tuple[int, str]] = {}
    header = body = None
    try:
        with tarfile.open(archive, "r:*") as tf:
            for member in tf:
                check_member(member, archive)
                if member.name in seen or (member.name == HEADER and header is not None):
                    raise ArchiveError(f"{archive} holds {member.name!r} twice. Nothing was written.",
                                       "Use an archive made by 'hefsearch export'.")
                if header is None and member.name != HEADER:
                    raise damaged(archive, f"it does not start with {HEADER}")
                data, reader = _read_member(tf, member, archive)
                if member.name == HEADER:
                    header = _json(data, HEADER, archive)
                    check_header(header, archive, schema_known)
                elif member.name == MANIFEST:
                    body = _json(data, MANIFEST, archive)
                else:
                    seen[member.name] = (reader.size, reader.sha.hexdigest())
                if reader.size != member.size:
                    raise damaged(archive, f"{member.name} is cut short")
    except HefsearchError:
        raise
    except READ_ERRORS as e:
        raise damaged(archive, e) from None
    if header is None or body is None or not isinstance(body.get("files"), dict):
        raise damaged(archive, f"no {MANIFEST}: the archive is cut short")
    manifest = Manifest.of(header, body)
    _compare(manifest.files, seen, archive)
    return manifest


def _read_member(tf, member, archive: Path):
    """(its bytes, the reader that hashed it): a member read through once; the header and the
    manifest whole (within MAX_JSON), the rest block by block (bytes: b"")."""
    reader = HashingReader(tf.extractfile(member))
    if member.name not in (HEADER, MANIFEST):
        while reader.read(BLOCK):
            pass
        return b"", reader
    if member.size > MAX_JSON:
        raise damaged(archive, f"{member.name} is {member.size:,} bytes")
    return reader.read(), reader


def _compare(listed: dict[str, dict], seen: dict[str, tuple[int, str]], archive: Path) -> None:
    if DB_MEMBER not in listed:
        raise damaged(archive, f"the manifest lists no {DB_MEMBER}")
    missing = sorted(set(listed) - set(seen))
    if missing:
        raise damaged(archive, f"{len(missing)} listed file(s) missing, e.g. {missing[0]}")
    extra = sorted(set(seen) - set(listed))
    if extra:
        raise damaged(archive, f"{extra[0]} is not in the manifest")
    for name, (size, sha) in seen.items():
        want = listed[name]
        if int(want.get("size", -1)) != size or want.get("sha256") != sha:
            raise ArchiveError(f"{archive}: {name} does not match its checksum (the archive was changed "
                               "or damaged after export). Nothing was written.",
                               "Copy the archive again from its source, or export the library again.")
