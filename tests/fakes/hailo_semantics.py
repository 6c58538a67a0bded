"""What a compiled network computes that its ONNX does not say: shared by the fake DFC
(``hailo_sdk_client``: emulation and the HEF it writes) and the fake HailoRT device
(``hailo_platform``), so the emulator and the "chip" agree. Tests only.

- :func:`mask_inside_softmax`: ``set_input_mask_to_softmax()``. The model zoo's
  all_minilm_l6_v2 script declares its second input with it, and its calibration record stores
  that input as a *multiplicative* 0/1 mask (hailo_model_zoo
  ``cfg/alls/generic/all_minilm_l6_v2.alls`` line 1, ``datasets/create_mteb_tfrecord.py``:
  ``multiplicative_mask``); the public Hailo-10H report (shared/reference/seeds/000_*.txt) feeds
  the raw 0/1 mask at the mask Mul with the same command. So the fake applies the input as a 0/1
  mask inside every softmax, whatever arithmetic the ONNX does on it: the input's own uses in the
  graph see zeros (a constant shift of the scores, which softmax ignores) and each softmax's
  output is multiplied by the mask and renormalised. A host that sends the additive bias
  (0 / -50) to such a network gets attention on the padding only, or none at all.
- :func:`basis_matrix`: the compiled network's channel basis. The same report found the HEF's
  output, and the DFC's SDK_NATIVE emulation, at a cosine of about 0.1 against ONNX "because the
  compiled network's channel basis differs (Hailo reorders channels internally)", while every
  basis-invariant measure held. The fake reorders channels ("permuted", the report's reading) or
  rotates them ("rotated": an orthogonal map, the general case basis-invariant metrics survive).
"""

from __future__ import annotations

import numpy as np

BASES = ("identity", "permuted", "rotated")


def basis_matrix(kind: str | None, dim: int, seed: int = 11) -> np.ndarray | None:
    """The [dim, dim] map the output channels go through (``h @ M``), or None for identity."""
    if kind in (None, "identity"):
        return None
    rng = np.random.default_rng(seed)
    if kind == "permuted":
        return np.eye(dim, dtype=np.float32)[:, rng.permutation(dim)]
    if kind == "rotated":
        q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
        return (q * np.sign(np.diag(r))).astype(np.float32)
    raise ValueError(f"unknown output basis {kind!r} (known: {', '.join(BASES)})")


def to_basis(hidden: np.ndarray, kind: str | None, seed: int = 11) -> np.ndarray:
    m = basis_matrix(kind, hidden.shape[-1], seed)
    return hidden if m is None else (hidden @ m).astype(np.float32)


def mask_inside_softmax(model_bytes: bytes, mask_input: str) -> bytes:
    """The ONNX model with ``mask_input`` applied as a multiplicative 0/1 mask inside every
    Softmax (see the module docstring). The input keeps its name and shape."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load_from_string(model_bytes)
    g = model.graph
    if mask_input not in [i.name for i in g.input]:
        raise ValueError(f"{mask_input} is not an input of the network")
    zero = f"{mask_input}__zeros"
    # the graph's own arithmetic on the mask sees zeros
    g.node.insert(0, helper.make_node("Mul", [mask_input, "__zero_scalar"], [zero], name="fake/mask_zeros"))
    g.initializer.append(helper.make_tensor("__zero_scalar", TensorProto.FLOAT, [], [0.0]))
    g.initializer.append(helper.make_tensor("__tiny", TensorProto.FLOAT, [], [1e-30]))
    g.initializer.append(helper.make_tensor("__last_axis", TensorProto.INT64, [1], [-1]))
    for node in list(g.node)[1:]:
        for i, t in enumerate(node.input):
            if t == mask_input:
                node.input[i] = zero
    nodes = list(g.node)
    out_nodes = []
    for node in nodes:
        out_nodes.append(node)
        if node.op_type != "Softmax":
            continue
        raw = node.output[0]
        node.output[0] = f"{raw}__unmasked"
        kept, total, safe = f"{raw}__kept", f"{raw}__sum", f"{raw}__safe"
        out_nodes += [
            helper.make_node("Mul", [node.output[0], mask_input], [kept], name=f"{node.name}/fake_mask_mul"),
            helper.make_node("ReduceSum", [kept, "__last_axis"], [total], keepdims=1,
                             name=f"{node.name}/fake_mask_sum"),
            helper.make_node("Add", [total, "__tiny"], [safe], name=f"{node.name}/fake_mask_eps"),
            helper.make_node("Div", [kept, safe], [raw], name=f"{node.name}/fake_mask_norm"),
        ]
    del g.node[:]
    g.node.extend(out_nodes)
    del g.value_info[:]
    return model.SerializeToString()
