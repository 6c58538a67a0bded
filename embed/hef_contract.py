"""The HEF's stream contract and output layouts, without any Hailo SDK (numpy only).

A compiled encoder body (ARCHITECTURE.md section 4) has two inputs and one logical output:

- ``embeddings``: the host's embedding sum, one frame = [1, SEQ, H] (the parsed network's
  4D [N,1,SEQ,H] without the batch axis);
- ``attention_mask``: the raw 0/1 mask, one frame = [1, 1, SEQ];
- ``last_hidden_state``: [SEQ, H] per frame, possibly split over several output streams.

The bundle manifest's HEF entry records the stream names the compiler produced::

    "inputs":  {"embeddings":     {"name": "<net>/input_layer1", "shape": [1, SEQ, H]},
                "attention_mask": {"name": "<net>/input_layer2", "shape": [1, 1, SEQ]}},
    "outputs": {"last_hidden_state": {"names": ["<net>/output_layer1"], "shape": [1, SEQ, H]}}

(``"name": "..."`` is accepted for a single output too). :func:`check_contract` compares
that with the stream infos read from the HEF and says exactly what differs;
:class:`OutputAssembler` turns whatever the HEF's outputs are (shape, format order, format
type, quantisation, split) into [N, SEQ, H] float32, reading every one of those from the
HEF instead of assuming them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import BackendUnavailable

#: host-side orders whose buffer is [h, w, c] (HailoRT maps FCR/F8CR to an NHWC host buffer)
HWC_ORDERS = {"NHWC", "FCR", "F8CR"}
#: every order we know how to read into [tokens, channels]
SUPPORTED_ORDERS = HWC_ORDERS | {"NHCW", "NCHW", "NC", "NHW"}
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
        return f"{self.name}: shape {list(self.shape)}, {self.type}, order {self.order}{q}"

    def tokens_channels(self, seq: int, hidden: int) -> tuple[int, int] | None:
        """How many tokens and channels this stream carries per frame, or None if unreadable."""
        if self.order in HWC_ORDERS or self.order in ("NHCW", "NCHW"):
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

    @property
    def embeddings_shape(self) -> tuple[int, ...]:
        return (1, self.seq_len, self.hidden)

    @property
    def mask_shape(self) -> tuple[int, ...]:
        return (1, 1, self.seq_len)

    @classmethod
    def from_entry(cls, entry, hidden: int) -> "HefContract":
        """Read the contract from a manifest ``EncoderEntry`` of kind "hef"."""
        seq = int(entry.seq_len)
        ins = entry.extra.get("inputs") or {}
        outs = entry.extra.get("outputs") or {}

        def _name(d):
            return d.get("name") if isinstance(d, dict) else None

        out = outs.get("last_hidden_state") if isinstance(outs, dict) else None
        names = None
        if isinstance(out, dict):
            if isinstance(out.get("names"), list):
                names = tuple(str(n) for n in out["names"])
            elif out.get("name"):
                names = (str(out["name"]),)
        return cls(seq, int(hidden), _name(ins.get("embeddings")), _name(ins.get("attention_mask")), names)


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


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(int(x)) for x in shape) + "]"


def check_contract(
    contract: HefContract,
    inputs: list[StreamSpec],
    outputs: list[StreamSpec],
    sorted_output_names: list[str] | None = None,
) -> ContractCheck:
    """Compare the HEF's input/output stream infos with the manifest and the host's needs.

    Inputs are matched by the manifest's names (and must then have the manifest's shapes, in
    the manifest's order); without names they are identified by shape. Outputs are taken in
    HailoRT's sorted order and must add up to [SEQ, H] along channels or tokens.
    """
    c = ContractCheck(contract)
    seq, hidden = contract.seq_len, contract.hidden
    by_name = {s.name: s for s in inputs}
    want = [("embeddings", contract.embeddings, contract.embeddings_shape),
            ("attention_mask", contract.attention_mask, contract.mask_shape)]
    if len(inputs) != 2:
        c.problems.append(
            f"the HEF has {len(inputs)} input stream(s) ({', '.join(s.name for s in inputs) or 'none'}); "
            "the encoder body needs exactly 2: embeddings [1, SEQ, H] and attention_mask [1, 1, SEQ]"
        )
    for role, name, shape in want:
        spec = None
        if name:
            spec = by_name.get(name)
            if spec is None:
                c.problems.append(
                    f"input {role}: the manifest names stream {name!r}, but the HEF's inputs are "
                    f"{', '.join(repr(s.name) for s in inputs) or 'none'}"
                )
                continue
        else:
            matches = [s for s in inputs if tuple(s.shape) == tuple(shape)]
            if len(matches) == 1:
                spec = matches[0]
                c.notes.append(f"input {role}: the manifest names no stream; identified {spec.name!r} by its shape")
            else:
                c.problems.append(
                    f"input {role}: the manifest names no stream and {len(matches)} HEF inputs have the "
                    f"expected shape {_shape_str(shape)}"
                )
                continue
        if tuple(spec.shape) != tuple(shape):
            other = [s.name for s in inputs if s is not spec and tuple(s.shape) == tuple(shape)]
            swapped = f"; {other[0]!r} has that shape, so the inputs look swapped" if other else ""
            c.problems.append(
                f"input {role} ({spec.name}): the HEF has shape {_shape_str(spec.shape)}, the manifest "
                f"and host expect {_shape_str(shape)} (SEQ {seq}, H {hidden}){swapped}"
            )
        if role == "embeddings":
            c.embeddings = spec
        else:
            c.attention_mask = spec
    if c.embeddings is not None and c.attention_mask is not None and len(inputs) == 2 and not c.problems:
        order = [s.name for s in inputs]
        if order.index(c.embeddings.name) > order.index(c.attention_mask.name):
            c.problems.append(
                f"input order: the HEF lists {order}, but the manifest has embeddings "
                f"({c.embeddings.name}) first"
            )

    # -- outputs ---------------------------------------------------------------------------
    out_by_name = {s.name: s for s in outputs}
    order = [n for n in (sorted_output_names or []) if n in out_by_name]
    order += [s.name for s in outputs if s.name not in order]
    if contract.outputs:
        missing = [n for n in contract.outputs if n not in out_by_name]
        extra = [n for n in order if n not in contract.outputs]
        if missing:
            c.problems.append(
                f"output: the manifest names {', '.join(repr(n) for n in missing)}, but the HEF's outputs "
                f"are {', '.join(repr(n) for n in order) or 'none'}"
            )
        if extra:
            c.problems.append(f"output: the HEF has streams the manifest does not list: {', '.join(extra)}")
        if list(contract.outputs) != [n for n in order if n in contract.outputs] and not missing:
            c.problems.append(
                f"output order: HailoRT sorts the outputs as {order}, the manifest lists {list(contract.outputs)}"
            )
    if not outputs:
        c.problems.append("the HEF has no output stream")
        return c
    c.outputs = [out_by_name[n] for n in order]
    parts = []
    for spec in c.outputs:
        if spec.order not in SUPPORTED_ORDERS:
            c.problems.append(
                f"output {spec.name}: format order {spec.order} is not a dense tensor layout hefsearch can read "
                f"(supported: {', '.join(sorted(SUPPORTED_ORDERS))})"
            )
            continue
        if spec.type not in DTYPES:
            c.problems.append(f"output {spec.name}: format type {spec.type} is not supported")
            continue
        tc = spec.tokens_channels(seq, hidden)
        if tc is None:
            c.problems.append(
                f"output {spec.name}: shape {_shape_str(spec.shape)} in order {spec.order} cannot be read as "
                f"tokens x channels for SEQ {seq}, H {hidden}"
            )
            continue
        n_ch = tc[1]
        if spec.type != "FLOAT32" and spec.quant and len(spec.quant) not in (1, n_ch):
            c.problems.append(
                f"output {spec.name}: {len(spec.quant)} quant infos for {n_ch} channels; cannot dequantise"
            )
        parts.append(tc)
    if c.problems:
        return c
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
    elif o == "NHCW":  # buffer [h, c, w] for a reported (h, w, c)
        h, w, c = spec.shape
        x = buf.reshape(n, h, c, w).transpose(0, 1, 3, 2).reshape(n, t, ch)
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
