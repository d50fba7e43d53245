// DocQuery's page: sign-in, questions with streamed answers, citations, documents.
// Everything from the service is inserted as text, except `answer_html`, which the service renders
// and sanitises (CommonMark, then an allowlist); it goes in through the one Trusted Types policy
// below and is checked against the same allowlist here. The CSP requires Trusted Types, so any other
// HTML sink throws instead of running.

const $ = (id) => document.getElementById(id);
const ALLOWED = new Set(["P", "BR", "EM", "STRONG", "CODE", "PRE", "UL", "OL", "LI", "BLOCKQUOTE", "HR", "A",
  "H1", "H2", "H3", "H4", "H5", "H6"]);
const MARKER = /\[S([0-9]{1,4})\]/g;
const MAX_HISTORY_TURNS = 8;
const MAX_HISTORY_CHARS = 4000;

const policy = window.trustedTypes
  ? window.trustedTypes.createPolicy("docquery-answer", { createHTML: (html) => html })
  : { createHTML: (html) => html };

const state = { csrf: "", history: [], busy: false, cursors: [null], page: 0, next: null, opener: null, job: 0 };
const FINAL = new Set(["indexed", "quarantined", "failed", "skipped"]);

// -- the service ---------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

async function call(method, url, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = state.csrf || "sign-in";
  const form = body instanceof FormData;  // the browser writes a multipart body's Content-Type and boundary
  if (body !== undefined && !form) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method, headers, credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : form ? body : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "The service cannot be reached. Check your connection and try again.");
  }
  if (!response.ok) throw await failure(response);
  return response;
}

async function failure(response) {
  let message = "";
  try {
    message = (await response.json()).error.message || "";
  } catch { /* not our envelope */ }
  const retry = parseInt(response.headers.get("Retry-After") || "", 10);
  return new ApiError(response.status, message, Number.isFinite(retry) ? retry : null);
}

function sentence(err) {
  switch (err.status) {
    case 0: return err.message;
    case 401: return "Your session has ended. Sign in again; your question is kept.";
    case 403: return err.message.includes("CSRF")
      ? "This page is out of date. Reload it and try again."
      : "Your key or account may not ask questions here. Ask your administrator for the query role.";
    case 404: return "That was not found, or you may not read it.";
    case 413: case 422: return `The request was refused: ${err.message}. Shorten the question or start a new conversation.`;
    case 429: return `Too many requests. Try again in ${err.retryAfter || 1} seconds.`;
    case 502: case 503: case 504:
      return `The service is busy. Try again in ${err.retryAfter || 2} seconds.`;
    default: return "Something went wrong on the service. Try again; if it persists, tell your administrator.";
  }
}

function say(text) { $("status").textContent = text; }

// -- views ---------------------------------------------------------------------------------------

function show(view) {
  for (const id of ["sign-in", "ask", "docs", "upload"]) $(id).hidden = id !== view;
  const signedIn = view !== "sign-in";
  $("nav").hidden = !signedIn;
  $("account").hidden = !signedIn;
  $("show-ask").setAttribute("aria-current", view === "ask" ? "page" : "false");
  $("show-docs").setAttribute("aria-current", view === "docs" ? "page" : "false");
  $("show-upload").setAttribute("aria-current", view === "upload" ? "page" : "false");
}

function signedIn(who) {
  state.csrf = who.csrf;
  const roles = new Set(who.roles || []);
  $("show-upload").hidden = !roles.has("ingest");
  $("upload-public-row").hidden = !roles.has("admin");
  $("upload-groups").value = (who.groups || []).join(",");
  $("who").textContent = who.principal;
  $("sign-in-error").textContent = "";
  show("ask");
  $("question").focus();
}

function toSignIn(message) {
  state.csrf = "";
  $("sign-in-error").textContent = message || "";
  show("sign-in");
  $("api-key").focus();
}

function handle(err) {
  if (err.status === 401) {
    toSignIn(sentence(err));
  } else {
    say(sentence(err));
  }
}

async function start() {
  try {
    const who = await (await call("GET", "/ui/session")).json();
    $("sso").hidden = !who.oidc;
    if (who.signed_in) signedIn(who); else toSignIn("");
  } catch (err) {
    toSignIn(err.status === 401 ? "Your session has ended or is not valid. Sign in again." : sentence(err));
  }
}

$("key-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const field = $("api-key");
  try {
    const who = await (await call("POST", "/ui/session", { api_key: field.value })).json();
    field.value = "";
    say("");
    signedIn(who);
  } catch (err) {
    $("sign-in-error").textContent = err.status === 401 ? "That API key is not valid." : sentence(err);
    field.focus();
  }
});

$("sign-out").addEventListener("click", async () => {
  try {
    await call("POST", "/ui/session/end");
  } catch { /* signed out either way: the cookie is cleared or was not valid */ }
  clearConversation();
  $("docs-rows").replaceChildren();
  $("question").value = "";
  say("Signed out.");
  toSignIn("");
});

$("show-ask").addEventListener("click", () => { show("ask"); $("question").focus(); });
$("show-docs").addEventListener("click", () => { show("docs"); loadDocuments(0); });

// -- asking --------------------------------------------------------------------------------------

function clearConversation() {
  state.history = [];
  $("conversation").replaceChildren();
}

$("new-conversation").addEventListener("click", () => {
  clearConversation();
  say("New conversation.");
  $("question").focus();
});

$("question").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("ask-form").requestSubmit();
});

$("ask-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (question && !state.busy) ask(question);
});

function keptHistory() {
  const turns = state.history.slice(-MAX_HISTORY_TURNS);
  while (turns.length && turns.reduce((n, t) => n + t.content.length, 0) > MAX_HISTORY_CHARS) turns.shift();
  return turns;
}

async function ask(question) {
  state.busy = true;
  $("ask-button").disabled = true;
  say("Searching your documents…");
  const turn = document.createElement("li");
  turn.className = "turn";
  const q = document.createElement("p");
  q.className = "q";
  q.textContent = question;
  const answer = document.createElement("div");
  answer.className = "answer streaming";
  answer.setAttribute("aria-busy", "true");
  turn.append(q, answer);
  $("conversation").append(turn);
  try {
    const response = await call("POST", "/v1/query", { question, history: keptHistory(), stream: true });
    const result = await readStream(response, answer);
    finish(turn, answer, result);
    state.history.push({ role: "user", content: question }, { role: "assistant", content: result.text });
    $("question").value = "";
    say("Answer complete.");
  } catch (err) {
    turn.remove();
    handle(err);
  } finally {
    state.busy = false;
    $("ask-button").disabled = false;
  }
}

async function readStream(response, answer) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const live = document.createTextNode("");
  answer.append(live);
  const result = { text: "", citations: [], done: null };
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const event = parseFrame(frame);
      if (!event) continue;
      if (event.name === "citations") result.citations = event.data.citations || [];
      else if (event.name === "delta") { result.text += event.data.text || ""; live.data = result.text; }
      else if (event.name === "done") result.done = event.data;
      else if (event.name === "error") throw new ApiError(503, event.data.error.message, null);
    }
    if (done) break;
  }
  if (!result.done) throw new ApiError(503, "the answer was cut off", null);
  return result;
}

function parseFrame(frame) {
  let name = "message";
  let data = "";
  for (const line of frame.split("\n")) {
    if (line.startsWith("event: ")) name = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return null;
  try {
    return { name, data: JSON.parse(data) };
  } catch {
    return null;
  }
}

function finish(turn, answer, result) {
  const { done, citations } = result;
  answer.classList.remove("streaming");
  answer.removeAttribute("aria-busy");
  const badge = document.createElement("p");
  badge.className = "badge";
  if (!citations.length) badge.textContent = "Not found in the documents you can read";
  else if (done.mode === "extractive") badge.textContent = "Extractive answer: passages quoted, no language model";
  else if (done.uncited) badge.textContent = "Unsupported: this answer cites none of its sources";
  else if (done.finish_reason === "length") badge.textContent = "Cut short: the answer reached its length limit";
  answer.replaceChildren(renderAnswer(done.answer_html, citations));
  if (badge.textContent) turn.insertBefore(badge, answer);
  if (citations.length) turn.append(sourceList(citations));
}

function renderAnswer(html, citations) {
  const template = document.createElement("template");
  template.innerHTML = policy.createHTML(html || "");
  const fragment = template.content;
  enforceAllowlist(fragment);
  linkMarkers(fragment, citations);
  return fragment;
}

// The service already allowlisted this HTML; checking again here costs little and keeps one mistake
// from being enough.
function enforceAllowlist(root) {
  for (const el of [...root.querySelectorAll("*")]) {
    if (!ALLOWED.has(el.tagName)) { el.replaceWith(document.createTextNode(el.textContent)); continue; }
    for (const attr of [...el.attributes]) {
      const ok = (el.tagName === "A" && (attr.name === "href" || attr.name === "rel"))
        || (el.tagName === "OL" && attr.name === "start");
      if (!ok) el.removeAttribute(attr.name);
    }
    if (el.tagName === "A") {
      const href = el.getAttribute("href");
      if (href !== null && !/^https?:\/\//i.test(href)) el.removeAttribute("href");
      el.setAttribute("rel", "noopener noreferrer");
    }
  }
}

function linkMarkers(root, citations) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) {
    if (!walker.currentNode.parentElement?.closest("code, pre")) nodes.push(walker.currentNode);
  }
  for (const node of nodes) {
    const text = node.data;
    MARKER.lastIndex = 0;
    if (!MARKER.test(text)) continue;
    MARKER.lastIndex = 0;
    const parts = document.createDocumentFragment();
    let at = 0;
    for (const m of text.matchAll(MARKER)) {
      const citation = citations.find((c) => c.id === `S${Number(m[1])}`);
      if (!citation) continue;
      parts.append(text.slice(at, m.index), citeButton(citation, `S${Number(m[1])}`));
      at = m.index + m[0].length;
    }
    parts.append(text.slice(at));
    node.replaceWith(parts);
  }
}

function citeButton(citation, label) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "cite";
  button.textContent = label;
  button.setAttribute("aria-label", `${label}: ${citation.title || citation.source}`);
  button.addEventListener("click", () => openPassage(citation, button));
  return button;
}

function sourceList(citations) {
  const list = document.createElement("ol");
  list.className = "sources";
  list.setAttribute("aria-label", "Sources");
  for (const c of citations) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `${c.id} ${c.title || c.source}${c.page ? ` (${c.page})` : ""}`;
    button.addEventListener("click", () => openPassage(c, button));
    item.append(button);
    list.append(item);
  }
  return list;
}

// -- passages ------------------------------------------------------------------------------------

// Citation offsets count code points; JavaScript strings count UTF-16 units.
function utf16Index(text, codePoints) {
  let units = 0;
  let seen = 0;
  for (const ch of text) {
    if (seen === codePoints) return units;
    units += ch.length;
    seen += 1;
  }
  return seen === codePoints ? units : -1;
}

function quoteSpan(text, citation, passage) {
  const snippet = citation.snippet || "";
  if (!snippet) return null;
  const from = (citation.char_start ?? 0) - (passage.char_start ?? 0);
  const start = from >= 0 ? utf16Index(text, from) : -1;
  if (start >= 0 && text.startsWith(snippet, start)) return [start, start + snippet.length];
  const found = text.indexOf(snippet);
  return found >= 0 ? [found, found + snippet.length] : null;
}

async function openPassage(citation, opener) {
  try {
    const url = `/v1/passages/${encodeURIComponent(citation.doc_id)}/${encodeURIComponent(citation.chunk_index)}`;
    const passage = await (await call("GET", url)).json();
    $("passage-title").textContent = `${citation.id}: ${passage.title || passage.source}`;
    const where = [passage.source, passage.page].filter(Boolean).join(" · ");
    $("passage-where").textContent = where;
    const span = quoteSpan(passage.text, citation, passage);
    const parts = [passage.text];
    if (span) {
      const mark = document.createElement("mark");
      mark.textContent = passage.text.slice(span[0], span[1]);
      parts.splice(0, 1, passage.text.slice(0, span[0]), mark, passage.text.slice(span[1]));
    }
    $("passage-text").replaceChildren(context(passage.before), ...parts, context(passage.after));
    state.opener = opener;
    $("passage").showModal();
    $("passage-close").focus();
    $("passage-text").querySelector("mark")?.scrollIntoView({ block: "center" });
  } catch (err) {
    handle(err);
  }
}

// The document's text around the passage, shown as context (the passage itself is what was cited).
function context(text) {
  const part = document.createElement("span");
  part.className = "context";
  part.textContent = text || "";
  return part;
}

$("passage").addEventListener("close", () => state.opener?.focus());

// -- documents -----------------------------------------------------------------------------------

$("docs-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.cursors = [null];
  loadDocuments(0);
});
$("docs-next").addEventListener("click", () => {
  if (state.next) { state.cursors[state.page + 1] = state.next; loadDocuments(state.page + 1); }
});
$("docs-prev").addEventListener("click", () => { if (state.page > 0) loadDocuments(state.page - 1); });

async function loadDocuments(page) {
  const params = new URLSearchParams({ limit: "20" });
  const cursor = state.cursors[page];
  if (cursor) params.set("cursor", cursor);
  const title = $("title-filter").value.trim();
  if (title) params.set("title", title);
  try {
    const listing = await (await call("GET", `/v1/documents?${params}`)).json();
    state.page = page;
    state.next = listing.next_cursor;
    const rows = listing.documents.map((d) => {
      const row = document.createElement("tr");
      for (const value of [d.title || d.doc_id, d.source, d.ingested_at]) {
        const cell = document.createElement("td");
        cell.textContent = value;
        row.append(cell);
      }
      return row;
    });
    $("docs-rows").replaceChildren(...rows);
    $("docs-prev").disabled = page === 0;
    $("docs-next").disabled = !listing.next_cursor;
    say(rows.length ? `Page ${page + 1}: ${rows.length} documents.` : "No documents match.");
  } catch (err) {
    handle(err);
  }
}

// -- uploads -------------------------------------------------------------------------------------

$("show-upload").addEventListener("click", () => { show("upload"); $("upload-files").focus(); });

$("upload-public").addEventListener("change", () => { $("upload-groups").disabled = $("upload-public").checked; });

function uploadRows(documents) {
  return documents.map((d) => {
    const row = document.createElement("tr");
    for (const value of [d.name, d.status, d.reason || ""]) {
      const cell = document.createElement("td");
      cell.textContent = value;  // names and reasons are the service's data: text only
      row.append(cell);
    }
    return row;
  });
}

function uploadSentence(err) {
  if (err.status === 403 && !err.message.includes("CSRF")) return `The upload was refused: ${err.message}.`;
  if (err.status === 409 || err.status === 413 || err.status === 422 || err.status === 400) {
    return `The upload was refused: ${err.message}.`;
  }
  return sentence(err);
}

// Follows the job until every document is in a final state; a newer upload stops the older one's polling.
async function follow(jobId, ticket) {
  while (ticket === state.job) {
    try {
      const job = await (await call("GET", `/v1/ingest/jobs/${encodeURIComponent(jobId)}`)).json();
      if (ticket !== state.job) return;
      $("upload-rows").replaceChildren(...uploadRows(job.documents));
      if (job.done) {
        const counts = Object.entries(job.counts).filter(([, n]) => n).map(([s, n]) => `${n} ${s}`);
        say(`Upload finished: ${counts.join(", ")}.`);
        return;
      }
    } catch (err) {
      handle(err);
      return;
    }
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
  }
}

$("upload-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = $("upload-files").files;
  if (!files.length) return;
  const body = new FormData();
  for (const file of files) body.append("files", file, file.name);
  if ($("upload-public").checked) body.append("public", "true");
  else body.append("groups", $("upload-groups").value);
  $("upload-button").disabled = true;
  say("Uploading…");
  try {
    const accepted = await (await call("POST", "/v1/documents", body)).json();
    $("upload-rows").replaceChildren(...uploadRows(accepted.documents));
    say(`Uploaded ${accepted.documents.length} files; indexing…`);
    state.job += 1;
    follow(accepted.job_id, state.job);
  } catch (err) {
    if (err.status === 401) handle(err); else say(uploadSentence(err));
  } finally {
    $("upload-button").disabled = false;
  }
});

start();
