// The JSON API of hefsearch serve, with the token when the server asks for one. The token lives
// in this tab's sessionStorage only: never in the URL, a cookie or the
// browser's lasting storage.
const KEY = "hefsearch.token";

export class ApiError extends Error {
  constructor(status, message, hint) {
    super(message);
    this.status = status;
    this.hint = hint || "";
  }
}

let asking = null; // one token dialog at a time, however many requests were refused

function askToken(message) {
  if (asking) return asking;
  asking = new Promise((resolve) => {
    const dialog = document.getElementById("login");
    const form = document.getElementById("login-form");
    const input = document.getElementById("token");
    document.getElementById("login-error").textContent = message;
    input.value = "";
    const done = (event) => {
      event.preventDefault();
      const token = input.value.trim();
      if (!token) return;
      sessionStorage.setItem(KEY, token);
      input.value = "";
      form.removeEventListener("submit", done);
      dialog.close();
      asking = null;
      resolve();
    };
    form.addEventListener("submit", done);
    dialog.addEventListener("cancel", (event) => event.preventDefault()); // nothing works without it
    dialog.showModal();
    input.focus();
  });
  return asking;
}

export async function api(path, params, { signal } = {}) {
  const url = path + (params && String(params) ? "?" + params : "");
  for (;;) {
    const token = sessionStorage.getItem(KEY);
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    const response = await fetch(url, { headers, signal, cache: "no-store", credentials: "omit" });
    if (response.status === 401) {
      sessionStorage.removeItem(KEY);
      await askToken(token ? "That token was refused: check it and try again." : "");
      continue;
    }
    let data;
    try {
      data = await response.json();
    } catch {
      throw new ApiError(response.status, `The server answered ${response.status} without JSON.`);
    }
    if (!response.ok) {
      const error = data.error || {};
      throw new ApiError(response.status, error.message || `HTTP ${response.status}`, error.hint);
    }
    return data;
  }
}
