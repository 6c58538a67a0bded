"""The crawl options as one value: what the library remembers reads back as it was written,
a run's given options replace the remembered ones but add to the suffixes, old settings read
as before (a missing or null size limit is the default), and one parser reads added suffixes."""

from __future__ import annotations

import pytest

from hefsearch.index.crawl_options import DEFAULT_MAX_BYTES, CrawlOptions


def test_the_remembered_options_read_back_as_they_were_written():
    options = CrawlOptions(include_hidden=True, excludes=["drafts/"], max_bytes=1 << 20, follow_links=True,
                           overlap_tokens=8, extra_suffixes={".log": "text"})
    settings = options.settings()
    assert settings == {"crawl_options": {"include_hidden": True, "excludes": ["drafts/"], "max_bytes": 1 << 20,
                                          "follow_links": True, "overlap_tokens": 8},
                        "extra_suffixes": {".log": "text"}}
    assert CrawlOptions.remembered(settings) == options
    assert CrawlOptions.remembered({}) == CrawlOptions()
    old = {"crawl_options": {"excludes": ["a"], "max_bytes": None, "gone_option": 1}}
    assert CrawlOptions.remembered(old) == CrawlOptions(excludes=("a",), max_bytes=DEFAULT_MAX_BYTES)


def test_given_options_replace_the_remembered_ones_and_add_suffixes():
    remembered = CrawlOptions(excludes=("a",), max_bytes=100, extra_suffixes={".log": "text"})
    run = remembered.given({"max_bytes": 200, "extra_suffixes": {".conf": "text"}})
    assert run.excludes == ("a",) and run.max_bytes == 200
    assert run.extra_suffixes == {".log": "text", ".conf": "text"}
    assert run.differences(remembered, leave_out=("extra_suffixes",)) == ["max_bytes"]
    assert (remembered.value_text("max_bytes"), run.value_text("max_bytes")) == ("0.0001 MiB", "0.0002 MiB")
    assert run.given_form("extra_suffixes") == (".conf", ".log")
    with pytest.raises(ValueError, match="not a crawl option: hidden"):
        remembered.given({"hidden": True})


def test_one_parser_reads_added_suffixes():
    assert CrawlOptions.parse_suffixes(["log", ".XHTML=html", "conf, ini"]) == {
        ".log": "text", ".xhtml": "html", ".conf": "text", ".ini": "text"}
    with pytest.raises(ValueError, match="not a document kind"):
        CrawlOptions.parse_suffixes([".x=spreadsheet"])
    with pytest.raises(ValueError, match="not a file suffix"):
        CrawlOptions.parse_suffixes(["a/b"])
