"""A CPU-side copy of an encoder body with ONNX Runtime's fused attention, built in a child process.

    python -m hefsearch.embed.attention_fusion SRC DST --heads 12 --hidden 384

ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer``) turns each layer's
unfused Q/K/V MatMuls, Reshape/Transpose chain, scaled scores, mask add and Softmax into one
``Attention`` node (one packed QKV GEMM, no transposes), the residual Add + LayerNorm into
``SkipLayerNormalization`` (unless ``--no-skip-layer-norm``: slower on some processors,
:mod:`hefsearch.embed.cpu_plan`) and bias + GELU into ``BiasGelu``. Its attention pattern expects the
score scale as a ``Div``; the body scales with a ``Mul`` by 1/sqrt(head size), which the matcher
confuses with the mask's ``Mul``, so the copy first turns that ``Mul(c)`` into ``Div(1/c)``
(the same value to a rounding step). The mask stays the raw 0/1 mask [N,S] (not lengths), so
the copy accepts every mask the body does; the body's moderate additive value (the DFC's -50)
becomes the node's ``mask_filter_value``.

This module needs the ``onnx`` package (compile extra) and imports it and the optimizer (about
two seconds), so :mod:`hefsearch.embed.ort_session` runs it as a child process, never in the
process that encodes; without ``onnx`` the CPU backends run ONNX Runtime's own optimisation of
the body. The bundle's ``encoder.onnx`` is only read: the DFC compiles that file as it is.
Exit status 0: DST written with this many fused Attention nodes (printed); 3: nothing fused.
"""

from __future__ import annotations

import argparse
import sys

#: bumped when the rewrite changes, so cached sessions built by an older one are rebuilt
RECIPE = "attention-fusion-1"


def scale_mul_to_div(model) -> int:
    """``MatMul -> Mul(constant)`` (the attention scores' scale) becomes ``Div(1/constant)``;
    returns how many. Constants may be initializers or Constant nodes."""
    import numpy as np
    from onnx import numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    producer = {o: n for n in model.graph.node for o in n.output}
    done = 0
    for n in model.graph.node:
        if n.op_type != "Mul" or len(n.input) != 2:
            continue
        src, c = n.input
        if producer.get(src) is None or producer[src].op_type != "MatMul" or c not in consts:
            continue
        value = consts[c]
        if value.size != 1 or value.dtype != np.float32 or float(value.reshape(-1)[0]) == 0.0:
            continue
        inv = numpy_helper.from_array((1.0 / value.astype(np.float64)).astype(np.float32), f"{c}__reciprocal")
        model.graph.initializer.append(inv)
        n.op_type = "Div"
        n.input[1] = inv.name
        done += 1
    return done


def fuse(src: str, dst: str, heads: int, hidden: int, skip_layer_norm: bool = True) -> int:
    """Write the fused copy of ``src`` to ``dst``; returns the number of Attention nodes.
    ``skip_layer_norm=False``: the residual Add and LayerNorm stay two nodes."""
    import onnx
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions

    model = onnx.load(src)
    scale_mul_to_div(model)
    opts = FusionOptions("bert")
    opts.attention_mask_format = AttentionMaskFormat.AttentionMask  # the raw 0/1 mask, any layout
    opts.enable_skip_layer_norm = skip_layer_norm
    fused = optimizer.optimize_model(model, model_type="bert", num_heads=heads, hidden_size=hidden,
                                     opt_level=0, use_gpu=False, optimization_options=opts)
    n = sum(1 for node in fused.model.graph.node if node.op_type == "Attention")
    if n:
        fused.save_model_to_file(dst)
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--no-skip-layer-norm", action="store_true", help="keep the residual Add and LayerNorm apart")
    args = ap.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)  # the optimizer logs every pattern it does not find
    n = fuse(args.src, args.dst, args.heads, args.hidden, skip_layer_norm=not args.no_skip_layer_norm)
    print(n)
    return 0 if n else 3


if __name__ == "__main__":
    sys.exit(main())
