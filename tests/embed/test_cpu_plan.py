"""The processor family -> CPU run settings chooser (embed/cpu_plan.py), and the ``batches`` mode
it picks on AMD Zen 4/5 (embed/backends/onnx_body.py): a batch cut into pieces, each padded to
its own longest, gives the vectors of the whole batch and of padding to the window."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import cpu_plan
from hefsearch.embed.backends.onnx_body import piece_count, split_rows
from hefsearch.embed.encoder import Encoder
from hefsearch.embed.samples import VERIFY_TEXTS

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx512_vnni avx_vnni

processor\t: 1
vendor_id\t: SomethingElse
"""
INTEL_AVX2 = """vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Core(TM) i7-8700
flags\t\t: fpu sse sse2 avx fma avx2
"""
# a Raspberry Pi 5 (Cortex-A76) as its kernel reports it
PI5 = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU part\t: 0xd0b
"""
PI4 = "Features\t: fp asimd evtstrm crc32 cpuid\nCPU part\t: 0xd08\n"


def test_amd_zen4_runs_pieces_of_batches_with_the_vnni_kernel():
    cpu = cpu_plan.parse_cpuinfo(ZEN4, "x86_64")
    assert (cpu.vendor, cpu.family, cpu.model_name) == ("AuthenticAMD", 25, "AMD EPYC 9R14")
    plan = cpu_plan.choose(cpu, cores=2)
    assert plan.parallel == cpu_plan.BATCHES and plan.workers == 2 and plan.intra_op_threads == 1
    assert plan.int8_kernel.startswith("AVX512-VNNI") and plan.unfused == ("SkipLayerNormFusion",)
    assert "Zen 4/5" in plan.line() and "pieces, 2 at once" in plan.line()


def test_other_families_keep_onnx_runtimes_own_threads():
    intel = cpu_plan.choose(cpu_plan.parse_cpuinfo(INTEL_AVX2, "x86_64"), cores=4)
    assert (intel.family, intel.parallel, intel.intra_op_threads, intel.workers) == ("x86-64 AVX2", "operators", 4, 1)
    assert intel.int8_kernel == "AVX2" and intel.unfused == ()
    pi5 = cpu_plan.choose(cpu_plan.parse_cpuinfo(PI5, "aarch64"), cores=4)
    assert (pi5.family, pi5.parallel, pi5.int8_kernel) == ("arm64 with dot product", "operators",
                                                           "NEON dot product (udot)")
    pi4 = cpu_plan.choose(cpu_plan.parse_cpuinfo(PI4, "aarch64"), cores=4)
    assert pi4.family == "arm64" and pi4.int8_kernel == "NEON (no dot product)"
    bare = cpu_plan.choose(cpu_plan.CpuFacts(machine="x86_64"), cores=2)  # no /proc/cpuinfo
    assert bare.parallel == "operators" and bare.int8_kernel == "SSE"


def test_threads_and_the_override_decide_over_the_family():
    zen = cpu_plan.parse_cpuinfo(ZEN4, "x86_64")
    assert cpu_plan.choose(zen, cores=8, threads=3).workers == 3
    one = cpu_plan.choose(zen, cores=2, threads=1)
    assert (one.parallel, one.workers, one.intra_op_threads) == ("operators", 1, 1)
    forced = cpu_plan.choose(zen, cores=2, override="Operators")
    assert forced.parallel == "operators" and "HEFSEARCH_ORT_PARALLEL" in forced.why
    pi5 = cpu_plan.parse_cpuinfo(PI5, "aarch64")
    assert cpu_plan.choose(pi5, cores=4, override="batches").workers == 4
    assert cpu_plan.choose(pi5, cores=4, override="nonsense").parallel == "operators"


def test_current_plan_reads_the_settings(monkeypatch):
    monkeypatch.setenv("HEFSEARCH_ORT_PARALLEL", "batches")
    monkeypatch.setenv("HEFSEARCH_THREADS", "3")
    plan = cpu_plan.current_plan()
    assert plan.parallel == "batches" and plan.threads == 3
    assert cpu_plan.current_plan(threads=1).parallel == "operators"


def test_rows_are_cut_into_neighbouring_pieces_of_similar_tokens():
    lengths = [2, 3, 3, 4, 10, 12]
    mask = np.zeros((6, 12), dtype=np.int64)
    for i, k in enumerate(lengths):
        mask[i, :k] = 1
    pieces = split_rows(mask, 2)
    assert [(a, b) for a, b, _ in pieces] == [(0, 5), (5, 6)]  # 22 tokens, then 12
    assert [w for _, _, w in pieces] == [10, 12]  # each as wide as its own longest row
    assert split_rows(mask, 1) == [(0, 6, 12)]
    assert split_rows(mask[:1], 4) == [(0, 1, 2)]  # never more pieces than rows
    assert [w for *_, w in split_rows(np.zeros((3, 5), dtype=np.int64), 2)] == [1, 1]  # all padding


def test_large_batches_get_two_pieces_per_worker_small_ones_one():
    assert piece_count((32, 64), 2) == 4  # a thread done early takes the next piece
    assert piece_count((32, 12), 2) == 2  # pieces of 8 x 12 tokens would cost more per token
    assert piece_count((32, 256), 1) == 1


@pytest.mark.parametrize("backend", ["cpu", "cpu-int8"])
def test_pieces_give_the_vectors_of_the_whole_batch_padded_to_the_window(backend, tiny_bert_bundle,
                                                                          monkeypatch, tmp_path):
    bundle = tiny_bert_bundle
    if backend == "cpu-int8":
        pytest.importorskip("onnx")
        import shutil

        from hefsearch.compile.cpu_int8 import build_cpu_int8

        bundle = tmp_path / "b"
        shutil.copytree(tiny_bert_bundle, bundle)
        build_cpu_int8(bundle)
    texts = list(VERIFY_TEXTS) + ["short", "a somewhat longer text " * 20]
    monkeypatch.setenv("HEFSEARCH_ORT_PARALLEL", "operators")
    with Encoder.open(bundle, backend=backend, threads=2, bulk=True) as whole:
        assert whole.backend.plan.workers == 1
        whole._pad_length = lambda longest: whole.max_tokens  # every batch padded to the window
        ref = whole.encode_passages(texts)
    monkeypatch.setenv("HEFSEARCH_ORT_PARALLEL", "batches")
    with Encoder.open(bundle, backend=backend, threads=2, bulk=True) as pieces:
        assert pieces.backend.plan.workers == 2
        widths = []
        run = pieces.backend._session.run
        pieces.backend._session.run = lambda out, feed, opts: widths.append(feed["attention_mask"].shape) or \
            run(out, feed, opts)
        got = pieces.encode_passages(texts)
    assert len(widths) > 2 and min(s for _, s in widths) < pieces.max_tokens  # short pieces stay short
    cos = (ref * got).sum(1)
    # FP32: the same arithmetic per row; int8 quantises each piece's activations by its own range
    assert cos.min() > (0.99999 if backend == "cpu" else 0.98)
    if backend == "cpu":
        np.testing.assert_allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize("cpuinfo, skip_nodes", [(ZEN4, 0), (INTEL_AVX2, 1)])
def test_zen_sessions_keep_the_residual_add_and_layernorm_apart(cpuinfo, skip_nodes, tiny_bert_bundle, monkeypatch):
    pytest.importorskip("onnx")
    import onnx

    from hefsearch.embed import ort_session

    monkeypatch.delenv(ort_session.ENV_FUSE, raising=False)  # conftest turns the fusion off elsewhere
    monkeypatch.setattr(cpu_plan, "_this_cpu", lambda: cpu_plan.parse_cpuinfo(cpuinfo, "x86_64"))
    with Encoder.open(tiny_bert_bundle, threads=1, bulk=True) as enc:
        assert enc.backend.session_kind == "fused"
        vecs = enc.encode_passages(list(VERIFY_TEXTS))
    (entry,) = [p for p in ort_session.ort_cache_dir().glob("*.fused") if p.is_dir()]
    ops = [n.op_type for n in onnx.load(str(entry / "model.onnx"), load_external_data=False).graph.node]
    assert ops.count("Attention") == 2  # attention is still fused
    assert ("SkipLayerNormalization" in ops) == bool(skip_nodes)
    monkeypatch.setenv(ort_session.ENV_CACHE, "0")
    with Encoder.open(tiny_bert_bundle, threads=1) as plain:  # the body as ONNX Runtime alone optimises it
        np.testing.assert_allclose(plain.encode_passages(list(VERIFY_TEXTS)), vecs, atol=1e-5)


def test_a_stop_ends_every_piece_of_a_batch(tiny_bert_bundle, monkeypatch):
    monkeypatch.setenv("HEFSEARCH_ORT_PARALLEL", "batches")
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=2, bulk=True) as enc:
        texts = ["the train leaves at noon", "an invoice is due", "a", "the hiking checklist " * 9]
        e, mask, _ = enc._prepare(texts, [0, 1, 2, 3], "")
        enc.backend.stop_running()  # asked before the run began: each piece ends at its first operator
        with pytest.raises(Exception, match="terminate"):
            enc.backend.run(e, mask)
        assert enc.backend._running is None
        assert enc.encode_passages(texts).shape == (4, enc.dim)  # the next encode runs again
