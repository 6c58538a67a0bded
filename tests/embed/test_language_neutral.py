"""The language-neutral post-transform: its math, its spec and fingerprint, language
identification, the encoder passing texts, ranking on a constructed set, and a library space
that is derived and re-fitted as the library grows."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.embed.language import identify, identify_all
from hefsearch.embed.post_transform import LanguageNeutral, from_spec
from hefsearch.search.request import SearchRequest


def unit(v):
    v = np.asarray(v, np.float32)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1)


def test_fit_offsets_are_language_means_minus_the_library_mean():
    v = np.array([[1, 0, 0], [0, 1, 0],          # de
                  [0, 0, 1], [0, 0, 1],          # en
                  [1, 1, 0],                     # fr: too few chunks for an offset
                  [0, 0, 0]], np.float32)        # an empty text: left out of every mean
    langs = ["de", "de", "en", "en", "fr", "de"]
    ln = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=2)
    mean = v[:5].mean(axis=0)
    assert sorted(ln.offsets) == ["de", "en"]
    assert np.allclose(ln.offsets["de"], [0.5, 0.5, 0] - mean)
    assert np.allclose(ln.offsets["en"], [0, 0, 1] - mean)
    assert ln.counts == {"de": 2, "en": 2, "fr": 1} and ln.fitted_on == 5


def test_apply_moves_by_alpha_times_the_offset_and_renormalises():
    ln = LanguageNeutral({"de": [0.0, 0.4, 0.0]}, alpha=0.5, dim=3, min_chunks=1)
    v = unit([[1, 1, 0], [1, 1, 0], [1, 1, 0], [0, 0, 0]])
    out = ln.apply(v, languages=["de", "ja", None, "de"])  # ja: no offset; None: unknown
    assert np.allclose(out[0], unit(v[0] - [0, 0.2, 0]))
    assert np.allclose(np.linalg.norm(out[:3], axis=1), 1)
    assert np.allclose(out[1], v[1]) and np.allclose(out[2], v[2])  # not moved
    assert not out[3].any()  # an empty text stays zero: it matches nothing
    assert np.allclose(LanguageNeutral({"de": [0.0, 0.4, 0.0]}, alpha=0.0, dim=3, min_chunks=1)
                       .apply(v, languages=["de"] * 4), v)
    with pytest.raises(ValueError):
        ln.apply(v, languages=["de"])  # one language per vector
    with pytest.raises(ValueError):
        ln.apply(np.ones((1, 4), np.float32), languages=["de"])


def test_invert_gives_back_the_vectors_apply_moved():
    rng = np.random.default_rng(0)
    v = unit(rng.normal(size=(40, 16)))
    langs = [["de", "en", "ja", None][i % 4] for i in range(40)]
    ln = LanguageNeutral.fit(v, langs, alpha=0.7, min_chunks=5)
    moved = ln.apply(v, languages=langs)
    assert not np.allclose(moved, v)
    assert np.allclose(ln.invert(moved, languages=langs), v, atol=1e-5)


def test_spec_round_trip_and_fingerprints(tiny_bert_bundle):
    rng = np.random.default_rng(1)
    v = unit(rng.normal(size=(20, 32)))
    langs = ["de", "en"] * 10
    a = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=5)
    b = LanguageNeutral.fit(v, langs, alpha=0.75, min_chunks=5)
    c = LanguageNeutral.fit(v[::-1], langs, alpha=0.5, min_chunks=5)  # other offsets
    back = from_spec(a.to_spec())
    assert back.describe() == a.describe() and back.counts == a.counts and back.min_chunks == 5
    assert np.allclose(back.apply(v, languages=langs), a.apply(v, languages=langs))
    with Encoder.open(tiny_bert_bundle, "cpu") as plain, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=a) as ea, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=a.to_spec()) as ea2, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=b) as eb, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=c) as ec:
        assert len({plain.fingerprint, ea.fingerprint, eb.fingerprint, ec.fingerprint}) == 4
        assert ea2.fingerprint == ea.fingerprint


def test_language_identification_on_short_texts():
    texts = ["Der Zug nach München fährt von Gleis 4 ab.", "The invoice must be paid within 14 days.",
             "Le train pour Lyon part du quai deux.", "東京から大阪まで新幹線で行きます。",
             "Поезд отправляется с четвёртой платформы.", "路由器忘记密码怎么办", "광합성 캘빈 회로",
             "¿Cómo pido cita con el médico de cabecera?"]
    assert identify_all(texts) == ["de", "en", "fr", "ja", "ru", "zh", "ko", "es"]
    for nothing in ["", "   ", "HX-4200", "INV-2024-0815", "12345"]:
        assert identify(nothing) is None  # too little text to say: such a text is not moved


def test_the_encoder_gives_the_transform_the_unprefixed_texts(tiny_bert_bundle):
    texts = ["Der Zug nach München fährt von Gleis 4 ab.", "The train to Munich leaves from platform 4.", ""]
    rng = np.random.default_rng(2)
    ln = LanguageNeutral({"de": rng.normal(size=32) * 0.3, "en": rng.normal(size=32) * 0.3},
                         alpha=0.5, dim=32, min_chunks=1)
    with Encoder.open(tiny_bert_bundle, "cpu") as plain, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=ln.to_spec()) as neutral:
        want = ln.apply(plain.encode_queries(texts), languages=["de", "en", None])
        got = neutral.encode_queries(texts)
        unmoved = plain.encode_queries(texts[:1])[0]
    assert np.allclose(got, want, atol=1e-6)
    assert not np.allclose(got[0], unmoved, atol=1e-3)  # really moved


def test_a_cross_lingual_pair_ranks_first_with_the_transform():
    """Vectors = topic + a planted language component. Without the transform the query's
    same-language neighbour (another topic) wins; with it, its translation does."""
    rng = np.random.default_rng(3)
    dim, topics = 64, 12
    topic = unit(rng.normal(size=(topics, dim)))
    lang_vec = {lang: rng.normal(size=dim) * 0.9 / np.sqrt(dim) * 8 for lang in ("de", "en", "ja")}
    docs, langs, doc_topic = [], [], []
    for t in range(topics):
        for lang in ("de", "en", "ja"):
            docs.append(topic[t] + lang_vec[lang] + 0.1 * rng.normal(size=dim))
            langs.append(lang)
            doc_topic.append(t)
    docs = unit(docs)
    # each query: German, about topic t, whose only document is in Japanese (the others dropped)
    keep = [i for i, (lang, t) in enumerate(zip(langs, doc_topic)) if not (lang == "de" and t < 4)
            and not (lang == "en" and t < 4)]
    docs, langs, doc_topic = docs[keep], [langs[i] for i in keep], [doc_topic[i] for i in keep]
    queries = unit([topic[t] + lang_vec["de"] + 0.1 * rng.normal(size=dim) for t in range(4)])

    def top1_topics(d, q):
        return [doc_topic[i] for i in np.argmax(q @ d.T, axis=1)]

    assert top1_topics(docs, queries) != [0, 1, 2, 3]  # same-language neighbours win
    ln = LanguageNeutral.fit(docs, langs, alpha=1.0, min_chunks=5)
    assert top1_topics(ln.apply(docs, languages=langs), ln.apply(queries, languages=["de"] * 4)) == [0, 1, 2, 3]


def test_refit_reason():
    from hefsearch.search.language_neutral import refit_reason

    from hefsearch.embed.post_transform import HubCorrection

    ln = LanguageNeutral({"de": np.zeros(4)}, alpha=0.5, dim=4, min_chunks=5, counts={"de": 8, "fr": 2},
                         fitted_on=100)
    assert refit_reason(ln, 100, {"de": 98, "fr": 2}) == "no hub correction yet"  # made before it existed
    ln.hubs = HubCorrection(np.zeros(4), 0.5, reference=36)
    assert refit_reason(ln, 110, {"de": 108, "fr": 2}) is None
    assert "125" in refit_reason(ln, 125, {"de": 123, "fr": 2})
    assert "fr" in refit_reason(ln, 105, {"de": 100, "fr": 5})
    assert "70" in refit_reason(ln, 70, {"de": 70})  # shrunk as much: re-fit as well


LINES = {
    "de": ["Der Zug nach München fährt heute von Gleis vier ab.", "Bitte schicken Sie den Vertrag bis Freitag zurück.",
           "Die Rechnung muss innerhalb von vierzehn Tagen bezahlt werden.", "Das Museum ist an Feiertagen geschlossen.",
           "Meine Schwester studiert Medizin in Berlin.", "Der Router startet nach dem Update von selbst neu."],
    "en": ["The train to Munich leaves from platform four today.", "Please send the contract back by Friday.",
           "The invoice must be paid within fourteen days.", "The museum is closed on public holidays.",
           "My sister studies medicine in Berlin.", "The router restarts by itself after the update."],
    "fr": ["Le train pour Munich part du quai quatre aujourd'hui.", "Veuillez renvoyer le contrat avant vendredi.",
           "La facture doit être payée sous quatorze jours.", "Le musée est fermé les jours fériés.",
           "Ma sœur étudie la médecine à Berlin.", "Le routeur redémarre tout seul après la mise à jour."],
}


def write_files(folder, lang, indexes):
    folder.mkdir(parents=True, exist_ok=True)
    for i in indexes:
        (folder / f"{lang}-{i}.txt").write_text(LINES[lang][i] + "\n", encoding="utf-8")


def test_derived_space_follows_the_library_and_is_refitted_when_it_grows(tmp_path, tiny_bert_bundle):
    from hefsearch.index.encoders import open_sync_encoders
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher
    from hefsearch.search.language_neutral import (chunk_languages, derive_neutral_space,
                                                   languages_with_offsets, refresh_neutral_spaces)

    docs = tmp_path / "docs"
    write_files(docs, "de", range(6))
    write_files(docs, "en", range(6))
    write_files(docs, "fr", range(2))  # too few French chunks for an offset yet
    lib = Library.open(tmp_path / "lib")
    with Encoder.open(tiny_bert_bundle, "cpu", threads=1) as enc:
        sync(lib, [docs], [enc])
        assert languages_with_offsets(lib, "cpu-fp32", min_chunks=5) == ["de", "en"]
        sp = derive_neutral_space(lib, "cpu-fp32", enc, alpha=0.5, min_chunks=5)
    assert sp.info.name == "cpu-fp32-neutral"
    spec = sp.info.backend_opts["post_transform"]
    assert spec["kind"] == "language-neutral" and sorted(spec["offsets"]) == ["de", "en"]
    ids = sorted(lib.member_ids("cpu-fp32"))
    langs = chunk_languages(lib, ids)
    assert sorted(langs) == ["de"] * 6 + ["en"] * 6 + ["fr"] * 2
    assert np.allclose(sp.vectors(ids), from_spec(spec).apply(lib.space("cpu-fp32").vectors(ids),
                                                                  languages=langs), atol=1e-6)
    s = Searcher(lib)  # reopens the neutral encoder from the stored spec; fingerprints match
    res = s.search(SearchRequest("Rechnung bezahlen", k=3, mode="vector", space="cpu-fp32-neutral", rerank_depth=0))
    assert res.hits and res.space == "cpu-fp32-neutral"
    s.close()

    write_files(docs, "fr", range(2, 6))  # +4 chunks (+29%), and French now has 6
    choice = open_sync_encoders(lib, backend="cpu", threads=1)
    try:
        sync(lib, [docs], choice.encoders)  # every space is kept up to date, the neutral one too
        assert len(lib.member_ids("cpu-fp32-neutral")) == 18
        done = refresh_neutral_spaces(lib, choice.encoders)
        assert [(r.space, r.languages) for r in done] == [("cpu-fp32-neutral", ["de", "en", "fr"])]
        assert refresh_neutral_spaces(lib, choice.encoders) == []  # fits again: nothing to do
    finally:
        choice.close()
    info = {i.name: i for i in lib.spaces()}["cpu-fp32-neutral"]
    new = from_spec(info.backend_opts["post_transform"])
    assert sorted(new.offsets) == ["de", "en", "fr"] and new.fitted_on == 18
    assert info.fingerprint != sp.info.fingerprint
    ids = sorted(lib.member_ids("cpu-fp32"))
    langs = chunk_languages(lib, ids)
    raw = lib.space("cpu-fp32").vectors(ids)
    from hefsearch.search.language_neutral import HUB_BETA

    fresh = LanguageNeutral.fit(raw, langs, alpha=0.5, min_chunks=5)  # as if derived today
    assert new.hubs is not None and new.hubs.beta == HUB_BETA and sp.info.backend_opts["post_transform"]["hubs"]
    assert np.allclose(lib.space("cpu-fp32-neutral").vectors(ids), fresh.apply(raw, languages=langs), atol=1e-5)
    s = Searcher(lib)
    res = s.search(SearchRequest("Rechnung", k=3, mode="vector", space="cpu-fp32-neutral", rerank_depth=0))
    assert res.hits
    # the answer says what the space corrects: its queries lose the mean query direction
    assert res.to_dict()["space_transform"]["hub_correction"]["beta"] == HUB_BETA
    assert s.search(SearchRequest("Rechnung", k=3, mode="vector", space="cpu-fp32",
                                  rerank_depth=0)).to_dict()["space_transform"] is None
    s.close()
    lib.close()


MULTI = os.environ.get("HEFSEARCH_TEST_MULTILINGUAL_MODEL")


@pytest.mark.multilingual
@pytest.mark.slow
@pytest.mark.skipif(not MULTI, reason="set HEFSEARCH_TEST_MULTILINGUAL_MODEL to a multilingual model folder")
def test_real_multilingual_model_ranks_more_translations_first(tmp_path):
    """The bundled parallel set, every sentence a document and a query for its translation:
    the default transform raises first-place hits (0.78 -> 0.90 with multilingual-e5-small)."""
    from hefsearch.bench.crosslingual import top_docs
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle
    from hefsearch.evaluate.parallel import load_parallel
    from hefsearch.search.language_neutral import DEFAULT_ALPHA, MIN_CHUNKS

    model = Path(MULTI)
    e5 = "e5" in model.name.lower()
    export_bundle(str(model), tmp_path / "b", ExportOptions(query_prefix="query: " if e5 else None,
                                                            passage_prefix="passage: " if e5 else None))
    pairs = load_parallel()
    sents = [p.text_a for p in pairs] + [p.text_b for p in pairs]
    n = len(pairs)
    partner = [(i + n) % (2 * n) for i in range(2 * n)]
    with Encoder.open(tmp_path / "b") as enc:
        docs, queries = enc.encode_passages(sents), enc.encode_queries(sents)
    langs = identify_all(sents)
    ln = LanguageNeutral.fit(docs, langs, alpha=DEFAULT_ALPHA, min_chunks=MIN_CHUNKS)

    def top1(d, q):
        ranked = top_docs(d, list(range(2 * n)), q, k=1, exclude=np.arange(2 * n))
        return np.mean([r[0] == partner[i] for i, r in enumerate(ranked)])

    plain = top1(docs, queries)
    neutral = top1(ln.apply(docs, languages=langs), ln.apply(queries, languages=langs))
    assert neutral >= plain + 0.05, (plain, neutral)


def test_index_command_keeps_drops_and_defaults_the_neutral_space(tmp_path, tiny_bert_bundle):
    """`index --language-neutral` derives <fp32>-neutral and makes it the default space; the
    tiny English-vocabulary bundle gets none unless asked; --no-language-neutral drops it."""
    from click.testing import CliRunner

    from hefsearch.cli.main import main
    from hefsearch.index.library import Library

    docs = tmp_path / "docs"
    docs.mkdir()
    german = ["Die Rechnung ist bis Ende des Monats zu bezahlen, sonst folgt eine Mahnung.",
              "Der Zug nach Wien fährt jeden Morgen um sieben Uhr vom Hauptbahnhof ab.",
              "Bitte gießen Sie die Pflanzen im Garten jeden Abend mit frischem Wasser.",
              "Die Steuererklärung muss bis zum Ende des Juli beim Finanzamt sein.",
              "Der Router startet neu, wenn die Firmware aktualisiert worden ist.",
              "Das Orchester probte die Sinfonie zweimal vor dem Konzert am Abend."]
    english = ["The invoice must be paid by the end of the month, otherwise a reminder follows.",
               "The train to Vienna leaves the central station every morning at seven.",
               "Please water the plants in the garden every evening with fresh water.",
               "The tax return must reach the tax office by the end of July.",
               "The router restarts once the firmware has been updated.",
               "The orchestra rehearsed the symphony twice before the evening concert."]
    for i, text in enumerate(german + english):
        (docs / f"{i:02d}.txt").write_text(text, encoding="utf-8")
    lib_path = tmp_path / "lib"
    run = CliRunner().invoke
    base = ["index", str(docs), "--bundle", str(tiny_bert_bundle), "--backend", "cpu", "--library", str(lib_path)]

    assert run(main, base).exit_code == 0  # auto: a small (600-piece) vocabulary is not multilingual: no neutral space
    with Library.open(lib_path, create=False) as lib:
        assert lib.space_names() == ["cpu-fp32"]

    res = run(main, base + ["--language-neutral"])
    assert res.exit_code == 0, res.output
    with Library.open(lib_path, create=False) as lib:
        assert "cpu-fp32-neutral" in lib.space_names()
        assert lib.settings()["default_space"] == "cpu-fp32-neutral"
        assert lib.member_ids("cpu-fp32-neutral").tolist() == lib.member_ids("cpu-fp32").tolist()

    res = run(main, base + ["--no-language-neutral"])
    assert res.exit_code == 0, res.output
    with Library.open(lib_path, create=False) as lib:
        assert lib.space_names() == ["cpu-fp32"] and not lib.settings().get("default_space")


def test_auto_language_neutral_for_every_space_a_library_searches(tmp_path, sim_bundle, monkeypatch):
    """With a multilingual bundle (here: the threshold lowered to the tiny vocabulary) every
    space a sync fills gets its own neutral copy, fitted on its own vectors: a CPU library
    searches cpu-fp32-neutral, a library indexed on the (simulated) NPU searches its NPU
    space's neutral copy, and with --also-fp32 both copies exist, each from its own space."""
    from click.testing import CliRunner

    from hefsearch.search.language_neutral import chunk_languages, neutral_transform
    from hefsearch.cli.main import main
    from hefsearch.index.library import Library

    monkeypatch.setattr("hefsearch.embed.bundle.MULTILINGUAL_VOCAB", 100)
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = [f"Die Rechnung Nummer {i} ist bis Ende des Monats zu bezahlen, sonst folgt eine Mahnung." for i in range(6)]
    texts += [f"Invoice number {i} must be paid by the end of the month, otherwise a reminder follows." for i in range(6)]
    for i, text in enumerate(texts):
        (docs / f"{i:02d}.txt").write_text(text, encoding="utf-8")
    run = CliRunner().invoke
    cases = (("cpu", [], ["cpu-fp32"], "cpu-fp32-neutral"),
             ("npu-sim", [], ["npu-sim-a8"], "npu-sim-a8-neutral"),
             ("npu-sim", ["--also-fp32"], ["npu-sim-a8", "cpu-fp32"], "cpu-fp32-neutral"))
    for n, (backend, extra, sources, default) in enumerate(cases):
        lib_path = tmp_path / f"lib-{n}"
        res = run(main, ["index", str(docs), "--bundle", str(sim_bundle), "--backend", backend,
                         "--library", str(lib_path), *extra], env={"HEFSEARCH_SIM": "a8"})
        assert res.exit_code == 0, res.output
        with Library.open(lib_path, create=False) as lib:
            assert sorted(lib.space_names()) == sorted(sources + [s + "-neutral" for s in sources])
            assert lib.settings().get("default_space") == default
            infos = {i.name: i for i in lib.spaces()}
            for src in sources:
                ids = lib.member_ids(src)
                ln = neutral_transform(infos[src + "-neutral"])
                # fitted on and moved from the source's own vectors: inverting gives them back
                back = ln.invert(lib.space(src + "-neutral").vectors(ids), languages=chunk_languages(lib, ids))
                assert np.allclose(back, lib.space(src).vectors(ids), atol=1e-5)
                assert ln.hubs is not None  # and its queries lose the mean query direction
                assert infos[src + "-neutral"].kind == infos[src].kind
            if len(sources) == 2:  # two encoders: two different sets of offsets
                a, b = (neutral_transform(infos[s + "-neutral"]) for s in sources)
                assert not np.allclose(a.offsets["de"], b.offsets["de"])


def test_sync_derives_the_neutral_vectors_from_the_fp32_ones_without_encoding_twice(tmp_path, tiny_bert_bundle):
    from hefsearch.index.encoders import open_sync_encoders
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search.language_neutral import chunk_languages, derive_neutral_space

    docs = tmp_path / "docs"
    write_files(docs, "de", range(6))
    write_files(docs, "en", range(6))
    lib = Library.open(tmp_path / "lib")
    with Encoder.open(tiny_bert_bundle, "cpu", threads=1) as enc:
        sync(lib, [docs], [enc])
        derive_neutral_space(lib, "cpu-fp32", enc, alpha=0.5, min_chunks=5)
    write_files(docs, "fr", range(6))
    choice = open_sync_encoders(lib, backend="cpu", threads=1)
    try:
        neutral = next(e for e in choice.encoders if e.space_name == "cpu-fp32-neutral")
        encoded = []
        neutral.encode = lambda texts, **kw: encoded.append(texts)  # must not be needed
        report = sync(lib, [docs], choice.encoders)
    finally:
        choice.close()
    assert report.added == 6 and not encoded
    ids = lib.member_ids("cpu-fp32-neutral")
    assert len(ids) == 18 and ids.tolist() == lib.member_ids("cpu-fp32").tolist()
    spec = {i.name: i for i in lib.spaces()}["cpu-fp32-neutral"].backend_opts["post_transform"]
    expected = from_spec(spec).apply(lib.space("cpu-fp32").vectors(ids), languages=chunk_languages(lib, ids))
    assert np.allclose(lib.space("cpu-fp32-neutral").vectors(ids), expected, atol=1e-6)
    lib.close()
