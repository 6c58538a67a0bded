"""The server's and MCP's search body carries the re-ranking depth (``rerank``: a depth, or
"off"; a bad value is a 400) through the service to the search."""

from __future__ import annotations

import pytest

from hefsearch.embed import Encoder
from hefsearch.search import rerank as R
from tests.support.library_helpers import TOPICS

QUERY = TOPICS[2][1]


def test_server_and_mcp_take_the_rerank_argument(npu_only_library, sim_bundle):
    from hefsearch.app.service import LibraryService
    from hefsearch.app.session import LibrarySession
    from hefsearch.base.errors import HefsearchError
    from hefsearch.serve.schema import SearchBody

    with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        R.backfill(npu_only_library, cpu)
    path = npu_only_library.path
    npu_only_library.close()
    with LibrarySession.open(path) as session:
        service = LibraryService(session)
        def ask(**fields):
            return service.search(SearchBody(query=QUERY, k=3, mode="vector", **fields).to_request())

        on = ask(rerank=7)
        assert on["rerank"]["depth"] == 7 and on["rerank"]["rescored"] == 7
        assert ask()["rerank"]["depth"] == R.DEFAULT_DEPTH
        assert ask(rerank="off")["rerank"]["depth"] == 0
        with pytest.raises(HefsearchError, match="not a depth") as e:
            ask(rerank="many")
        assert e.value.http_status == 400
