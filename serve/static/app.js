// The page: the search lives in the URL (/?q=...&mode=...&type=...), every answer comes from the
// server's JSON API, newer requests win over older ones.
import { api } from "./api.js";
import { $, el, fileName, freshnessText, queryTerms } from "./dom.js";
import { renderCompare, renderHits, renderReader, renderStatus } from "./views.js";

const FIELDS = ["q", "mode", "type", "lang", "path", "since", "until"];
const DEFAULTS = { mode: "hybrid" };
const VIEWS = ["search", "compare", "status"];
const TYPING_MS = 200; // search this long after the last key (Enter: at once)
const K = 20;

const state = { view: "search", open: null, like: null };
let seq = 0;
let controller = null;
let timer = null;
let likeName = null; // the file of the passage "more like this" started from, when known

// -- the URL ------------------------------------------------------------------------------------
function ensureOption(select, value) {
  if (select.tagName !== "SELECT" || !value || [...select.options].some((o) => o.value === value)) return;
  select.append(el("option", { value }, value));
}

function readUrl() {
  const p = new URLSearchParams(location.search);
  for (const f of FIELDS) {
    const value = p.getAll(f).join(",");
    ensureOption($(f), value);
    $(f).value = value || DEFAULTS[f] || "";
  }
  state.view = VIEWS.includes(p.get("view")) ? p.get("view") : "search";
  $("rerank").checked = p.get("rerank") === "1";
  state.open = p.get("open");
  state.like = p.get("like");
}

function urlFor(change = {}) {
  const s = { ...state, ...change };
  const p = new URLSearchParams();
  for (const f of FIELDS) {
    const value = $(f).value.trim();
    if (value && value !== DEFAULTS[f]) p.set(f, value);
  }
  if (s.view !== "search") p.set("view", s.view);
  if (s.view === "compare" && $("rerank").checked) p.set("rerank", "1");
  if (s.like) p.set("like", s.like);
  if (s.open) p.set("open", s.open);
  const query = p.toString();
  return "/" + (query ? "?" + query : "");
}

function go(change, push = true) {
  Object.assign(state, change);
  history[push ? "pushState" : "replaceState"](null, "", urlFor());
}

// the API's parameters from the form (type and lang may hold several, comma-separated)
function params(extra = {}) {
  const p = new URLSearchParams({ mode: $("mode").value, ...extra });
  for (const f of ["type", "lang"]) {
    for (const v of $(f).value.split(",")) if (v.trim()) p.append(f, v.trim());
  }
  for (const f of ["path", "since", "until"]) if ($(f).value.trim()) p.set(f, $(f).value.trim());
  return p;
}

// -- answering ------------------------------------------------------------------------------------
function say(text, isError = false) {
  $("summary").textContent = text;
  $("summary").classList.toggle("error", isError);
}

function fail(error) {
  if (error.name === "AbortError") return;
  say(error.message + (error.hint ? ` ${error.hint}` : ""), true);
}

function begin() {
  controller?.abort();
  controller = new AbortController();
  return { mine: ++seq, signal: controller.signal };
}

async function runSearch() {
  const { mine, signal } = begin();
  const query = $("q").value.trim();
  const list = $("hits");
  if (!query && !state.like) {
    list.replaceChildren();
    list.removeAttribute("data-query");
    say("Type words to search: in any language, by meaning and by words.");
    return;
  }
  document.body.classList.add("busy");
  try {
    const data = state.like
      ? await api("/similar", params({ id: state.like, k: K }), { signal })
      : await api("/search", params({ query, k: K }), { signal });
    if (mine !== seq) return;
    renderHits(list, data, queryTerms(query), (id) => urlFor({ open: String(id) }));
    list.dataset.query = state.like ? `like:${state.like}` : query;
    if (!performance.getEntriesByName("hefsearch:first-result").length) performance.mark("hefsearch:first-result");
    const n = data.hits.length;
    const what = state.like ? `like ${likeName || "passage " + state.like}` : `for “${query}”`;
    say([`${n} ${n === 1 ? "file" : "files"} ${what}`, data.mode, data.backend,
      data.timings_ms?.total != null ? `${Math.round(data.timings_ms.total)} ms` : null, data.notice]
      .filter(Boolean).join(" · "));
    showFreshness(data.library);
  } catch (e) {
    if (mine !== seq || e.name === "AbortError") return;
    list.replaceChildren(); // hits of an earlier search would pass for this one's
    list.removeAttribute("data-query");
    fail(e);
  } finally {
    if (mine === seq) document.body.classList.remove("busy");
  }
}

async function runCompare() {
  const { mine, signal } = begin();
  const query = $("q").value.trim();
  const section = $("compare-body");
  if (!query) {
    section.replaceChildren(el("p", {}, "Type a query: the NPU's answer and FP32's appear side by side."));
    say("");
    return;
  }
  const p = params({ query, k: 10 });
  if (p.get("mode") === "keyword") p.set("mode", "vector"); // keyword search involves no encoder
  if ($("rerank").checked) p.set("rerank", "true");
  try {
    const data = await api("/compare", p, { signal });
    if (mine !== seq) return;
    renderCompare(section, data, queryTerms(query), (id) => urlFor({ open: String(id) }));
    section.dataset.query = query;
    say(`${data.sides[0].label}${$("rerank").checked ? " re-ranked with FP32" : ""} and ${data.sides[1].label} `
      + `for “${query}” (${p.get("mode")})`);
  } catch (e) {
    if (mine !== seq || e.name === "AbortError") return;
    section.replaceChildren(el("p", { class: "error" }, e.message), e.hint ? el("p", {}, e.hint) : "");
    say(""); // the message stands in the compare view itself: said once, not again in the summary line
  }
}

let statusTimer = null;

async function loadStatus() {
  clearTimeout(statusTimer);
  try {
    const st = await api("/status");
    fillChoices($("type"), st.kinds);
    fillChoices($("lang"), st.langs);
    showFreshness(st.freshness);
    if (state.view === "status") {
      renderStatus($("status"), st);
      say(`${st.documents} documents in ${st.roots.length} folder(s)`);
      statusTimer = setTimeout(loadStatus, 5000); // freshness and progress while it is shown
    }
  } catch (e) {
    fail(e);
  }
}

function fillChoices(select, counts) {
  const chosen = select.value;
  const keep = [...select.options].filter((o) => o.value === "" || o.value === chosen).map((o) => o.value);
  for (const value of Object.keys(counts || {})) {
    if (!keep.includes(value)) select.append(el("option", { value }, `${value} (${counts[value]})`));
  }
}

function showFreshness(fresh) {
  $("freshness").textContent = freshnessText(fresh);
}

// -- the reader ----------------------------------------------------------------------------------
async function openReader(id, { focus = true } = {}) {
  const section = $("reader");
  try {
    const chunk = await api(`/chunks/${encodeURIComponent(id)}`);
    const doc = await api(`/documents/${chunk.doc_id}`);
    if (state.open !== String(id)) return;
    const passage = renderReader(section, chunk, doc, queryTerms($("q").value), {
      moreLike: () => {
        likeName = `${fileName(doc.path)}${chunk.line ? ` (line ${chunk.line})` : ""}`;
        go({ like: String(id), open: null, view: "search" });
        show();
      },
      close: closeReader,
      link: urlFor({ open: String(id) }),
    });
    section.hidden = false;
    $("main").classList.add("reading");
    scrollTo(passage);
    if (focus) passage.focus({ preventScroll: true });
    document.title = `${doc.title || fileName(doc.path)} · hefsearch`;
  } catch (e) {
    fail(e);
  }
}

// the passage in the middle of the text box (wide screens), else of the window (phones)
function scrollTo(passage) {
  const box = passage.closest(".doc-text");
  if (box.scrollHeight > box.clientHeight + 1) {
    box.scrollTop = passage.offsetTop - box.offsetTop - box.clientHeight / 3;
  } else {
    passage.scrollIntoView({ block: "center" });
  }
}

function closeReader() {
  const id = state.open;
  go({ open: null });
  $("reader").hidden = true;
  $("reader").replaceChildren();
  $("main").classList.remove("reading");
  document.title = "hefsearch";
  document.querySelector(`.hit-link[data-chunk="${CSS.escape(String(id))}"]`)?.focus();
}

// -- views -----------------------------------------------------------------------------------------
function show() {
  for (const view of VIEWS) $(view === "search" ? "results" : view).hidden = state.view !== view;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.view === state.view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
    a.href = urlFor({ view: a.dataset.view, open: null });
  }
  if (!state.open) {
    $("reader").hidden = true;
    $("main").classList.remove("reading");
  }
  if (state.open) openReader(state.open, { focus: false });
  if (state.view === "status") return loadStatus();
  return state.view === "compare" ? runCompare() : runSearch();
}

function answer() {
  if (state.view === "compare") runCompare();
  else if (state.view === "search") runSearch();
}

// -- events -------------------------------------------------------------------------------------------
function hitLinks() {
  const visible = state.view === "compare" ? $("compare-body") : $("hits");
  return [...visible.querySelectorAll(".hit-link")];
}

function bind() {
  $("q").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (state.view === "status") state.view = "search";
      go({ like: null, open: null }, false); // a new query: the old passage no longer answers it
      show();
    }, TYPING_MS);
  });
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    go({ like: null, open: null, view: state.view === "status" ? "search" : state.view });
    show();
  });
  for (const f of [...FIELDS.slice(1), "rerank"]) {
    $(f).addEventListener("change", () => { go({}, false); answer(); });
  }
  document.querySelector("nav").addEventListener("click", (event) => {
    const a = event.target.closest("a[data-view]");
    if (!a || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    go({ view: a.dataset.view, open: null });
    show();
  });
  document.addEventListener("click", (event) => {
    const a = event.target.closest(".hit-link");
    if (!a || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    go({ open: a.dataset.chunk });
    openReader(a.dataset.chunk);
  });
  $("filters-toggle").addEventListener("click", () => showFilters(!$("search").classList.contains("show-filters")));
  document.addEventListener("keydown", keys);
  window.addEventListener("popstate", () => { readUrl(); show(); });
}

// narrow screens fold the filters away behind a button (open when the URL sets one)
function showFilters(open) {
  $("search").classList.toggle("show-filters", open);
  $("filters-toggle").setAttribute("aria-expanded", String(open));
}

function keys(event) {
  const typing = event.target.matches("input, select, textarea");
  if (event.key === "/" && !typing && !$("login").open) {
    event.preventDefault();
    $("q").focus();
    $("q").select();
    return;
  }
  if (event.key === "Escape" && state.open && !$("login").open) {
    event.preventDefault();
    closeReader();
    return;
  }
  if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
  const links = hitLinks();
  const at = links.indexOf(document.activeElement);
  if (event.target === $("q") && event.key === "ArrowDown" && links.length) {
    event.preventDefault();
    links[0].focus();
  } else if (at >= 0) {
    event.preventDefault();
    if (event.key === "ArrowUp" && at === 0) $("q").focus();
    else links[Math.max(0, Math.min(links.length - 1, at + (event.key === "ArrowDown" ? 1 : -1)))].focus();
  }
}

readUrl();
bind();
showFilters(FIELDS.slice(1).some((f) => $(f).value && $(f).value !== DEFAULTS[f]));
const first = show();
// the type and language choices and the freshness, after the first answer (it comes first)
if (state.view !== "status") Promise.resolve(first).finally(loadStatus);
if (!state.open) $("q").focus();
