"""The web page's server side, without a browser (tests/serve/test_web_browser.py drives the page):
the page and its files are served with strict security headers, only they pass without the
token, file names are looked up and never joined to a path, foreign Hosts and Origins are
refused; ``/compare`` is the search API's comparison; the status counts kinds and languages;
the page's own files hold no inline script or HTML built from strings, and its colours keep
WCAG AA contrast in both themes."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "serve" / "static"
TOKEN = "test-token-of-more-than-16-chars"


@pytest.fixture(scope="module")
def service(tiny_bert_bundle, tmp_path_factory):
    from tests.support.serve_fixtures import service_over_served_docs

    yield from service_over_served_docs(tmp_path_factory.mktemp("web-api"), tiny_bert_bundle)


def client(service, token: str | None = None):
    from fastapi.testclient import TestClient

    from hefsearch.serve.http import make_http_app

    app = make_http_app(service, token=token, loopback=token is None)
    return TestClient(app, base_url="http://127.0.0.1:8765")


def test_the_page_and_every_answer_carry_the_security_headers(service):
    c = client(service)
    page = c.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/static/app.js">' in page.text
    for r in (page, c.get("/static/app.js"), c.get("/health"), c.get("/search", params={"query": ""})):
        csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
        assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'" and csp["default-src"] == "'none'"
        assert csp["frame-ancestors"] == "'none'" and "unsafe" not in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["x-frame-options"] == "DENY"
    # the page's own files hold no data: behind a proxy that rewrites Host they still load
    assert c.get("/static/app.js", headers={"origin": "https://pi.example"}).status_code == 200
    js = c.get("/static/app.js")
    assert js.headers["content-type"].startswith("text/javascript")
    again = c.get("/static/app.js", headers={"if-none-match": js.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert "/" not in c.get("/openapi.json").json()["paths"]  # the page is not part of the API


def test_only_shipped_files_are_served_by_name(service):
    c = client(service)
    assert c.get("/static/style.css").status_code == 200
    for path in ("/static/web.py", "/static/..%2Fweb.py", "/static/%2e%2e%2fhttp.py", "/static/.hidden",
                 "/static/index.html%00.js", "/static/", "/static/nope.js"):
        r = c.get(path)
        assert r.status_code == 404, path
        assert r.headers["content-type"] == "application/json" and "import" not in r.text


def test_a_token_server_serves_the_page_but_no_data_without_it(service):
    c = client(service, token=TOKEN)
    assert c.get("/").status_code == 200 and c.get("/static/api.js").status_code == 200
    for path in ("/status", "/search?query=zephyr", "/compare?query=zephyr", "/documents/1", "/openapi.json"):
        assert c.get(path).status_code == 401, path
    assert c.post("/", json={}).status_code == 401  # only GET/HEAD of the page pass
    ok = c.get("/status", headers={"authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.json()["documents"] == 4


def test_foreign_hosts_and_origins_are_refused(service):
    c = client(service)
    assert c.get("/", headers={"host": "attacker.example"}).status_code == 403  # DNS rebinding
    same = {"origin": "http://127.0.0.1:8765"}
    assert c.get("/search", params={"query": "zephyr"}, headers=same).status_code == 200
    for origin in ("http://attacker.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8765x"):
        r = c.get("/search", params={"query": "zephyr"}, headers={"origin": origin})
        assert r.status_code == 403, origin
        assert "another site" in r.json()["error"]["message"]
        assert r.headers["x-frame-options"] == "DENY"
    # the page's own files hold no data: behind a proxy that rewrites Host they still load
    assert c.get("/static/app.js", headers={"origin": "https://pi.example"}).status_code == 200


def test_status_counts_documents_per_kind_and_chunks_per_language(service):
    from hefsearch.search.request import SearchRequest

    st = service.status()
    assert st["kinds"] == {"text": 2, "html": 1, "markdown": 1}
    assert "de" in st["langs"] and sum(st["langs"].values()) <= st["chunks"]
    assert st["backend"] is None or st["backend"] == "CPU FP32"  # None until a query opened the encoder
    service.search(SearchRequest("zephyr turbine", mode="vector", k=1))
    assert service.status()["backend"] == "CPU FP32"


def test_compare_without_a_second_space_says_how_to_get_one(service):
    from hefsearch.app.requests import CompareRequest
    from hefsearch.app.service import ServiceError
    from hefsearch.search.request import SearchRequest

    with pytest.raises(ServiceError) as e:
        service.compare(CompareRequest(SearchRequest("zephyr turbine", mode="vector")))
    assert "no NPU" in e.value.message and "hefsearch" in e.value.hint
    r = client(service).get("/compare", params={"query": "zephyr"})
    assert r.status_code == 400 and r.json()["error"]["hint"]
    r = client(service).get("/compare", params={"query": "zephyr", "space": ["cpu-fp32", "nope"]})
    assert r.status_code == 400 and "nope" in r.json()["error"]["message"]
    assert "cpu-fp32" in r.json()["error"]["hint"]


def test_compare_is_the_search_apis_comparison(tiny_bert_bundle, tmp_path):
    """Two spaces (a test-only distorted encoder as the NPU side, and FP32): the answer is
    search.compare's, plus the labels of the two sides."""
    from hefsearch.app.service import LibraryService
    from hefsearch.app.session import LibrarySession
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher, compare
    from dataclasses import replace

    from hefsearch.app.requests import CompareRequest
    from hefsearch.search.filters import make_filters
    from hefsearch.search.request import SearchRequest
    from tests.support.tui_support import cpu_encoder, noisy_encoder, write_corpus

    noisy, cpu = noisy_encoder(tiny_bert_bundle), cpu_encoder(tiny_bert_bundle)
    library = Library.open(tmp_path / "lib")
    sync(library, [write_corpus(tmp_path / "docs")], [noisy, cpu])
    session = LibrarySession(library, Searcher(library, encoders={"npu-sim": noisy, "cpu-fp32": cpu}))
    try:
        asked = SearchRequest("invoice for the garden", mode="vector", k=5, filters=make_filters(types=["text"]))
        data = LibraryService(session).compare(CompareRequest(asked))
        expected = compare(session.searcher, replace(asked, rerank_depth=0), ("npu-sim", "cpu-fp32"))
        assert [s["label"] for s in data["sides"]] == ["NPU simulation (test noise)", "CPU FP32"]
        assert [h["chunk_id"] for h in data["left"]["hits"]] == [h.chunk_id for h in expected.left.hits]
        assert [h["chunk_id"] for h in data["right"]["hits"]] == [h.chunk_id for h in expected.right.hits]
        assert data["rbo"] == pytest.approx(expected.rbo) and data["filters"] == {"types": ["text"]}
        assert all(h["path"].endswith(".txt") for side in ("left", "right") for h in data[side]["hits"])
    finally:
        session.close()


# -- the page's own files ------------------------------------------------------------------------
class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.problems, self.ids, self.labelled = [], set(), set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and not a.get("src"):
            self.problems.append("inline <script>")
        if tag == "style":
            self.problems.append("<style> element")
        self.problems += [f"{tag} {k}=" for k in a if k == "style" or k.startswith("on")]
        if tag in ("input", "select") and "id" in a:
            self.ids.add(a["id"])
        if tag == "label" and "for" in a:
            self.labelled.add(a["for"])

    def handle_data(self, data):
        if self.lasttag == "script" and data.strip():
            self.problems.append("inline script text")


def test_the_page_has_no_inline_script_or_style_and_labels_its_fields():
    tags = _Tags()
    tags.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    assert tags.problems == []
    # fields without a for= label sit inside their <label> (checked in the browser test too)
    assert {"q", "token"} <= tags.labelled


def test_the_scripts_never_parse_html_from_strings():
    """Documents are hostile: text goes in through textContent and Text nodes only."""
    banned = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
                        r"setAttribute\(\s*[\"'](?:style|on)|DOMParser|createContextualFragment|localStorage")
    found = [f"{p.name}:{n}: {line.strip()}" for p in sorted(STATIC.glob("*.js"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if banned.search(line)]
    assert found == []


def _theme_colours() -> tuple[dict, dict]:
    css = (STATIC / "style.css").read_text(encoding="utf-8")
    light = dict(re.findall(r"--([\w-]+):\s*(#[0-9a-f]{6})", css.split("@media (prefers-color-scheme: dark)")[0]))
    dark_block = css.split("@media (prefers-color-scheme: dark)")[1].split("}\n}")[0]
    return light, {**light, **dict(re.findall(r"--([\w-]+):\s*(#[0-9a-f]{6})", dark_block))}


def _contrast(a: str, b: str) -> float:
    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("theme", [0, 1], ids=["light", "dark"])
def test_text_colours_keep_aa_contrast_in_both_themes(theme):
    colours = _theme_colours()[theme]
    pairs = [("fg", "bg"), ("muted", "bg"), ("accent", "bg"), ("fg", "card"), ("muted", "card"), ("accent", "card"),
             ("mark-fg", "mark"), ("fg", "passage"), ("up", "bg"), ("down", "bg")]
    low = {f"{a} on {b}": round(_contrast(colours[a], colours[b]), 2) for a, b in pairs
           if _contrast(colours[a], colours[b]) < 4.5}
    assert low == {}
