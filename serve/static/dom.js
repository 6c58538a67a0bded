// Building the page: every piece of text from the library goes in through textContent or
// Text nodes (documents are hostile input); no HTML is ever parsed from data.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child != null && child !== false) node.append(child); // a string becomes a Text node
  }
  return node;
}

// function words not worth highlighting (the TUI skips the same kind)
const STOPWORDS = new Set(`a an and are as at be but by for from has have how i in is it its of on or
that the this to was were what when where which who why will with you your do does did can not no der
die das den dem des ein eine und oder ist sind war wie wo wer was im zu zum zur mit von für auf aus bei
nicht es ich du sie er wir nach vor über um an am als auch so wenn dass noch nur man hat wird kann le la les un une et ou est sont de du au aux en dans pour par sur avec que
qui ne pas el los las y o es son del al por para con se il lo gli di da che het een van te op met dat`.split(/\s+/));

export function queryTerms(query) {
  const words = (query || "").toLowerCase().match(/[\p{L}\p{N}]+/gu) || [];
  return [...new Set(words.filter((w) => w.length > 1 && !STOPWORDS.has(w)))].slice(0, 32);
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// text with the query's words (at the start of a word) in <mark>, as a fragment
export function highlighted(text, terms) {
  const frag = document.createDocumentFragment();
  if (!terms.length || !text) {
    frag.append(text || "");
    return frag;
  }
  const alternatives = [...terms].sort((a, b) => b.length - a.length).map(escapeRe).join("|");
  const re = new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives})`, "giu");
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) frag.append(text.slice(last, m.index));
    frag.append(el("mark", { text: m[0] }));
    last = m.index + m[0].length;
  }
  frag.append(text.slice(last));
  return frag;
}

export function fileName(path) {
  return path.split("/").pop() || path;
}

export function folderOf(path) {
  const name = fileName(path);
  return path.length > name.length ? path.slice(0, path.length - name.length - 1) : "";
}

export function place(item) {
  const parts = [];
  if (item.message) parts.push(`message ${item.message}`);  // a hit inside a mail file
  if (item.page != null) parts.push(`page ${item.page}`);
  if (item.line != null) parts.push(`line ${item.line}`);
  return parts.join(" · ");
}

export function ago(seconds) {
  if (seconds == null) return "never";
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} days ago`;
}

export function freshnessText(fresh) {
  if (!fresh) return "";
  let text = fresh.last_sync ? `synced ${ago(fresh.age_s)}` : "no sync finished yet";
  if (fresh.unfinished && fresh.unfinished.length) { // not up to date, whatever the last sync says
    text = `not up to date: a stopped run left ${fresh.unfinished.length} folder(s) unfinished`
      + (fresh.last_sync ? ` (last sync finished ${ago(fresh.age_s)})` : "");
  }
  const w = fresh.watcher;
  if (!w) return text + "; not watched";
  text += `; watching (${w.mode || "events"})`;
  if (w.pending) text += `, ${w.pending} change(s) pending`;
  if (w.last_error) text += `; last problem: ${w.last_error}`;
  return text;
}
