// The codemode playground: plain JavaScript, no framework, no build step.
// It calls the HTTP API of the server that served it (same origin), with the API key kept in
// sessionStorage.  Everything that comes back is shown with textContent, never parsed as HTML.
"use strict";

const KEY_STORAGE = "codemode.apiKey";
const $ = (id) => document.getElementById(id);

// Each example: [label, JavaScript code, options, Python code].
const EXAMPLES = [
  ["Hello", 'text("hello from a cell");\nreturn 1 + 1;', {}, 'text("hello from a cell")\n1 + 1'],
  ["Demo tools (shipping plugin and travel MCP server)",
    'const quote = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});\n' +
    'const weather = await MCP.travel.forecast({city: "Paris", days: 2});\n' +
    'text(`${quote.carrier}: ${quote.price} ${quote.currency}`);\n' +
    "return {quote, sky: weather.structuredContent.days.map(d => d.sky)};", {},
    'quote = await quote_shipping(origin="DE", destination="FR", weight_kg=2)\n' +
    'weather = await MCP.travel.forecast(city="Paris", days=2)\n' +
    'text(f"{quote[\'carrier\']}: {quote[\'price\']} {quote[\'currency\']}")\n' +
    '{"quote": quote, "sky": [d["sky"] for d in weather["structuredContent"]["days"]]}'],
  ["A client tool (you answer it)",
    'const order = await lookup_order({order_id: "A-17"});\nreturn {destination: order.destination};',
    {clientTools: [{name: "lookup_order", description: "Look an order up by {order_id}",
      input_schema: {type: "object", properties: {order_id: {type: "string"}}, required: ["order_id"]}}]},
    'order = await lookup_order(order_id="A-17")\n{"destination": order["destination"]}'],
  ["An approval (approve or deny the call)",
    'const quote = await quote_shipping({origin: "DE", destination: "US", weight_kg: 30});\nreturn quote.price;',
    {requireApproval: "quote_shipping"},
    'quote = await quote_shipping(origin="DE", destination="US", weight_kg=30)\nquote["price"]'],
  ["A background cell (live events)",
    'for (let i = 1; i <= 3; i++) {\n  await new Promise(r => setTimeout(r, 300));\n  text(`step ${i}`);\n}\n' +
    'return "done";', {background: true},
    'for i in range(1, 4):\n    await sleep(0.3)\n    text(f"step {i}")\n"done"'],
  ["Declarations", 'const files = await API.list();\nreturn files.files.map(f => f.path);', {},
    'files = await API.list()\n[f["path"] for f in files["files"]]'],
];

const python = () => $("language").value === "python";

const state = { cell: null, started: 0, stream: null };

// ---- HTTP ---------------------------------------------------------------------------------------

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let data;
  try { data = JSON.parse(text); } catch (e) { data = { error: { code: "not_json", message: text.slice(0, 500) } }; }
  if (!response.ok) {
    const err = new Error((data.error && data.error.message) || response.statusText);
    err.status = response.status;
    err.body = data;
    throw err;
  }
  return data;
}

// ---- small DOM helpers --------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "testid") node.dataset.testid = v;
    else if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  return node;
}

function pretty(value) { return JSON.stringify(value, null, 2); }

function showError(where, err) {
  const body = err.body ? pretty(err.body) : String(err);
  $("envelope").textContent = body;
  setStatus(err.status ? `refused (${err.status})` : "error");
  addTimeline(`${where} refused`, err.message);
}

function setStatus(text) { $("status").textContent = text; }

// ---- timeline and events ------------------------------------------------------------------------

function addTimeline(label, detail, wallMs) {
  const at = state.started ? Math.round(performance.now() - state.started) : 0;
  const row = el("li", {}, el("span", { class: "at" }, `+${at} ms`), " ", el("strong", {}, label));
  if (detail) row.append(" ", el("span", { class: "detail" }, detail));
  if (wallMs !== undefined) {
    const bar = el("span", { class: "bar", title: `${wallMs} ms` });
    bar.style.width = Math.max(2, Math.min(300, wallMs / 10)) + "px";
    row.append(" ", bar);
  }
  $("timeline").append(row);
}

function addCalls(t) {
  for (const c of (t && t.call_log) || []) {
    const sizes = `${c.request_bytes} B → ${c.reply_bytes === null ? "–" : c.reply_bytes + " B"}`;
    const row = `${c.method}${c.target ? " " + c.target : ""}`;
    addTimeline(`  ${c.id} ${row}`, `${sizes} · ${c.ms} ms · ${c.outcome}`, c.ms);
  }
  if (t && t.call_log_dropped) addTimeline("  …", `${t.call_log_dropped} more calls not listed`);
}

function telemetryText(t) {
  if (!t) return "";
  const cell = t.cell_wall_ms !== undefined && t.cell_wall_ms !== t.wall_ms ? ` (cell ${t.cell_wall_ms} ms)` : "";
  return `wall ${t.wall_ms} ms${cell} · legs ${t.legs} · calls ${t.call_count} · host requests ${t.host_requests}`;
}

function addOutput(entries) {
  for (const entry of entries || []) {
    let text;
    if (entry.type === "text") text = entry.text;
    else if (entry.type === "json") text = pretty(entry.value);
    else text = pretty(entry);
    $("output").append(el("pre", { class: "entry " + entry.type, testid: "output-entry" }, text));
  }
}

// ---- envelopes ----------------------------------------------------------------------------------

function handle(env, via) {
  $("envelope").textContent = pretty(env);
  $("value").textContent = env.status === "completed" ? pretty(env.value) : env.status === "failed" ? env.error : "";
  addOutput(env.output);
  setStatus(env.status + (env.reason ? ` (${env.reason})` : ""));
  const calls = env.pending_tool_calls || [];
  const detail = [env.code, calls.length ? `${calls.length} pending` : "", telemetryText(env.telemetry)];
  addTimeline(`${via} → ${env.status}`, detail.filter(Boolean).join(" · "), env.telemetry && env.telemetry.wall_ms);
  addCalls(env.telemetry);
  for (const call of calls) {
    const kind = call.method === "approval" ? "approval" : "input" in call ? "client tool" : call.method;
    addTimeline(`pending ${call.id}`, `${kind} ${call.tool || ""}`.trim());
  }
  const finished = env.status === "completed" || env.status === "failed";
  if (finished) remember(env);
  $("wait").disabled = finished || env.status === "running";
  $("cancel").disabled = finished;
  renderPending(env.status === "waiting" ? calls : []);
  const needsUser = calls.some((c) => c.method === "approval" || "input" in c);
  if (env.status === "waiting" && !needsUser && env.reason !== "yield" && $("auto-wait").checked) {
    setTimeout(() => resume({}), 0);
  }
}

function renderPending(calls) {
  const box = $("pending");
  box.replaceChildren();
  for (const call of calls) {
    if (call.method === "approval") box.append(approvalForm(call));
    else if ("input" in call) box.append(clientToolForm(call));
  }
}

function approvalForm(call) {
  const reason = el("input", { placeholder: "reason (optional)", testid: "approval-reason" });
  const answer = (approve) => () => {
    const entry = { id: call.id, approve };
    if (reason.value) entry.reason = reason.value;
    addTimeline(`${approve ? "approved" : "denied"} ${call.id}`, call.tool);
    resume({ approvals: [entry] });
  };
  return el("div", { class: "card", testid: "approval" },
    el("div", {}, el("strong", {}, "Approve "), el("code", {}, call.tool || "?"), call.reason ? ` — ${call.reason}` : ""),
    el("pre", {}, pretty(call.input)),
    reason,
    el("button", { testid: "approve", class: "primary", onclick: answer(true) }, "Approve"),
    el("button", { testid: "deny", onclick: answer(false) }, "Deny"));
}

function clientToolForm(call) {
  const value = el("textarea", { rows: "3", spellcheck: "false", testid: "tool-result" });
  value.value = "{}";
  const send = (ok) => () => {
    let entry;
    if (ok) {
      try { entry = { id: call.id, ok: true, value: JSON.parse(value.value) }; } catch (e) {
        value.setCustomValidity("not JSON: " + e.message); value.reportValidity(); return;
      }
    } else entry = { id: call.id, ok: false, error: { message: value.value } };
    addTimeline(`answered ${call.id}`, `${call.name || call.tool} ${ok ? "ok" : "error"}`);
    resume({ tool_results: [entry] });
  };
  return el("div", { class: "card", testid: "client-tool" },
    el("div", {}, el("strong", {}, "Client tool "), el("code", {}, call.name || call.tool)),
    el("pre", {}, pretty(call.input)),
    el("label", {}, "Result (JSON), or an error message", value),
    el("button", { testid: "send-result", class: "primary", onclick: send(true) }, "Send result"),
    el("button", { testid: "send-error", onclick: send(false) }, "Send error"));
}

// ---- run, wait, cancel --------------------------------------------------------------------------

function requestBody() {
  const body = { code: $("code").value };
  if (python()) body.language = "python";
  const field = (id, name, convert) => { const v = $(id).value.trim(); if (v) body[name] = convert ? convert(v) : v; };
  field("session-id", "session_id");
  field("run-id", "run_id");
  field("timeout-ms", "timeout_ms", Number);
  field("require-approval", "require_approval", (v) => v.split(",").map((s) => s.trim()).filter(Boolean));
  const tools = JSON.parse($("client-tools").value.trim() || "[]");
  if (tools.length) body.client_tools = tools;
  if ($("background").checked) body.background = true;
  body.call_log = true; // the timeline lists every nested call
  return body;
}

// The panes of the last cell: emptied for a new run, and when another example is chosen.
const RESULT_PANES = ["output", "timeline", "events", "pending", "value", "envelope"];

function clearResults() {
  for (const id of RESULT_PANES) $(id).replaceChildren();
}

// ---- run history: the tab's last cells (sessionStorage), each restored into the editor on click ----

const HISTORY_STORAGE = "codemode.playground.history";
const HISTORY_SIZE = 20;

function history() {
  try { return JSON.parse(sessionStorage.getItem(HISTORY_STORAGE) || "[]"); } catch { return []; }
}

function remember(env) {
  if (!state.sent || state.sent.cell !== env.cell_id) return;  // once per cell, for the code that ran
  const entry = { code: state.sent.code, language: state.sent.language, status: env.status, code_of: env.code || "" };
  state.sent = null;
  sessionStorage.setItem(HISTORY_STORAGE, JSON.stringify([entry, ...history()].slice(0, HISTORY_SIZE)));
  renderHistory();
}

function renderHistory() {
  const list = $("history");
  list.replaceChildren();
  history().forEach((entry, i) => {
    const first = entry.code.split("\n").find((line) => line.trim()) || "";
    list.append(el("li", { testid: "history-entry" },
      el("button", { class: "link", title: "put this cell back in the editor", onclick: () => restore(entry) }, `#${i + 1}`),
      " ", el("span", { class: "detail" }, `${entry.language} · ${entry.status}${entry.code_of ? " " + entry.code_of : ""} · ${first.slice(0, 60)}`)));
  });
}

function restore(entry) {
  if ($("language").value !== entry.language) {
    $("language").value = entry.language;
    if (editor) editor.setLanguage(python() ? "python" : "javascript");
  }
  $("code").value = entry.code;
  if (editor) editor.setCode(entry.code);
}

async function run() {
  stopStream();
  let body;
  try { body = requestBody(); } catch (e) { showError("exec", new Error("client_tools: " + e.message)); return; }
  clearResults();
  state.started = performance.now();
  state.cell = null;
  setStatus("running…");
  addTimeline("exec", body.background ? "background" : "");
  try {
    const env = await api("POST", "/v1/exec", body);
    state.cell = env.cell_id;
    state.sent = { cell: env.cell_id, code: body.code, language: body.language || "javascript" };
    handle(env, "exec");
    if (body.background && env.status === "running") follow(env.cell_id);
  } catch (err) { showError("exec", err); }
}

async function resume(answers) {
  if (!state.cell) return;
  $("pending").replaceChildren();
  const body = Object.assign({}, answers);
  // A background cell goes on by itself: a short wait hands over the answers and comes back.
  if (state.stream) body.timeout_ms = 1000;
  else { const t = $("timeout-ms").value.trim(); if (t) body.timeout_ms = Number(t); }
  try { handle(await api("POST", `/v1/cells/${encodeURIComponent(state.cell)}/wait`, body), "wait"); }
  catch (err) { showError("wait", err); }
}

async function cancel() {
  if (!state.cell) return;
  try { handle(await api("POST", `/v1/cells/${encodeURIComponent(state.cell)}/cancel`), "cancel"); }
  catch (err) { showError("cancel", err); }
}

// ---- the event stream (fetch, not EventSource: EventSource cannot send the API key) ------------

function stopStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
}

async function follow(cellId) {
  const controller = new AbortController();
  state.stream = controller;
  let lastId = null;
  for (let attempt = 0; attempt < 5 && state.stream === controller; attempt++) {
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (lastId !== null) h["Last-Event-ID"] = lastId;
      const response = await fetch(`/v1/cells/${encodeURIComponent(cellId)}/events`, { headers: h, signal: controller.signal });
      if (!response.ok) { addTimeline("event stream refused", String(response.status)); break; }
      const done = await readEvents(response, (event) => { lastId = event.id; return onEvent(event); });
      if (done) break;
    } catch (err) {
      if (controller.signal.aborted) return;
    }
  }
  if (state.stream === controller) state.stream = null;
}

async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { id: null, kind: "message", data: [] };
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "id") event.id = text;
        else if (name === "event") event.kind = text;
        else if (name === "data") event.data.push(text);
      }
      if (event.data.length && onEvent(event)) return true;
    }
  }
}

function onEvent(event) {
  const data = JSON.parse(event.data.join("\n"));
  $("events").append(el("li", { testid: "event" }, el("code", {}, `${event.id} ${event.kind}`), " ", JSON.stringify(data).slice(0, 300)));
  if (event.kind === "output") addOutput([data]);
  else if (event.kind === "status") { setStatus(data.status); addTimeline(`status ${data.status}`); }
  else if (event.kind === "pending") {
    setStatus(`waiting (${data.reason})`);
    $("wait").disabled = false;
    for (const call of data.pending_tool_calls) addTimeline(`pending ${call.id}`, `${call.method} ${call.tool || ""}`);
    renderPending(data.pending_tool_calls);
  } else if (event.kind === "envelope") { handle(data, "event stream"); return true; }
  return false;
}

// ---- catalog search and declarations ------------------------------------------------------------

async function search() {
  const query = $("search-query").value.trim();
  const list = $("search-results");
  list.replaceChildren();
  if (!query) return;
  // The guest's own search (native and MCP tools, the same ranking a cell sees), run as a headless cell.
  const code = `return await catalog.search(${JSON.stringify(query)}, {limit: 10});`;
  try {
    const hits = await cellValue(code, "playground search");
    if (!hits.length) list.append(el("li", {}, "no tool matches"));
    for (const hit of hits) {
      const name = hit.callableName;
      const call = python() ? `r = await ${name}()\n` : `const r = await ${name}({});\n`;
      list.append(el("li", { testid: "search-hit" },
        el("button", { class: "link", title: "insert a call into the editor", onclick: () => insert(call) }, name),
        // A tool that declares no output schema has no `output`: its line shows the input only.
        " ", el("span", { class: "detail" }, (hit.input || "") + (hit.output ? ` → ${hit.output}` : "")),
        el("div", { class: "detail" }, hit.description || "")));
    }
  } catch (err) { list.append(el("li", {}, err.message)); }
}

function insert(text) {
  if (editor) { editor.insert(text); return; }
  const code = $("code");
  const at = code.selectionStart;
  code.value = code.value.slice(0, at) + text + code.value.slice(at);
  code.focus();
}

// The value of a headless cell (the guest's own view: its catalog search, its files); a cell that
// did not complete throws its error.
async function cellValue(code, title, language) {
  const body = { code, headless: true, title };
  if (language) body.language = language;
  const env = await api("POST", "/v1/exec", body);
  if (env.status !== "completed") throw new Error(env.error || env.status);
  return env.value;
}

// The declarations a cell of the chosen language sees: JavaScript's from the HTTP API, Python's (with
// the .pyi stubs) from the guest's own API.list().
async function listFiles() {
  if (!python()) return api("GET", "/v1/api/files");
  return cellValue("await API.list()", "playground files", "python");
}

// Each load is numbered: when a later one starts (the language changed again) before an earlier one's
// answer arrives, that answer is dropped, so the list shows one language's files, once each.
let filesLoad = 0;

async function loadFiles() {
  const list = $("api-files");
  const load = ++filesLoad;
  list.replaceChildren();
  $("api-file").textContent = "";
  try {
    const answer = await listFiles();
    if (load !== filesLoad) return;
    list.replaceChildren();
    for (const file of answer.files) {
      list.append(el("li", {}, el("button", { class: "link", testid: "api-file-link", onclick: () => readFile(file.path) }, file.path),
        file.description ? el("span", { class: "detail" }, " " + file.description) : ""));
    }
    if (editor) editor.setNames(await completionNames(answer.files));
  } catch (err) {
    if (load === filesLoad) list.append(el("li", {}, err.message));
  }
}

// What the editor completes besides the guest API: a name per tool declaration file, and each MCP
// server's functions as its declaration file (`declare namespace MCP.<server> { function <tool>(…`) has them.
async function completionNames(files) {
  const names = [];
  for (const file of files) {
    const tool = /^tools\/(.+)\.(?:d\.ts|pyi)$/.exec(file.path);
    if (tool) names.push([tool[1], file.description || "tool"]);
  }
  for (const file of files) {
    const server = /^mcp\/(?!index\.)(.+)\.(?:d\.ts|pyi)$/.exec(file.path);
    if (!server) continue;
    const path = `mcp/${encodeURIComponent(server[1])}.d.ts`;
    const text = (await api("GET", "/v1/api/files/" + path)).content;
    for (const fn of text.matchAll(/^\s*function ([\w$]+)\(/gm)) names.push([`MCP.${server[1]}.${fn[1]}`, `MCP ${server[1]}`]);
  }
  return names;
}

async function readFile(path) {
  const pane = $("api-file");
  try {
    if (path.endsWith(".pyi")) {
      // A stub exists only in Python cells: read it as one does.
      const code = `(await API.read(${JSON.stringify(path)}))["content"]`;
      pane.textContent = await cellValue(code, "playground read", "python");
    } else {
      pane.textContent = (await api("GET", "/v1/api/files/" + path.split("/").map(encodeURIComponent).join("/"))).content;
    }
  } catch (err) { pane.textContent = err.message; }
  pane.scrollIntoView({ block: "nearest" });  // below a long list, the file opened out of sight
}

// ---- copy as curl / Python ----------------------------------------------------------------------

function pyLiteral(v) {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number" || typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(pyLiteral).join(", ") + "]";
  return "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ": " + pyLiteral(x)).join(", ") + "}";
}

function curlSnippet(body) {
  const quoted = "'" + JSON.stringify(body).replace(/'/g, "'\\''") + "'";
  const auth = sessionStorage.getItem(KEY_STORAGE) ? ' \\\n  -H "Authorization: Bearer $CODEMODE_API_KEY"' : "";
  return `curl -s ${location.origin}/v1/exec -H 'content-type: application/json'${auth} \\\n  -d ${quoted}`;
}

function pyName(name) { return name.replace(/[^A-Za-z0-9_]/g, "_"); }

function pythonSnippet(body) {
  const lines = ["import os", "", "from codemode_client import Client", "", ""];
  const tools = body.client_tools || [];
  for (const tool of tools) {
    // A JSON string is a valid Python string literal, and any string literal may be the docstring.
    lines.push(`def ${pyName(tool.name)}(params):`, `    ${JSON.stringify(tool.description || tool.name)}`,
      "    return {}  # answer the call here", "", "");
  }
  const args = [`code=${JSON.stringify(body.code)}`];
  if (tools.length) args.push(`client_tools=[${tools.map((t) => `(${pyLiteral(t)}, ${pyName(t.name)})`).join(", ")}]`);
  if (body.require_approval) args.push('approve=lambda call: (True, "approved in Python")');
  for (const [k, v] of Object.entries(body)) if (k !== "code" && k !== "client_tools") args.push(`${k}=${pyLiteral(v)}`);
  lines.push(`with Client(${JSON.stringify(location.origin)}, api_key=os.environ.get("CODEMODE_API_KEY")) as cm:`,
    "    env = cm.run(", ...args.map((a) => `        ${a},`), "    )", "    print(env.status, env.value)");
  return lines.join("\n");
}

async function copy(kind) {
  let body;
  try { body = requestBody(); } catch (e) { $("copy-note").textContent = "client_tools: " + e.message; return; }
  delete body.background;
  const text = kind === "curl" ? curlSnippet(body) : pythonSnippet(body);
  $("snippet").hidden = false;
  $("snippet").textContent = text;
  try { await navigator.clipboard.writeText(text); $("copy-note").textContent = "copied"; }
  catch (e) { $("copy-note").textContent = "select the text below to copy it"; }
}

// ---- start --------------------------------------------------------------------------------------

function useExample(index) {
  const [, code, opts, pythonCode] = EXAMPLES[index];
  stopStream();
  clearResults();
  state.cell = null;
  setStatus("idle");
  $("wait").disabled = true;
  $("cancel").disabled = true;
  $("code").value = python() ? pythonCode : code;
  if (editor) editor.setCode($("code").value);
  $("client-tools").value = JSON.stringify(opts.clientTools || [], null, 1);
  $("require-approval").value = opts.requireApproval || "";
  $("background").checked = Boolean(opts.background);
  if (opts.clientTools || opts.requireApproval || opts.background) $("options").open = true;
}

async function checkKey() {
  // Keys configured: /v1 answers 401 without one, and the page asks for it.
  const response = await fetch("/v1/catalog", { headers: headers() });
  $("key-box").hidden = response.status !== 401 && !sessionStorage.getItem(KEY_STORAGE);
  $("key-note").textContent = response.status === 401 ? "this server needs an API key" : response.ok ? "key accepted" : "";
  if (response.ok) loadFiles();
}

// The CodeMirror editor (static/editor.js, built by ../editor/build.sh) over the <textarea>, which stays
// the request's source: its value follows every edit. Without the bundle the page keeps the textarea.
let editor = null;

function startEditor() {
  if (!window.CodemodeEditor) return;
  const holder = el("div", { id: "code-editor", testid: "code-editor" });
  $("code").after(holder);
  $("code").hidden = true;
  const nonce = document.querySelector('meta[name="codemode-style-nonce"]')?.content;
  editor = window.CodemodeEditor.create(holder, $("code"), python() ? "python" : "javascript", nonce);
  holder.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
}

function start() {
  startEditor();
  EXAMPLES.forEach(([label], i) => $("examples").append(el("option", { value: String(i) }, label)));
  $("examples").addEventListener("change", (e) => useExample(Number(e.target.value)));
  $("language").addEventListener("change", () => {
    if (editor) editor.setLanguage(python() ? "python" : "javascript");
    useExample(Number($("examples").value));
    loadFiles();
  });
  useExample(0);
  $("api-key").value = sessionStorage.getItem(KEY_STORAGE) || "";
  $("key-box").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("api-key").value.trim();
    if (key) sessionStorage.setItem(KEY_STORAGE, key); else sessionStorage.removeItem(KEY_STORAGE);
    checkKey();
  });
  $("run").addEventListener("click", run);
  $("wait").addEventListener("click", () => resume({}));
  $("cancel").addEventListener("click", cancel);
  $("search").addEventListener("click", search);
  $("search-query").addEventListener("keydown", (e) => { if (e.key === "Enter") search(); });
  $("copy-curl").addEventListener("click", () => copy("curl"));
  $("copy-python").addEventListener("click", () => copy("python"));
  $("code").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run(); });
  renderHistory();
  checkKey();
}

start();
