"""``GET /export``: the served library as one archive, while the server keeps its library open;
behind the token like every route; a bad request is a JSON error before any byte of archive."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

TOKEN = "export-token-of-at-least-16-chars"


@pytest.fixture(scope="module")
def service(tiny_bert_bundle, tmp_path_factory):
    from tests.support.serve_fixtures import service_over_served_docs

    yield from service_over_served_docs(tmp_path_factory.mktemp("export-api"), tiny_bert_bundle)


def client(service):
    from fastapi.testclient import TestClient

    from hefsearch.serve.http import make_http_app

    return TestClient(make_http_app(service, token=TOKEN, loopback=False), base_url="http://127.0.0.1:8765")


def test_export_streams_an_archive_that_imports(service, tmp_path):
    from hefsearch.index.library import Library
    from hefsearch.index.restore import import_library

    c = client(service)
    assert c.get("/export").status_code == 401
    auth = {"authorization": f"Bearer {TOKEN}"}
    with c.stream("GET", "/export", headers=auth) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-tar"
        assert 'filename="hefsearch-lib-' in r.headers["content-disposition"]
        (tmp_path / "served.tar").write_bytes(b"".join(r.iter_bytes()))
    out = import_library(tmp_path / "served.tar", tmp_path / "copy")
    served = service.session.library
    assert out.manifest.chunks == served.status().chunks > 0
    with Library.open(tmp_path / "copy") as lib:
        assert lib.space_names() == served.space_names()
    # the server still answers from its library
    assert c.get("/status", headers=auth).json()["chunks"] == out.manifest.chunks

    bare = c.get("/export", params={"vectors": "false"}, headers=auth)
    assert bare.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(bare.content)) as tf:
        names = tf.getnames()
        assert "library.db" in names and not [n for n in names if n.startswith("spaces/")]
        assert json.load(tf.extractfile("manifest.json"))["spaces"] == []

    wrong = c.get("/export", params={"space": "hef"}, headers=auth)
    assert wrong.status_code == 400 and "no space 'hef'" in json.loads(wrong.text)["error"]["message"]
