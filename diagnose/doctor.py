"""``hefsearch doctor``: is this machine ready, and if not, what exactly to fix.

Each check returns a :class:`Check` (ok / warn / fail / skip) with a plain detail and, when
something is wrong, the fix. The CLI only prints them. Checks:

- Python and package versions (and HailoRT's numpy<2 pin on Python < 3.13); OCR (Tesseract,
  its languages: :mod:`.ocr_check`); the CPU encoder's settings for this processor (one line);
- HailoRT: installed, version;
- devices: present, architecture read from the device;
- runtime vs device: HailoRT 5.x drives Hailo-10H, 4.x drives Hailo-8/8L;
- each HEF in the bundle: compiled for this chip, its Dataflow Compiler line (DFC 5.x <->
  HailoRT 5.x, DFC 3.x <-> HailoRT 4.x) and whether its DFC release and the installed HailoRT are
  a known pair (embed/runtime_pairing.py; a mismatch warns with the two ways out), its streams vs
  the manifest;
- bundle integrity: the manifest (types, file names inside the folder) and every file's sha256;
- library consistency: SQLite's ``quick_check`` of library.db; SQLite chunk ids vs each
  space's members and FAISS ids; a sample of FAISS vectors vs the raw vectors (a FAISS index
  that differs was rebuilt when the library opened, and is reported); raw vectors that are not
  finite or segments that cannot be read; whether its spaces were built with this bundle.

The HailoRT parts are verified against the contract fake (tests/fakes/hailo_platform) only.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

from hefsearch.base.errors import HefsearchError
from hefsearch.base.versions import major_version

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"

#: vectors compared between FAISS and the raw vectors per space (opening compares fewer)
DOCTOR_SAMPLE = 256
#: runtime packages hefsearch needs (distribution names)
RUNTIME_PACKAGES = ("numpy", "tokenizers", "onnxruntime", "faiss-cpu", "click", "rich",
                    "platformdirs", "textual")
#: HailoRT major version and DFC major version per chip (hailo-api.md section 0)
RUNTIME_MAJOR = {"hailo10h": 5, "hailo8": 4, "hailo8l": 4, "hailo8r": 4}
DFC_MAJOR = {5: 5, 4: 3}  # HailoRT major -> matching DFC major
APT_PACKAGE = {5: "hailo-h10-all", 4: "hailo-all"}


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str | None = None


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)
    #: the bundle could not be opened at all (a user-caused error: the CLI exits 2)
    bundle_error: HefsearchError | None = None
    #: the bundle checked: the one given, else the one the library records (None: neither)
    bundle: str | Path | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks]}


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# -- environment -------------------------------------------------------------------------------
def check_python() -> Check:
    v = sys.version_info
    text = f"Python {platform.python_version()} on {platform.system()} {platform.machine()}"
    if (3, 10) <= (v.major, v.minor) <= (3, 13):
        return Check("python", OK, text)
    return Check("python", WARN, text + " (hefsearch is tested on 3.10-3.13)",
                 "Use Python 3.10-3.13 (Raspberry Pi OS Bookworm has 3.11, Trixie 3.13).")


def check_packages() -> Check:
    found, missing = [], []
    for name in ("hefsearch",) + RUNTIME_PACKAGES:
        v = dist_version(name)
        (found if v else missing).append(f"{name} {v}" if v else name)
    if missing:
        return Check("packages", FAIL, f"missing: {', '.join(missing)}; found: {', '.join(found)}",
                     "Reinstall: pip install hefsearch (inside the venv you run it from).")
    return Check("packages", OK, ", ".join(found))


def check_cpu_plan() -> Check:
    """How the CPU backends run on this processor (embed/cpu_plan.py): informational."""
    from hefsearch.embed.cpu_plan import current_plan

    return Check("CPU encoder", OK, current_plan().line())


def check_hailort() -> tuple[Check, str | None]:
    from hefsearch.embed import hailo_device

    try:
        hp = hailo_device.import_hailort()
    except HefsearchError as e:
        return Check("HailoRT", WARN, f"{e.message} The CPU backends work; the NPU does not.", e.hint), None
    version = str(getattr(hp, "__version__", "unknown"))
    np_version = dist_version("numpy") or "?"
    if sys.version_info < (3, 13) and (major_version(np_version) or 0) >= 2:
        return Check("HailoRT", WARN, f"HailoRT {version} (hailo_platform) loads, but numpy is {np_version}; "
                     "HailoRT's wheel requires numpy<2 on Python < 3.13",
                     "If HailoRT calls fail: pip install 'numpy<2' in this venv."), version
    return Check("HailoRT", OK, f"HailoRT {version} (hailo_platform)"), version


def check_devices(runtime: str | None):
    """(checks, devices): devices present, their architecture, and runtime <-> device."""
    from hefsearch.embed import hailo_device

    if runtime is None:
        return [Check("device", SKIP, "not checked: HailoRT is not installed")], []
    try:
        devices = hailo_device.probe_devices()
    except hailo_device.WrongRuntime:
        # HailoRT 5.x refuses to open a Hailo-8/8L (HAILO_NOT_SUPPORTED), so its chip cannot be read
        have = major_version(runtime)
        return [Check("device", WARN, f"a Hailo-8/8L is present, but HailoRT {runtime} refuses to open it"),
                Check("runtime/device", FAIL, f"the Hailo-8/8L needs HailoRT 4.x, but HailoRT {runtime} is installed",
                      _runtime_fix(4, have))], []
    except HefsearchError as e:
        return [Check("device", FAIL, e.message, e.hint)], []
    if not devices:
        return [Check("device", FAIL, "no Hailo device found",
                      "Check the AI HAT+/M.2 card is seated and PCIe is enabled, then 'lspci | grep -i hailo' "
                      "and 'hailortcli scan'; reboot after installing the driver package.")], []
    checks = [Check("device", OK, "; ".join(
        f"{d.label} ({d.arch}) at {d.id}" + (f", firmware {d.firmware}" if d.firmware else "") for d in devices))]
    want = RUNTIME_MAJOR.get(devices[0].arch)
    have = major_version(runtime)
    if want is not None and have is not None:
        if want == have:
            checks.append(Check("runtime/device", OK, f"HailoRT {runtime} drives the {devices[0].label}"))
        else:
            checks.append(Check(
                "runtime/device", FAIL,
                f"the {devices[0].label} needs HailoRT {want}.x, but HailoRT {runtime} is installed",
                _runtime_fix(want, have)))
    return checks, devices


def _runtime_fix(want: int, have: int | None) -> str:
    return (f"sudo apt install {APT_PACKAGE[want]} (it replaces {APT_PACKAGE[have] if have in APT_PACKAGE else 'the other'};"
            " the two cannot be installed together), then reboot.")


# -- bundle and HEFs -------------------------------------------------------------------------------
def check_bundle(path: str | Path | None):
    """(check, Bundle or None, the error when it cannot be opened at all): the bundle opens
    and every file matches its sha256."""
    from hefsearch.embed.bundle import Bundle

    if path is None:
        return Check("bundle", SKIP, "no bundle given (--bundle, $HEFSEARCH_BUNDLE, or the library's)"), None, None
    try:
        bundle = Bundle.open(path)
    except HefsearchError as e:
        return Check("bundle", FAIL, e.message, e.hint), None, e
    bad = bundle.verify()
    if bad:
        return Check("bundle", FAIL, f"{bundle.path}: {len(bad)} file(s) differ from manifest.json: {', '.join(bad)}",
                     "Copy the whole bundle folder again (or re-export / recompile it)."), bundle, None
    hefs = bundle.encoder_entries("hef")
    return Check("bundle", OK, f"{bundle.path}: {bundle.model_id}, H {bundle.hidden}, SEQ {bundle.seq_len}, "
                 f"{len(bundle.manifest['files'])} files verified, {len(hefs)} HEF(s)"), bundle, None


def check_hefs(bundle, devices: list, runtime: str | None) -> list[Check]:
    """Per HEF: chip, DFC line vs chip and runtime, and (with HailoRT) its streams vs the manifest."""
    from hefsearch.embed.hef_file import hef_entries_for

    if bundle is None:
        return []
    entries = bundle.encoder_entries("hef")
    dev = devices[0] if devices else None
    if not entries:
        arch = dev.arch if dev else "hailo10h|hailo8|hailo8l"
        status = FAIL if dev else WARN
        return [Check("HEF", status, f"the bundle has no HEF{f' for the {dev.label}' if dev else ''}",
                      f"On an x86 host with the Dataflow Compiler: hefsearch compile hef {bundle.path} --hw-arch {arch}")]
    checks = []
    if dev and not hef_entries_for(bundle, dev.arch):
        have = ", ".join(sorted({e.hw_arch or "?" for e in entries}))
        checks.append(Check("HEF", FAIL, f"no HEF for this {dev.label} ({dev.arch}); the bundle's HEFs are for {have}",
                            f"hefsearch compile hef {bundle.path} --hw-arch {dev.arch} (on an x86 host with the DFC)"))
    return checks + [_check_hef(bundle, e, dev, runtime) for e in entries]


@dataclass
class _HefFindings:
    """What one HEF's check found, in the order its line says it."""

    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    paired: list[str] = field(default_factory=list)

    def check(self, name: str, detail: str) -> Check:
        status = FAIL if self.problems else (WARN if self.notes else OK)
        return Check(name, status, "; ".join([detail] + self.paired + self.problems + self.notes),
                     "; ".join(dict.fromkeys(self.fixes)) or None)


def _check_hef(bundle, e, dev, runtime: str | None) -> Check:
    """One HEF: its DFC line against its chip; on this device's chip, against the installed
    HailoRT too, and its streams against the manifest."""
    from hefsearch.embed.hailo_device import arch_label
    from hefsearch.embed.hef_file import precision_name

    name, arch, dfc = f"HEF {e.file}", (e.hw_arch or "").lower(), e.extra.get("dfc_version")
    found = _HefFindings()
    want_rt = RUNTIME_MAJOR.get(arch)
    if major_version(dfc) is not None and want_rt is not None and DFC_MAJOR[want_rt] != major_version(dfc):
        found.problems.append(f"compiled with DFC {dfc}, but {arch_label(arch)} HEFs need DFC {DFC_MAJOR[want_rt]}.x")
        found.fixes.append(f"recompile with DFC {DFC_MAJOR[want_rt]}.x")
    if dfc is None:
        found.notes.append("the manifest does not record the DFC version, so its runtime match is unknown")
    if dev and arch != dev.arch:
        detail = f"for {arch_label(arch)}, SEQ {e.seq_len} (not this device's chip; unused here)"
        return Check(name, FAIL if found.problems else OK, "; ".join([detail] + found.problems + found.notes),
                     "; ".join(found.fixes) or None)
    _runtime_match(dfc, runtime, found)
    contract = _hef_streams(bundle, e, runtime, found)
    detail = f"{arch_label(arch)}, SEQ {e.seq_len}, precision {precision_name(e)}, DFC {dfc or 'unknown'}"
    if contract is not None and contract.ok:
        detail += ", streams match the manifest"
    elif runtime is None:
        detail += " (streams not checked: HailoRT is not installed)"
    return found.check(name, detail)


def _runtime_match(dfc: str | None, runtime: str | None, found: _HefFindings) -> None:
    """The HEF's DFC line against the installed HailoRT: another major line is a problem; the
    same line, a known release pair or a note."""
    from hefsearch.embed.runtime_pairing import pairing, ways_out

    rt_major = major_version(runtime)
    need_rt = {v: k for k, v in DFC_MAJOR.items()}.get(major_version(dfc))
    if rt_major is not None and need_rt is not None and need_rt != rt_major:
        found.problems.append(f"DFC {dfc} HEFs run on HailoRT {need_rt}.x; HailoRT {runtime} is installed")
        found.fixes.append(f"install HailoRT {need_rt}.x (sudo apt install {APT_PACKAGE[need_rt]}) or recompile "
                           f"with DFC {DFC_MAJOR.get(rt_major, '?')}.x")
    elif dfc is not None and runtime is not None:  # the same line: is it a known release pair?
        pair = pairing(dfc, runtime)
        (found.notes if pair.known is not True else found.paired).append(pair.detail)
        if pair.mismatch:
            found.fixes.append(ways_out(dfc, runtime))


def _hef_streams(bundle, e, runtime: str | None, found: _HefFindings):
    """The HEF's streams checked against the manifest (with HailoRT installed), or None."""
    from hefsearch.embed.hef_file import inspect_hef

    if runtime is None:
        return None
    try:
        contract = inspect_hef(bundle.path / e.file, bundle).check
    except HefsearchError as err:
        found.problems.append(err.message)
        found.fixes.append(err.hint or "recompile the HEF")
        return None
    if not contract.ok:
        found.problems.extend(contract.problems)
        found.fixes.append(f"recompile the HEF from this bundle; 'hefsearch inspect {bundle.path / e.file}' "
                           "shows its streams")
    return contract


# -- library ----------------------------------------------------------------------------------------
def open_library(path: str | Path | None):
    """(Library or None, Check or None): the library, opened once (its reconcile report is
    the doctor's evidence of interrupted writes), or why it is not there."""
    try:
        from hefsearch.index.library import Library, resolve_library_path
    except ImportError as e:  # pragma: no cover - the index package is part of hefsearch
        return None, Check("library", SKIP, f"the library code is not available ({e})")
    try:
        folder = resolve_library_path(path)
    except HefsearchError as e:
        return None, Check("library", FAIL, e.message, e.hint)
    if not (folder / "library.db").exists():
        return None, Check("library", SKIP, f"no library at {folder}",
                           "Build one with: hefsearch index FOLDER --bundle BUNDLE")
    try:
        return Library.open(folder, create=False), None
    except HefsearchError as e:
        return None, Check("library", FAIL, e.message, e.hint)


def check_library(lib, bundle=None) -> list[Check]:
    """SQLite chunks vs each space's members vs its FAISS ids; spaces built with this bundle."""
    checks = []
    try:
        repaired = {n: {k: v for k, v in d.items() if v} for n, d in (lib.last_reconcile or {}).items()}
        repaired = {n: d for n, d in repaired.items() if d}
        status = lib.status()
        chunk_ids = lib.chunk_ids()  # sorted
        head = f"{lib.path}: {status.documents} documents, {status.chunks} chunks, {len(status.spaces)} space(s)"
        if status.writing:  # the differences are the batches an index run has not saved yet
            head += "; an index run is writing it now (run doctor again after it for a full check)"
            repaired = {}
        checks.append(Check("library", OK if not repaired else WARN,
                            head + (f"; repaired on open: {repaired}" if repaired else ""),
                            "An earlier write was interrupted; it was repaired. Run 'hefsearch index' to "
                            "re-embed anything listed as lost." if repaired else None))
        if status.interrupted:
            checks.append(unfinished_check(status))
        checks.append(check_sqlite(lib))
        for info in status.spaces:
            checks.append(_check_space(lib, info, chunk_ids, bundle))
        if status.spaces:
            checks.append(check_reach(status.spaces, bundle))
    except Exception as e:  # a library we cannot read fully is itself the finding
        checks.append(Check("library", FAIL, f"could not check {lib.path}: {type(e).__name__}: {e}",
                            "Back up the folder and rebuild the library with 'hefsearch index'."))
    return checks


def check_reach(spaces, bundle) -> Check:
    """Which spaces this machine can search, and how (an imported library may hold a hef space)."""
    from hefsearch.index.space_reach import space_reach

    reach = space_reach(spaces, bundle, None if bundle is not None else "doctor could not open one")
    text = "; ".join(f"{r.name}: {'yes, ' if r.searchable else 'no, '}{r.how}" for r in reach)
    return Check("search here", OK if all(r.searchable for r in reach) else WARN, text)


def unfinished_check(status) -> Check:
    """An index run that did not finish, and the folders it left unfinished (until a run
    over them completes, whatever other folders are indexed meanwhile)."""
    from hefsearch.base.terminal_text import for_terminal

    folders = for_terminal(", ".join(status.unfinished)) if status.unfinished else "its folders"
    return Check("index runs", WARN, f"the run started {status.interrupted} did not finish: {folders} "
                 "not indexed completely (every batch it committed is kept)",
                 "Run 'hefsearch index' (no folders: all of the library's) to finish.")


def check_sqlite(lib) -> Check:
    """SQLite's own ``PRAGMA quick_check`` of library.db (pages, b-trees, no index rebuild)."""
    name = "library.db"
    try:
        rows = [str(r[0]) for r in lib.query("PRAGMA quick_check")]
    except Exception as e:  # sqlite3.DatabaseError: "database disk image is malformed"
        rows = [f"{type(e).__name__}: {e}"]
    if rows == ["ok"]:
        return Check(name, OK, "SQLite quick_check: ok")
    shown = "; ".join(rows[:5]) + (f"; and {len(rows) - 5} more" if len(rows) > 5 else "")
    return Check(name, FAIL, f"SQLite quick_check of {lib.path / 'library.db'} found problems: {shown}",
                 "Stop hefsearch, copy the library folder away as a backup, then try "
                 "'sqlite3 library.db \".recover\"' into a new file, or rebuild the library with "
                 "'hefsearch index' into a new --library.")


@dataclass
class SpaceFiles:
    """What doctor found in a space's own files."""

    #: fixed when the library opened (the FAISS index was rebuilt from the raw vectors)
    repaired: list[str] = field(default_factory=list)
    #: still wrong; ``hefsearch index`` repairs these
    problems: list[str] = field(default_factory=list)
    #: stored vectors that are NaN or infinite: only embedding the space again repairs them
    nonfinite: list[str] = field(default_factory=list)


def space_files(lib, sp) -> SpaceFiles:
    """The FAISS index against a sample of the raw vectors, unreadable segments, and every
    stored vector checked finite."""
    found = SpaceFiles()
    rebuilt = (lib.last_reconcile or {}).get(sp.info.name, {}).get("index_mismatch")
    if rebuilt:
        found.repaired.append(f"the FAISS index did not match the raw vectors ({rebuilt}); it was "
                              "rebuilt from them when the library opened")
    now = sp.index_mismatch(sample=DOCTOR_SAMPLE)
    if now:
        found.problems.append(f"the FAISS index does not match the raw vectors ({now})")
    if sp.raw.unreadable:
        found.problems.append(f"{len(sp.raw.unreadable)} vector segment(s) cannot be read: "
                              + ", ".join(sorted(sp.raw.unreadable)[:3]))
    bad = sp.nonfinite_ids()
    if len(bad):
        found.nonfinite.append(f"{len(bad)} stored vector(s) are not finite numbers (NaN or infinity; "
                               f"chunk ids {bad[:5].tolist()})")
    return found


def _check_space(lib, info, chunk_ids: np.ndarray, bundle) -> Check:
    from hefsearch.index.spaces import IdSet, index_ids

    name = f"space {info.name}"
    members = IdSet(lib.member_ids(info.name))
    sp = lib.space(info.name)
    faiss_ids = IdSet(index_ids(sp.index)) if getattr(sp, "index", None) is not None else IdSet()
    problems = []
    dangling = members - chunk_ids
    if dangling:
        problems.append(f"{len(dangling)} member(s) point at chunks SQLite no longer has")
    removable = getattr(sp, "removable", lambda: True)()
    missing, extra = len(members - faiss_ids), len(faiss_ids - members)
    if (missing or extra) if removable else missing:  # HNSW keeps tombstones
        problems.append(f"FAISS holds {len(faiss_ids)} ids, SQLite lists {len(members)} members "
                        f"({missing} missing, {extra} extra)")
    missing_vectors = int((~sp.raw.has(members.ids)).sum())
    if missing_vectors:
        problems.append(f"{missing_vectors} member(s) have no stored vector")
    pending = len(IdSet(chunk_ids) - members)
    detail = f"{info.label or info.kind}: {len(members)} vectors, dim {info.dim}"
    if pending:
        detail += f", {pending} chunk(s) not embedded yet"
    if bundle is not None and info.parts.get("model_hash") not in (None, bundle.model_hash):
        problems.append(f"built with another model (hash {info.parts.get('model_hash')}; the bundle has "
                        f"{bundle.model_hash})")
    files = space_files(lib, sp)
    if files.nonfinite:
        return Check(name, FAIL, "; ".join([detail, *problems, *files.problems, *files.nonfinite]),
                     "Copy the bundle again or re-export it (and check it with 'hefsearch doctor --bundle "
                     f"BUNDLE'), then delete the folder {sp.folder} and run 'hefsearch index': it embeds "
                     "this space again from the stored text.")
    problems += files.problems
    if files.repaired and not problems:
        return Check(name, WARN, "; ".join([detail, *files.repaired]),
                     "Nothing to do: the raw vectors are the source of truth. If it happens again, "
                     f"check the disk holding {lib.path}.")
    if problems:
        return Check(name, FAIL, detail + "; " + "; ".join(problems),
                     "Run 'hefsearch index' again (it reconciles and re-embeds); if that does not help, "
                     "rebuild this space.")
    return Check(name, WARN if pending else OK, detail,
                 "Run 'hefsearch index' to embed the rest." if pending else None)


# -- all of it ----------------------------------------------------------------------------------------
def library_bundle(library: str | Path | None) -> str | None:
    """The bundle a library was built with (its settings), if there is a library."""
    lib, _ = open_library(library)
    if lib is None:
        return None
    try:
        return lib.settings().get("bundle")
    finally:
        lib.close()


def run_doctor(bundle: str | Path | None = None, library: str | Path | None = None, *,
               check_lib: bool = True) -> DoctorReport:
    """Every check, in order. ``bundle`` defaults to the one the library was built with."""
    report = DoctorReport()
    from .ocr_check import check_ocr  # its own module: Tesseract, the languages scans are read in

    report.checks += [check_python(), check_packages(), check_cpu_plan(), check_ocr()]
    hrt, runtime = check_hailort()
    report.checks.append(hrt)
    dev_checks, devices = check_devices(runtime)
    report.checks += dev_checks
    lib, lib_check = open_library(library) if check_lib else (None, None)
    try:
        if bundle is None and lib is not None:
            bundle = lib.settings().get("bundle")
        report.bundle = bundle
        bcheck, b, report.bundle_error = check_bundle(bundle)
        report.checks.append(bcheck)
        report.checks += check_hefs(b, devices, runtime)
        if lib is not None:
            report.checks += check_library(lib, b)
        elif lib_check is not None:
            report.checks.append(lib_check)
    finally:
        if lib is not None:
            lib.close()
    return report


# -- inspect ---------------------------------------------------------------------------------------------
@dataclass
class InspectItem:
    """One HEF: its manifest entry (if a bundle lists it), its streams (if HailoRT can read it)."""

    path: Path
    entry: object | None = None
    streams: object | None = None   # hef_file.HefStreams
    error: str | None = None
    hint: str | None = None

    def manifest_text(self) -> str:
        """What the manifest says of the HEF: chip, SEQ, precision, DFC version (entry required)."""
        from hefsearch.embed.hailo_device import arch_label
        from hefsearch.embed.hef_file import precision_name

        e = self.entry
        return (f"{arch_label(e.hw_arch)} ({e.hw_arch}), SEQ {e.seq_len}, precision {precision_name(e)}, "
                f"DFC {e.extra.get('dfc_version', 'unknown')}")

    def to_dict(self) -> dict:
        d = {"path": str(self.path), "error": self.error}
        if self.entry is not None:
            d["manifest"] = self.entry.to_dict()
        s = self.streams
        if s is not None:
            d["network_groups"] = s.network_groups
            d["inputs"] = [asdict(x) for x in s.inputs]
            d["outputs"] = [asdict(x) for x in s.outputs]
            d["sorted_outputs"] = s.sorted_outputs
            if s.check is not None:
                d["matches_manifest"] = s.check.ok
                d["problems"] = s.check.problems
                d["notes"] = s.check.notes
            d["notes"] = d.get("notes", []) + s.notes
        return d


def inspect_target(target: str | Path) -> list[InspectItem]:
    """A bundle folder (all its HEFs) or one .hef file (checked against its bundle, if in one)."""
    from hefsearch.embed.hef_file import inspect_hef
    from hefsearch.embed.bundle import MANIFEST, Bundle

    target = Path(target).expanduser()
    bundle = None
    if target.is_dir():
        bundle = Bundle.open(target)
        items = [InspectItem(bundle.path / e.file, e) for e in bundle.encoder_entries("hef")]
        if not items:
            raise HefsearchError(f"Bundle {bundle.path} has no HEF.",
                                 f"Compile one: hefsearch compile hef {bundle.path} --hw-arch hailo10h")
    else:
        if (target.parent / MANIFEST).is_file():
            bundle = Bundle.open(target.parent)
        entry = None
        if bundle is not None:
            entry = next((e for e in bundle.encoder_entries("hef")
                          if (bundle.path / e.file).resolve() == target.resolve()), None)
        items = [InspectItem(target, entry)]
    for item in items:
        try:
            item.streams = inspect_hef(item.path, bundle)
        except HefsearchError as e:
            item.error, item.hint = e.message, e.hint
    return items
