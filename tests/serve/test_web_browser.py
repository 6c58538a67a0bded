"""The web page of ``hefsearch serve`` in a real headless Chromium (tests/support/browser.py): one
server (a real ``hefsearch serve`` process on 127.0.0.1) and one browser for the module.

What the page shows is checked against what the JSON API answers for the same request (the
page is one more front end on it, not a second search path), and against the folder's contents
where the answer is known (keyword search, filters). Hostile file names and documents must
render as text: ``window.__pwned`` is what each of them would set if it ran. Screenshots of the
main views (light, dark, phone width) are kept in ``out/browser/``.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.support.browser import js, missing, required, screenshot, set_dark, set_phone, wait
from tests.support.web_fixtures import HOSTILE_NAME, OLD_FILE, start_server

if missing() and not required():  # before any model is built (the browser fixture fails in CI)
    pytest.skip(missing(), allow_module_level=True)

pytestmark = pytest.mark.timeout(240)


def names(driver, where: str = "#hits") -> list[str]:
    return js(driver, f"return [...document.querySelectorAll('{where} .name')].map(e => e.textContent)")


def api_names(server, route: str = "/search", **params) -> list[str]:
    r = httpx.get(server.url + route, params=params, timeout=30)
    assert r.status_code == 200, r.text
    return [h["path"].rsplit("/", 1)[1] for h in r.json()["hits"]]


def shows(driver, expected: list[str], what: str) -> list[str]:
    return wait(driver, lambda: names(driver) == expected and names(driver), what=what)


def query_of(driver) -> dict:
    return {k: v[0] for k, v in parse_qs(urlsplit(driver.current_url).query).items()}


def type_query(driver, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(text)


def choose(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    wait(driver, lambda: js(driver, f"return [...document.getElementById('{select_id}').options]"
                                    f".some(o => o.value === arguments[0])", value), what=f"{value} in #{select_id}")
    Select(driver.find_element(By.ID, select_id)).select_by_value(value)


def not_pwned(driver) -> None:
    assert js(driver, "return window.__pwned") is None, "a script from a document ran"


def console_problems(driver) -> list[str]:
    """Console errors since the last call (a CSP refusal of inline script or style shows here);
    the browser's own note on an API answer the server refused on purpose (4xx) is not one."""
    return [e["message"] for e in driver.get_log("browser")
            if (e["level"] == "SEVERE" or "Content Security Policy" in e["message"])
            and "the server responded with a status of 4" not in e["message"]]


# -- searching ---------------------------------------------------------------------------------
def test_opening_a_search_url_shows_its_hits(browser, web_server):
    """The acceptance check: /?q=WORDS in a fresh browser shows the hits for WORDS."""
    browser.get(f"{web_server.url}/?q=zanzibar+ferry")
    expected = api_names(web_server, query="zanzibar ferry", k=20)
    holding = {p.name for p in web_server.docs.rglob("*") if p.is_file() and "zanzibar" in p.read_text()}
    assert shows(browser, expected, "the hits of the URL's query")[0] in holding
    assert js(browser, "return document.getElementById('q').value") == "zanzibar ferry"
    marked = js(browser, "return [...document.querySelectorAll('#hits mark')].map(m => m.textContent.toLowerCase())")
    assert {"zanzibar", "ferry"} <= set(marked)
    assert not console_problems(browser)
    screenshot(browser, "search")


def test_typing_a_query_shows_the_files_that_hold_it(browser, web_server):
    browser.get(f"{web_server.url}/?mode=keyword")
    type_query(browser, "zanzibar")  # one key at a time: the search waits for the typing to stop
    holding = sorted(n for n in [*web_server.docs.rglob("*")] if n.is_file() and "zanzibar" in n.read_text())
    expected = api_names(web_server, query="zanzibar", mode="keyword", k=20)
    assert sorted(expected) == sorted(p.name for p in holding) and len(expected) == 4
    shows(browser, expected, "the files holding 'zanzibar'")
    assert query_of(browser) == {"q": "zanzibar", "mode": "keyword"}
    # each hit: score and kind; the query's word marked in its passage
    kinds = js(browser, "return [...document.querySelectorAll('#hits .kind')].map(e => e.textContent)")
    assert set(kinds) == {"text", "markdown", "html"}
    scores = js(browser, "return [...document.querySelectorAll('#hits .score')].map(e => Number(e.textContent))")
    assert len(scores) == 4 and scores == sorted(scores, reverse=True) and scores[0] > 0
    assert js(browser, "return document.querySelectorAll('#hits li').length") == 4
    assert all(js(browser, "return [...document.querySelectorAll('#hits .snippet')]"
                           ".map(s => [...s.querySelectorAll('mark')].some(m => /zanzibar/i.test(m.textContent)))"))


def test_mode_and_filters_change_the_answer(browser, web_server):
    browser.get(f"{web_server.url}/?q=invoice&mode=keyword")
    shows(browser, api_names(web_server, query="invoice", mode="keyword", k=20), "keyword hits")
    assert sorted(names(browser)) == ["invoice-2023.txt", "recipes.txt"]
    choose(browser, "mode", "vector")
    vector = shows(browser, api_names(web_server, query="invoice", mode="vector", k=20), "vector hits")
    assert len(vector) > 2
    choose(browser, "type", "markdown")
    markdown = shows(browser, api_names(web_server, query="invoice", mode="vector", type="markdown", k=20),
                     "markdown only")
    assert markdown and all(n.endswith(".md") for n in markdown) and len(markdown) < len(vector)
    assert query_of(browser) == {"q": "invoice", "mode": "vector", "type": "markdown"}
    # the folder and date filters, on keyword hits whose files are known
    browser.get(f"{web_server.url}/?q=zanzibar&mode=keyword&path=*/notes/*")
    shows(browser, ["evil.md"], "the folder filter")
    browser.get(f"{web_server.url}/?q=zanzibar&mode=keyword")
    shows(browser, api_names(web_server, query="zanzibar", mode="keyword", k=20), "all four")
    js(browser, "const u = document.getElementById('until'); u.value = '2021-01-01';"
                "u.dispatchEvent(new Event('change'))")
    shows(browser, [OLD_FILE.rsplit("/", 1)[1]], "the date filter")
    assert query_of(browser)["until"] == "2021-01-01"
    # a filter the server refuses: its message, and no hits left over from before
    js(browser, "const s = document.getElementById('since'); s.value = '2024-01-01';"
                "s.dispatchEvent(new Event('change'))")
    wait(browser, lambda: js(browser, "return document.getElementById('summary').classList.contains('error')"),
         what="the refusal")
    assert "is not before" in js(browser, "return document.getElementById('summary').textContent")
    assert names(browser) == []


def test_the_url_reloads_the_same_search(browser, web_server):
    browser.get(f"{web_server.url}/")
    type_query(browser, "zanzibar")
    choose(browser, "mode", "keyword")
    choose(browser, "type", "text")
    expected = api_names(web_server, query="zanzibar", mode="keyword", type="text", k=20)
    shows(browser, expected, "text files with zanzibar")
    url = browser.current_url
    assert query_of(browser) == {"q": "zanzibar", "mode": "keyword", "type": "text"}
    browser.get("about:blank")
    browser.get(url)
    shows(browser, expected, "the same answer after a reload")
    assert js(browser, "return ['q', 'mode', 'type'].map(id => document.getElementById(id).value)") == [
        "zanzibar", "keyword", "text"]


# -- reading a hit -------------------------------------------------------------------------------
def test_keyboard_opens_a_hit_at_its_highlighted_passage(browser, web_server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{web_server.url}/?q=quetzal&mode=keyword")
    answer = httpx.get(f"{web_server.url}/search", params={"query": "quetzal", "mode": "keyword", "k": 20}).json()
    shows(browser, [h["path"].rsplit("/", 1)[1] for h in answer["hits"]], "hits")
    log = next(h for h in answer["hits"] if h["path"].endswith("long-log.txt"))
    assert len(answer["hits"]) == 3
    js(browser, "document.activeElement.blur()")
    ActionChains(browser).send_keys("/").perform()  # "/" focuses the search box
    assert js(browser, "return document.activeElement.id") == "q"
    ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()  # to the first hit, then on
    for _ in range(log["rank"] - 1):
        ActionChains(browser).send_keys(Keys.ARROW_DOWN).perform()
    assert js(browser, "return document.activeElement.dataset.chunk") == str(log["chunk_id"])
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait(browser, lambda: js(browser, "return !document.getElementById('reader').hidden "
                                      "&& document.getElementById('passage')?.textContent"), what="the reader")
    assert query_of(browser)["open"] == str(log["chunk_id"])
    assert js(browser, "return document.getElementById('passage').textContent") == log["text"]
    assert "quetzal" in js(browser, "return [...document.querySelectorAll('#passage mark')]"
                                    ".map(m => m.textContent.toLowerCase()).join(' ')")
    doc = js(browser, "return document.querySelector('.doc-text').textContent")
    assert doc.startswith("Log entry 1:") and "Log entry 200:" in doc  # the text around the passage
    assert js(browser, "return document.querySelector('#reader .path').textContent") == log["path"]
    assert "line " in js(browser, "return document.querySelector('#reader .facts').textContent")
    # scrolled to it: the passage (line 160 of 200) is in the text box and on the screen
    assert js(browser, """const b = document.querySelector('.doc-text'), p = document.getElementById('passage');
        const br = b.getBoundingClientRect(), pr = p.getBoundingClientRect();
        return b.scrollTop > 0 && pr.top >= br.top && pr.bottom <= br.bottom + 1 && pr.top >= 0
            && pr.bottom <= innerHeight""")
    screenshot(browser, "reader")
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    wait(browser, lambda: js(browser, "return document.getElementById('reader').hidden"), what="the reader to close")
    assert js(browser, "return document.activeElement.dataset.chunk") == str(log["chunk_id"])
    assert "open" not in query_of(browser)


def test_the_hit_list_marks_where_relevance_ends(browser, web_server):
    # the page draws what the answer says: the line before its first weaker hit, all hits listed
    browser.get(f"{web_server.url}/?q=zanzibar+ferry")
    answer = httpx.get(f"{web_server.url}/search", params={"query": "zanzibar ferry", "k": 20}).json()
    shows(browser, [h["path"].rsplit("/", 1)[1] for h in answer["hits"]], "hits")
    items = js(browser, "return [...document.querySelectorAll('#hits > li')].map(li => li.className)")
    line = answer["relevance"]
    if line is None or line["above"] == len(answer["hits"]):
        assert "relevance-line" not in items
    else:
        assert items.index("relevance-line") == line["above"] and items.count("hit") == len(answer["hits"])
    # and with a line drawn after the second of four hits
    shown = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/static/views.js').then((m) => {
          const hit = (i) => ({rank: i, chunk_id: i, path: `/d/f${i}.txt`, doc_kind: 'text', score: 0.9,
            similarity: 0.9 - i / 100, snippet: 's', text: 't', sources: {vector: i}, also_in: [], more_in_file: 0});
          const list = document.createElement('ol'), none = document.createElement('ol');
          m.renderHits(list, {hits: [1, 2, 3, 4].map(hit), relevance: {above: 2, threshold: 0.8181}}, [], String);
          m.renderHits(none, {hits: [1, 2].map(hit), relevance: null}, [], String);
          done([[...list.children].map((li) => li.className), list.children[2].textContent, none.children.length]);
        });""")
    assert shown == [["hit", "hit", "relevance-line", "hit", "hit"], "weaker matches below (cosine under 0.818)", 2]


def test_the_passage_box_leaves_blank_lines_out(browser, web_server):
    answer = httpx.get(f"{web_server.url}/search", params={"query": "quetzal lake", "mode": "keyword"}).json()
    hit = next(h for h in answer["hits"] if h["path"].endswith("guatemala.md"))
    assert "\n\n" in hit["text"].strip()  # a heading, a blank line, a paragraph
    browser.get(f"{web_server.url}/?q=quetzal+lake&mode=keyword&open={hit['chunk_id']}")
    wait(browser, lambda: js(browser, "return document.getElementById('passage')?.textContent"), what="the reader")
    assert js(browser, "return document.getElementById('passage').textContent") == hit["text"]
    boxes = js(browser, "return [...document.querySelectorAll('#passage mark.passage')].map(m => m.textContent)")
    assert len(boxes) >= 2, boxes  # one box per paragraph
    assert all(b == b.strip() and "\n\n" not in b for b in boxes), boxes
    assert boxes == [p.strip() for p in hit["text"].split("\n\n") if p.strip()]
    # every box is drawn: none is an empty line's outline
    assert js(browser, "return [...document.querySelectorAll('#passage mark.passage')]"
                       ".every(m => m.getBoundingClientRect().height > 0 && m.textContent.trim())")


def test_more_like_this_lists_other_documents(browser, web_server):
    hit = httpx.get(f"{web_server.url}/search", params={"query": "garden", "mode": "keyword"}).json()["hits"][0]
    browser.get(f"{web_server.url}/?q=garden&mode=keyword&open={hit['chunk_id']}")
    wait(browser, lambda: js(browser, "return document.getElementById('more-like')"), what="the reader")
    js(browser, "document.getElementById('more-like').click()")
    expected = api_names(web_server, "/similar", id=hit["chunk_id"], k=20, mode="keyword")
    similar = shows(browser, expected, "the similar passages")
    assert similar and hit["path"].rsplit("/", 1)[1] not in similar
    assert query_of(browser)["like"] == str(hit["chunk_id"])
    summary = js(browser, "return document.getElementById('summary').textContent")
    assert f"like {hit['path'].rsplit('/', 1)[1]} (line {hit['line']})" in summary


# -- NPU vs FP32 -----------------------------------------------------------------------------------
def test_compare_view_sets_the_two_rankings_side_by_side(browser, web_server):
    browser.get(f"{web_server.url}/?q=invoice+garden&view=compare")
    data = httpx.get(f"{web_server.url}/compare", params={"query": "invoice garden", "k": 10, "mode": "hybrid"}).json()
    assert [s["label"] for s in data["sides"]] == ["NPU simulation (a8)", "CPU FP32"]
    wait(browser, lambda: js(browser, "return document.getElementById('compare-body').dataset.query") == "invoice garden",
         what="the comparison")
    headings = js(browser, "return [...document.querySelectorAll('#compare h3')].map(h => h.firstChild.textContent)")
    assert headings == ["NPU simulation (a8)", "CPU FP32"]
    for i, (mine, other) in enumerate([(data["left"], data["right"]), (data["right"], data["left"])]):
        shown = js(browser, f"return [...document.querySelectorAll('#compare .side')[{i}].querySelectorAll('.hit-link')]"
                            ".map(a => [Number(a.dataset.chunk), a.querySelector('.move').className])")
        other_rank = {h["chunk_id"]: h["rank"] for h in other["hits"]}
        expected = []
        for h in mine["hits"]:
            r = other_rank.get(h["chunk_id"])
            expected.append([h["chunk_id"], "move " + ("move-only" if r is None else "move-same" if r == h["rank"]
                                                       else "move-up" if h["rank"] < r else "move-down")])
        assert shown == expected
    assert data["only_left"] or any(h["rank"] != {x["chunk_id"]: x["rank"] for x in data["right"]["hits"]}
                                    .get(h["chunk_id"], h["rank"]) for h in data["left"]["hits"]), \
        "the simulation ranks like FP32 here: the test shows no rank change"
    summary = js(browser, "return document.querySelector('#compare .agreement').textContent")
    assert f"{data['overlap_at_k']:.2f}" in summary and f"{data['rbo']:.2f}" in summary
    screenshot(browser, "compare")
    # the TUI's other view: the NPU's candidates re-ranked with FP32 vectors
    reranked = httpx.get(f"{web_server.url}/compare", params={"query": "invoice garden", "k": 10, "mode": "hybrid",
                                                              "rerank": "true"}).json()
    js(browser, "document.getElementById('rerank').click()")
    wanted = [h["chunk_id"] for h in reranked["left"]["hits"]]
    assert wanted != [h["chunk_id"] for h in data["left"]["hits"]], "re-ranking changed nothing here"
    wait(browser, lambda: js(browser, "return [...document.querySelectorAll('#compare .side')[0]"
                                      ".querySelectorAll('.hit-link')].map(a => Number(a.dataset.chunk))") == wanted,
         what="the re-ranked NPU side")
    assert query_of(browser)["rerank"] == "1" and "re-ranked" in js(browser, "return document.getElementById('summary').textContent")



def test_a_compare_the_server_refuses_says_why_once(browser, web_server):
    """The refusal stands in the compare view; the summary line does not repeat it."""
    query = "x" * 5000  # over the server's query limit: the compare is refused (413)
    refused = httpx.get(f"{web_server.url}/compare", params={"query": query, "k": 10, "mode": "vector"})
    assert refused.status_code == 413
    message = refused.json()["error"]["message"]
    browser.get(f"{web_server.url}/?q={query}&view=compare")
    wait(browser, lambda: message in js(browser, "return document.getElementById('compare-body').textContent"),
         what="the refusal in the compare view")
    assert js(browser, "return document.body.innerText").count(message) == 1
    browser.get(f"{web_server.url}/")  # leave the page as the next test expects it


# -- library status ----------------------------------------------------------------------------------
def test_status_view_shows_folders_freshness_backend_and_counts(browser, web_server):
    browser.get(f"{web_server.url}/?view=status")
    wait(browser, lambda: js(browser, "return document.getElementById('status-freshness')"), what="the status")
    text = js(browser, "return document.getElementById('status').textContent")
    st = httpx.get(f"{web_server.url}/status").json()
    assert str(web_server.docs) in text and "synced" in text and "not watched" in text
    assert "CPU FP32" in js(browser, "return document.getElementById('status-backend').textContent")
    assert f"{st['documents']} documents, {st['chunks']} chunks" in text
    rows = js(browser, "return [...document.querySelectorAll('#status table')[0].querySelectorAll('tbody tr')]"
                       ".map(r => [...r.cells].map(c => c.textContent))")
    assert rows == [[s["name"], s["label"], s["kind"], str(s["count"]), "yes"] for s in st["spaces"]]
    assert st["kinds"] == {"text": 10, "markdown": 4, "html": 1} and "markdown" in text
    assert "Nothing is being indexed." in text
    screenshot(browser, "status")
    # another process writing the library (as hefsearch index does): the page says so
    from hefsearch.index.library import Library

    with Library.open(web_server.library) as lib, lib.write_lock(wait=10):
        browser.refresh()
        progress = wait(browser, lambda: js(browser, "return document.getElementById('status-progress')?.textContent"),
                        what="the status")
        assert "is writing the library" in progress and f"{st['documents']} documents" in progress


# -- hostile input -----------------------------------------------------------------------------------------
def test_hostile_names_and_documents_render_as_inert_text(browser, web_server):
    browser.get(f"{web_server.url}/?q=zanzibar&mode=keyword")
    shows(browser, api_names(web_server, query="zanzibar", mode="keyword", k=20), "hits")
    assert HOSTILE_NAME in names(browser)
    assert js(browser, "return document.querySelectorAll('#hits img, #hits script, #hits [onclick]').length") == 0
    for name in ("evil.md", "evil.html"):
        link = js(browser, "return [...document.querySelectorAll('#hits .hit-link')]"
                           ".find(a => a.querySelector('.name').textContent === arguments[0]).dataset.chunk", name)
        js(browser, "document.querySelector(`.hit-link[data-chunk='${arguments[0]}']`).click()", link)
        wait(browser, lambda: js(browser, "return document.querySelector('#reader h2')?.textContent") == name,
             what=f"{name} in the reader")
        text = js(browser, "return document.querySelector('.doc-text').textContent")
        assert "<script>window.__pwned=" in text  # shown, as the characters it is
        assert js(browser, "return document.querySelectorAll('#reader script, #reader img').length") == 0
    js(browser, "document.querySelector(`.hit-link[data-chunk]`).focus()")
    not_pwned(browser)
    assert not console_problems(browser)
    # and were text ever to become markup, the policy would stop it: an inline script added now
    js(browser, "const s = document.createElement('script'); s.textContent = 'window.__pwned = 7';"
                "document.head.append(s)")
    not_pwned(browser)
    assert any("Content Security Policy" in m for m in console_problems(browser))


# -- looks -----------------------------------------------------------------------------------------------------
def test_phone_width_and_dark_theme(browser, web_server):
    browser.get(f"{web_server.url}/?q=zanzibar+ferry")
    shows(browser, api_names(web_server, query="zanzibar ferry", k=20), "hits")
    light = js(browser, "return getComputedStyle(document.body).backgroundColor")
    set_dark(browser, True)
    try:
        dark = js(browser, "return getComputedStyle(document.body).backgroundColor")
        assert light != dark and dark.startswith("rgb(13, 17, 23")
        screenshot(browser, "search-dark")
    finally:
        set_dark(browser, False)
    set_phone(browser, True)
    try:
        browser.get(f"{web_server.url}/?q=zanzibar+ferry")
        shows(browser, api_names(web_server, query="zanzibar ferry", k=20), "hits on a phone")
        assert js(browser, "return document.documentElement.scrollWidth <= innerWidth"), "scrolls sideways"
        screenshot(browser, "search-phone")
        visible = "return getComputedStyle(document.getElementById('filters')).display !== 'none'"
        assert not js(browser, visible)  # folded away on a phone, a button away
        js(browser, "document.getElementById('filters-toggle').click()")
        assert js(browser, visible) and js(browser, "return document.getElementById('filters-toggle')"
                                                    ".getAttribute('aria-expanded')") == "true"
        js(browser, "document.querySelector('#hits .hit-link').click()")  # the reader takes the screen
        wait(browser, lambda: js(browser, "return document.getElementById('passage')"), what="the reader")
        assert js(browser, "return getComputedStyle(document.getElementById('results')).display") == "none"
        assert js(browser, "return document.documentElement.scrollWidth <= innerWidth"), "scrolls sideways"
        screenshot(browser, "reader-phone")
    finally:
        set_phone(browser, False)
    unlabelled = js(browser, "return [...document.querySelectorAll('input, select, button')]"
                             ".filter(e => !e.labels?.length && !e.textContent.trim()).map(e => e.id)")
    assert unlabelled == []


# -- the token ---------------------------------------------------------------------------------------------
def test_a_token_server_refuses_the_page_until_the_token_is_given(browser, web_server, tmp_path):
    """A server started as any bind but loopback must be (it listens on 127.0.0.1 here, with a
    token file): the page loads, its API calls are refused, it asks once, then works."""
    from selenium.webdriver.common.by import By

    token = "web-page-token-0123456789abcdef"
    (tmp_path / "token").write_text(token + "\n")
    proc, url = start_server(web_server.library, web_server.env, "--token-file", str(tmp_path / "token"))
    try:
        assert httpx.get(f"{url}/search", params={"query": "zanzibar"}).status_code == 401
        browser.get(f"{url}/?q=zanzibar&mode=keyword")
        wait(browser, lambda: js(browser, "return document.getElementById('login').open"), what="the token dialog")
        assert names(browser) == []
        refused = js(browser, "return fetch('/status').then(r => r.status)")
        assert refused == 401
        box = browser.find_element(By.ID, "token")
        box.send_keys("wrong-token-of-some-length")
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait(browser, lambda: "refused" in js(browser, "return document.getElementById('login-error').textContent"),
             what="the refusal")
        assert js(browser, "return document.getElementById('login').open") and names(browser) == []
        screenshot(browser, "token")
        box.send_keys(token)
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        expected = [h["path"].rsplit("/", 1)[1] for h in httpx.get(
            f"{url}/search", params={"query": "zanzibar", "mode": "keyword", "k": 20},
            headers={"authorization": f"Bearer {token}"}).json()["hits"]]
        shows(browser, expected, "the hits once the token is given")
        assert not js(browser, "return document.getElementById('login').open")
        assert js(browser, "return sessionStorage.getItem('hefsearch.token')") == token
        assert js(browser, "return localStorage.length") == 0 and js(browser, "return document.cookie") == ""
        assert token not in browser.current_url
        assert not any(token in line for line in proc.lines)  # nor in the server's log
    finally:
        js(browser, "sessionStorage.clear()")
        proc.stop()
