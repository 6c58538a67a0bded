"""The DFC-facing variant of the encoder body, derived from the bundle's ``encoder.onnx``.

It starts where Hailo's public model-zoo recipes start their transformer encoders
(docs/hailo-facts.md), so the parsed network, the calibration arrays and the runtime all hold
the same thing:

- ``embeddings``      float32 [N, S, H]   (the host's word + position + type sum), parsed NWC;
- ``attention_mask``, by HEF mask mode (:mod:`hefsearch.embed.mask_layout`), always the tensor
  the score Adds take (the cut is *after* the mask Mul):

  - ``keys01`` (the public Hailo-10H report): [N, 1, 1, S], parsed NHWC, with
    ``set_input_mask_to_softmax()`` applying the raw 0/1 mask inside every softmax. The report
    cuts *at* the ``/Mul``; whether a mask fed straight into the Adds behaves the same is an
    open question for hardware (docs/hailo-facts.md);
  - ``scores01`` (the zoo's all_minilm_l6_v2): [N, heads, S, S], parsed NGWC, same command;
  - ``additive`` (the zoo's bert_base_uncased): [N, 1, 1, S], the bias ``(1 - mask) *
    mask_value`` itself, parsed NCHW; no softmax command.

  In FP32 ONNX semantics the input is the additive bias in every mode (what
  :func:`verify_dfc_onnx` feeds); what the command modes receive on the device is the DFC's doing.
- ``last_hidden_state`` float32 [N, S, H]

The mask preparation (Cast / Unsqueeze / Sub / Mul) is removed; the bias stays the bundle's
moderate ``mask_value`` (about -50). Needs the ``onnx`` package (compile extra), no torch model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hefsearch.embed.bundle import Bundle
from hefsearch.base.errors import HefsearchError
from hefsearch.embed.host import HostPipeline
from hefsearch.embed.mask_layout import MaskLayout, hef_mask_mode
from hefsearch.embed.samples import VERIFY_TEXTS

EMBEDDINGS = "embeddings"
MASK = "attention_mask"
OUTPUT = "last_hidden_state"
#: the network's name in the DFC (no dots: the DFC turns them into "_" in layer names)
NET_NAME = "hefsearch_encoder"
#: ops allowed between the 2-D mask input and the additive bias the score Adds take
_MASK_PREP_OPS = {"Cast", "Unsqueeze", "Reshape", "Identity", "Sub", "Mul"}
#: the variant must equal encoder.onnx to float32 rounding
PARITY_MAX_ABS = 1e-4


class DfcOnnxError(HefsearchError):
    title = "DFC ONNX error"


@dataclass(frozen=True)
class DfcOnnx:
    path: Path
    seq_len: int
    hidden: int
    mask_value: float
    mask_mode: str = "keys01"
    heads: int = 1

    @property
    def layout(self) -> MaskLayout:
        return MaskLayout.for_mode(self.mask_mode, self.seq_len, self.heads, self.mask_value)

    @property
    def mask_shape(self) -> list[int]:
        s = self.seq_len
        return [1, self.heads, s, s] if self.layout.layout == "scores" else [1, 1, 1, s]

    @property
    def input_shapes(self) -> dict[str, list[int]]:
        """Shapes for the parser's ``net_input_shapes`` (batch 1)."""
        return {EMBEDDINGS: [1, self.seq_len, self.hidden], MASK: self.mask_shape}

    def mask_feed(self, mask: np.ndarray) -> np.ndarray:
        """The FP32 value of the mask input for a 0/1 mask [N, S] (the additive bias)."""
        bias = ((1.0 - mask.astype(np.float32)) * np.float32(self.mask_value))[:, None, None, :]
        if self.layout.layout == "scores":
            bias = np.broadcast_to(bias, (mask.shape[0], self.heads, self.seq_len, self.seq_len))
        return np.ascontiguousarray(bias, dtype=np.float32)


def _onnx():
    try:
        import onnx
    except ImportError:
        raise DfcOnnxError("Deriving the DFC model needs the onnx package.", "pip install 'hefsearch[compile]'") from None
    return onnx


def make_dfc_onnx(bundle: Bundle, out: str | Path, seq_len: int, mask_mode: str = "keys01",
                  source: str | Path | None = None) -> DfcOnnx:
    """Write the DFC-facing variant of ``bundle``'s encoder.onnx (or of the body at ``source``,
    e.g. the robust one) to ``out`` (fixed S = seq_len)."""
    mode, heads = _mask_mode(bundle, mask_mode)
    onnx = _onnx()
    src = Path(source) if source else bundle.path / "encoder.onnx"
    model = onnx.load(str(src))
    _check_io(model.graph, src)
    chain, bias = _mask_chain(model, src)
    _cut_mask_prep(model.graph, chain, bias)
    dfc = DfcOnnx(Path(out), int(seq_len), bundle.hidden, bundle.mask_value, mode.name, max(heads, 1))
    _fixed_io(model.graph, dfc, produced={t for n in chain for t in n.output})
    model.doc_string = (f"hefsearch DFC-facing encoder body, mask mode {mode.name}: the mask input is the "
                        f"additive bias on the attention scores (mask value {bundle.mask_value})")
    onnx.checker.check_model(model)
    dfc.path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dfc.path))
    return dfc


def _mask_mode(bundle: Bundle, mask_mode: str):
    """The HEF mask mode named ``mask_mode`` and the bundle's attention heads (which a
    scores-layout mask needs)."""
    try:
        mode = hef_mask_mode(mask_mode)
    except ValueError as e:
        raise DfcOnnxError(f"Unknown mask mode {mask_mode!r}.", str(e)) from None
    heads = int(bundle.model.get("heads") or 0)
    if mode.layout == "scores" and heads <= 0:
        raise DfcOnnxError("The bundle's manifest does not record the number of attention heads.",
                           "Re-export the bundle with 'hefsearch compile export'.")
    return mode, heads


def _check_io(g, src: Path) -> None:
    """The body's inputs and outputs are those hefsearch's export writes."""
    names = [i.name for i in g.input]
    if EMBEDDINGS not in names or MASK not in names:
        raise DfcOnnxError(
            f"{src} has inputs {names}; expected '{EMBEDDINGS}' and '{MASK}'.",
            "Re-export the bundle with 'hefsearch compile export'.",
        )
    if [o.name for o in g.output] != [OUTPUT]:
        raise DfcOnnxError(f"{src} has outputs {[o.name for o in g.output]}; expected ['{OUTPUT}'].",
                           "Re-export the bundle with 'hefsearch compile export'.")


def _mask_chain(model, src: Path) -> tuple[list, str]:
    """The mask's preparation nodes, from the graph input to the additive bias the score Adds
    take, and the bias tensor's name."""
    from onnx import TensorProto, shape_inference

    inferred = shape_inference.infer_shapes(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in
             list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    elem = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for t in node.input:
            consumers.setdefault(t, []).append(node)

    def feeds_scores(t: str) -> bool:
        """``t`` is the bias: every user is an Add whose output goes into a Softmax."""
        users = consumers.get(t, [])
        return bool(users) and all(
            u.op_type == "Add" and any(w.op_type == "Softmax" for w in consumers.get(u.output[0], []))
            for u in users)

    chain, tensor = [], MASK
    while not (ranks.get(tensor) == 4 and elem.get(tensor) == TensorProto.FLOAT and feeds_scores(tensor)):
        users = consumers.get(tensor, [])
        if len(users) != 1 or users[0].op_type not in _MASK_PREP_OPS:
            raise DfcOnnxError(
                f"Cannot find the attention-mask bias in {src}: '{tensor}' feeds "
                f"{[u.op_type for u in users]} before any Add into a Softmax.",
                "The body was not exported by hefsearch; re-export it with 'hefsearch compile export'.",
            )
        chain.append(users[0])
        tensor = users[0].output[0]
    return chain, tensor


def _cut_mask_prep(g, chain: list, bias: str) -> None:
    """The preparation nodes removed (and what only they used): the mask input feeds the bias's
    users itself."""
    dropped = {id(n) for n in chain}
    keep = [n for n in g.node if id(n) not in dropped]
    for node in keep:
        for i, t in enumerate(node.input):
            if t == bias:
                node.input[i] = MASK
    keep = _live_nodes(keep, {OUTPUT})  # e.g. the Constants the removed nodes used
    del g.node[:]
    g.node.extend(keep)


def _fixed_io(g, dfc: DfcOnnx, produced: set[str]) -> None:
    """The graph's inputs and output at the fixed sequence length, the mask in its mode's shape;
    the value infos of the removed nodes' outputs dropped."""
    from onnx import TensorProto, helper

    s, h = dfc.seq_len, dfc.hidden
    del g.input[:]
    g.input.extend([
        helper.make_tensor_value_info(EMBEDDINGS, TensorProto.FLOAT, ["batch", s, h]),
        helper.make_tensor_value_info(MASK, TensorProto.FLOAT, ["batch", *dfc.mask_shape[1:]]),
    ])
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", s, h])])
    for vi in [vi for vi in g.value_info if vi.name in produced]:
        g.value_info.remove(vi)


def _live_nodes(nodes: list, outputs: set[str]) -> list:
    """``nodes`` without those whose outputs nothing reads (graph order kept)."""
    needed = set(outputs)
    live = []
    for node in reversed(nodes):
        if any(t in needed for t in node.output):
            live.append(node)
            needed.update(t for t in node.input if t)
    return live[::-1]


def sample_inputs(bundle: Bundle, seq_len: int, texts: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Host-pipeline inputs for ``texts`` padded to ``seq_len``: E [N,S,H], mask [N,S] int64."""
    host = HostPipeline(bundle, max_tokens=seq_len)
    tok = host.tokenize(texts or VERIFY_TEXTS)
    return host.embed(tok.ids, pad_to=seq_len)


def verify_dfc_onnx(bundle: Bundle, dfc: DfcOnnx, texts: list[str] | None = None,
                    source: str | Path | None = None) -> float:
    """Max |difference| between the variant and the body it came from (default encoder.onnx)
    on sample texts; raises over the limit."""
    from hefsearch.embed.backends.cpu import make_session

    e, mask = sample_inputs(bundle, dfc.seq_len, texts)
    src = Path(source) if source else bundle.path / "encoder.onnx"
    ref = make_session(src, 1).run([OUTPUT], {EMBEDDINGS: e, MASK: mask})[0]
    got = make_session(dfc.path, 1).run([OUTPUT], {EMBEDDINGS: e, MASK: dfc.mask_feed(mask)})[0]
    diff = float(np.max(np.abs(ref - got)))
    if not diff <= PARITY_MAX_ABS:
        raise DfcOnnxError(
            f"The DFC-facing model {dfc.path} differs from encoder.onnx by up to {diff:.3g} "
            f"(limit {PARITY_MAX_ABS}).", "Please report this with the bundle's manifest.json.")
    return diff
