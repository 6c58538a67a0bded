"""A HEF as plain data: its streams read with HailoRT (no device needed), the bundle's HEFs.

``inspect``, ``doctor``, the hardware report, ``compile hef`` (the streams a compiled HEF
really has) and the ``hailo`` backend (before its first frame) all read a HEF through
:func:`read_hef`; :func:`inspect_hef` adds the check against the bundle's manifest entry
(:mod:`hefsearch.embed.hef_contract`). HailoRT's stream infos become :class:`StreamSpec`
(name, shape, format order, type, quantisation, flags) here, so nothing else touches them.
HailoRT itself comes from :func:`hefsearch.embed.hailo_device.import_hailort`, at call time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .bundle import Bundle, EncoderEntry
from hefsearch.base.errors import BackendUnavailable
from .hailo_device import import_hailort
from .hef_contract import ContractCheck, HefContract, StreamSpec, check_contract
from .runtime_pairing import is_hef_refused, refused_hef


def hef_entries_for(bundle: Bundle, hw_arch: str, precision: str | None = None) -> list[EncoderEntry]:
    """The bundle's HEFs for one chip, one per SEQ (the last listed wins), shortest SEQ first.

    A Hailo-8 also runs HEFs compiled for the Hailo-8L (HailoRT only warns: "lower
    performance"), used when the bundle has none for the Hailo-8 itself.
    """
    def pick(arch: str) -> list[EncoderEntry]:
        by_seq: dict[int, EncoderEntry] = {}
        for e in bundle.encoder_entries("hef"):
            if (e.hw_arch or "").lower() != arch or not e.seq_len:
                continue
            if precision and precision_name(e) != precision:
                continue
            by_seq[int(e.seq_len)] = e
        return [by_seq[s] for s in sorted(by_seq)]

    found = pick(hw_arch.lower())
    if not found and hw_arch.lower() == "hailo8":
        found = pick("hailo8l")
    return found


def precision_name(entry: EncoderEntry) -> str:
    """The precision profile's name ("a8", "balanced", ...); the manifest may hold its dict."""
    p = entry.extra.get("precision")
    if isinstance(p, dict):
        return str(p.get("name", "custom"))
    return str(p) if p else "unknown"


def _enum_name(v) -> str:
    return getattr(v, "name", None) or str(v).split(".")[-1]


def _quant_pairs(quant_infos) -> tuple[tuple[float, float], ...]:
    return tuple((float(q.qp_scale), float(q.qp_zp)) for q in (quant_infos or []))


def _limvals(quant_infos) -> tuple[tuple[float, float], ...]:
    """(limvals_min, limvals_max) per quant info, or () when HailoRT gives none (or an empty range)."""
    out = []
    for q in quant_infos or []:
        lo, hi = getattr(q, "limvals_min", None), getattr(q, "limvals_max", None)
        if lo is None or hi is None or not float(hi) > float(lo):
            return ()
        out.append((float(lo), float(hi)))
    return tuple(out)


def flags_name(fmt) -> str:
    flags = getattr(fmt, "flags", None)
    if flags is None:
        return "NONE"
    name = getattr(flags, "name", None)
    if name:
        return name
    try:  # an int-like value (pybind arithmetic enum): HAILO_FORMAT_FLAGS_TRANSPOSED = 1 << 1
        return "TRANSPOSED" if int(flags) & 2 else "NONE"
    except (TypeError, ValueError):
        return str(flags).split(".")[-1]


def spec_from_vstream_info(info) -> StreamSpec:
    q = getattr(info, "quant_info", None)
    return StreamSpec(
        name=str(info.name),
        shape=tuple(int(x) for x in info.shape),
        order=_enum_name(info.format.order),
        type=_enum_name(info.format.type),
        quant=_quant_pairs([q] if q is not None else []),
        flags=flags_name(info.format),
        limvals=_limvals([q] if q is not None else []),
    )


def spec_from_infer_stream(stream) -> StreamSpec:
    fmt = stream.format
    return StreamSpec(
        name=str(stream.name),
        shape=tuple(int(x) for x in stream.shape),
        order=_enum_name(fmt.order),
        type=_enum_name(fmt.type),
        quant=_quant_pairs(stream.quant_infos),
        flags=flags_name(fmt),
        limvals=_limvals(stream.quant_infos),
    )


@dataclass
class HefStreams:
    """A HEF's stream infos, as plain data (for ``inspect`` and the contract check)."""

    path: Path
    network_groups: list[str]
    inputs: list[StreamSpec]
    outputs: list[StreamSpec]
    sorted_outputs: list[str]
    check: ContractCheck | None = None
    entry: EncoderEntry | None = None
    notes: list[str] = field(default_factory=list)


def read_hef(path: str | Path, hp=None, dfc: str | None = None) -> HefStreams:
    """Open a HEF file (no device needed) and read its stream infos. ``dfc``: the DFC version the
    manifest records for it, named with HailoRT's when HailoRT refuses the HEF."""
    hp = hp or import_hailort()
    path = Path(path)
    try:
        hef = hp.HEF(str(path))
        groups = list(hef.get_network_group_names())
        ins = [spec_from_vstream_info(i) for i in hef.get_input_vstream_infos()]
        outs = [spec_from_vstream_info(o) for o in hef.get_output_vstream_infos()]
        sorted_names = list(hef.get_sorted_output_names())
    except Exception as e:
        if is_hef_refused(e):
            raise BackendUnavailable(*refused_hef(path, dfc, str(getattr(hp, "__version__", "") or "") or None,
                                                  e)) from None
        raise BackendUnavailable(
            f"HailoRT cannot read {path}: {type(e).__name__}: {e}",
            "Is it a HEF for this HailoRT version? Recompile it, or copy the bundle again.",
        ) from None
    return HefStreams(path, groups, ins, outs, sorted_names)


def inspect_hef(path: str | Path, bundle: Bundle | None = None, hp=None) -> HefStreams:
    """Stream infos of a HEF and, when a bundle lists it, the check against its manifest entry."""
    path = Path(path)
    entry = None if bundle is None else next(
        (e for e in bundle.encoder_entries("hef") if (bundle.path / e.file).resolve() == path.resolve()), None)
    streams = read_hef(path, hp, entry.extra.get("dfc_version") if entry is not None else None)
    if bundle is None:
        return streams
    if entry is None:
        streams.notes.append(f"{path.name} is not listed in {bundle.path / 'manifest.json'}")
        return streams
    streams.entry = entry
    streams.check = check_contract(
        HefContract.from_entry(entry, bundle.hidden, bundle.mask_value), streams.inputs, streams.outputs,
        streams.sorted_outputs)
    return streams
