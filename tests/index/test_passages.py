"""Passages in context: short chunks grouped into sections, each chunk's vector the mean of its
own and its section's, the same whichever path computes it (the sync, a re-rank, a back-fill)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from hefsearch.embed.in_context import ContextPlan
from hefsearch.index import passages
from hefsearch.index.passages import Cutting, section_starts, section_text, sections_of


@dataclass
class C:
    text: str
    start: int
    end: int
    page: int | None = None
    tokens: int = 10


def _cut(doc: str, spans, **kw) -> list[C]:
    return [C(doc[s:e], s, e, **kw) for s, e in spans]


def test_sections_fill_the_window_and_never_cross_a_page():
    chunks = [C("a", 0, 1, tokens=100), C("b", 2, 3, tokens=100), C("c", 4, 5, tokens=100),
              C("d", 6, 7, tokens=100), C("e", 8, 9, tokens=100, page=2), C("f", 10, 11, tokens=100, page=2)]
    assert section_starts(chunks, 250) == [0, 0, 2, 2, 4, 4]
    assert section_starts(chunks, 1000) == [0, 0, 0, 0, 4, 4]  # the page ends the first
    assert section_starts(chunks, 50) == [0, 1, 2, 3, 4, 5]  # a chunk longer than the window: alone


def test_a_section_text_is_the_document_text_with_each_overlap_once():
    doc = "One two three. Four five six.\n\nSeven eight nine. Ten."
    # the second chunk overlaps the first ("Four five six."), the third follows a paragraph gap
    chunks = _cut(doc, [(0, 29), (15, 29), (31, len(doc))])
    assert section_text(chunks) == "One two three. Four five six.\nSeven eight nine. Ten."
    assert sections_of(chunks, [0, 0, 2]) == ["One two three. Four five six."] * 2 + [None]


def test_the_plan_encodes_each_section_once_and_takes_the_mean():
    plan = ContextPlan(["a", "b", "c"], ["ab", "ab", None])
    assert plan.flat == ["a", "b", "c", "ab"]
    v = np.eye(4, dtype=np.float32)
    out = plan.fuse(v)
    assert np.allclose(out[0], 0.5 * (v[0] + v[3])) and np.allclose(out[1], 0.5 * (v[1] + v[3]))
    assert np.allclose(out[2], v[2])
    assert ContextPlan(["a"], [None]).plain and ContextPlan(["a"], ["a"]).plain  # its own section
    with pytest.raises(ValueError):
        plan.fuse(v[:3])


def test_a_chunk_in_context_is_the_mean_of_its_and_its_sections_vectors(bert_encoder):
    texts, section = ["the cat sat on the mat", "a dog ran in the park"], "the cat sat on the mat\na dog ran in the park"
    both = bert_encoder.encode_passages(texts, sections=[section, section])
    alone, whole = bert_encoder.encode_passages(texts), bert_encoder.encode_passages([section])
    assert np.allclose(both, 0.5 * (alone + whole), atol=1e-5)
    assert np.allclose(bert_encoder.encode_passages(texts, sections=[None, None]), alone)


def test_the_language_move_keeps_a_vectors_length_and_inverts():
    from hefsearch.embed.post_transform import LanguageNeutral

    rng = np.random.default_rng(0)
    v = rng.normal(size=(40, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[:20] *= 0.9  # passages in context are shorter than 1
    langs = ["de"] * 20 + ["fr"] * 20
    ln = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=5)
    moved = ln.apply(v, languages=langs)
    assert np.allclose(np.linalg.norm(moved, axis=1), np.linalg.norm(v, axis=1), atol=1e-5)
    assert not np.allclose(moved, v)
    assert np.allclose(ln.invert(moved, languages=langs), v, atol=1e-4)


def test_cutting_window():
    assert Cutting(32, 128).window(512) == 128 and Cutting(32, 0).window(512) == 512
    assert Cutting.of(16) == Cutting(16, 0)


# -- a library -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wide_bundle(tmp_path_factory) -> Path:
    """A tiny BERT with a 512-token window: a library made with it cuts passages."""
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle
    from tests.support.models import make_tiny_bert

    model = make_tiny_bert(tmp_path_factory.mktemp("wide-model"), max_seq_length=512)
    out = tmp_path_factory.mktemp("b") / "wide"
    export_bundle(str(model), out, ExportOptions())
    return out


def _long_text(n: int, seed: int) -> str:
    words = ["river", "stone", "lamp", "garden", "window", "letter", "violin", "harbour", "cloud", "engine"]
    rng = np.random.default_rng(seed)
    return "\n\n".join(" ".join(rng.choice(words, 12)) + "." for _ in range(n))


def test_a_new_library_stores_passages_with_their_sections(tmp_path, wide_bundle):
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text(_long_text(60, 1), encoding="utf-8")
    (docs / "short.txt").write_text("a lamp in the window.", encoding="utf-8")
    with Library.open(tmp_path / "lib") as lib, Encoder.open(wide_bundle, bulk=True) as enc:
        sync(lib, [docs], [enc])
        assert lib.settings()[passages.SETTING] == passages.PASSAGE_TOKENS
        rows = lib.query('SELECT c.id, c.tokens, c.section, c.ordinal, d.path FROM chunks c JOIN documents d '
                         "ON d.id = c.doc_id ORDER BY c.id")
        long_rows = [r for r in rows if r[4].endswith("long.txt")]
        assert len(long_rows) > 4 and max(r[1] for r in long_rows) <= passages.PASSAGE_TOKENS
        assert len({r[2] for r in long_rows}) < len(long_rows)  # sections of several passages
        ids = [r[0] for r in rows]
        sections = passages.stored_sections(lib, ids)
        assert sections[-1] is None  # the short file: its own section
        stored = lib.space(enc.space_name).vectors(ids)
        records = lib.chunks(ids)
        # a re-rank or back-fill computes what the sync stored
        again = enc.encode_passages([r.text for r in records], sections=sections)
        assert np.allclose(stored, again, atol=1e-5)
        assert not np.allclose(stored, enc.encode_passages([r.text for r in records]), atol=1e-3)
        from hefsearch.search.request import SearchRequest
        from hefsearch.search.searcher import Searcher

        with Searcher(lib, encoders={enc.space_name: enc}) as s:
            said = s.search(SearchRequest("violin harbour")).to_dict()["passages"]
        assert said["tokens"] == passages.PASSAGE_TOKENS and "section" in said["score"]


def test_a_library_that_holds_chunks_keeps_them_whole(tmp_path, wide_bundle):
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.index.sync_types import SyncOptions

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text(_long_text(60, 2), encoding="utf-8")
    with Library.open(tmp_path / "lib") as lib, Encoder.open(wide_bundle, bulk=True) as enc:
        sync(lib, [docs], [enc], SyncOptions(passage_tokens=0))
        assert lib.settings()[passages.SETTING] == 0
        with lib.transaction():  # as a library made before passages: no setting
            lib.db.execute("DELETE FROM settings WHERE key = ?", [passages.SETTING])
        (docs / "more.txt").write_text(_long_text(40, 3), encoding="utf-8")
        sync(lib, [docs], [enc])
        assert lib.settings()[passages.SETTING] == 0
        tokens = [t for (t,) in lib.query("SELECT tokens FROM chunks")]
        assert max(tokens) > passages.PASSAGE_TOKENS
        assert lib.query("SELECT count(*) FROM chunks WHERE section IS NOT NULL")[0][0] == 0
        before = lib.query("SELECT count(*) FROM chunks")[0][0]
        (docs / "third.txt").write_text(_long_text(30, 4), encoding="utf-8")
        with pytest.raises(passages.PassagesFixed, match="chunks that fill"):
            sync(lib, [docs], [enc], SyncOptions(passage_tokens=passages.PASSAGE_TOKENS))
        assert lib.query("SELECT count(*) FROM chunks")[0][0] == before  # nothing was written


def test_index_asks_for_passages_or_not(tmp_path, wide_bundle):
    from click.testing import CliRunner

    from hefsearch.cli.main import main
    from hefsearch.index.library import Library

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text(_long_text(60, 5), encoding="utf-8")
    run = CliRunner().invoke
    args = ["index", str(docs), "--bundle", str(wide_bundle), "--backend", "cpu", "--library"]
    res = run(main, [*args, str(tmp_path / "whole"), "--no-passages"])
    assert res.exit_code == 0, res.output
    with Library.open(tmp_path / "whole", create=False) as lib:
        assert lib.settings()[passages.SETTING] == 0
    res = run(main, [*args, str(tmp_path / "whole"), "--passages"])
    assert res.exit_code == 2 and "index into a new library" in res.output
    res = run(main, [*args, str(tmp_path / "cut")])
    assert res.exit_code == 0, res.output
    with Library.open(tmp_path / "cut", create=False) as lib:
        assert lib.settings()[passages.SETTING] == passages.PASSAGE_TOKENS


def test_a_remote_first_encoder_stores_what_a_local_one_does(tmp_path, wide_bundle):
    """A Ray pool sends the plan's texts (passages, then each section once) and gets the backend's
    vectors back: the sync takes the means itself, as Encoder.encode_passages does."""
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    class Remote(Encoder):  # what index/ray_pool.RayEncoder is to the sync
        max_in_flight = 2

        def __init__(self, local):
            super().__init__(local.bundle, local.backend)
            self.sent = []

        def submit_passages(self, texts):
            self.sent.append(list(texts))
            return self.encode(texts, prefix=self.bundle.prefixes["passage"], passages=True, transform=False)

        def collect(self, ticket):
            return {self.space_name: ticket}

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.txt").write_text(_long_text(50, 6), encoding="utf-8")
    with Library.open(tmp_path / "lib") as lib, Encoder.open(wide_bundle, bulk=True) as enc:
        remote = Remote(enc)
        sync(lib, [docs], [remote])
        ids = [int(i) for i in lib.chunk_ids()]
        assert sum(map(len, remote.sent)) > len(ids)  # the sections travelled too
        records = lib.chunks(ids)
        local = enc.encode_passages([r.text for r in records], sections=passages.stored_sections(lib, ids))
        assert np.allclose(lib.space(enc.space_name).vectors(ids), local, atol=1e-5)


def test_a_grouped_search_asks_enough_passages_for_k_files(tmp_path, wide_bundle):
    """Neighbouring passages share their section's half of the score, so they come in runs:
    one hit per file still fills k files."""
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search.request import SearchRequest
    from hefsearch.search.searcher import Searcher

    docs = tmp_path / "docs"
    docs.mkdir()
    words = ["river", "stone", "lamp", "garden", "window", "letter", "violin", "harbour", "cloud", "engine"]
    for i in range(12):  # one sentence again and again: a file's passages tie, a run of them
        line = " ".join(np.random.default_rng(100 + i).choice(words, 12)) + "."
        (docs / f"f{i:02d}.txt").write_text("\n\n".join([line] * 30), encoding="utf-8")
    with Library.open(tmp_path / "lib") as lib, Encoder.open(wide_bundle, bulk=True) as enc:
        sync(lib, [docs], [enc])
        assert len(lib.chunk_ids()) > 8 * 12  # many passages a file
        with Searcher(lib, encoders={enc.space_name: enc}) as s:
            res = s.search(SearchRequest("river stone lamp", mode="vector", k=10))
        assert len({h.path for h in res.hits}) == 10
        assert res.to_dict()["passages"]["per_section"] == 512 // passages.PASSAGE_TOKENS
