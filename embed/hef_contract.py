"""The HEF's stream contract and output layouts, without any Hailo SDK (numpy only).

A compiled encoder body (ARCHITECTURE.md section 4) has two inputs and one logical output:
``embeddings`` (the host's embedding sum, SEQ x H per frame), ``attention_mask`` (in the layout
the HEF was compiled for, :mod:`hefsearch.embed.mask_layout`) and ``last_hidden_state`` (SEQ x H
per frame, possibly split over several streams). The manifest's HEF entry records, by role, the
streams the compiled HEF has (``inputs``, ``outputs``, ``mask_input``; written by compile/hef/build.py).

Matching is by meaning, as HailoRT binds by name and the allocator reshapes freely
(docs/hailo-facts.md): an input is found by its recorded name, else by its element count; a
stream of another shape with the same element count is fed row-major in the HEF's shape; input
order is a note, never an error; outputs adding up to SEQ x H are accepted under any name. Only
a real mismatch (element counts, types, TRANSPOSED flags, unreadable layouts) is refused, naming
the stream. :class:`OutputAssembler` turns the HEF's outputs into [N, SEQ, H] float32, reading
shape, format order, type, quantisation and split from the HEF; :func:`to_stream` lays host
frames out in an input stream's shape and order.

Verified against the contract fakes in ``tests/fakes`` only, not a HEF of a real Dataflow Compiler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hefsearch.base.errors import BackendUnavailable
from .mask_layout import MaskLayout

#: host-side orders whose buffer is [h, w, c]: HailoRT maps FCR/F8CR to an NHWC host buffer, and
#: NHCW is a device-side order that is not used on the host, where such a stream is NHWC too
#: (hailort ``hailort/libhailort/include/hailo/hailort.h``, comments on ``HAILO_FORMAT_ORDER_*``)
HWC_ORDERS = {"NHWC", "FCR", "F8CR", "NHCW"}
#: every order we know how to read into [tokens, channels]
SUPPORTED_ORDERS = HWC_ORDERS | {"NCHW", "NC", "NHW"}
DTYPES = {"UINT8": np.uint8, "UINT16": np.uint16, "FLOAT32": np.float32}


class HefContractError(BackendUnavailable):
    """The HEF's streams do not match what the bundle manifest (and the host) expect."""

    title = "HEF contract mismatch"


@dataclass(frozen=True)
class StreamSpec:
    """One input or output stream as HailoRT describes it (SDK objects converted to plain data).

    ``shape`` is exactly what HailoRT reports, without the batch axis: (h, w, c) for most
    orders, (c,) for NC, (h, w) for NHW. ``quant``: (scale, zero point) per quant info.
    """

    name: str
    shape: tuple[int, ...]
    order: str
    type: str
    quant: tuple[tuple[float, float], ...] = ()
    flags: str = "NONE"
    #: (limvals_min, limvals_max) per quant info: the float range HailoRT clips an input to
    #: before quantising it (``quantization.hpp``); empty when unknown (then the type's range)
    limvals: tuple[tuple[float, float], ...] = ()

    @property
    def transposed(self) -> bool:
        return "TRANSPOSED" in self.flags.upper()

    @property
    def dtype(self) -> np.dtype:
        if self.type not in DTYPES:
            raise HefContractError(f"Stream {self.name!r} has format type {self.type}, which hefsearch cannot read.")
        return np.dtype(DTYPES[self.type])

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 0

    def describe(self) -> str:
        q = ""
        if self.quant:
            s, z = self.quant[0]
            q = f", scale {s:.6g} zp {z:g}" + (f" (+{len(self.quant) - 1} more)" if len(self.quant) > 1 else "")
        f = "" if self.flags.upper() in ("NONE", "0", "") else f", flags {self.flags}"
        return f"{self.name}: shape {list(self.shape)}, {self.type}, order {self.order}{f}{q}"

    def tokens_channels(self, seq: int, hidden: int) -> tuple[int, int] | None:
        """How many tokens and channels this stream carries per frame, or None if unreadable."""
        if self.order in HWC_ORDERS or self.order == "NCHW":
            if len(self.shape) != 3:
                return None
            h, w, c = self.shape
            return h * w, c
        if self.order in ("NC", "NHW"):
            n = self.size
            if n % hidden == 0:
                return n // hidden, hidden
            if n % seq == 0:
                return seq, n // seq
        return None


@dataclass(frozen=True)
class HefContract:
    """What the manifest entry says the HEF's streams are (names may be missing in old bundles)."""

    seq_len: int
    hidden: int
    embeddings: str | None = None
    attention_mask: str | None = None
    outputs: tuple[str, ...] | None = None
    mask: MaskLayout | None = None
    #: per-frame shapes as recorded (the HEF's own, or the parsed network's for old bundles)
    embeddings_recorded: tuple[int, ...] | None = None
    mask_recorded: tuple[int, ...] | None = None

    @property
    def mask_layout(self) -> MaskLayout:
        return self.mask or MaskLayout("keys01", self.seq_len)

    @property
    def embeddings_size(self) -> int:
        return self.seq_len * self.hidden

    @property
    def mask_size(self) -> int:
        return self.mask_layout.size

    @classmethod
    def from_entry(cls, entry, hidden: int, mask_value: float = -50.0) -> "HefContract":
        """Read the contract from a manifest ``EncoderEntry`` of kind "hef"."""
        seq = int(entry.seq_len)
        ins = entry.extra.get("inputs") or {}
        outs = entry.extra.get("outputs") or {}

        def _name(d):
            return d.get("name") if isinstance(d, dict) else None

        def _shape(d):
            sh = d.get("shape") if isinstance(d, dict) else None
            return tuple(int(x) for x in sh) if isinstance(sh, list) and sh else None

        out = outs.get("last_hidden_state") if isinstance(outs, dict) else None
        names = None
        if isinstance(out, dict):
            if isinstance(out.get("names"), list):
                names = tuple(str(n) for n in out["names"])
            elif out.get("name"):
                names = (str(out["name"]),)
        mask = MaskLayout.from_dict(entry.extra.get("mask_input"), seq, float(entry.extra.get("mask_value", mask_value)))
        return cls(seq, int(hidden), _name(ins.get("embeddings")), _name(ins.get("attention_mask")), names, mask,
                   _shape(ins.get("embeddings")), _shape(ins.get("attention_mask")))


@dataclass
class ContractCheck:
    """The outcome of :func:`check_contract`: which stream is which, and every problem found."""

    contract: HefContract
    embeddings: StreamSpec | None = None
    attention_mask: StreamSpec | None = None
    outputs: list[StreamSpec] = field(default_factory=list)
    concat: str | None = None  # "channels" or "tokens" when the output is split
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_failed(self, hef_path) -> None:
        if self.problems:
            lines = "\n  - ".join(self.problems)
            raise HefContractError(
                f"{hef_path} does not match the bundle manifest:\n  - {lines}",
                "Recompile the HEF from this bundle (hefsearch compile hef), or run "
                f"'hefsearch inspect {hef_path}' to see its streams.",
            )

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "embeddings": self.embeddings.name if self.embeddings else None,
            "attention_mask": self.attention_mask.name if self.attention_mask else None,
            "mask_layout": self.contract.mask_layout.to_dict(),
            "outputs": [s.name for s in self.outputs],
            "concat": self.concat,
            "problems": list(self.problems),
            "notes": list(self.notes),
        }


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(int(x)) for x in shape) + "]"


def _match_inputs(c: ContractCheck, inputs: list[StreamSpec]) -> None:
    """Stage 1: find the embeddings and mask streams by recorded name, else by element count,
    and check each one can be fed; sets ``c.embeddings`` and ``c.attention_mask``."""
    contract = c.contract
    seq, hidden = contract.seq_len, contract.hidden
    roles = [("embeddings", contract.embeddings, contract.embeddings_size,
              f"{seq} tokens x {hidden} channels", contract.embeddings_recorded),
             ("attention_mask", contract.attention_mask, contract.mask_size, contract.mask_layout.describe(),
              contract.mask_recorded)]
    if len(inputs) != 2:
        c.problems.append(
            f"the HEF has {len(inputs)} input stream(s) ({', '.join(s.name for s in inputs) or 'none'}); "
            "the encoder body needs exactly 2: the embeddings and the attention mask"
        )
    taken: set[str] = set()
    for role, name, size, what, recorded in roles:
        spec = _find_input(c, inputs, role, name, size, what, taken)
        if spec is None:
            continue
        taken.add(spec.name)
        _check_input(c, inputs, role, spec, size, what, recorded)
        if role == "embeddings":
            c.embeddings = spec
        else:
            c.attention_mask = spec
    if c.embeddings is not None and c.attention_mask is not None and len(inputs) == 2:
        order = [s.name for s in inputs]
        if order.index(c.embeddings.name) > order.index(c.attention_mask.name):
            c.notes.append(f"input order: the HEF lists {order} (mask first); inputs are bound by name, so "
                           "the order does not matter")


def _find_input(c: ContractCheck, inputs: list[StreamSpec], role: str, name: str | None, size: int,
                what: str, taken: set[str]) -> StreamSpec | None:
    """The stream the manifest names, else the one untaken stream holding ``size`` values."""
    spec = {s.name: s for s in inputs}.get(name) if name else None
    if spec is not None:
        return spec
    # renamed, or an old manifest without names: identify the stream by what it holds
    matches = [s for s in inputs if s.size == size and s.name not in taken]
    if len(matches) == 1:
        spec = matches[0]
        c.notes.append(
            f"input {role}: " + (f"the manifest names {name!r}, which the HEF does not have; "
                                 if name else "the manifest names no stream; ")
            + f"identified {spec.name!r} by its size ({size} values)")
        return spec
    have = ", ".join(f"{s.name!r} {_shape_str(s.shape)}" for s in inputs) or "none"
    c.problems.append(
        f"input {role}: " + (f"the manifest names stream {name!r}, but " if name else "")
        + f"no single HEF input holds the {size} values of {what} (the HEF's inputs: {have})")
    return None


def _check_input(c: ContractCheck, inputs: list[StreamSpec], role: str, spec: StreamSpec, size: int,
                 what: str, recorded: tuple[int, ...] | None) -> None:
    """A problem when the host cannot feed ``spec`` (size, TRANSPOSED, order); a note when its
    shape was folded or differs from the record (fed row-major in the HEF's shape)."""
    contract = c.contract
    if spec.size != size:
        other = [s.name for s in inputs if s is not spec and s.size == size]
        swapped = f"; {other[0]!r} has that size, so the inputs look swapped" if other else ""
        c.problems.append(
            f"input {role} ({spec.name}): the HEF has shape {_shape_str(spec.shape)} = {spec.size} values; "
            f"the host sends {size} ({what}, SEQ {contract.seq_len}, H {contract.hidden}){swapped}"
        )
    elif spec.transposed:
        c.problems.append(
            f"input {role} ({spec.name}): the stream has FormatFlags.TRANSPOSED (height and width swapped); "
            "hefsearch does not feed transposed streams. Recompile the HEF without a transposed format.")
    elif spec.order not in SUPPORTED_ORDERS:
        c.problems.append(f"input {role} ({spec.name}): format order {spec.order} is not a dense layout "
                          f"hefsearch can write (supported: {', '.join(sorted(SUPPORTED_ORDERS))})")
    elif recorded and tuple(recorded) != tuple(spec.shape):
        c.notes.append(f"input {role} ({spec.name}): the HEF's shape {_shape_str(spec.shape)} differs from "
                       f"the recorded {_shape_str(recorded)}; fed row-major in the HEF's shape")
    elif len(spec.shape) == 3 and spec.shape[0] != 1:
        c.notes.append(f"input {role} ({spec.name}): folded to {_shape_str(spec.shape)} by the compiler's "
                       "automatic spatial reshape; fed row-major in that shape")


def _order_outputs(c: ContractCheck, outputs: list[StreamSpec], sorted_output_names: list[str] | None
                   ) -> list[str]:
    """Stage 2: the output names in HailoRT's sorted order (unsorted ones after); notes where
    the manifest's names or order differ (names are informative, meaning decides)."""
    contract = c.contract
    out_names = {s.name for s in outputs}
    order = [n for n in (sorted_output_names or []) if n in out_names]
    order += [s.name for s in outputs if s.name not in order]
    if contract.outputs and outputs:
        missing = [n for n in contract.outputs if n not in out_names]
        extra = [n for n in order if n not in contract.outputs]
        if missing or extra:
            # The compiler names outputs after the layer that feeds them, and the optimiser
            # renames layers (LayerNorm decomposition): names are informative, meaning decides.
            c.notes.append(
                f"output: the manifest names {', '.join(repr(n) for n in contract.outputs)}, the HEF's outputs are "
                f"{', '.join(repr(n) for n in order)}; read as the hidden state in HailoRT's sorted order")
        elif list(contract.outputs) != order:
            c.notes.append(f"output order: HailoRT sorts the outputs as {order}, the manifest lists "
                           f"{list(contract.outputs)}; HailoRT's order is used")
    return order


def _read_output(c: ContractCheck, spec: StreamSpec) -> tuple[int, int] | None:
    """Stage 3, per output stream: (tokens, channels) it carries, or None with a problem listed."""
    seq, hidden = c.contract.seq_len, c.contract.hidden
    if spec.transposed:
        c.problems.append(f"output {spec.name}: the stream has FormatFlags.TRANSPOSED (height and width "
                          "swapped); hefsearch does not read transposed streams")
        return None
    if spec.order not in SUPPORTED_ORDERS:
        c.problems.append(
            f"output {spec.name}: format order {spec.order} is not a dense tensor layout hefsearch can read "
            f"(supported: {', '.join(sorted(SUPPORTED_ORDERS))})"
        )
        return None
    if spec.type not in DTYPES:
        c.problems.append(f"output {spec.name}: format type {spec.type} is not supported")
        return None
    tc = spec.tokens_channels(seq, hidden)
    if tc is None:
        c.problems.append(
            f"output {spec.name}: shape {_shape_str(spec.shape)} in order {spec.order} cannot be read as "
            f"tokens x channels for SEQ {seq}, H {hidden}"
        )
        return None
    n_ch = tc[1]
    if spec.type != "FLOAT32" and spec.quant and len(spec.quant) not in (1, n_ch):
        c.problems.append(
            f"output {spec.name}: {len(spec.quant)} quant infos for {n_ch} channels; cannot dequantise"
        )
    return tc


def _join_outputs(c: ContractCheck, parts: list[tuple[int, int]]) -> None:
    """Stage 4: the readable outputs must add up to SEQ x H along one axis; sets ``c.concat``."""
    seq, hidden = c.contract.seq_len, c.contract.hidden
    if len(parts) == 1:
        if parts[0] != (seq, hidden):
            c.problems.append(
                f"output {c.outputs[0].name}: shape {_shape_str(c.outputs[0].shape)} (order {c.outputs[0].order}) "
                f"holds {parts[0][0]} tokens x {parts[0][1]} channels; the host needs {seq} x {hidden}"
            )
    elif all(t == seq for t, _ in parts) and sum(ch for _, ch in parts) == hidden:
        c.concat = "channels"
        c.notes.append(f"the output is split over {len(parts)} streams along channels; concatenated in HailoRT's order")
    elif all(ch == hidden for _, ch in parts) and sum(t for t, _ in parts) == seq:
        c.concat = "tokens"
        c.notes.append(f"the output is split over {len(parts)} streams along tokens; concatenated in HailoRT's order")
    else:
        desc = ", ".join(f"{s.name} {t}x{ch}" for s, (t, ch) in zip(c.outputs, parts))
        c.problems.append(
            f"the {len(parts)} output streams ({desc}) do not add up to {seq} tokens x {hidden} channels "
            "along one axis"
        )


def check_contract(
    contract: HefContract,
    inputs: list[StreamSpec],
    outputs: list[StreamSpec],
    sorted_output_names: list[str] | None = None,
) -> ContractCheck:
    """Compare the HEF's input/output stream infos with the manifest and the host's needs.

    See the module docstring for what is matched how; every problem found is listed, notes say
    what was tolerated and why. Stages: match the inputs, order the outputs, read each output
    as tokens x channels, join the outputs.
    """
    c = ContractCheck(contract)
    _match_inputs(c, inputs)
    order = _order_outputs(c, outputs, sorted_output_names)
    if not outputs:
        c.problems.append("the HEF has no output stream")
        return c
    out_by_name = {s.name: s for s in outputs}
    c.outputs = [out_by_name[n] for n in order]
    parts = [tc for tc in (_read_output(c, spec) for spec in c.outputs) if tc is not None]
    if c.problems:
        return c
    _join_outputs(c, parts)
    return c


def to_tokens(buf: np.ndarray, spec: StreamSpec, seq: int, hidden: int) -> np.ndarray:
    """Host buffers of one stream for N frames, [N, *spec.shape] -> [N, tokens, channels] float32.

    The layout comes from the stream's format order; a non-float type is dequantised with its
    quant info, x = (q - zero_point) * scale (per channel when there is one per channel).
    """
    n = buf.shape[0]
    t, ch = spec.tokens_channels(seq, hidden)
    o = spec.order
    if o in HWC_ORDERS or o in ("NC", "NHW"):
        x = buf.reshape(n, t, ch)
    elif o == "NCHW":  # buffer [c, h, w] for a reported (h, w, c)
        h, w, c = spec.shape
        x = buf.reshape(n, c, h, w).transpose(0, 2, 3, 1).reshape(n, t, ch)
    else:  # pragma: no cover - check_contract refuses these
        raise HefContractError(f"Stream {spec.name}: unsupported format order {o}.")
    if x.dtype == np.float32:
        return x
    if not spec.quant:
        raise HefContractError(f"Stream {spec.name} returned {x.dtype} data without quant info to dequantise it.")
    q = np.asarray(spec.quant, dtype=np.float32)
    scale, zp = (q[0, 0], q[0, 1]) if len(q) == 1 else (q[:, 0], q[:, 1])
    return ((x.astype(np.float32) - zp) * scale).astype(np.float32)


class OutputAssembler:
    """Turns a checked HEF's output buffers into the encoder's [N, SEQ, H] float32."""

    def __init__(self, check: ContractCheck, specs: list[StreamSpec] | None = None):
        self.seq = check.contract.seq_len
        self.hidden = check.contract.hidden
        self.concat = check.concat
        #: the streams as configured (format type may differ from the HEF's native type)
        self.specs = specs if specs is not None else check.outputs

    def __call__(self, buffers: dict[str, np.ndarray]) -> np.ndarray:
        parts = [to_tokens(buffers[s.name], s, self.seq, self.hidden) for s in self.specs]
        if len(parts) == 1:
            return np.ascontiguousarray(parts[0])
        axis = 2 if self.concat == "channels" else 1
        return np.ascontiguousarray(np.concatenate(parts, axis=axis))


def to_stream(frames: np.ndarray, spec: StreamSpec) -> np.ndarray:
    """Host frames [N, ...] (row-major, any logical shape of ``spec.size`` values per frame) ->
    the input buffer [N, *spec.shape] in the stream's format order, C-contiguous.

    HWC-like orders (NHWC, FCR, F8CR) and NC/NHW are plain row-major reshapes: this is how the
    automatic spatial reshape folds [1, 128, C] into [16, 8, C]; so is NHCW, which HailoRT does not
    use host-side (an NHCW device stream has an NHWC host buffer). NCHW buffers are the (h, w, c)
    frame transposed.
    """
    n = frames.shape[0]
    o = spec.order
    if o in HWC_ORDERS or o in ("NC", "NHW"):
        out = frames.reshape(n, *spec.shape)
    elif o == "NCHW":
        h, w, c = spec.shape
        out = frames.reshape(n, h, w, c).transpose(0, 3, 1, 2)
    else:
        raise HefContractError(f"Stream {spec.name}: unsupported format order {o}.")
    return np.ascontiguousarray(out)
