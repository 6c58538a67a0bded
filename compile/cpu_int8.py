"""``hefsearch compile cpu-int8``: the bundle's FP32 body with int8 weights, for CPUs without an NPU.

ONNX Runtime's own dynamic quantisation (``onnxruntime.quantization.quantize_dynamic``): the
weights of the MatMuls become int8, one scale per output channel; activations are quantised
to uint8 per tensor at run time from their own min/max, so no calibration set is needed and
no range can be wrong for a user's text. LayerNorm, softmax, GELU, the residual adds and, by
default, each layer's FFN output projection stay FP32. Measured (``bench/int8_variants.py``,
``bench/encode.py``, ``hefsearch bench quality``): per-tensor weights cost far more quality
(cosine 0.93), static QDQ with calibrated activation ranges was faster but worse (0.92-0.93),
keeping the last layer in FP32 bought nothing measurable; keeping the FFN output projections
in FP32 (whose input, the GELU output, has the most outliers) is what brings ranking within
reach of FP32 (multilingual-e5-small library MRR vs FP32 0.958 -> 0.974) at about 1/1.3 of
``--all-int8``'s speed (2.38x against 3.12x sentence-transformers, measured under load; 2.61x
lightly loaded: docs/performance.md).

The result is ``encoder.cpu-int8.onnx``, listed in the manifest with kind ``cpu-int8`` and the
check against FP32 on the built-in sample texts. Building it needs the compile extra (the
``onnx`` package, for the graph pre-processing); running it needs only onnxruntime.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hefsearch.base.atomic_write import write_bytes_atomic
from hefsearch.embed.bundle import Bundle, EncoderEntry
from hefsearch.embed import space_names
from hefsearch.base.errors import ExportError

KIND = space_names.CPU_INT8
FILE = "encoder.cpu-int8.onnx"
#: what the manifest and ``describe()`` say about the arithmetic
RECIPE = {
    "method": "onnxruntime dynamic quantisation",
    "weights": "int8, per output channel (MatMul)",
    "activations": "uint8 per tensor, ranges measured at run time",
    "fp32": "LayerNorm, softmax, GELU, residual adds",
}


@dataclass
class Int8Report:
    file: str
    weights: int
    check: dict
    seconds: float
    onnxruntime: str
    notices: list[str] = field(default_factory=list)


def build_cpu_int8(bundle: Bundle | str | Path, *, keep_ffn_output_fp32: bool = True,
                   progress: Callable[[str], None] | None = None) -> Int8Report:
    """Write ``encoder.cpu-int8.onnx`` into the bundle and list it in the manifest.

    ``keep_ffn_output_fp32`` (the default): leave each layer's FFN down-projection
    (intermediate -> hidden) in FP32. Its input, the GELU output, has the widest, most
    outlier-prone range of the layer, so one uint8 scale per tensor costs most there. Measured
    in one run each: all-MiniLM-L6-v2 cosine to FP32 0.9924 -> 0.9970 (min 0.978 -> 0.991) for
    3.1x -> 2.4x sentence-transformers; multilingual-e5-small library MRR against FP32 0.958 ->
    0.974 (190 chunks, 150 queries)."""
    try:
        import onnx
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError:
        raise ExportError("Building the int8 CPU encoder needs the onnx package.",
                          "pip install 'hefsearch[compile]'") from None
    from .self_check import self_check

    t0 = time.perf_counter()
    say = progress or (lambda m: None)
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    entries = bundle.encoder_entries("onnx")
    if not entries:
        raise ExportError(f"Bundle {bundle.path} has no FP32 encoder body to quantise.", "Re-export the bundle.")
    src = bundle.path / entries[0].file
    say(f"quantising {src.name}: int8 weights per channel, dynamic uint8 activations")
    with tempfile.TemporaryDirectory(prefix="hefsearch-int8-") as tmp:
        pre, out = Path(tmp) / "pre.onnx", Path(tmp) / "int8.onnx"
        # shape inference and graph folding first, as ONNX Runtime's quantisation guide asks
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=False)
        pre_model = onnx.load(str(pre))  # read once for both node lists
        weights = weight_matmuls(pre_model)
        if keep_ffn_output_fp32:
            ffn_out = ffn_down_projections(pre_model)
            weights = [n for n in weights if n not in ffn_out]
        del pre_model
        quantize_dynamic(str(pre), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"], nodes_to_quantize=weights)
        write_bytes_atomic(bundle.path / FILE, out.read_bytes())
    say("checking against FP32 on the built-in sample texts")
    check = self_check(bundle, FILE)
    notices = []
    if check["cosine_min"] < 0.95:
        notices.append(f"The int8 encoder's lowest cosine to FP32 on the sample texts is {check['cosine_min']:.3f}; "
                       "run 'hefsearch bench quality' on your library before relying on it.")
    bundle.add_file(FILE)
    bundle.upsert_encoder(EncoderEntry(
        kind=KIND, file=FILE, seq_len=None, hw_arch=None,
        extra={**RECIPE, "matmuls": len(weights), "onnxruntime": onnxruntime.__version__, "check": check,
               **({"fp32": RECIPE["fp32"] + ", FFN output projections"} if keep_ffn_output_fp32 else {})},
    ))
    bundle.save_manifest()
    return Int8Report(file=FILE, weights=len(weights), check=check, seconds=time.perf_counter() - t0,
                      onnxruntime=onnxruntime.__version__, notices=notices)


def _load(model):
    """An ONNX model from a path, or the loaded model itself."""
    import onnx

    return model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))


def weight_matmuls(model) -> list[str]:
    """MatMul nodes with a constant operand: the ones whose weights become int8 (the attention
    products of two activations stay FP32). ``model``: a path or a loaded model."""
    model = _load(model)
    constants = {t.name for t in model.graph.initializer}
    constants |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in model.graph.node
            if n.op_type == "MatMul" and any(i in constants for i in n.input)]


def ffn_down_projections(model) -> set[str]:
    """MatMuls whose constant weight narrows (rows > columns): each layer's FFN output
    projection, found by shape so it does not depend on how the exporter named the nodes.
    ``model``: a path or a loaded model."""
    model = _load(model)
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    return {n.name for n in model.graph.node if n.op_type == "MatMul"
            for i in n.input if len(shapes.get(i, ())) == 2 and shapes[i][0] > shapes[i][1]}

