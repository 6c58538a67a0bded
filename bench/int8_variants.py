"""Which int8 recipe for ``compile cpu-int8``: quality per speed of ONNX Runtime's variants.

    python bench/int8_variants.py [--bundle BUNDLE] [--n 1200] [--slices 10]

Every variant quantises the same FP32 body of the bundle (default: all-MiniLM-L6-v2 exported to
a temp folder) with ``onnxruntime.quantization``; each is run through hefsearch's own host
pipeline on the same mixed-length texts, slice by slice beside the FP32 body, and reported as
the median speed ratio against FP32 and the cosine of its vectors to FP32's (mean and min).

Variants: dynamic quantisation with int8 weights per output channel, with each layer's FFN
output projection kept in FP32 (what ``compile cpu-int8`` builds) and without (``--all-int8``),
the same per tensor, the same with uint8 weights, the same with the last
layer kept in FP32, and static QDQ (activation ranges calibrated on other texts; min/max and
percentile). Needs the compile extra (the onnx package).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from hefsearch.bench.harness import export_temp_bundle, paired_ratios
from hefsearch.bench.encode import mixed_texts


def build_variants(body: Path, bundle, folder: Path) -> dict[str, Path]:
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from hefsearch.compile.cpu_int8 import ffn_down_projections, weight_matmuls
    from hefsearch.embed.host import HostPipeline

    pre = folder / "pre.onnx"
    quant_pre_process(str(body), str(pre), skip_symbolic_shape=False)
    pre_model = onnx.load(str(pre))  # read once for both node lists
    weights = weight_matmuls(pre_model)
    ffn_out = ffn_down_projections(pre_model)
    del pre_model
    last = max(int(n.split("layer.")[1].split("/")[0]) for n in weights if "layer." in n)
    out: dict[str, Path] = {}

    def dynamic(name, **kw):
        out[name] = folder / f"{name}.onnx"
        quantize_dynamic(str(pre), str(out[name]), op_types_to_quantize=["MatMul"], **kw)

    dynamic("dynamic per-channel, FFN out FP32 (default)", weight_type=QuantType.QInt8, per_channel=True,
            nodes_to_quantize=[n for n in weights if n not in ffn_out])
    dynamic("dynamic int8 per-channel (--all-int8)", weight_type=QuantType.QInt8, per_channel=True,
            nodes_to_quantize=weights)
    dynamic("dynamic int8 per-tensor", weight_type=QuantType.QInt8, per_channel=False, nodes_to_quantize=weights)
    dynamic("dynamic uint8 per-channel", weight_type=QuantType.QUInt8, per_channel=True, nodes_to_quantize=weights)
    dynamic("dynamic per-channel, last layer FP32", weight_type=QuantType.QInt8, per_channel=True,
            nodes_to_quantize=[n for n in weights if f"layer.{last}/" not in n])

    host = HostPipeline(bundle)
    calib_texts = mixed_texts(160, seed=7)  # other texts than the measured ones

    class Reader(CalibrationDataReader):
        def __init__(self):
            feeds = []
            for i in range(0, len(calib_texts), 16):
                e, m = host.embed(host.tokenize(calib_texts[i : i + 16]).ids)
                feeds.append({"embeddings": e, "attention_mask": m.astype(np.int64)})
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    for method, label in [(CalibrationMethod.MinMax, "static QDQ min/max"),
                          (CalibrationMethod.Percentile, "static QDQ percentile")]:
        out[label] = folder / f"static-{method.name}.onnx"
        quantize_static(str(pre), str(out[label]), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8,
                        op_types_to_quantize=["MatMul"], nodes_to_quantize=weights, calibrate_method=method)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", help="an exported bundle (default: all-MiniLM-L6-v2 exported to a temp dir)")
    ap.add_argument("--n", type=int, default=1200)
    ap.add_argument("--slices", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    from hefsearch.embed import Encoder
    from hefsearch.embed.backends.cpu import make_session

    bundle_path = Path(args.bundle) if args.bundle else export_temp_bundle()
    enc = Encoder.open(bundle_path, backend="cpu", threads=args.threads)
    with tempfile.TemporaryDirectory(prefix="hefsearch-int8-variants-") as tmp:
        paths = build_variants(bundle_path / enc.bundle.encoder_entries("onnx")[0].file, enc.bundle, Path(tmp))
        sessions = {"FP32": enc.backend._session,
                    **{name: make_session(str(p), args.threads) for name, p in paths.items()}}
        texts = mixed_texts(args.n)
        times: dict[str, list[float]] = {k: [] for k in sessions}
        vecs: dict[str, list[np.ndarray]] = {k: [] for k in sessions}
        for name, sess in sessions.items():  # warm-up
            enc.backend._session = sess
            enc.encode_passages(texts[:32])
        size = -(-len(texts) // args.slices)
        for i in range(0, len(texts), size):
            for name, sess in sessions.items():
                enc.backend._session = sess  # same host pipeline, only the body differs
                t = time.perf_counter()
                vecs[name].append(enc.encode_passages(texts[i : i + size]))
                times[name].append(time.perf_counter() - t)
    ref = np.concatenate(vecs["FP32"])
    print(f"{len(texts)} texts, {args.slices} slices; speed = median of per-slice FP32 time / variant time")
    for name in sessions:
        cos = (np.concatenate(vecs[name]) * ref).sum(1)
        ratio = statistics.median(paired_ratios(times["FP32"], times[name]))
        print(f"{name:46s} {ratio:5.2f}x FP32   cosine to FP32: mean {cos.mean():.4f}, min {cos.min():.4f}")


if __name__ == "__main__":
    main()
