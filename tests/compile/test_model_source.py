"""Where the demo's model comes from: the Hugging Face cache, a download of only the files
export needs, or the packaged English model, and never a hang on a closed network.

No hub is reachable here: the download path is verified only against monkeypatched
``huggingface_hub`` calls (``model_info``/``snapshot_download``) and a hand-built cache folder
in huggingface_hub's layout, never against the real hub."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from hefsearch.compile.export import model_source as ms
from hefsearch.base.errors import ModelNotFound

E5 = ms.DEFAULT_MULTILINGUAL.repo_id
#: What the hub lists for intfloat/multilingual-e5-small (abridged): two weight formats, ONNX
#: and OpenVINO copies, the sentencepiece model next to tokenizer.json.
E5_LISTING = {
    ".gitattributes": 1_500, "README.md": 90_000, "config.json": 655, "model.safetensors": 470_641_600,
    "pytorch_model.bin": 470_693_617, "onnx/model.onnx": 470_000_000, "onnx/config.json": 655,
    "openvino/openvino_model.bin": 470_000_000, "modules.json": 387, "sentence_bert_config.json": 57,
    "1_Pooling/config.json": 200, "sentencepiece.bpe.model": 5_069_051, "special_tokens_map.json": 167,
    "tokenizer.json": 17_082_730, "tokenizer_config.json": 443,
}
NEEDED = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
          "special_tokens_map.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json"}


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    """An empty private HF cache, online by default."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    return cache


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the network was asked")

    monkeypatch.setattr(ms, "list_repo", refuse)
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)


def fake_cached_model(cache: Path, repo_id: str, files: dict[str, str], *, ref: bool = True) -> Path:
    """A repo laid out as huggingface_hub does: blobs/, snapshots/<rev>/ symlinks, refs/main."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    rev = "0123456789abcdef0123456789abcdef01234567"
    snap = repo / "snapshots" / rev
    for i, (name, text) in enumerate(files.items()):
        blob = repo / "blobs" / f"blob{i}"
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text(text)
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).symlink_to(blob)
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(rev)
    return snap


MODEL_FILES = {"config.json": "{}", "model.safetensors": "w", "tokenizer.json": "{}", "1_Pooling/config.json": "{}"}


def test_offline_falls_back_to_the_english_model_at_once(hub_env, monkeypatch, no_network):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    choice = ms.choose_demo_model()
    assert not choice.multilingual
    assert choice.known is ms.ENGLISH_FALLBACK
    assert (Path(choice.model) / "config.json").is_file()
    assert f"{E5} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set" in choice.why
    assert "English model" in choice.why and f"hf download {E5}" in choice.why
    assert choice.export_args == [choice.model]  # no prefixes for MiniLM


def test_unreachable_hub_falls_back_with_a_short_timeout(hub_env, monkeypatch):
    """A closed local port: the listing request fails, nothing is downloaded, English is used."""
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    # huggingface_hub reads HF_HUB_OFFLINE once, at import: another test may have imported it
    # under the suite's offline setting
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    seen = {}
    real = huggingface_hub.HfApi.model_info

    def spy(self, repo_id, **kw):
        seen.update(kw, endpoint=self.endpoint)
        return real(self, repo_id, **kw)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", spy)
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda *a, **k: pytest.fail("no download after a failed listing"))
    choice = ms.choose_demo_model()
    assert not choice.multilingual
    assert "the Hugging Face hub at http://127.0.0.1:9 did not list it (no connection)" in choice.why
    assert seen["endpoint"] == "http://127.0.0.1:9"
    assert seen["timeout"] == ms.HUB_TIMEOUT_S <= 10


def test_a_hub_that_never_answers_is_given_up_on(hub_env, monkeypatch):
    """A black-holed network or a DNS lookup that hangs: the bounded thread gives up."""
    import huggingface_hub

    forever = threading.Event()
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, *a, **k: forever.wait())
    try:
        with pytest.raises(ModelNotFound, match=r"did not list it \(no answer within 0.05 s\)"):
            ms.list_repo(E5, timeout=0.05)
    finally:
        forever.set()


def test_a_cached_model_is_found_without_the_network(hub_env, no_network):
    snap = fake_cached_model(hub_env, E5, MODEL_FILES)
    assert ms.find_cached(E5) == snap
    choice = ms.choose_demo_model()
    assert choice.multilingual and choice.model == E5
    assert choice.export_args == [E5, "--query-prefix", "query: ", "--passage-prefix", "passage: "]
    from hefsearch.compile.export.bundle import resolve_model

    assert resolve_model(E5) == snap


def test_the_second_known_model_is_taken_from_the_cache(hub_env, no_network):
    other = ms.MULTILINGUAL_MODELS[1]
    fake_cached_model(hub_env, other.repo_id, MODEL_FILES, ref=False)  # no refs/main: newest snapshot
    choice = ms.choose_demo_model()
    assert choice.multilingual and choice.known is other and choice.export_args == [other.repo_id]


def test_a_half_downloaded_snapshot_does_not_count(hub_env, no_network, monkeypatch):
    snap = fake_cached_model(hub_env, E5, MODEL_FILES)
    (snap / "model.safetensors").resolve().unlink()  # dangling symlink, as after an interrupted download
    assert ms.find_cached(E5) is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not ms.choose_demo_model().multilingual


def test_the_download_asks_only_for_what_export_needs(hub_env, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(ms, "list_repo", lambda repo_id, **kw: ("sha", E5_LISTING))
    asked = {}

    def fake_snapshot_download(repo_id, **kw):
        asked.update(kw, repo_id=repo_id)
        return str(fake_cached_model(Path(kw["cache_dir"]), repo_id, {f: "x" for f in kw["allow_patterns"]}))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    said = []
    choice = ms.choose_demo_model(say=said.append)
    assert choice.multilingual and choice.model == E5 and "downloaded" in choice.why
    assert asked["repo_id"] == E5
    assert set(asked["allow_patterns"]) == NEEDED
    assert asked["etag_timeout"] <= 10
    assert asked["cache_dir"] == hub_env
    assert said == [f"Downloading {len(NEEDED)} files of {E5}, 488 MB (only what export needs)"]


def test_files_for_export_falls_back_to_other_formats():
    names = ms.files_for_export(["config.json", "pytorch_model.bin", "vocab.txt", "tokenizer_config.json",
                                 "onnx/model.onnx", "2_Normalize/config.json"])
    assert names == ["config.json", "pytorch_model.bin", "tokenizer_config.json", "vocab.txt",
                     "2_Normalize/config.json"]
    with pytest.raises(ModelNotFound, match="none of model.safetensors, pytorch_model.bin"):
        ms.files_for_export(["config.json", "model.onnx"])
    with pytest.raises(ModelNotFound, match="no config.json"):
        ms.files_for_export(["model.safetensors"])


def test_export_takes_prefixes_from_the_model_prompts(tmp_path):
    from hefsearch.compile.export.bundle import model_prefixes

    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "document": "passage: "}}))
    prefixes, notice = model_prefixes(tmp_path, None, None)
    assert prefixes == {"query": "query: ", "passage": "passage: "}
    assert "query 'query: '" in notice and "passage 'passage: '" in notice
    prefixes, notice = model_prefixes(tmp_path, "", "doc: ")  # given ones win; "" means none
    assert prefixes == {"query": "", "passage": "doc: "} and notice is None
    (tmp_path / "config_sentence_transformers.json").write_text('{"__version__": {}}')
    assert model_prefixes(tmp_path, None, None) == ({"query": "", "passage": ""}, None)


MULTI = os.environ.get("HEFSEARCH_TEST_MULTILINGUAL_MODEL")


@pytest.mark.multilingual
@pytest.mark.skipif(not MULTI, reason="set HEFSEARCH_TEST_MULTILINGUAL_MODEL to a multilingual-e5-small folder")
def test_a_real_e5_copy_in_the_cache_is_chosen_with_its_prefixes(hub_env, no_network):
    """The real model folder, linked into a cache as huggingface_hub lays it out: chosen without
    the network, and export reads its query/passage prompts."""
    from hefsearch.compile.export.bundle import model_prefixes, resolve_model

    repo = hub_env / ("models--" + E5.replace("/", "--"))
    snap = repo / "snapshots" / "local"
    snap.mkdir(parents=True)
    for f in Path(MULTI).iterdir():
        (snap / f.name).symlink_to(f.resolve())
    choice = ms.choose_demo_model()
    assert choice.multilingual and choice.model == E5
    assert resolve_model(E5) == snap
    prefixes, _ = model_prefixes(snap, None, None)
    if (Path(MULTI) / "config_sentence_transformers.json").is_file():
        assert prefixes == {"query": "query: ", "passage": "passage: "}
