// The views, each drawn from one JSON answer of the API: the hit list, the reader, the
// NPU/FP32 comparison and the library's status.
import { el, fileName, folderOf, freshnessText, highlighted, place } from "./dom.js";

function score(hit) {
  const cosine = hit.similarity != null;
  const value = cosine ? hit.similarity : hit.score;
  return el("span", { class: "score", title: cosine ? "cosine similarity" : "keyword score (BM25)" },
    value.toFixed(3));
}

function sources(hit) {
  const found = Object.keys(hit.sources || {});
  return found.length ? el("span", { class: "sources", title: "found by" }, found.join(" + ")) : null;
}

// one hit: file, where, score and kind, its best passage with the query's words marked
export function hitItem(hit, terms, href) {
  const more = [];
  if (hit.more_in_file) more.push(`+${hit.more_in_file} more in this file`);
  if (hit.also_in && hit.also_in.length) more.push("also in: " + hit.also_in.map(fileName).join(", "));
  return el("li", { class: "hit" },
    el("a", { class: "hit-link", href, "data-chunk": hit.chunk_id },
      el("span", { class: "line1" },
        el("span", { class: "rank" }, `${hit.rank}.`),
        el("span", { class: "name" }, fileName(hit.path)),
        el("span", { class: "kind" }, hit.doc_kind),
        score(hit),
        sources(hit)),
      el("span", { class: "folder" }, [folderOf(hit.path), place(hit)].filter(Boolean).join(" · ")),
      el("span", { class: "snippet" }, highlighted(hit.snippet || hit.text, terms)),
      more.length ? el("span", { class: "more" }, more.join(" · ")) : null));
}

// the hits, and where relevance ends (data.relevance.above hits stand out from the query's
// other candidates) a line before the first weaker one; the hits below it stay listed
export function renderHits(list, data, terms, hrefFor) {
  const items = data.hits.map((hit) => hitItem(hit, terms, hrefFor(hit.chunk_id)));
  const line = data.relevance;
  if (line && line.above < items.length) {
    items.splice(line.above, 0, el("li", { class: "relevance-line", role: "separator" },
      `weaker matches below (cosine under ${line.threshold.toFixed(3)})`));
  }
  list.replaceChildren(...items);
}

// the passage's text with a box (mark.passage) around each paragraph, and none around the
// blank lines between them or the blanks at its ends
export function passageMarks(text, terms) {
  return text.split(/(\n[ \t]*\n\s*)/).flatMap((part, i) => {
    if (i % 2 === 1 || !part.trim()) return part ? [part] : [];
    const lead = part.match(/^\s*/)[0];
    const trail = part.match(/\s*$/)[0];
    const body = part.slice(lead.length, part.length - trail.length);
    return [lead, el("mark", { class: "passage" }, highlighted(body, terms)), trail].filter((p) => p !== "");
  });
}

// the document's text with the passage marked (and its query words), or the passage alone
// when it is not in the text the server sent (a document cut at the server's limit)
function documentText(doc, chunk, terms) {
  const at = doc.text.indexOf(chunk.text);
  const passage = el("span", { class: "passage-text", id: "passage", tabindex: "-1" }, passageMarks(chunk.text, terms));
  if (at < 0) return el("div", { class: "doc-text" }, passage);
  return el("div", { class: "doc-text" }, doc.text.slice(0, at), passage, doc.text.slice(at + chunk.text.length));
}

export function renderReader(section, chunk, doc, terms, actions) {
  const facts = [doc.kind, place(chunk), doc.modified ? `modified ${doc.modified.slice(0, 10)}` : null,
    doc.langs && doc.langs.length ? `language ${doc.langs.join(", ")}` : null].filter(Boolean);
  section.replaceChildren(
    el("div", { class: "reader-head" },
      el("h2", {}, doc.title || fileName(doc.path)),
      el("p", { class: "path" }, el("code", {}, doc.path)),
      el("p", { class: "facts" }, facts.join(" · ")),
      el("div", { class: "actions" },
        el("button", { type: "button", id: "more-like", onclick: actions.moreLike }, "More like this"),
        el("a", { href: actions.link, id: "passage-link" }, "Link to this passage"),
        el("button", { type: "button", id: "close-reader", onclick: actions.close }, "Close (Esc)")),
      doc.text_truncated ? el("p", { class: "notice" }, "The text is cut at the server's limit.") : null),
    documentText(doc, chunk, terms));
  return section.querySelector("#passage");
}

// -- NPU vs FP32 ---------------------------------------------------------------------------
// where the other side ranked the same chunk: same rank, higher, lower, or not at all
function move(hit, otherRanks, otherLabel) {
  const other = otherRanks.get(hit.chunk_id);
  if (other == null) {
    return el("span", { class: "move move-only", title: `${otherLabel} did not find it` }, "only here");
  }
  if (other === hit.rank) return el("span", { class: "move move-same", title: "same rank on both sides" }, "=");
  const up = hit.rank < other;
  return el("span", { class: `move ${up ? "move-up" : "move-down"}`, title: `rank ${other} on ${otherLabel}` },
    `${up ? "▲" : "▼"} ${otherLabel}: ${other}`);
}

function side(result, info, otherRanks, otherLabel, terms, hrefFor) {
  return el("section", { class: "side", "aria-label": info.label },
    el("h3", {}, info.label, " ", el("span", { class: "space" }, info.space)),
    el("p", { class: "side-facts" }, [result.backend, result.timings_ms && result.timings_ms.total != null
      ? `${Math.round(result.timings_ms.total)} ms` : null].filter(Boolean).join(" · ")),
    el("ol", { class: "side-hits" }, result.hits.map((hit) => el("li", { class: "hit" },
      el("a", { class: "hit-link", href: hrefFor(hit.chunk_id), "data-chunk": hit.chunk_id },
        el("span", { class: "line1" },
          el("span", { class: "rank" }, `${hit.rank}.`),
          el("span", { class: "name" }, fileName(hit.path)),
          score(hit),
          move(hit, otherRanks, otherLabel)),
        el("span", { class: "snippet" }, highlighted(hit.snippet || hit.text, terms)))))));
}

export function renderCompare(section, data, terms, hrefFor) {
  const ranks = (r) => new Map(r.hits.map((h) => [h.chunk_id, h.rank]));
  const [left, right] = data.sides;
  section.replaceChildren(
    el("p", { class: "agreement" },
      `overlap@${data.left.hits.length || 0}: ${data.overlap_at_k.toFixed(2)} · rank-biased overlap: ${data.rbo.toFixed(2)} · `
      + `${data.only_left.length} only on ${left.label}, ${data.only_right.length} only on ${right.label}`),
    el("div", { class: "sides" },
      side(data.left, left, ranks(data.right), right.label, terms, hrefFor),
      side(data.right, right, ranks(data.left), left.label, terms, hrefFor)));
}

// -- library status ----------------------------------------------------------------------------
function table(caption, head, rows) {
  return el("table", {},
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, String(c)))))));
}

function progress(st) {
  const lines = [];
  if (st.writing) {
    const started = st.settings?.sync_started?.at;
    lines.push(`An index run${started ? ` started ${started.replace("T", " ").slice(0, 16)} UTC` : ""} is writing `
      + `the library: ${st.documents} documents, ${st.chunks} chunks so far.`);
  }
  if (st.interrupted) {
    const folders = (st.unfinished || []).length ? ` (not finished: ${st.unfinished.join(", ")})` : "";
    lines.push(`The index run started ${st.interrupted} did not finish${folders}; run hefsearch index again.`);
  }
  const w = st.freshness && st.freshness.watcher;
  if (w && w.pending) lines.push(`The watcher has ${w.pending} change(s) to index.`);
  for (const s of st.spaces) {
    if (!s.complete) lines.push(`${s.name}: ${s.count} of ${st.chunks} chunks have vectors.`);
  }
  return lines.length ? lines : ["Nothing is being indexed."];
}

export function renderStatus(section, st) {
  const def = st.spaces.find((s) => s.name === st.default_space);
  const dl = el("dl", {},
    el("dt", {}, "Library"), el("dd", {}, el("code", {}, st.path)),
    el("dt", {}, "Folders"), el("dd", {}, st.roots.length ? el("ul", {}, st.roots.map((r) => el("li", {}, el("code", {}, r)))) : "none yet"),
    el("dt", {}, "Freshness"), el("dd", { id: "status-freshness" }, freshnessText(st.freshness)),
    el("dt", {}, "Queries encoded by"), el("dd", { id: "status-backend" },
      st.backend || (def ? `${def.label || def.kind} (not opened yet)` : "nothing: keyword search only"),
      st.default_space ? ` · space ${st.default_space}` : ""),
    el("dt", {}, "Size"), el("dd", {}, `${st.documents} documents, ${st.chunks} chunks`),
    el("dt", {}, "Indexing"), el("dd", { id: "status-progress" }, progress(st).join(" ")));
  const failures = st.failures.length
    ? table(`${st.failures.length} file(s) could not be read`, ["file", "reason"],
      st.failures.slice(0, 50).map((f) => [f.path, f.reason]))
    : null;
  section.replaceChildren(dl,
    table("Vector spaces", ["space", "device", "kind", "chunks", "complete"],
      st.spaces.map((s) => [s.name, s.label || "", s.kind, s.count, s.complete ? "yes" : "no"])),
    table("Documents per kind", ["kind", "documents"], Object.entries(st.kinds || {})),
    table("Chunks per language", ["language", "chunks"], Object.entries(st.langs || {})),
    failures);
}
