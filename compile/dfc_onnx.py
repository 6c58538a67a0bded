"""The DFC-facing variant of the encoder body, derived from the bundle's ``encoder.onnx``.

The Dataflow Compiler turns the body's 2-D mask into a 4-D network input ``[N,1,1,S]``; this
variant makes that tensor the graph input, so the parsed network, the calibration arrays and
the runtime all hold the same thing:

- ``embeddings``      float32 [N, S, H]   (the host's word + position + type sum, fixed S)
- ``attention_mask``  float32 [N, 1, 1, S] 0/1 (the body's unsqueezed mask)
- ``last_hidden_state`` float32 [N, S, H]

Only the mask preparation (Cast / Unsqueeze / Reshape from the 2-D mask up to the first 4-D
tensor) is removed; the additive bias the body adds to the attention scores stays the bundle's
moderate ``mask_value`` (about -50). Needs the ``onnx`` package (compile extra); a bundle alone
suffices, no torch model. :func:`verify_dfc_onnx` checks the variant against ``encoder.onnx``
with ONNX Runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hefsearch.embed.bundle import Bundle
from hefsearch.embed.errors import HefsearchError
from hefsearch.embed.host import HostPipeline
from hefsearch.embed.samples import VERIFY_TEXTS

EMBEDDINGS = "embeddings"
MASK = "attention_mask"
OUTPUT = "last_hidden_state"
#: ops allowed between the 2-D mask input and the 4-D mask tensor
_MASK_PREP_OPS = {"Cast", "Unsqueeze", "Reshape", "Identity"}
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

    @property
    def input_shapes(self) -> dict[str, list[int]]:
        """Shapes for the parser's ``net_input_shapes`` (batch 1)."""
        return {EMBEDDINGS: [1, self.seq_len, self.hidden], MASK: [1, 1, 1, self.seq_len]}


def _onnx():
    try:
        import onnx
    except ImportError:
        raise DfcOnnxError("Deriving the DFC model needs the onnx package.", "pip install 'hefsearch[compile]'") from None
    return onnx


def make_dfc_onnx(bundle: Bundle, out: str | Path, seq_len: int) -> DfcOnnx:
    """Write the DFC-facing variant of ``bundle``'s encoder.onnx to ``out`` (fixed S = seq_len)."""
    onnx = _onnx()
    from onnx import TensorProto, helper, shape_inference

    src = bundle.path / "encoder.onnx"
    model = onnx.load(str(src))
    g = model.graph
    names = [i.name for i in g.input]
    if EMBEDDINGS not in names or MASK not in names:
        raise DfcOnnxError(
            f"{src} has inputs {names}; expected '{EMBEDDINGS}' and '{MASK}'.",
            "Re-export the bundle with 'hefsearch compile export'.",
        )
    if [o.name for o in g.output] != [OUTPUT]:
        raise DfcOnnxError(f"{src} has outputs {[o.name for o in g.output]}; expected ['{OUTPUT}'].",
                           "Re-export the bundle with 'hefsearch compile export'.")

    inferred = shape_inference.infer_shapes(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in
             list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    elem = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}

    consumers: dict[str, list] = {}
    for node in g.node:
        for t in node.input:
            consumers.setdefault(t, []).append(node)

    # Follow the mask from the graph input through shape-only ops to the first float 4-D tensor.
    chain, tensor = [], MASK
    while not (ranks.get(tensor) == 4 and elem.get(tensor) == TensorProto.FLOAT):
        users = consumers.get(tensor, [])
        if len(users) != 1 or users[0].op_type not in _MASK_PREP_OPS:
            raise DfcOnnxError(
                f"Cannot find the 4-D attention mask in {src}: '{tensor}' feeds "
                f"{[u.op_type for u in users]} before any 4-D float tensor.",
                "The body was not exported by hefsearch; re-export it with 'hefsearch compile export'.",
            )
        chain.append(users[0])
        tensor = users[0].output[0]
    dropped = {id(n) for n in chain}
    keep = [n for n in g.node if id(n) not in dropped]
    for node in keep:
        for i, t in enumerate(node.input):
            if t == tensor:
                node.input[i] = MASK
    keep = _live_nodes(keep, {OUTPUT})  # e.g. the Constants the removed Unsqueezes used
    del g.node[:]
    g.node.extend(keep)

    hidden = bundle.hidden
    new_inputs = [
        helper.make_tensor_value_info(EMBEDDINGS, TensorProto.FLOAT, ["batch", seq_len, hidden]),
        helper.make_tensor_value_info(MASK, TensorProto.FLOAT, ["batch", 1, 1, seq_len]),
    ]
    del g.input[:]
    g.input.extend(new_inputs)
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", seq_len, hidden])])
    produced = {t for n in chain for t in n.output}
    stale = [vi for vi in g.value_info if vi.name in produced]
    for vi in stale:
        g.value_info.remove(vi)
    model.doc_string = (f"hefsearch DFC-facing encoder body: mask input [N,1,1,{seq_len}] 0/1, "
                        f"additive mask value {bundle.mask_value}")
    onnx.checker.check_model(model)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return DfcOnnx(out, int(seq_len), hidden, bundle.mask_value)


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


def verify_dfc_onnx(bundle: Bundle, dfc: DfcOnnx, texts: list[str] | None = None) -> float:
    """Max |difference| between the variant and encoder.onnx on sample texts; raises over the limit."""
    from hefsearch.embed.backends.cpu import make_session

    e, mask = sample_inputs(bundle, dfc.seq_len, texts)
    ref = make_session(bundle.path / "encoder.onnx", 1).run([OUTPUT], {EMBEDDINGS: e, MASK: mask})[0]
    got = make_session(dfc.path, 1).run(
        [OUTPUT], {EMBEDDINGS: e, MASK: mask[:, None, None, :].astype(np.float32)})[0]
    diff = float(np.max(np.abs(ref - got)))
    if not diff <= PARITY_MAX_ABS:
        raise DfcOnnxError(
            f"The DFC-facing model {dfc.path} differs from encoder.onnx by up to {diff:.3g} "
            f"(limit {PARITY_MAX_ABS}).", "Please report this with the bundle's manifest.json.")
    return diff
