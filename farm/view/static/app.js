// farm view: the pages. Plain DOM, no framework: every value is set as text, never as markup.
// The state of a page lives in the URL's fragment (#/run/<run>?status=failed), so a view can be
// bookmarked, shared and reloaded; the server does the filtering, sorting and paging.

const app = document.getElementById("app");
let timer = null;   // the page's refresh, cleared on every navigation
let generation = 0; // a page left behind ignores its late answers

// ---- small helpers -------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "style") Object.assign(node.style, value); // through the CSSOM: the page's policy allows no style attribute
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const response = await fetch("/api/" + path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

const enc = encodeURIComponent;
const pct = (rate) => (rate === null || rate === undefined ? "—" : (rate * 100).toFixed(1) + "%");
// at least two significant digits: one case of a cheap model costs $0.000085, which toFixed(4) rounds away
const usd = (value) => (value === null || value === undefined ? "—" : "$" + value.toFixed(value > 0 && value < 1 ? Math.max(2, 1 - Math.floor(Math.log10(value))) : 2));
const when = (seconds) => (seconds ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) : "—");

function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  const m = Math.floor(s / 60);
  return m < 60 ? `${m}m ${Math.round(s % 60)}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
}

const badge = (status, text) => h("span", { class: "status " + status }, text || status.replace("_", " "));
// a case's change between two runs, in words that state it, not judge it (the verdict above does that)
const CHANGES = { regression: "passed → failed", fix: "failed → passed", only_a: "only in A", only_b: "only in B" };
const changeBadge = (change) => badge(change, CHANGES[change] || change.replace("_", " "));
const bar = (rate) => h("span", { class: "bar" }, rate === null ? null : Object.assign(h("span"), { style: `width:${(rate * 100).toFixed(1)}%` }));
const figure = (label, value, id) => h("div", { class: "figure" }, h("div", { class: "value", id }, value), h("div", { class: "label" }, label));

function pretty(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function decoded(part) {
  try { return decodeURIComponent(part); } catch { return part; } // a stray % stays as it was typed
}

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  return { parts: path.split("/").filter(Boolean).map(decoded), params: new URLSearchParams(query || "") };
}

function go(parts, params) {
  const query = params ? new URLSearchParams([...params].filter(([, v]) => v !== "" && v !== null)).toString() : "";
  location.hash = "#/" + parts.map(enc).join("/") + (query ? "?" + query : "");
}

function show(title, ...content) {
  app.replaceChildren(...content.filter((node) => node !== null && node !== undefined && node !== false));
  document.title = title + " · farm view";
}

function failure(error) {
  app.dataset.state = "error";
  show("error", h("div", { class: "card err", id: "error" }, String(error.message || error)));
}

function rows(table, columns, items, onclick) {
  const body = table.querySelector("tbody");
  body.replaceChildren(...items.map((item) => {
    const tr = h("tr", { class: onclick ? "clickable" : null, onclick: onclick ? () => onclick(item) : null });
    for (const column of columns) tr.append(h("td", { class: column.class || null }, column.cell(item)));
    return tr;
  }));
}

// ---- runs ----------------------------------------------------------------------------------

const runSort = { key: "started_at", desc: true };

async function runsPage(mine) {
  const data = await api("runs");
  if (mine !== generation) return;
  document.getElementById("root").textContent = data.root;
  const chosen = new Set();
  const compareButton = h("button", { class: "primary", id: "compare-selected", disabled: true, onclick: () => {
    const [a, b] = data.runs.filter((run) => chosen.has(run.name)).sort((x, y) => (x.started_at || 0) - (y.started_at || 0));
    go(["compare"], new URLSearchParams({ a: a.name, b: b.name })); // the older run is side a
  } }, "Compare selected");
  const columns = [
    { key: null, title: "", cell: (run) => h("input", { type: "checkbox", onclick: (event) => {
      event.stopPropagation();
      if (event.target.checked) chosen.add(run.name); else chosen.delete(run.name);
      compareButton.disabled = chosen.size !== 2;
    } }) },
    { key: "started_at", title: "Started", class: "started", cell: (run) => when(run.started_at).split(" ").map((part) => h("div", {}, part)) },
    { key: "name", title: "Run", cell: (run) => h("a", { href: `#/run/${enc(run.name)}`, class: "run-link" }, run.name) },
    { key: "status", title: "Status", cell: (run) => [run.progress
      ? [h("span", { class: "progress" }, Object.assign(h("span"), { style: `width:${run.progress.planned ? Math.min(100, 100 * run.progress.done / run.progress.planned) : 0}%` })),
         h("span", { class: "done" }, `${run.progress.done}${run.progress.planned ? " / " + run.progress.planned : ""}`), " ", badge(run.status)]
      : badge(run.status), problems(run)] },
    { key: "suite", title: "Suite", cell: (run) => run.suite || "—" },
    { key: "agents", title: "Agents", cell: (run) => run.agents.join(", ") || "—" },
    { key: "engine", title: "Engine", cell: (run) => run.engine || "—" },
    { key: "total", title: "Case runs", class: "num", tip: "Cases × repetitions × agents", cell: (run) => run.counts.total },
    { key: "passed", title: "Passed", class: "num", cell: (run) => run.counts.passed },
    { key: "failed", title: "Failed", class: "num", cell: (run) => run.counts.failed },
    { key: "error", title: "Errors", class: "num", cell: (run) => run.counts.error },
    { key: "timeout", title: "Timeouts", class: "num", cell: (run) => run.counts.timeout },
    { key: "skipped", title: "Skipped", class: "num", cell: (run) => run.counts.skipped },
    { key: "pass_rate", title: "Pass rate", class: "num", cell: (run) => (run.per_agent && run.per_agent.length > 1
      ? run.per_agent.map((a) => h("div", { class: "agent-rate" }, `${a.agent} `, bar(a.pass_rate), pct(a.pass_rate)))  // each agent's own
      : [bar(run.pass_rate), pct(run.pass_rate)]) },
    { key: "cost_usd", title: "Cost", class: "num", tip: "The agent under test; below it, what the role calls (simulator, judges) cost.",
      cell: (run) => [usd(run.cost_usd), run.role_cost_usd === null || run.role_cost_usd === undefined ? null : h("div", { class: "muted role-cost" }, `+ ${usd(run.role_cost_usd)} roles`)] },
    { key: "wall_s", title: "Wall time", class: "num", cell: (run) => (run.wall_s === null ? "—" : duration(run.wall_s * 1000)) },
  ];
  const value = (run, key) => (key in run.counts ? run.counts[key] : Array.isArray(run[key]) ? run[key].join(",") : run[key]);
  const sorted = () => [...data.runs].sort((x, y) => {
    const [a, b] = [value(x, runSort.key), value(y, runSort.key)];
    const order = a === b ? 0 : a === null || a === undefined ? 1 : b === null || b === undefined ? -1 : a < b ? -1 : 1;
    return runSort.desc ? -order : order;
  });
  const table = h("table", { class: "grid", id: "runs" },
    h("thead", {}, h("tr", {}, columns.map((column) => h("th", {
      class: [column.key ? "sortable" : "", column.class || "", runSort.key === column.key ? "sorted" + (runSort.desc ? " desc" : "") : ""].join(" "),
      title: column.tip || null,
      onclick: column.key ? () => { runSort.desc = runSort.key === column.key ? !runSort.desc : false; runSort.key = column.key; runsPage(generation).catch(failure); } : null,
    }, column.title)))),
    h("tbody"));
  rows(table, columns, sorted(), (run) => go(["run", run.name]));
  show("Runs",
    h("h1", {}, "Runs ", h("span", { class: "muted", id: "run-count" }, `(${data.runs.length})`)),
    data.runs.length ? h("div", {}, h("div", { class: "filters" }, compareButton, h("span", { class: "muted" }, "Tick two runs to compare them.")), table)
      : h("p", { class: "muted", id: "no-runs" }, `No runs in ${data.root} yet; a run appears here as soon as it starts.`));
  app.dataset.state = "ready";
  timer = setTimeout(() => runsPage(mine).catch(failure), data.runs.some((run) => run.status === "running") ? 2000 : 5000);
}

// ---- one run -------------------------------------------------------------------------------

const STATUSES = ["passed", "failed", "error", "timeout", "skipped"];

async function runPage(mine, name, params) {
  const page = Number(params.get("page") || 1), size = Number(params.get("size") || 50);
  const query = new URLSearchParams();
  for (const key of ["status", "tag", "agent", "q", "sort", "desc"]) if (params.get(key)) query.set(key, params.get(key));
  query.set("offset", (page - 1) * size); query.set("limit", size);
  const [run, cases] = await Promise.all([api(`runs/${enc(name)}`), api(`runs/${enc(name)}/cases?${query}`)]);
  if (mine !== generation) return;
  const s = run.summary;
  const set = (changes) => { const next = new URLSearchParams(params); for (const [k, v] of Object.entries(changes)) { if (v === null || v === "") next.delete(k); else next.set(k, v); } if (!("page" in changes)) next.delete("page"); go(["run", name], next); };
  const active = new Set((params.get("status") || "").split(",").filter(Boolean));
  const chips = STATUSES.map((status) => {
    const found = cases.facets.status.find((f) => f.value === status);
    return h("button", { class: "chip" + (active.has(status) ? " on" : ""), "data-status": status, onclick: () => {
      active.has(status) ? active.delete(status) : active.add(status);
      set({ status: [...active].join(",") });
    } }, `${status} ${found ? found.count : 0}`);
  });
  const search = h("input", { type: "search", id: "search", placeholder: "Search ids, names, inputs and replies…", value: params.get("q") || "" });
  search.addEventListener("keydown", (event) => { if (event.key === "Enter") set({ q: search.value.trim() }); });
  const select = (key, facet, label) => h("select", { id: "filter-" + key, onchange: (event) => set({ [key]: event.target.value }) },
    h("option", { value: "" }, label), facet.map((f) => h("option", { value: f.value, selected: params.get(key) === f.value }, `${f.value} (${f.count})`)));
  const sortKey = params.get("sort") || "case_id", desc = params.get("desc") === "1";
  const columns = [
    { key: "status", title: "Status", cell: (c) => badge(c.status) },
    { key: "case_id", title: "Case", cell: (c) => h("a", { href: caseHref(name, c), class: "case-link" }, c.case_id) },
    // a run of several suites: an id may be two suites' cases, each row says whose
    ...((cases.facets.suite || []).length > 1 ? [{ key: null, title: "Suite", class: "suite", cell: (c) => c.suite || "—" }] : []),
    { key: "name", title: "Name", cell: (c) => c.name || "" },
    { key: null, title: "Tags", cell: (c) => (c.tags || []).map((t) => h("span", { class: "tag" }, t)) },
    { key: "agent", title: "Agent", cell: (c) => c.agent || "—" },
    { key: "run_index", title: "Rep", class: "num", cell: (c) => c.run_index + 1 + (c.attempt > 1 ? ` (attempt ${c.attempt})` : "") },
    { key: "total_turns", title: "Turns", class: "num", cell: (c) => c.total_turns },
    { key: "duration_ms", title: "Duration", class: "num", cell: (c) => duration(c.duration_ms) },
    { key: "cost_usd", title: "Cost", class: "num", cell: (c) => usd(c.cost_usd) },
    { key: null, title: "First failure", class: "message", cell: (c) => h("span", { title: c.error || "" }, c.error || "") },
  ];
  const table = h("table", { class: "grid", id: "cases" },
    h("thead", {}, h("tr", {}, columns.map((column) => h("th", {
      class: [column.key ? "sortable" : "", column.class === "num" ? "num" : "", sortKey === column.key ? "sorted" + (desc ? " desc" : "") : ""].join(" "),
      onclick: column.key ? () => set({ sort: column.key, desc: sortKey === column.key && !desc ? "1" : null }) : null,
    }, column.title)))), h("tbody"));
  rows(table, columns, cases.rows, (c) => { location.hash = caseHref(name, c); });
  const pages = Math.max(1, Math.ceil(cases.total / size));
  const agents = cases.facets.agent.map((f) => f.value);
  show(name,
    h("h1", {}, "Run ", h("span", { id: "run-id" }, s.run_id), " ", badge(s.status)),
    (s.problems || []).length ? h("div", { class: "card", id: "problems" }, h("b", {}, "What could not be read: "), h("ul", {}, s.problems.map((p) => h("li", {}, p)))) : null,
    h("div", { class: "card figures" },
      figure("Suite", s.suite || "—"), figure("Agents", s.agents.join(", ") || "—"), figure("Engine", s.engine || "—"),
      figure("Started", when(s.started_at)), figure("Case runs", s.counts.total, "count-total"), figure("Passed", s.counts.passed, "count-passed"),
      figure("Failed", s.counts.failed, "count-failed"), figure("Errors", s.counts.error), figure("Timeouts", s.counts.timeout), figure("Skipped", s.counts.skipped),
      ...((s.per_agent || []).length > 1  // several agents: each one's own, never one rate of them all
        ? s.per_agent.map((a, i) => figure(`Pass rate of ${a.agent}`, `${pct(a.pass_rate)} (${a.counts.passed} / ${a.counts.total})`, `pass-rate-${i}`))
        : [figure("Pass rate", pct(s.pass_rate), "pass-rate")]),
      figure("Cost", usd(s.cost_usd), "cost"), s.role_cost_usd !== null ? figure("Role calls' cost", usd(s.role_cost_usd)) : null,
      figure("Wall time", s.wall_s === null ? "—" : duration(s.wall_s * 1000)),
      s.stop_reason ? figure("Stopped by", s.stop_reason.replace("_", " "), "stop-reason") : null,
      s.progress ? figure("Progress", `${s.progress.done}${s.progress.planned ? " / " + s.progress.planned : ""}`, "progress") : null),
    agents.length > 1 ? h("p", {}, h("a", { href: `#/compare?a=${enc(name)}&agent_a=${enc(agents[0])}&agent_b=${enc(agents[1])}`, id: "compare-agents" }, `Compare ${agents[0]} with ${agents[1]} →`)) : null,
    h("div", { class: "filters" }, chips, select("tag", cases.facets.tag, "any tag"), select("agent", cases.facets.agent, "any agent"), search,
      h("button", { onclick: () => set({ q: search.value.trim() }) }, "Search"),
      (active.size || params.get("q") || params.get("tag") || params.get("agent")) ? h("button", { id: "clear", onclick: () => go(["run", name]) }, "Clear filters") : null),
    h("div", { class: "pager" },
      h("span", { id: "match-count" }, `${cases.total}`), h("span", { class: "muted" }, ` of ${cases.facets.total} case runs`),
      h("button", { id: "prev", disabled: page <= 1, onclick: () => set({ page: page - 1 }) }, "← Prev"),
      h("span", { id: "page" }, `page ${page} of ${pages}`),
      h("button", { id: "next", disabled: page >= pages, onclick: () => set({ page: page + 1 }) }, "Next →")),
    table);
  app.dataset.state = "ready";
  if (s.status === "running") timer = setTimeout(() => runPage(mine, name, params).catch(failure), 3000);
}

function caseHref(run, c) {
  // a case is its suite's: an id may repeat across a run's suites
  const query = new URLSearchParams();
  if (c.agent) query.set("agent", c.agent);
  if (c.suite !== null && c.suite !== undefined) query.set("suite", c.suite);
  const text = query.toString();
  return `#/case/${enc(run)}/${enc(c.case_id)}` + (text ? `?${text}` : "");
}

// ---- one case ------------------------------------------------------------------------------

function transcript(repetition) {
  const checksByTurn = new Map();
  const later = [];
  for (const check of repetition.checks) {
    // a turn's assertions, and a checkpoint where it was reached, show under that turn
    const inline = check.scope === "turn" || (check.scope === "checkpoint" && check.passed && check.turn !== null);
    if (inline) (checksByTurn.get(check.turn) || checksByTurn.set(check.turn, []).get(check.turn)).push(check);
    else later.push(check);
  }
  const items = [];
  for (const turn of repetition.turns) {
    const simulated = turn.input_source === "simulated";
    items.push(h("div", { class: "msg user" + (simulated ? " simulated" : ""), "data-turn": turn.turn },
      h("div", { class: "who" }, h("span", {}, simulated ? "simulator (as the user)" : turn.input_source === "human" ? "human" : "user"), h("span", {}, `turn ${turn.turn}`)),
      h("div", { class: "text" }, pretty(turn.input)),
      turn.simulator_reasoning ? h("details", { class: "note" }, h("summary", {}, "simulator's reasoning"), h("div", { class: "text" }, turn.simulator_reasoning)) : null,
      (turn.sim_flags || []).length ? h("div", { class: "err sim-flags" }, "simulator flags: " + turn.sim_flags.join(", ")) : null));
    items.push(h("div", { class: "msg agent" },
      h("div", { class: "who" }, h("span", {}, "agent"), h("span", {}, duration(turn.duration_ms)),
        turn.total_tokens ? h("span", {}, `${turn.total_tokens} tokens`) : null, turn.steps > 1 ? h("span", {}, `${turn.steps} steps`) : null,
        turn.truncated ? h("span", { class: "tag truncated", title: "the model stopped at its token limit (finish_reason: length): the reply may be half an answer" }, "cut at token limit") : null),
      h("div", { class: "text" }, turn.output || ""),
      turn.output_chars ? h("div", { class: "note" }, `reply cut: ${turn.output_chars} characters in all`) : null,
      (turn.tool_calls || []).map((call) => h("div", { class: "tool" },
        h("b", {}, "tool call "), h("code", {}, call.name), call.mocked ? h("span", { class: "muted" }, " (mocked)") : null,
        h("pre", {}, "args: " + pretty(call.args)), call.result !== null ? h("pre", {}, "result: " + pretty(call.result)) : null)),
      (turn.spans || []).length ? waterfall(turn.spans) : null,
      turn.awaiting_input ? h("div", { class: "awaiting" }, `awaiting input (${turn.awaiting_reason || "?"})` + (turn.input_hint ? `: ${turn.input_hint}` : "")) : null,
      turn.note ? h("div", { class: "note" }, turn.note) : null,
      turn.error ? h("div", { class: "err" }, turn.error) : null,
      turn.traceback ? h("pre", { class: "err traceback" }, turn.traceback) : null));
    for (const check of checksByTurn.get(turn.turn) || []) items.push(checkView(check));
  }
  if (later.length) {
    items.push(h("h3", {}, "Final assertions and checkpoints"));
    for (const check of later) items.push(checkView(check));
  }
  return h("div", { class: "transcript" }, items);
}

// The spans the agent made in a turn: one row each, nested under its parent, its bar placed on
// the turn's time line (from its first span's start to its last span's end); an error span marked.
function waterfall(spans) {
  const end = Math.max(...spans.map((s) => s.offset_ms + s.duration_ms), 0.001);
  return h("details", { class: "waterfall", open: "" },
    h("summary", {}, `${spans.length} span${spans.length === 1 ? "" : "s"} (${duration(end)})`),
    spans.map((span) => h("div", { class: "span" + (span.status === "error" ? " error" : ""), "data-span": span.span_id },
      h("div", { class: "label", style: { paddingLeft: `${span.depth * 14}px` }, title: span.status_message || "" },
        span.name, span.tool_name && !span.name.endsWith(span.tool_name) ? h("span", { class: "muted" }, ` (${span.tool_name})`) : null,
        span.status === "error" ? h("span", { class: "tag" }, "error") : null),
      h("div", { class: "track" }, h("div", { class: "bar", style: { left: `${(100 * span.offset_ms / end).toFixed(2)}%`, width: `${Math.max(0.5, 100 * span.duration_ms / end).toFixed(2)}%` } })),
      h("div", { class: "ms" }, duration(span.duration_ms)))));
}

function checkView(check) {
  const checkpoint = check.scope === "checkpoint";
  const title = checkpoint ? `checkpoint ${check.checkpoint_id}` + (check.required === false ? " (optional)" : "") : (check.negate ? "not " : "") + (check.type || "?");
  const verdict = checkpoint ? (check.passed ? `reached at turn ${check.turn}` : "not reached") : check.error ? "error" : check.passed ? "passed" : "failed";
  return h("div", { class: "check" + (check.passed ? "" : " failed"), "data-scope": check.scope },
    h("div", { class: "head" }, h("b", {}, title), badge(check.passed ? "passed" : check.error ? "error" : "failed", verdict),
      check.score !== null && check.score !== undefined ? h("span", {}, `score ${check.score}`) : null,
      check.matched_by ? h("span", { class: "muted" }, `matched by ${check.matched_by}`) : null),
    check.description ? h("div", { class: "muted" }, check.description) : null,
    check.expected !== null && !checkpoint ? h("div", {}, h("span", { class: "muted" }, "expected "), h("code", {}, pretty(check.expected))) : null,
    check.actual !== null && !check.passed ? h("div", {}, h("span", { class: "muted" }, "actual "), h("code", {}, pretty(check.actual))) : null,
    check.message ? h("div", { class: "err" }, check.message) : null,
    check.reason ? h("div", {}, h("span", { class: "muted" }, "judge: "), check.reason) : null,
    (check.suggestions || []).length ? h("ul", {}, check.suggestions.map((s) => h("li", {}, s))) : null,
    check.diff ? h("pre", { class: "diff" }, check.diff.split("\n").map((line) =>
      h("span", { class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null }, line + "\n"))) : null);
}

function caseHeader(c) {
  return h("div", { class: "card figures" },
    figure("Status", badge(c.status)), figure("Agent", c.agent || "—"), figure("Mode", c.mode || "—"), figure("Turns", c.total_turns),
    figure("Duration", duration(c.duration_ms)), figure("Cost", usd(c.cost_usd)),
    c.role_cost_usd !== null && c.role_cost_usd !== undefined ? figure("Role calls' cost", usd(c.role_cost_usd)) : null, figure("Tokens", c.total_tokens ?? "—"),
    figure("Source", c.source || "—"), c.ended_by ? figure("Ended by", c.ended_by) : null,
    c.blame ? figure("Blame", c.blame + (c.blame_reason ? `: ${c.blame_reason}` : ""), "blame") : null);
}

async function casePage(mine, run, caseId, params) {
  const agent = params.get("agent"), suite = params.get("suite");
  const wanted = new URLSearchParams();
  if (agent) wanted.set("agent", agent);
  if (suite !== null) wanted.set("suite", suite);
  const detail = await api(`runs/${enc(run)}/cases/${enc(caseId)}` + (wanted.toString() ? `?${wanted}` : ""));
  if (mine !== generation) return;
  const reps = detail.repetitions;
  const chosen = Math.min(Number(params.get("rep") || 0), reps.length - 1);
  const rep = reps[chosen];
  const c = rep.case;
  const stability = detail.stability;
  show(caseId,
    h("p", {}, h("a", { href: `#/run/${enc(run)}` }, "← " + run)),
    h("h1", {}, h("span", { id: "case-id" }, caseId), c.name ? h("span", { class: "muted" }, " — " + c.name) : null, " ", badge(c.status)),
    (detail.suites || []).length > 1 ? h("p", { id: "case-suites" }, "Suite ", h("b", { id: "case-suite" }, detail.suite), " · the same id in: ",
      detail.suites.filter((s) => s !== detail.suite).map((s, i) => [i ? ", " : "", h("a", { href: caseHref(run, { case_id: caseId, agent: detail.agent, suite: s }), class: "suite-link" }, s)])) : null,
    (detail.agents || []).length > 1 ? h("p", { id: "case-agents" }, "Agent ", h("b", { id: "case-agent" }, detail.agent), " · other agents: ",
      detail.agents.filter((a) => a !== detail.agent).map((a, i) => [i ? ", " : "", h("a", { href: caseHref(run, { case_id: caseId, agent: a, suite: detail.suite }), class: "agent-link" }, a)])) : null,
    reps.length > 1 ? h("div", { class: "card" },
      h("div", {}, h("b", {}, "Repetitions "), stability ? h("span", { id: "stability" }, `${stability.passed} of ${stability.runs} passed (${pct(stability.pass_rate)}), `, h("b", {}, stability.class.replace("_", " "))) : null),
      h("div", { class: "repetitions" }, reps.map((r, i) => h("button", { class: "chip" + (i === chosen ? " on" : ""), onclick: () => {
        const next = new URLSearchParams(params); next.set("rep", i); go(["case", run, caseId], next);
      } }, `${r.case.agent && reps.some((o) => o.case.agent !== r.case.agent) ? r.case.agent + " " : ""}run ${r.case.run_index + 1}${r.case.attempt > 1 ? " attempt " + r.case.attempt : ""}: ${r.case.status}`)))) : null,
    detail.stopped ? h("div", { class: "card", id: "adaptive-stop" }, h("b", {}, "Adaptive repeats: "), detail.stopped) : null,
    caseHeader(c),
    c.error ? h("div", { class: "card err", id: "case-error" }, c.error, c.hint ? h("div", { class: "muted" }, c.hint) : null) : null,
    c.awaiting_question ? h("div", { class: "card" }, h("b", {}, "The agent awaited input: "), c.awaiting_question) : null,
    h("h2", {}, "Conversation"),
    h("div", { id: "transcript" }, transcript(rep)));
  app.dataset.state = "ready";
}

// ---- compare -------------------------------------------------------------------------------

async function comparePage(mine, params) {
  const runs = (await api("runs")).runs;
  if (mine !== generation) return;
  let a = params.get("a"), b = params.get("b");
  const picker = () => {
    const pick = (id, value) => h("select", { id }, runs.map((run) => h("option", { value: run.name, selected: run.name === value }, `${run.name} (${run.suite || "?"}, ${run.agents.join(", ")})`)));
    // one run's two agents compared: "with" is that same run, not another one
    const left = pick("pick-a", a || (runs[1] || runs[0] || {}).name), right = pick("pick-b", b || a || (runs[0] || {}).name);
    const compare = () => {
      const next = new URLSearchParams({ a: left.value, b: right.value });
      if (left.value === a && right.value === (b || a)) for (const key of ["agent_a", "agent_b"]) if (params.get(key)) next.set(key, params.get(key));
      go(["compare"], next);
    };
    return h("div", { class: "filters" }, "Compare ", left, " with ", right, h("button", { class: "primary", onclick: compare }, "Compare"));
  };
  if (!a) {
    show("Compare", h("h1", {}, "Compare"), runs.length ? picker() : h("p", { class: "muted" }, "No runs yet."));
    app.dataset.state = "ready";
    return;
  }
  const page = Number(params.get("page") || 1), size = 100;
  const query = new URLSearchParams(params); query.delete("page"); query.set("offset", (page - 1) * size); query.set("limit", size);
  const data = await api("compare?" + query);
  if (mine !== generation) return;
  const stats = data.statistics;
  const side = (s, interval, id) => h("div", { class: "card", id },
    h("h2", {}, s.label), h("div", { class: "figures" },
      figure("Pass rate", pct(s.pass_rate), id + "-rate"),
      interval ? figure("95% interval", `${pct(interval[0])} – ${pct(interval[1])}`, id + "-interval") : null,
      figure("Passed", `${s.passed} / ${s.judged}`), figure("Cases", s.cases)));
  // an id two suites both use names two cases: their rows say which suite
  const suitesOf = {};
  for (const r of data.rows) (suitesOf[r.case_id] = suitesOf[r.case_id] || new Set()).add(r.suite);
  const columns = [
    { title: "Change", cell: (r) => changeBadge(r.change) },
    { title: "Case", cell: (r) => (suitesOf[r.case_id].size > 1 ? `${r.case_id} (${r.suite})` : r.case_id) },
    ...(data.rows.some((r) => r.agent) ? [{ title: "Agent", cell: (r) => r.agent || "" }] : []),
    { title: "Name", cell: (r) => (r.b || r.a).name || "" },
    { title: data.a.label, cell: (r) => outcome(r.a) },
    { title: data.b.label, cell: (r) => outcome(r.b) },
    { title: "Failure (b)", class: "message", cell: (r) => (r.b && r.b.error) || (r.a && r.a.error) || "" },
  ];
  const table = h("table", { class: "grid", id: "changes" }, h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c.title)))), h("tbody"));
  const pair = h("div", { id: "pair" });
  rows(table, columns, data.rows, (r) => showPair(pair, data, r));
  const changes = data.changes;
  const pages = Math.max(1, Math.ceil(data.total / size));
  const set = (changes) => { const next = new URLSearchParams(params); for (const [k, v] of Object.entries(changes)) v ? next.set(k, v) : next.delete(k); go(["compare"], next); };
  show("Compare",
    h("h1", {}, "Compare"),
    picker(),
    h("div", { class: "side-by-side" }, side(data.a, stats.interval_a, "side-a"), side(data.b, stats.interval_b, "side-b")),
    h("div", { class: "card", id: "verdict" },
      h("div", { class: "verdict", id: "sentence" }, stats.sentence || `${stats.a_only} case(s) passed only on ${data.a.label}, ${stats.b_only} only on ${data.b.label}.`),
      stats.pairing && stats.pairing !== stats.sentence ? h("div", { class: "muted", id: "pairing" }, stats.pairing) : null,
      stats.p_value !== undefined && stats.p_value !== null ? h("div", { class: "muted", id: "p-value" }, `${stats.test} test over ${stats.paired} paired cases: p = ${stats.p_value.toPrecision(3)}`) : null),
    h("div", { class: "filters", id: "change-counts" },
      ["regression", "fix", "changed", "only_a", "only_b", "same"].map((k) => h("span", {}, changeBadge(k), ` ${changes[k]}`)),
      h("label", {}, h("input", { type: "checkbox", id: "changed-only", checked: params.get("changed") === "1", onchange: (e) => set({ changed: e.target.checked ? "1" : null, page: null }) }), " changed only")),
    pair,
    h("div", { class: "pager" }, h("span", { id: "change-total" }, `${data.total} cases`),
      h("button", { disabled: page <= 1, onclick: () => set({ page: page - 1 }) }, "← Prev"), `page ${page} of ${pages}`,
      h("button", { disabled: page >= pages, onclick: () => set({ page: page + 1 }) }, "Next →")),
    table);
  app.dataset.state = "ready";
  if (params.get("case")) {
    const row = data.rows.find((r) => r.case_id === params.get("case"));
    if (row) await showPair(pair, data, row);
  }
}

// a case on one side of a comparison: its statuses, and under --runs how many of its tries passed
function outcome(side) {
  if (!side) return "—";
  return [side.statuses.map((s) => badge(s)), side.judged > 1 ? h("span", { class: "tries" }, ` ${side.passed}/${side.judged}`) : null];
}

async function showPair(pair, data, row) {
  const agentOf = (s) => s.agent || row.agent;  // rows of runs of several agents are matched per agent
  const load = (s, present) => (present ? api(`runs/${enc(s.run)}/cases/${enc(row.case_id)}` + (agentOf(s) ? `?agent=${enc(agentOf(s))}` : "")) : null);
  const [one, two] = await Promise.all([load(data.a, row.a), load(data.b, row.b)]);
  const column = (label, detail) => h("div", {}, h("h3", {}, label), detail
    ? [caseHeader(detail.repetitions[0].case), transcript(detail.repetitions[0])] : h("p", { class: "muted" }, "Not in this side."));
  pair.replaceChildren(h("h2", {}, `Case ${row.case_id}` + (row.agent ? ` · ${row.agent}` : "")), h("div", { class: "side-by-side" }, column(data.a.label, one), column(data.b.label, two)));
  pair.scrollIntoView();
}

// ---- trends --------------------------------------------------------------------------------

function chart(title, points, value, format, id, ceiling = null) {
  const width = 400, height = 220, pad = { l: 56, r: 12, t: 26, b: 28 };
  const ns = "http://www.w3.org/2000/svg";
  const el = (tag, attrs, text) => { const n = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); if (text !== undefined) n.textContent = text; return n; };
  const svg = el("svg", { class: "chart", id, width, height, viewBox: `0 0 ${width} ${height}` });
  svg.append(el("text", { x: pad.l, y: 16, "font-weight": "600" }, title));
  const shown = points.filter((p) => value(p) !== null && value(p) !== undefined);
  if (!shown.length) { svg.append(el("text", { x: pad.l, y: height / 2 }, "no values")); return svg; }
  const values = shown.map(value);
  const top = ceiling || Math.max(...values) || 1, w = width - pad.l - pad.r, hgt = height - pad.t - pad.b;
  const x = (i) => pad.l + (shown.length === 1 ? w / 2 : (i * w) / (shown.length - 1));
  const y = (v) => pad.t + hgt - (v / top) * hgt;
  for (const f of [0, 0.5, 1]) {
    svg.append(el("line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: y(top * f), y2: y(top * f) }));
    svg.append(el("text", { x: 4, y: y(top * f) + 4 }, format(top * f)));
  }
  svg.append(el("polyline", { points: shown.map((p, i) => `${x(i)},${y(value(p))}`).join(" ") }));
  shown.forEach((p, i) => {
    const dot = el("circle", { cx: x(i), cy: y(value(p)), r: 4, "data-run": p.name });
    dot.append(el("title", {}, `${p.name}: ${format(value(p))}`));
    dot.addEventListener("click", () => go(["run", p.name]));
    svg.append(dot);
  });
  svg.append(el("text", { x: pad.l, y: height - 8 }, when(shown[0].started_at).slice(0, 16)));
  if (shown.length > 1) svg.append(el("text", { x: width - pad.r, y: height - 8, "text-anchor": "end" }, when(shown[shown.length - 1].started_at).slice(0, 16)));
  return svg;
}

// a run the reader could not read whole: what is wrong with it, on its row
function problems(run) {
  const found = run.problems || [];
  return found.length ? h("span", { class: "problems", title: found.join("\n") }, ` ⚠ ${found.length} problem${found.length > 1 ? "s" : ""}`) : null;
}

async function trendsPage(mine, params) {
  const { suites } = await api("suites");
  if (mine !== generation) return;
  const suite = params.get("suite") || (suites[0] && suites[0].suite);
  const select = h("select", { id: "suite", onchange: (e) => go(["trends"], new URLSearchParams({ suite: e.target.value })) },
    suites.map((s) => h("option", { value: s.suite, selected: s.suite === suite }, `${s.suite} (${s.runs} runs)`)));
  if (!suite) { show("Trends", h("h1", {}, "Trends"), h("p", { class: "muted" }, "No runs yet.")); app.dataset.state = "ready"; return; }
  const data = await api(`trends?suite=${enc(suite)}` + (params.get("agent") ? `&agent=${enc(params.get("agent"))}` : ""));
  if (mine !== generation) return;
  select.value = data.suite; // a suite named by its file name alone is the one the server found
  // a run stopped early (budget, fail-fast, interrupt) ran only some cases: not a point of the trend
  const points = data.points.filter((p) => p.status === "finished");
  const stopped = data.points.filter((p) => p.status !== "finished" && p.status !== "running").length;
  const counted = `${points.length} finished ${points.length === 1 ? "run" : "runs"}` + (stopped ? `; ${stopped} stopped early, not shown` : "");
  // a suite run on several agents: one agent's trend at a time, never two agents' figures in one point
  const agentSelect = data.agents.length > 1 ? ["Agent ", h("select", { id: "trend-agent", onchange: (e) => go(["trends"], new URLSearchParams({ suite, agent: e.target.value })) },
    data.agents.map((a) => h("option", { value: a, selected: a === data.agent }, a)))] : [];
  show("Trends",
    h("h1", {}, "Trends"), h("div", { class: "filters" }, "Suite ", select, ...agentSelect, h("span", { class: "muted", id: "trend-runs" }, counted)),
    h("div", { class: "charts" },
      chart("Pass rate", points, (p) => p.pass_rate, pct, "chart-pass-rate", 1),
      chart("Median case time", points, (p) => p.case_p50_ms, duration, "chart-latency"),
      chart("Cost", points, (p) => p.cost_usd, usd, "chart-cost")),
    h("table", { class: "grid", id: "trend-table" },
      h("thead", {}, h("tr", {}, ["Started", "Run", "Agents", "Case runs", "Pass rate", "Median case time", "Cost"].map((t) => h("th", {}, t)))),
      h("tbody", {}, [...points].reverse().map((p) => h("tr", { class: "clickable", onclick: () => go(["run", p.name]) },
        h("td", {}, when(p.started_at)), h("td", {}, p.name), h("td", {}, p.agents.join(", ")), h("td", { class: "num" }, p.total),
        h("td", { class: "num" }, pct(p.pass_rate)), h("td", { class: "num" }, duration(p.case_p50_ms)), h("td", { class: "num" }, usd(p.cost_usd)))))));
  app.dataset.state = "ready";
}

// ---- the router ----------------------------------------------------------------------------

function render() {
  clearTimeout(timer);
  const mine = ++generation;
  app.dataset.state = "loading";
  try {
    page(mine, route()).catch(failure);
  } catch (error) {
    failure(error);
  }
}

function page(mine, { parts, params }) {
  const section = parts[0] || "runs";
  const nav = section === "compare" || section === "trends" ? section : "runs"; // anything else shows the runs
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === nav);
  let shown;
  if (section === "run" && parts[1]) shown = runPage(mine, parts[1], params);
  else if (section === "case" && parts[2]) shown = casePage(mine, parts[1], parts[2], params);
  else if (section === "compare") shown = comparePage(mine, params);
  else if (section === "trends") shown = trendsPage(mine, params);
  else shown = runsPage(mine);
  return shown;
}

window.addEventListener("hashchange", render);
render();
