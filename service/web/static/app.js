// The Memory page: one module, no build step. It signs in (OIDC code + PKCE, or a dev token),
// keeps the bearer token in sessionStorage and calls only Mneme's public API with it.

const TOKEN_KEY = "mneme.token";
const PKCE_KEY = "mneme.pkce";
const main = document.getElementById("main");
const alertBox = document.getElementById("alert");
const statusBox = document.getElementById("status");
let pageConfig = { oidc: null, dev_tokens: false };
// What the signed-in caller may do beyond its own data, learnt from the API at sign-in: only
// admins change or delete the organization's memories.
const caller = { admin: false };

// ---- small DOM helper: text always goes in as text, never as HTML --------------------------
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    // Styles go through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    else if (key === "style") Object.assign(el.style, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function show(...nodes) {
  main.replaceChildren(...nodes);
}

function say(message) {
  alertBox.textContent = "";
  statusBox.textContent = message;
}

function fail(message) {
  statusBox.textContent = "";
  alertBox.textContent = message;
}

function clearMessages() {
  alertBox.textContent = "";
  statusBox.textContent = "";
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

// ---- the API -----------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, problem) {
    super(problemMessage(status, problem));
    this.status = status;
    this.problem = problem;
  }
}

// What the page shows of a problem: each refused input's own message, named by where it was
// (a 422's `detail` only counts them), else the `detail`, written for people.
function problemMessage(status, problem) {
  const errors = Array.isArray(problem.errors) ? problem.errors : [];
  const said = errors
    .filter((error) => error && typeof error.msg === "string")
    .slice(0, 5)
    .map((error) => {
      const where = (Array.isArray(error.loc) ? error.loc : [])
        .filter((part) => !["body", "query", "path", "header"].includes(part))
        .join(".");
      return where ? `${where}: ${error.msg}` : error.msg;
    });
  if (said.length) return said.join("; ");
  return problem.detail || problem.title || `HTTP ${status}`;
}

async function api(method, path, { body, contentType, headers = {}, raw = false } = {}) {
  const init = { method, headers: { ...headers } };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = contentType || "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    let problem = {};
    try {
      problem = await response.json();
    } catch {
      problem = { detail: `${response.status} ${response.statusText}` };
    }
    if (response.status === 401 && token) {
      sessionStorage.removeItem(TOKEN_KEY);
    }
    throw new ApiError(response.status, problem);
  }
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== "" && value !== null && value !== undefined) search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

const enc = encodeURIComponent;

// ---- sign-in -----------------------------------------------------------------------------
function base64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function discover(issuer) {
  const url = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
  const response = await fetch(url);
  if (!response.ok) throw new Error(`The identity provider's discovery document: ${response.status}`);
  return response.json();
}

function redirectUri() {
  return `${location.origin}${location.pathname}`;
}

async function startOidc() {
  const oidc = pageConfig.oidc;
  const discovery = await discover(oidc.issuer);
  const verifier = randomString();
  const state = randomString();
  const challenge = base64url(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)),
  );
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  location.assign(
    discovery.authorization_endpoint +
      query({
        response_type: "code",
        client_id: oidc.client_id,
        redirect_uri: redirectUri(),
        scope: oidc.scopes,
        state,
        code_challenge: challenge,
        code_challenge_method: "S256",
      }),
  );
}

async function finishOidc(params) {
  const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) || "null");
  sessionStorage.removeItem(PKCE_KEY);
  history.replaceState(null, "", redirectUri());
  if (params.get("error")) {
    throw new Error(`Sign-in refused: ${params.get("error_description") || params.get("error")}`);
  }
  if (!saved || saved.state !== params.get("state")) {
    throw new Error("Sign-in failed: the answer does not match the request (state).");
  }
  const oidc = pageConfig.oidc;
  const discovery = await discover(oidc.issuer);
  const response = await fetch(discovery.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code"),
      redirect_uri: redirectUri(),
      client_id: oidc.client_id,
      code_verifier: saved.verifier,
    }),
  });
  const tokens = await response.json();
  if (!response.ok || !tokens[oidc.token]) {
    throw new Error(`Sign-in failed: ${tokens.error_description || tokens.error || response.status}`);
  }
  sessionStorage.setItem(TOKEN_KEY, tokens[oidc.token]);
}

function signInView() {
  const parts = [h("h2", {}, "Sign in")];
  if (pageConfig.oidc) {
    parts.push(
      h("p", {}, h("button", { type: "button", class: "primary", id: "oidc-sign-in",
        onclick: () => startOidc().catch((e) => fail(e.message)) }, "Sign in with your account")),
    );
  }
  if (pageConfig.dev_tokens) {
    const form = h("form", { class: "grid", id: "dev-mint", "aria-labelledby": "dev-mint-title" },
      h("label", {}, "Tenant", h("input", { name: "tenant", required: true, value: "acme" })),
      h("label", {}, "User", h("input", { name: "user", required: true })),
      h("label", {}, h("span", {}, "Admin"), h("input", { type: "checkbox", name: "admin" })),
      h("button", { type: "submit", class: "primary" }, "Mint a dev token and sign in"));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      try {
        const { token } = await api("POST", "/memory/dev-token", { body: {
          tenant: data.get("tenant"), user: data.get("user"), admin: data.get("admin") === "on" } });
        await useToken(token);
      } catch (e) {
        fail(e.message);
      }
    });
    parts.push(h("section", {}, h("h3", { id: "dev-mint-title" }, "Development: mint a dev token"),
      h("p", { class: "meta" }, "Only on a server running with MNEME_ENV=dev."), form));
  }
  const paste = h("form", { id: "paste-token" },
    h("div", { class: "field" }, h("label", {}, "Bearer token",
      h("textarea", { name: "token", rows: 3, required: true, autocomplete: "off" }))),
    h("p", {}, h("button", { type: "submit" }, "Use this token")));
  paste.addEventListener("submit", (event) => {
    event.preventDefault();
    useToken(new FormData(paste).get("token").trim()).catch((e) => fail(e.message));
  });
  parts.push(h("section", {}, h("h3", {}, "Use a token"),
    h("p", { class: "meta" }, "A JWT or API key, e.g. from `mneme token --tenant acme --user ada`."),
    paste));
  show(...parts);
}

async function useToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  clearMessages();
  if (location.hash && location.hash !== "#/") {
    await route();
  } else {
    // The hashchange listener renders the view (rendering here too would draw it twice).
    location.hash = "#/memories";
  }
}

async function refreshIdentity() {
  const me = await api("GET", "/v1/users/me");
  document.getElementById("whoami").textContent =
    `${me.name ? `${me.name} · ` : ""}${me.id} · tenant ${me.tenant_id}`;
  let admin = false;
  try {
    await api("GET", "/v1/admin/users?limit=1");
    admin = true;
  } catch {
    admin = false;
  }
  caller.admin = admin;
  document.getElementById("nav-admin").hidden = !admin;
  document.getElementById("nav").hidden = false;
  return me;
}

// ---- memories ----------------------------------------------------------------------------
const KINDS = ["", "semantic", "episodic", "procedural"];
const SCOPES = ["", "user", "org"];
const LIFECYCLES = ["", "proposed", "confirmed", "superseded"];

function select(name, label, options, value = "") {
  return h("label", {}, label, h("select", { name },
    options.map((o) => h("option", { value: o, selected: o === value }, o || "any"))));
}

function memoryFilters(data) {
  const value = (key) => (data.get(key) || "").trim();
  const iso = (key) => (value(key) ? new Date(value(key)).toISOString() : "");
  return {
    kind: value("kind"), category: value("category"), scope: value("scope"),
    lifecycle: value("lifecycle"), created_after: iso("created_after"),
    created_before: iso("created_before"),
  };
}

function scoreChart(scores, inThread) {
  const rows = [
    ["lexical", scores.lexical_score],
    ["vector", scores.vector_cosine],
    ["fused", scores.fused_score],
    // Evidence from around the memory and from what the question names: shown when it counted.
    // The session's best match is only evidence for a memory from a thread (outside one it is
    // the memory's own fused score again).
    ...[
      ["neighbours", scores.neighbour_score],
      ["session", inThread ? scores.thread_score : 0],
      ["speaker", scores.speaker_score],
      ["date", scores.date_score],
    ].filter(([, v]) => v > 0),
    ["recency", scores.recency_factor],
    ["confidence", scores.confidence_factor],
    ["final", scores.final_score],
  ];
  const top = Math.max(...rows.map(([, v]) => Math.abs(v ?? 0)), 1e-9);
  return h("div", { class: "scores", role: "group", "aria-label": "Component scores" },
    rows.map(([name, v]) => {
      const width = v === null || v === undefined ? 0 : Math.min(100, (Math.abs(v) / top) * 100);
      const shown = v === null || v === undefined ? "—" : Number(v).toFixed(3);
      return [
        h("span", {}, name),
        h("span", { class: "bar", role: "meter", "aria-label": `${name} score`,
          "aria-valuemin": 0, "aria-valuemax": top.toFixed(3), "aria-valuenow": (v ?? 0).toFixed(3),
          dataset: { score: name } }, h("span", { style: { width: `${width.toFixed(1)}%` } })),
        h("span", { class: "score-value" }, shown),
      ];
    }));
}

// Where a memory lives: the user's own routes, or for a memory the organization shares
// (`scope: "org"`, which a search and a listing with that scope return) the organization's,
// which every user reads and only admins change; a user's route answers 404 for it.
function memoryHome(user, memory) {
  const id = enc(memory.id);
  if (memory.scope === "org") {
    return { api: `/v1/org/memories/${id}`, page: `#/org/memory/${id}`, writable: caller.admin };
  }
  return { api: `/v1/users/${enc(user)}/memories/${id}`, page: `#/u/${enc(user)}/memory/${id}`,
    writable: true };
}

const ORG_READ_ONLY = "Shared by your organization: only an admin can change or delete it.";

function memoryCard(user, memory, scores) {
  const home = memoryHome(user, memory);
  const base = home.api;
  const actions = h("div", { class: "actions" },
    h("a", { href: home.page }, home.writable ? "History and edit" : "History"));
  if (!home.writable) {
    actions.append(h("span", { class: "meta read-only" }, ORG_READ_ONLY));
  }
  if (memory.lifecycle === "proposed" && home.writable) {
    actions.append(h("button", { type: "button", onclick: async () => {
      try {
        await api("PATCH", base, { body: { lifecycle: "confirmed" } });
        say("Confirmed.");
        await route();
      } catch (e) { fail(e.message); }
    } }, "Confirm"));
  }
  if (home.writable) {
    actions.append(h("button", { type: "button", class: "danger",
      "aria-label": `Delete memory: ${memory.text.slice(0, 60)}`, onclick: async () => {
        if (!confirm(`Delete this memory?\n\n${memory.text}`)) return;
        try {
          await api("DELETE", base);
          if (location.hash === home.page) {
            // The memory's own page has nothing left to show: the list it belongs to instead
            // (replaced, not pushed: going back must not land on the deleted memory).
            history.replaceState(null, "",
              memory.scope === "org" || user === "me" ? "#/memories" : `#/u/${enc(user)}/memories`);
          }
          say("Memory deleted.");
          await route();
        } catch (e) { fail(e.message); }
      } }, "Delete"));
  }
  return h("li", { class: "card memory", dataset: { memoryId: memory.id, scope: memory.scope } },
    h("p", { class: "memory-text" }, memory.text),
    h("p", { class: "meta" },
      h("span", { class: "badge" }, memory.kind),
      memory.category && h("span", { class: "badge" }, memory.category),
      h("span", { class: `badge ${memory.lifecycle}` }, memory.lifecycle),
      h("span", { class: "badge" }, memory.scope),
      ` confidence ${memory.confidence.toFixed(2)} · ${when(memory.created_at)}`),
    scores && scoreChart(scores, memory.source_thread_id !== null),
    actions);
}

async function memoriesView(view, user) {
  const list = h("ul", { class: "cards", id: "memory-list", "aria-label": "Memories" });
  const more = h("button", { type: "button", hidden: true }, "More");
  const deleteArea = h("div", { id: "delete-area" });
  const filters = h("form", { class: "grid", id: "filters", "aria-label": "Filter memories" },
    select("kind", "Kind", KINDS),
    h("label", {}, "Category", h("input", { name: "category", placeholder: "e.g. preference" })),
    select("scope", "Scope", SCOPES),
    select("lifecycle", "Lifecycle", LIFECYCLES),
    h("label", {}, "Created after", h("input", { type: "date", name: "created_after" })),
    h("label", {}, "Created before", h("input", { type: "date", name: "created_before" })),
    h("button", { type: "submit", class: "primary" }, "Apply filters"),
    h("button", { type: "button", class: "danger", id: "delete-matching" }, "Delete matching…"),
    h("p", { class: "meta", id: "org-read-only", hidden: true },
      "Organization memories are shared: only an admin can delete them."));
  const searchForm = h("form", { class: "grid", id: "search", role: "search" },
    h("label", {}, "Search memories", h("input", { type: "search", name: "q", required: true })),
    h("button", { type: "submit", class: "primary" }, "Search"));

  let cursor = null;
  // Only the newest listing or search fills the list: the answer to an earlier one (the first
  // page, still on its way when the person searches or applies filters) is dropped, never
  // mixed into the newer results.
  let listing = 0;
  async function load(reset) {
    const mine = reset ? ++listing : listing;
    const params = memoryFilters(new FormData(filters));
    const page = await api("GET", `/v1/users/${enc(user)}/memories${
      query({ ...params, cursor: reset ? null : cursor, limit: 50 })}`);
    if (mine !== listing) return;
    if (reset) list.replaceChildren();
    for (const memory of page.items) list.append(memoryCard(user, memory));
    if (!list.children.length) list.append(h("li", { class: "meta" }, "No memories match."));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  }

  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    deleteArea.replaceChildren();
    load(true).catch((e) => fail(e.message));
  });
  more.addEventListener("click", () => load(false).catch((e) => fail(e.message)));
  const deleteMatching = filters.querySelector("#delete-matching");
  // Organization memories are deleted through the organization's route, by admins only: for
  // anyone else "Delete matching…" is not offered while the filters choose them.
  const offerDelete = () => {
    const readOnly = new FormData(filters).get("scope") === "org" && !caller.admin;
    deleteMatching.hidden = readOnly;
    filters.querySelector("#org-read-only").hidden = !readOnly;
    if (readOnly) deleteArea.replaceChildren();
  };
  filters.addEventListener("change", offerDelete);
  deleteMatching.addEventListener("click", async () => {
    const { scope, ...rest } = memoryFilters(new FormData(filters));
    const org = scope === "org";
    // The organization's route takes the same filters; its memories are all it deletes.
    const params = org ? rest : { ...rest, scope };
    const any = Object.values(params).some((v) => v);
    const path = org ? "/v1/org/memories" : `/v1/users/${enc(user)}/memories`;
    const noun = org ? "organization memories" : "memories";
    const selection = query({ ...params, all: any ? "" : "true" });
    try {
      // The dry run counts what the same filter would delete; nothing changes yet.
      const preview = await api("DELETE", `${path}${selection}${selection ? "&" : "?"}dry_run=true`);
      const go = h("button", { type: "button", class: "danger", id: "confirm-delete",
        disabled: preview.matched === 0, onclick: async () => {
          try {
            const done = await api("DELETE", `${path}${selection}`);
            deleteArea.replaceChildren();
            say(`Deleted ${done.deleted} ${noun}.`);
            await load(true);
          } catch (e) { fail(e.message); }
        } }, `Delete ${preview.matched} ${noun}`);
      const matches = preview.matched === 1
        ? `${org ? "organization memory" : "memory"} matches` : `${noun} match`;
      deleteArea.replaceChildren(h("div", { class: "confirm", role: "alertdialog",
        "aria-labelledby": "delete-count" },
        h("p", { id: "delete-count" },
          `${preview.matched} ${matches} ` +
          (any ? "these filters." : `(no filter: every ${org ? "organization " : ""}memory).`)),
        h("div", { class: "actions" }, go,
          h("button", { type: "button", onclick: () => deleteArea.replaceChildren() }, "Cancel"))));
      go.focus();
    } catch (e) { fail(e.message); }
  });
  searchForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const q = new FormData(searchForm).get("q");
    const mine = ++listing;
    try {
      const result = await api("POST", `/v1/users/${enc(user)}/memories/search`,
        { body: { query: q, limit: 20 } });
      if (mine !== listing) return;
      list.replaceChildren(...result.hits.map((hit) => memoryCard(user, hit.memory, hit.scores)));
      if (!result.hits.length) list.append(h("li", { class: "meta" }, "Nothing found."));
      more.hidden = true;
      say(`${result.hits.length} results (${result.mode}, ${result.fusion} fusion).`);
    } catch (e) { fail(e.message); }
  });

  view.show(h("h2", {}, "Memories"), searchForm,
    h("details", { open: true }, h("summary", {}, "Filters"), filters), deleteArea, list, more);
  await load(true);
}

async function memoryView(view, user, id, scope = "user") {
  const home = memoryHome(user, { id, scope });
  const base = home.api;
  const [memory, history] = await Promise.all([api("GET", base), api("GET", `${base}/history`)]);
  const edit = h("form", { id: "edit-memory" },
    h("div", { class: "field" }, h("label", {}, "Text",
      h("textarea", { name: "text", rows: 3, required: true }, memory.text))),
    h("p", {}, h("button", { type: "submit", class: "primary" }, "Save text")));
  edit.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("PATCH", base, { body: { text: new FormData(edit).get("text") } });
      say("Saved.");
      await route();
    } catch (e) { fail(e.message); }
  });
  const timeline = h("ol", { class: "timeline", "aria-label": "History" },
    history.items.map((event) => h("li", {},
      h("strong", {}, event.action), ` by ${event.actor} · ${when(event.created_at)}`,
      event.old_text && h("pre", { "aria-label": "before" }, `− ${event.old_text}`),
      event.new_text && h("pre", { "aria-label": "after" }, `+ ${event.new_text}`))));
  const back = scope === "org" ? "#/memories" : `#/u/${enc(user)}/memories`;
  view.show(h("p", {}, h("a", { href: back }, "← Memories")),
    h("h2", {}, scope === "org" ? "Organization memory" : "Memory"),
    h("ul", { class: "cards" }, memoryCard(user, memory)),
    ...(home.writable ? [h("h3", {}, "Edit"), edit] : []), h("h3", {}, "History"), timeline);
}

// ---- profile -----------------------------------------------------------------------------
async function profileView(view, user) {
  const path = `/v1/users/${enc(user)}/profile`;
  const read = await api("GET", path, { raw: true });
  // Writes carry the ETag of what the person saw: a change made meanwhile elsewhere is refused
  // (412) rather than overwritten.
  const etag = read.headers.get("ETag");
  const profile = await read.json();
  const patch = async (operations) => {
    try {
      await api("PATCH", path, { body: operations, contentType: "application/json-patch+json",
        headers: etag ? { "If-Match": etag } : {} });
      say("Profile saved.");
      await route();
    } catch (e) { fail(e.message); }
  };
  const rows = Object.entries(profile.profile).map(([key, value]) => {
    const source = profile.sources[key];
    const input = h("textarea", { rows: 1, "aria-label": `Value of ${key}` }, JSON.stringify(value));
    const cells = [h("th", { scope: "row" }, key),
      h("td", {}, source === "account" ? h("pre", {}, JSON.stringify(value)) : input),
      h("td", {}, source === "account" ? "identity provider" : "you / memory")];
    const actions = h("td", {});
    if (source !== "account") {
      actions.append(
        h("button", { type: "button", onclick: () => {
          let parsed;
          try { parsed = JSON.parse(input.value); } catch { parsed = input.value; }
          patch([{ op: "replace", path: `/${key}`, value: parsed }]);
        } }, "Save"), " ",
        h("button", { type: "button", class: "danger",
          onclick: () => patch([{ op: "remove", path: `/${key}` }]) }, "Remove"));
    }
    cells.push(actions);
    return h("tr", { dataset: { key } }, cells);
  });
  const add = h("form", { class: "grid", id: "profile-add" },
    h("label", {}, "Field", h("input", { name: "key", required: true })),
    h("label", {}, "Value (JSON or text)", h("input", { name: "value", required: true })),
    h("button", { type: "submit", class: "primary" }, "Add field"));
  add.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(add);
    let value;
    try { value = JSON.parse(data.get("value")); } catch { value = data.get("value"); }
    patch([{ op: "add", path: `/${data.get("key")}`, value }]);
  });
  view.show(h("h2", {}, "Profile"),
    h("p", { class: "meta" }, `${profile.key_count} stored fields · ${profile.bytes} of ` +
      `${profile.max_bytes} bytes · version ${profile.version}. Fields from the identity ` +
      "provider are changed there, not here."),
    h("div", { class: "table-wrap" }, h("table", { id: "profile-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Field"), h("th", {}, "Value"),
        h("th", {}, "Source"), h("th", {}, h("span", { class: "skip" }, "Actions")))),
      h("tbody", {}, rows))),
    h("h3", {}, "Add a field"), add);
}

// ---- threads -----------------------------------------------------------------------------
async function threadsView(view, user) {
  const page = await api("GET", `/v1/users/${enc(user)}/threads?limit=100`);
  view.show(h("h2", {}, "Threads"),
    page.items.length
      ? h("ul", { class: "cards" }, page.items.map((t) => h("li", { class: "card" },
        h("a", { href: `#/u/${enc(user)}/thread/${enc(t.id)}` }, t.title || "(untitled)"),
        h("p", { class: "meta" }, `last message ${when(t.last_message_at)}`))))
      : h("p", { class: "meta" }, "No threads."));
}

async function threadView(view, user, id) {
  const base = `/v1/users/${enc(user)}/threads/${enc(id)}`;
  const [thread, messages, summaries] = await Promise.all([
    api("GET", base), api("GET", `${base}/messages?limit=200`), api("GET", `${base}/summaries`)]);
  view.show(h("p", {}, h("a", { href: `#/u/${enc(user)}/threads` }, "← Threads")),
    h("h2", {}, thread.title || "(untitled)"),
    h("h3", {}, "Summaries"),
    summaries.items.length
      ? h("ol", { class: "timeline" }, summaries.items.map((s) => h("li", {},
        h("strong", {}, `Messages ${s.start_index}–${s.end_index}`),
        h("ul", {}, s.entries.map((e) => h("li", {}, typeof e === "string" ? e : JSON.stringify(e)))))))
      : h("p", { class: "meta" }, "No summaries yet."),
    h("h3", {}, "Messages"),
    h("ol", { class: "cards", id: "messages" }, messages.items.map((m) => h("li", { class: "card" },
      h("p", { class: "meta" }, h("span", { class: "badge" }, m.label || m.role),
        `${m.role} · ${when(m.created_at)}`),
      h("p", {}, m.content)))));
}

// ---- export ------------------------------------------------------------------------------
async function download(user) {
  const response = await api("GET", `/v1/users/${enc(user)}/export`, { raw: true });
  const blob = await response.blob();
  const link = h("a", { href: URL.createObjectURL(blob), download: `mneme-${user}.ndjson` });
  document.body.append(link);
  link.click();
  link.remove();
  say(`Export of ${user} downloaded.`);
}

// ---- admin -------------------------------------------------------------------------------
function counts(object) {
  return h("table", { class: "counts" }, h("tbody", {}, Object.entries(object).map(([k, v]) =>
    h("tr", { dataset: { table: k } }, h("th", { scope: "row" }, k), h("td", {}, String(v))))));
}

async function adminView(view) {
  const [users, jobs, audit] = await Promise.all([
    api("GET", "/v1/admin/users?limit=100"), api("GET", "/v1/admin/jobs"),
    api("GET", "/v1/admin/audit?limit=20")]);
  view.show(h("h2", {}, "Users"),
    h("div", { class: "table-wrap" }, h("table", { id: "users" },
      h("thead", {}, h("tr", {}, ["User", "Memories (sem/epi/proc)", "Threads", "Messages",
        "Last active"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, users.items.map((u) => h("tr", { dataset: { user: u.id } },
        h("td", {}, h("a", { href: `#/admin/users/${enc(u.id)}` }, u.name || u.id)),
        h("td", {}, `${u.memories.semantic}/${u.memories.episodic}/${u.memories.procedural}`),
        h("td", {}, String(u.threads)), h("td", {}, String(u.messages)),
        h("td", {}, when(u.last_active_at))))))),
    h("h2", {}, "Jobs"),
    h("p", { class: "meta" }, `Write path: ${jobs.extraction} (${jobs.strategy}).`),
    h("div", { class: "table-wrap" }, h("table", { id: "jobs" },
      h("thead", {}, h("tr", {}, ["Kind", "Status", "Jobs", "Retrying", "Interrupted", "Oldest"]
        .map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, jobs.counts.length ? jobs.counts.map((c) => h("tr", {},
        h("td", {}, c.kind), h("td", {}, c.status), h("td", {}, String(c.jobs)),
        h("td", {}, String(c.retrying)), h("td", {}, String(c.interrupted)),
        h("td", {}, when(c.oldest_created_at))))
        : h("tr", {}, h("td", { colspan: 6 }, "The queue is empty."))))),
    h("h3", {}, "Recent failures"),
    jobs.failures.length ? h("ul", {}, jobs.failures.map((f) => h("li", {},
      `${f.kind} · ${f.user_id || "—"} · attempt ${f.attempt}${f.final ? " (gave up)" : ""} · `
      + `${when(f.failed_at)}: ${f.error}`))) : h("p", { class: "meta" }, "None."),
    h("h2", {}, "Audit trail"),
    h("ol", { class: "timeline", id: "audit" }, audit.items.map((a) => h("li", {},
      h("strong", {}, a.action), ` ${a.target_type} ${a.target_id || ""} by ${a.actor_kind} `
      + `${a.actor_id} · ${when(a.created_at)}`))));
}

async function adminUserView(view, user) {
  const overview = await api("GET", `/v1/admin/users/${enc(user)}`);
  const area = h("div", { id: "purge-area" });
  const purge = h("button", { type: "button", class: "danger", id: "purge", onclick: () => {
    const go = h("button", { type: "button", class: "danger", id: "confirm-purge",
      onclick: async () => {
        try {
          const report = await api("DELETE", `/v1/admin/users/${enc(user)}`);
          area.replaceChildren(h("section", { id: "purge-report", "aria-labelledby": "pr" },
            h("h3", { id: "pr" }, report.verified
              ? h("span", { class: "ok" }, "Purged and verified: nothing remains.")
              : h("span", { class: "error" }, "Purged, but the verification found rows left.")),
            h("h4", {}, "Deleted"), counts(report.deleted),
            h("h4", {}, "Remaining (verification)"), counts(report.remaining)));
          purge.disabled = true;
        } catch (e) { fail(e.message); }
      } }, `Purge ${user} for good`);
    area.replaceChildren(h("div", { class: "confirm", role: "alertdialog",
      "aria-labelledby": "purge-title" },
      h("p", { id: "purge-title" }, h("strong", {}, `Purge ${user}?`),
        " Everything stored about this user is deleted and cannot be restored (export first):"),
      h("ul", { id: "purge-preview" },
        h("li", {}, `${overview.memories.semantic} semantic, ${overview.memories.episodic} ` +
          `episodic and ${overview.memories.procedural} procedural memories`),
        h("li", {}, `${overview.threads} threads with ${overview.messages} messages`),
        h("li", {}, "the profile, the account, job and audit records about the user")),
      h("div", { class: "actions" }, go,
        h("button", { type: "button", onclick: () => area.replaceChildren() }, "Cancel"))));
    go.focus();
  } }, "Purge…");
  view.show(h("p", {}, h("a", { href: "#/admin" }, "← Users")),
    h("h2", {}, overview.name || overview.id),
    h("p", { class: "meta" }, `${overview.email || "no email"} · since ${when(overview.created_at)}`
      + ` · last active ${when(overview.last_active_at)}`),
    counts({ "semantic memories": overview.memories.semantic,
      "episodic memories": overview.memories.episodic,
      "procedural memories": overview.memories.procedural,
      threads: overview.threads, messages: overview.messages }),
    h("div", { class: "actions" },
      h("button", { type: "button", onclick: () => download(user).catch((e) => fail(e.message)) },
        "Export (NDJSON)"), purge),
    area);
}

// ---- routing -----------------------------------------------------------------------------
const ROUTES = [
  [/^#\/(?:memories)?$/, (v) => memoriesView(v, "me")],
  [/^#\/u\/([^/]+)\/memories$/, (v, u) => memoriesView(v, u)],
  [/^#\/u\/([^/]+)\/memory\/([^/]+)$/, (v, u, id) => memoryView(v, u, id)],
  [/^#\/org\/memory\/([^/]+)$/, (v, id) => memoryView(v, "me", id, "org")],
  [/^#\/profile$/, (v) => profileView(v, "me")],
  [/^#\/u\/([^/]+)\/profile$/, (v, u) => profileView(v, u)],
  [/^#\/threads$/, (v) => threadsView(v, "me")],
  [/^#\/u\/([^/]+)\/threads$/, (v, u) => threadsView(v, u)],
  [/^#\/u\/([^/]+)\/thread\/([^/]+)$/, (v, u, id) => threadView(v, u, id)],
  [/^#\/admin$/, (v) => adminView(v)],
  [/^#\/admin\/users\/([^/]+)$/, (v, u) => adminUserView(v, u)],
];

let routeSerial = 0;

async function route() {
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    document.getElementById("nav").hidden = true;
    document.getElementById("whoami").textContent = "";
    signInView();
    return;
  }
  const hash = location.hash || "#/memories";
  for (const link of document.querySelectorAll("nav a")) {
    link.toggleAttribute("aria-current", hash.startsWith(link.getAttribute("href")));
    if (link.hasAttribute("aria-current")) link.setAttribute("aria-current", "page");
  }
  // Views load asynchronously: only the latest navigation may draw, so a slow answer for a
  // page the person already left never replaces the page they are on.
  const mine = ++routeSerial;
  const view = { show: (...nodes) => mine === routeSerial && show(...nodes) };
  try {
    if (document.getElementById("nav").hidden) await refreshIdentity();
    const found = ROUTES.find(([pattern]) => pattern.test(hash));
    if (!found) {
      view.show(h("h2", {}, "Not found"), h("p", {}, h("a", { href: "#/memories" }, "Memories")));
      return;
    }
    const args = hash.match(found[0]).slice(1).map(decodeURIComponent);
    await found[1](view, ...args);
    if (mine === routeSerial) main.focus();
  } catch (e) {
    if (mine !== routeSerial) return;
    show(h("h2", {}, "Cannot show this page"), h("p", { class: "error", id: "page-error",
      dataset: { route: hash } }, e.message));
    if (!sessionStorage.getItem(TOKEN_KEY)) signInView();
    fail(e.message);
  }
}

async function start() {
  document.getElementById("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.hash = "";
    route();
  });
  document.getElementById("export-me").addEventListener("click", () =>
    download("me").catch((e) => fail(e.message)));
  window.addEventListener("hashchange", () => { clearMessages(); route(); });
  // A link to the page already shown fires no hashchange: draw it afresh (e.g. after a search).
  document.getElementById("nav").addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (link && link.getAttribute("href") === location.hash) {
      clearMessages();
      route();
    }
  });
  pageConfig = await (await fetch("/memory/config.json")).json();
  const params = new URLSearchParams(location.search);
  if (pageConfig.oidc && (params.has("code") || params.has("error"))) {
    try {
      await finishOidc(params);
    } catch (e) {
      fail(e.message);
    }
  }
  await route();
}

start();
