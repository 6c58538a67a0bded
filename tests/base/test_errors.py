"""base/errors.py decides how an error becomes an exit code or an HTTP status, by its class: a
request's fault is 4xx, what the server cannot do now is 503, and nothing matches message text."""

from __future__ import annotations

import pytest

from hefsearch.app.service import error_json
from hefsearch.base.errors import BackendUnavailable, BundleError, DeviceError, HefsearchError, NotFound
from hefsearch.index.errors import FingerprintMismatch, LibraryBusy, LibraryError
from hefsearch.search.searcher import NotInLibrary, SearchError
from hefsearch.search.filters import FilterError


@pytest.mark.parametrize("cls, status", [
    (HefsearchError, 400), (FilterError, 400), (SearchError, 400), (FingerprintMismatch, 400),
    (NotFound, 404), (NotInLibrary, 404),
    (LibraryError, 503), (LibraryBusy, 503), (DeviceError, 503), (BackendUnavailable, 503), (BundleError, 503),
])
def test_the_class_decides_the_status_and_the_cli_exits_2(cls, status):
    e = cls("what went wrong", "what to do")
    assert (e.http_status, e.exit_code) == (status, 2)
    assert error_json(e) == {"error": {"status": status, "message": "what went wrong", "hint": "what to do"}}


def test_the_message_does_not_decide_the_status():
    assert SearchError("The library has no chunk 7.").http_status == 400
    assert NotInLibrary("anything at all").http_status == 404
