"""Data integrity: nothing corrupt enters or stays in a space; bundle files are checked on
the write path; a damaged manifest is a message; a corrupt segment does not warn forever;
library and bundle files follow the umask."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.embed import bundle as bundle_mod
from hefsearch.base.atomic_write import write_atomic, write_bytes_atomic, write_json_atomic
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.encoder import Encoder
from hefsearch.base.errors import BundleError
from hefsearch.index.errors import SpaceError
from hefsearch.index.library import Library
from hefsearch.index.spaces import INDEX_FILE, make_index
from hefsearch.index.sync import SyncOptions, sync
from hefsearch.diagnose.doctor import FAIL, OK, WARN, check_sqlite, run_doctor
from hefsearch.cli.main import main
from tests.support.library_helpers import assert_consistent, small_indexed_library, write_corpus


def _copy(bundle: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(bundle, tmp_path / "bundle"))


def _checks(report):
    return {c.name: c for c in report.checks}


def _nan_into_onnx_weights(onnx_file: Path) -> None:
    """Overwrite the largest float weight of an ONNX body with NaN, in place, same size:
    ONNX Runtime still loads it, and every vector it makes is NaN."""
    import onnx

    model = onnx.load(str(onnx_file))
    raw = max((t.raw_data for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT),
              key=len)
    data = bytearray(onnx_file.read_bytes())
    at = data.find(raw)
    assert at > 0 and len(raw) >= 64
    data[at : at + 64] = np.full(16, np.nan, np.float32).tobytes()
    onnx_file.write_bytes(bytes(data))


@pytest.fixture
def library_with_docs(tmp_path, tiny_bert_bundle):
    return small_indexed_library(tmp_path, tiny_bert_bundle)


# -- item 2: nothing corrupt enters a space -----------------------------------------------------------
def test_a_batch_with_nan_commits_nothing_of_it_and_names_the_space(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=8)
    calls: list[list[str]] = []
    with Library.open(tmp_path / "lib") as lib, Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        real = enc.encode_passages

        def third_batch_has_a_nan(texts):
            texts = list(texts)
            calls.append(texts)
            out = real(texts)
            if len(calls) == 3:
                out[len(out) // 2, 0] = np.nan
            return out

        enc.encode_passages = third_batch_has_a_nan
        with pytest.raises(SpaceError) as err:
            sync(lib, [docs], [enc], SyncOptions(batch_chunks=4))
        assert "'cpu-fp32'" in err.value.message and "NaN" in err.value.message
        assert "Nothing of this batch was stored" in err.value.message
        assert "hefsearch doctor --verify" in err.value.hint and "re-export" in err.value.hint
        stored = {r[0] for r in lib.query("SELECT text FROM chunks")}
        assert stored == {t for batch in calls[:2] for t in batch}  # the earlier batches are kept
        assert not stored & set(calls[2])
        assert len(lib.space("cpu-fp32").raw.segment_names()) == 2  # no segment of the bad batch
        assert_consistent(lib)
        # the run can be repeated once the encoder is fine again
        enc.encode_passages = real
        sync(lib, [docs], [enc], SyncOptions(batch_chunks=4))
        assert lib.document_count() == 8
        assert_consistent(lib)


def test_space_add_refuses_infinity(library_with_docs):
    with Library.open(library_with_docs) as lib:
        sp = lib.space("cpu-fp32")
        before = sp.raw.segment_names()
        ids = [int(i) for i in lib.chunk_ids()[:3]]
        vecs = np.ones((3, sp.info.dim), np.float32)
        vecs[1, 2] = np.inf
        with pytest.raises(SpaceError, match="not numbers"):
            sp.add(ids, vecs)
        assert sp.raw.segment_names() == before


def test_a_damaged_encoder_file_is_refused_when_indexing(tmp_path, tiny_bert_bundle, monkeypatch):
    bundle = _copy(tiny_bert_bundle, tmp_path)
    _nan_into_onnx_weights(bundle / "encoder.onnx")
    Bundle.open(bundle)  # same size: opening does not see it
    with Encoder.open(bundle, backend="cpu", threads=1) as enc:  # a query encoder is not checked...
        assert np.isnan(enc.encode_passages(["a damaged model embeds NaN"])).all()  # ...and shows why
    expected = Bundle.open(bundle).file_sha256("encoder.onnx")
    with pytest.raises(BundleError) as err:
        Encoder.open(bundle, backend="cpu", threads=1, bulk=True)
    msg = err.value.message
    assert str(bundle / "encoder.onnx") in msg and expected in msg
    assert bundle_mod.sha256_file(bundle / "encoder.onnx") in msg
    assert "Copy the whole bundle folder again" in err.value.hint and "re-export" in err.value.hint
    # the index command stops with the message, and the library keeps nothing of it
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=2)
    r = CliRunner().invoke(main, ["index", str(docs), "--bundle", str(bundle), "--library",
                                  str(tmp_path / "lib"), "--backend", "cpu"])
    assert r.exit_code == 2 and "is damaged or was replaced" in r.output and "Traceback" not in r.output


def test_the_sha256_check_is_cached_by_file_identity(tmp_path, tiny_bert_bundle, monkeypatch):
    bundle = _copy(tiny_bert_bundle, tmp_path)
    hashed: list[str] = []
    real = bundle_mod.sha256_file
    monkeypatch.setattr(bundle_mod, "sha256_file", lambda p, *a: hashed.append(Path(p).name) or real(p, *a))
    Encoder.open(bundle, backend="cpu", threads=1, bulk=True).close()
    assert {"encoder.onnx", "word.npy", "tokenizer.json"} <= set(hashed)
    hashed.clear()
    Encoder.open(bundle, backend="cpu", threads=1, bulk=True).close()
    assert hashed == []  # a later run costs a stat per file
    assert (Path(os.environ["HEFSEARCH_HOME"]) / "cache" / bundle_mod.CACHE_FILE).is_file()
    # rewritten in place with its old mtime: still hashed again (ctime changed)
    f = bundle / "embeddings" / "word.npy"
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[-4:] = np.float32(np.nan).tobytes()
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(BundleError, match="word.npy is damaged"):
        Encoder.open(bundle, backend="cpu", threads=1, bulk=True)
    assert hashed == ["word.npy"]


def test_a_read_only_bundle_and_a_damaged_cache_still_work(tmp_path, tiny_bert_bundle):
    bundle = _copy(tiny_bert_bundle, tmp_path)
    cache = Path(os.environ["HEFSEARCH_HOME"]) / "cache" / bundle_mod.CACHE_FILE
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    before = sorted(p.name for p in bundle.rglob("*"))
    modes = {p: p.stat().st_mode for p in [bundle, *bundle.rglob("*")]}
    for p in modes:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        Encoder.open(bundle, backend="cpu", threads=1, bulk=True).close()
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert sorted(p.name for p in bundle.rglob("*")) == before  # nothing written into the bundle
    assert isinstance(json.loads(cache.read_text()), dict)


def _tamper_faiss(space_folder: Path, factory: str = "Flat") -> None:
    """Same ids, other vectors: the file opens fine but does not hold the raw vectors."""
    import faiss

    old = faiss.read_index(str(space_folder / INDEX_FILE))
    ids = faiss.vector_to_array(old.id_map).astype(np.int64)
    fake = make_index(factory, old.d)
    vecs = np.random.default_rng(7).standard_normal((len(ids), old.d)).astype(np.float32)
    fake.add_with_ids(vecs, ids)
    faiss.write_index(fake, str(space_folder / INDEX_FILE))


@pytest.mark.parametrize("factory", ["Flat", "HNSW32"])
def test_a_faiss_index_that_differs_from_the_raw_vectors_is_rebuilt(library_with_docs, factory, no_hailo):
    with Library.open(library_with_docs) as lib:
        if factory != "Flat":
            lib.set_settings(index_factory=factory)
            with lib.write_lock():
                lib.space("cpu-fp32").maintain(hnsw_threshold=10**9, factory_override=factory)
        folder = lib.space("cpu-fp32").folder
    _tamper_faiss(folder, factory)
    lib = Library.open(library_with_docs)
    try:
        report = lib.last_reconcile["cpu-fp32"]
        assert report["rebuilt"] and "sampled vectors differ" in report["index_mismatch"]
        sp = lib.space("cpu-fp32")
        ids = np.array(sorted(sp._members), np.int64)
        np.testing.assert_allclose(sp.index.reconstruct_batch(ids), sp.raw.get(ids), atol=1e-6)
        assert sp.index_mismatch(sample=10_000) is None
    finally:
        lib.close()
    import faiss  # the rebuilt index was saved: the next open finds nothing to do

    saved = faiss.read_index(str(folder / INDEX_FILE))
    assert saved.ntotal == len(ids)
    # doctor: the FAISS index is compared with the raw vectors and the rebuild reported
    _tamper_faiss(folder, factory)
    c = _checks(run_doctor(None, library_with_docs))
    assert c["space cpu-fp32"].status == WARN
    assert "did not match the raw vectors" in c["space cpu-fp32"].detail
    assert "rebuilt" in c["space cpu-fp32"].detail
    c = _checks(run_doctor(None, library_with_docs))
    assert c["space cpu-fp32"].status == OK and c["library"].status == OK


def test_an_index_that_cannot_give_back_vectors_must_find_them(library_with_docs):
    """A lossy index (here IVF over PQ-like storage cannot reconstruct exactly): sampled raw
    vectors must find themselves."""
    import faiss

    with Library.open(library_with_docs) as lib:
        sp = lib.space("cpu-fp32")
        ids = np.array(sorted(sp._members), np.int64)
        raw = sp.raw.get(ids)
        quant = faiss.IndexFlatIP(sp.info.dim)
        ivf = faiss.IndexIVFFlat(quant, sp.info.dim, 1, faiss.METRIC_INNER_PRODUCT)
        ivf.train(raw)
        good = faiss.IndexIDMap2(ivf)
        good.add_with_ids(raw, ids)
        sp.index = good
        assert not sp._stores_exact_vectors()
        assert sp.index_mismatch() is None
        quant = faiss.IndexFlatIP(sp.info.dim)
        ivf = faiss.IndexIVFFlat(quant, sp.info.dim, 1, faiss.METRIC_INNER_PRODUCT)
        ivf.train(raw)
        bad = faiss.IndexIDMap2(ivf)
        bad.add_with_ids(-raw, ids)  # every vector points the other way
        sp.index = bad
        assert "find themselves" in sp.index_mismatch()
        # one chunk text repeated more often than a search returns: a twin counts as found
        with lib.write_lock(reconcile=False):
            sp.raw.write(ids, np.repeat(raw[:1], len(ids), axis=0))
        quant = faiss.IndexFlatIP(sp.info.dim)
        ivf = faiss.IndexIVFFlat(quant, sp.info.dim, 1, faiss.METRIC_INNER_PRODUCT)
        ivf.train(raw)
        twins = faiss.IndexIDMap2(ivf)
        twins.add_with_ids(np.repeat(raw[:1], len(ids), axis=0), ids)
        sp.index = twins
        _, found = twins.search(raw[:1].repeat(len(ids), axis=0), 10)
        assert (found == ids[:, None]).any(axis=1).mean() < 0.5  # by id, most would be "lost"
        assert sp.index_mismatch(sample=len(ids)) is None


def test_doctor_runs_sqlite_quick_check(library_with_docs, no_hailo):
    c = _checks(run_doctor(None, library_with_docs))
    assert c["library.db"].status == OK and "quick_check: ok" in c["library.db"].detail

    class Damaged:
        path = library_with_docs

        def query(self, sql):
            assert sql == "PRAGMA quick_check"
            return [("row 3 missing from index idx_chunks_doc",), ("wrong # of entries in index x",)]

    check = check_sqlite(Damaged())
    assert check.status == FAIL and "row 3 missing from index" in check.detail
    assert "backup" in check.fix


def test_doctor_finds_stored_vectors_that_are_not_numbers(library_with_docs, no_hailo):
    with Library.open(library_with_docs) as lib:
        sp = lib.space("cpu-fp32")
        ids = np.array(sorted(sp._members)[:2], np.int64)
        vecs = sp.raw.get(ids)
        vecs[0, 0] = np.nan
        with lib.write_lock():
            sp.raw.write(ids, vecs)  # as written by a hefsearch without the check
    c = _checks(run_doctor(None, library_with_docs))
    space = c["space cpu-fp32"]
    assert space.status == FAIL and "1 stored vector(s) are not finite" in space.detail
    assert str(Path(library_with_docs) / "spaces" / "cpu-fp32") in space.fix and "hefsearch index" in space.fix


# -- item 6: a damaged manifest is a message ------------------------------------------------------------
WRONG_VALUES = [None, True, -1, 0, 1.5, "x", [], {}, [1], {"a": 1}]


def _manifest_variants(m: dict):
    """(label, manifest) with one value replaced by a wrong type, or one key deleted, at every
    level hefsearch reads."""
    def paths(obj, prefix=()):
        if isinstance(obj, dict):
            for k, v in obj.items():
                yield prefix + (k,)
                if k not in ("inputs", "outputs", "extra", "calibration"):
                    yield from paths(v, prefix + (k,))
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                yield prefix + (i,)
                yield from paths(v, prefix + (i,))

    def edited(path, value, delete=False):
        m2 = json.loads(json.dumps(m))
        obj = m2
        for k in path[:-1]:
            obj = obj[k]
        if delete:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
        return m2

    for path in paths(m):
        if isinstance(path[-1], str):
            yield f"del {path}", edited(path, None, delete=True)
        for v in WRONG_VALUES:
            yield f"{path} = {v!r}", edited(path, v)


def test_a_crafted_or_truncated_manifest_gives_a_bundle_error(tmp_path, tiny_bert_bundle):
    bundle = _copy(tiny_bert_bundle, tmp_path)
    mpath = bundle / "manifest.json"
    text = mpath.read_text()
    m = json.loads(text)
    cases = [(f"truncated at {n}", text[:n]) for n in (0, 1, 10, len(text) // 3, len(text) // 2, len(text) - 2)]
    cases += [(label, json.dumps(v)) for label, v in _manifest_variants(m)]
    cases += [("a list", "[1, 2]"), ("not UTF-8", b"\xff\xfe{".decode("latin-1")), ("deep", "[" * 100_000)]
    assert len(cases) > 500
    opened = 0
    for label, content in cases:
        mpath.write_text(content, encoding="latin-1" if label == "not UTF-8" else "utf-8")
        try:
            b = Bundle.open(bundle)
        except BundleError as e:
            assert str(mpath) in e.message or str(bundle) in e.message, label
            assert e.hint, label
            continue
        except Exception as e:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"{label}: {type(e).__name__}: {e}")
        opened += 1  # a harmless edit (e.g. a string where any string will do): it must still work
        b.model_hash, b.hidden, b.seq_len, b.pooling, b.normalize, b.position_offset
        b.prefixes, b.mask_value, b.encoders, [b.file_sha256(r) for r in b.manifest["files"]]
    assert opened < len(cases) // 2  # most edits are wrong; the others must keep working
    for path, value in [(("model", "hidden"), "32"), (("seq_len",), None), (("files",), []),
                        (("encoders", 0, "file"), 1), (("pooling",), "sum"), (("normalize",), "yes"),
                        (("model", "heads"), 0), (("files", "encoder.onnx", "bytes"), "12")]:
        m2 = json.loads(text)
        obj = m2
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
        mpath.write_text(json.dumps(m2))
        with pytest.raises(BundleError, match=r"damaged or was not written by hefsearch: \S*" + str(path[-1])):
            Bundle.open(bundle)


@pytest.mark.parametrize("evil", ["../../etc/passwd", "/etc/passwd", "embeddings/../../x.npy", "C:\\x.onnx"])
def test_manifest_file_names_stay_inside_the_bundle(tmp_path, tiny_bert_bundle, evil):
    bundle = _copy(tiny_bert_bundle, tmp_path)
    mpath = bundle / "manifest.json"
    original = json.loads(mpath.read_text())
    for where in ("files", "encoders"):
        m = json.loads(json.dumps(original))
        if where == "files":
            m["files"][evil] = {"bytes": 1, "sha256": "0" * 64}
        else:
            m["encoders"][0]["file"] = evil
        mpath.write_text(json.dumps(m))
        with pytest.raises(BundleError, match="not a file inside the bundle folder") as err:
            Bundle.open(bundle)
        assert str(mpath) in err.value.message and "re-export" in err.value.hint


def test_cli_with_a_damaged_manifest_exits_2_without_a_traceback(tmp_path, tiny_bert_bundle, no_hailo):
    bundle = _copy(tiny_bert_bundle, tmp_path)
    m = json.loads((bundle / "manifest.json").read_text())
    m["model"]["hidden"] = "32"
    (bundle / "manifest.json").write_text(json.dumps(m))
    runner = CliRunner()
    r = runner.invoke(main, ["embed", "--bundle", str(bundle), "-"], input="hello\n")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "model.hidden is \"32\", expected a positive whole number" in r.output and "hint:" in r.output
    r = runner.invoke(main, ["doctor", "--bundle", str(bundle), "--library", str(tmp_path / "none")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "FAIL bundle:" in r.output and "model.hidden" in r.output and "fix: Copy the whole bundle" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    (bundle / "manifest.json").write_text('{"schema": 1, "model": {')
    r = runner.invoke(main, ["doctor", "--bundle", str(bundle), "--library", str(tmp_path / "none"), "--json"])
    assert r.exit_code == 2 and json.loads(r.output)["ok"] is False


# -- item 9: a corrupt segment goes once re-embedded; files follow the umask ---------------------------------
def test_a_corrupt_segment_is_deleted_once_its_chunks_are_embedded_again(library_with_docs, tiny_bert_bundle,
                                                                            tmp_path, caplog):
    with Library.open(library_with_docs) as lib:
        sp = lib.space("cpu-fp32")
        first = sp.raw.segment_names()[0]
        n_first = len(sp.raw.segment_ids(first))
        total = sp.count
    seg = Path(library_with_docs) / "spaces" / "cpu-fp32" / first
    seg.write_bytes(seg.read_bytes()[:-7])  # torn (as by a disk fault)
    caplog.set_level(logging.WARNING, logger="hefsearch.index")
    with Library.open(library_with_docs) as lib:
        assert lib.last_reconcile["cpu-fp32"]["lost"] == n_first
        lib.space("cpu-fp32").raw.reload()
        lib.space("cpu-fp32").raw.reload()
        assert sum(first in r.getMessage() for r in caplog.records) == 1  # said once, not per reload
        with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
            sync(lib, [tmp_path / "docs"], [enc])
        assert lib.space("cpu-fp32").count == total
        assert_consistent(lib)
    assert not seg.exists()
    caplog.clear()
    with Library.open(library_with_docs) as lib:
        assert lib.space("cpu-fp32").count == total
    assert not [r for r in caplog.records if "segment" in r.getMessage()]


def _save_zeros(tmp: str) -> None:
    with open(tmp, "wb") as f:  # a file object: np.save would add ".npy" to the temp name
        np.save(f, np.zeros(3))


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_follow_the_umask(tmp_path, tiny_bert_bundle, umask, mode):
    old = os.umask(umask)
    try:
        write_bytes_atomic(tmp_path / "a.bin", b"x")
        write_json_atomic(tmp_path / "b.json", {"a": 1})
        write_atomic(tmp_path / "c.npy", _save_zeros)
        bundle = _copy(tiny_bert_bundle, tmp_path)
        b = Bundle.open(bundle)
        b.save_manifest()
        with Library.open(tmp_path / "lib") as lib, Encoder.open(bundle, backend="cpu", threads=1) as enc:
            write_corpus(tmp_path / "docs", n_files=2)
            sync(lib, [tmp_path / "docs"], [enc])
            folder = lib.space("cpu-fp32").folder
    finally:
        os.umask(old)
    files = [tmp_path / "a.bin", tmp_path / "b.json", tmp_path / "c.npy", bundle / "manifest.json",
             folder / INDEX_FILE, *folder.glob("seg-*.npy")]
    assert len(files) > 5
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == mode, f
    assert not list(tmp_path.glob("*.tmp")) and not list(folder.glob("*.tmp"))


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "t.json"
    write_json_atomic(target, {"v": 1})

    def fail(tmp):
        Path(tmp).write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, fail)
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_calibration_set_is_written_with_the_umask(tmp_path, tiny_bert_bundle):
    from hefsearch.compile.calib import build_calibration

    bundle = _copy(tiny_bert_bundle, tmp_path)
    write_corpus(tmp_path / "docs", n_files=3)
    old = os.umask(0o002)
    try:
        summary = build_calibration(bundle, [tmp_path / "docs"], n=8, seq_len=32)
    finally:
        os.umask(old)
    f = bundle / summary.file
    assert stat.S_IMODE(f.stat().st_mode) == 0o664
    with np.load(f) as z:
        assert z["embeddings"].shape[0] == 8
    assert not list(f.parent.glob("*.tmp*"))
