// selectgraph studio: draws the graph, follows a run's event stream, answers its questions,
// shows threads (conversations) and sends their next message.
// Everything shown comes from the JSON API and the run's Server-Sent Events; text is
// always set with textContent, never parsed as HTML. A run this studio did not start
// (another process's, an earlier one's) streams from the store's event log: same records.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  graph: null, nodes: {}, links: [], run: null, source: null, live: true,
  steps: [], selected: -1, current: null, tokens: 0, cost: 0, streamNode: null, pending: [], thread: null,
};

async function api(path, options = {}) {
  const init = { credentials: "same-origin", ...options };
  if (init.body !== undefined) {
    init.method = init.method || "POST";
    init.headers = { "Content-Type": "application/json" };
    init.body = JSON.stringify(init.body);
  }
  const reply = await fetch(path, init);
  const body = await reply.json().catch(() => ({}));
  if (!reply.ok) {
    const error = new Error(body.error || `${reply.status} ${reply.statusText}`);
    error.body = body; // an answer's refusal carries its fields: { errors: { path: why } }
    throw error;
  }
  return body;
}

function showError(message) {
  const banner = $("error-banner");
  banner.textContent = message;
  banner.classList.toggle("hidden", !message);
}

// ------------------------------------------------------------------ the diagram
async function drawGraph(info) {
  state.graph = info || await api("api/graph");
  state.nodes = {};
  document.body.dataset.graphVersion = String(state.graph.version);
  $("graph-name").textContent = state.graph.name;
  if (state.graph.input_field) {
    // Text goes to the graph's input field (the command line's convention too).
    $("run-input-label").textContent =
      `Input: text (goes to ${state.graph.input_field}) or JSON (the state's data)`;
  }
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
  const { svg } = await mermaid.render("sg-graph", state.graph.mermaid);
  $("diagram").innerHTML = svg; // produced by Mermaid from our own graph description
  const byId = Object.fromEntries(Object.entries(state.graph.ids).map(([n, id]) => [id, n]));
  for (const g of document.querySelectorAll("#diagram g.node")) {
    const match = g.id.match(/flowchart-(.+)-\d+$/);
    const name = match && byId[match[1]];
    if (name !== undefined) {
      g.dataset.sgNode = name;
      state.nodes[name] = g;
    }
  }
  const paths = [...document.querySelectorAll("#diagram path")].filter((p) => /L[-_]/.test(p.id));
  state.links = state.graph.links.map((link) => {
    const from = state.graph.ids[link.source], to = state.graph.ids[link.target];
    const pattern = new RegExp(`L[-_]${from}[-_]${to}[-_]\\d+$`);
    return { ...link, path: paths.find((p) => pattern.test(p.id)) };
  });
}

function setNode(name, status) {
  const g = state.nodes[name];
  if (g) g.dataset.sgState = status;
}

function takeEdge(source, target) {
  const end = target && typeof target === "object" && target.$end ? "__end__" : target;
  for (const link of state.links) {
    if (link.source === source && link.target === end && link.path) link.path.dataset.sgTaken = "true";
  }
}

function resetDiagram() {
  for (const g of Object.values(state.nodes)) {
    delete g.dataset.sgState;
    delete g.dataset.sgBranch;
  }
  for (const link of state.links) if (link.path) delete link.path.dataset.sgTaken;
}

// With hot reload on, the server swaps in the graph when its module changes: redraw it.
async function watchReload() {
  let info;
  try { info = await api("api/graph"); } catch { return; } // the server restarting: next time
  if (info.reload_error && info.reload_error !== state.reloadError) {
    showError(`the graph's module did not reload (the old graph still serves): ${info.reload_error}`);
  }
  state.reloadError = info.reload_error;
  if (info.version !== state.graph.version) {
    await drawGraph(info);
    showError("");
  }
}

// ------------------------------------------------------------------ a run's view
function resetRun(runId) {
  if (state.source) state.source.close();
  state.run = runId;
  state.steps = [];
  state.selected = -1;
  state.current = null; // the run's last known state: the next step is diffed against it
  state.tokens = 0;
  state.cost = 0;
  state.streamNode = null;
  Timeline.reset($("timeline"));
  resetDiagram();
  $("run-id").textContent = runId;
  $("stream").textContent = "";
  $("steps").textContent = "";
  $("state-view").textContent = "";
  $("events").textContent = "";
  $("run-step").textContent = "0";
  $("run-elapsed").textContent = "0.0s";
  showInterrupt(null);
  showError("");
  updateUsage();
  setStatus("running");
}

function setStatus(status) {
  $("run-status").textContent = status;
  document.body.dataset.runStatus = status;
  // Only a run this studio drives can be cancelled from here; another process's run
  // shows the button disabled, saying why (a store has no cross-process cancel).
  const cancel = $("cancel-run");
  cancel.classList.toggle("hidden", status !== "running");
  cancel.disabled = !state.live;
  cancel.title = state.live ? "cancel this run" : "this run is driven by another process; cancel it there";
}

async function cancelRun() {
  try {
    await api(`api/runs/${encodeURIComponent(state.run)}/cancel`, { body: {} });
  } catch (error) {
    showError(error.message);
  }
}

function updateUsage() {
  $("run-tokens").textContent = String(state.tokens);
  $("run-cost").textContent = `$${state.cost.toFixed(4)}`;
}

// Follow a run's events from the first. ``described`` (GET api/runs/{id}) sets what the
// page shows before the events arrive: a stored run's status, questions and state.
function follow(runId, described) {
  state.live = described ? described.live !== false : true;
  resetRun(runId);
  showLineage(described);
  if (described) {
    setStatus(described.status);
    setStep(described.step);
    showInterrupt(described.interrupts);
    if (described.state) $("state-view").textContent = JSON.stringify(described.state, null, 2);
    if (described.event_log === false) return; // a store without event logs: no timeline
  }
  const source = new EventSource(`api/runs/${encodeURIComponent(runId)}/events`);
  state.source = source;
  source.onmessage = (message) => handle(JSON.parse(message.data));
  source.addEventListener("end", () => source.close());
  source.onerror = () => { if (source.readyState === EventSource.CLOSED) setStatus("disconnected"); };
}

function showElapsed() {
  // The run's time is its events' (first to last), never this page's clock: a run
  // reopened from the store, or a fork, shows how long it really took.
  $("run-elapsed").textContent = `${Timeline.elapsed().toFixed(1)}s`;
}

function logEvent(record) {
  const where = (record.node_path || []).join(" / ");
  const list = $("events");
  if (record.event === "NodeChunk") {
    // A node's streamed text is one row (expandable), not one row per chunk.
    const previous = list.lastElementChild;
    if (previous && previous.dataset.event === "NodeChunk" && previous.dataset.path === where) {
      previous.dataset.chunks = String(Number(previous.dataset.chunks) + 1);
      previous.querySelector("summary").textContent = `NodeChunk ${where} ×${previous.dataset.chunks}`;
      previous.querySelector("pre").textContent += record.delta;
      return;
    }
    const item = document.createElement("li");
    item.dataset.event = "NodeChunk";
    item.dataset.path = where;
    item.dataset.chunks = "1";
    const fold = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = `NodeChunk ${where} ×1`;
    const text = document.createElement("pre");
    text.textContent = record.delta;
    fold.append(summary, text);
    item.appendChild(fold);
    list.appendChild(item);
    return;
  }
  const item = document.createElement("li");
  item.textContent = `${record.event}${where ? " " + where : ""}`;
  item.dataset.event = record.event;
  list.appendChild(item);
}

function handle(record) {
  logEvent(record);
  Timeline.add(record);
  showElapsed();
  const top = !record.namespace || record.namespace.length === 0;
  switch (record.event) {
    case "RunStarted":
      if (top) takeEdge("__start__", record.entry);
      if (top && record.state && !state.steps.length) state.current = record.state;
      break;
    case "NodeStarted":
      if (top) {
        setNode(record.node, "running");
        if (record.branch) state.nodes[record.node] && (state.nodes[record.node].dataset.sgBranch = "true");
      }
      break;
    case "NodeFinished":
      if (top && record.outcome === "interrupted") {
        setNode(record.node, "paused"); // not a step yet: it is one once answered
      } else if (top) {
        setNode(record.node, record.outcome === "success" ? "done" : "failed");
        addStep(record);
      }
      break;
    case "EdgeFired":
      if (top) takeEdge(record.source, record.target);
      break;
    case "ParallelFinished":
      // The branches' updates merged: the state the step after them is diffed against.
      if (top && record.state) state.current = record.state;
      break;
    case "NodeChunk":
      streamText(record.node_path.join(" / "), record.delta);
      break;
    case "LLMCallFinished":
      state.tokens += (record.input_tokens || 0) + (record.output_tokens || 0);
      state.cost += record.cost_usd || 0;
      updateUsage();
      break;
    case "InterruptRaised":
      setNode(record.node_path[0] || record.node, "paused");
      break;
    case "CheckpointSaved":
      // Steps are counted as the store and the CLI count them: the steps completed,
      // which is the step of the run's last checkpoint.
      if (top) setStep(record.step);
      // A stored run's input checkpoint brings the state its first step is diffed against.
      if (top && record.state && record.trigger === "input" && !state.steps.length) state.current = record.state;
      else if (top && record.state && record.trigger === "node_complete") stateOfLastStep(record.state);
      break;
    case "RunPaused":
      if (top) setStep(record.step);
      setStatus(record.reason === "interrupt" ? "interrupted" : "paused");
      for (const name of record.next || []) setNode(name, "paused");
      if (record.summary) showInterrupt(record.summary.interrupts);
      threadChanged();
      break;
    case "RunResumed":
      setStatus("running");
      showInterrupt(null);
      break;
    case "RunFinished":
      if (top) setStep(record.steps);
      setStatus(record.stop_reason === "end" ? "done" : record.stop_reason);
      showInterrupt(null);
      if (record.summary) streamText("result", `\n${JSON.stringify(record.summary.content, null, 2)}`);
      threadChanged();
      break;
    case "RunFailed":
      setStatus("failed");
      if (record.node) setNode(record.node, "failed");
      showError(`${record.category}: ${record.error}`);
      threadChanged();
      break;
    case "StudioRunFailed":
      setStatus("failed");
      showError(record.error);
      threadChanged();
      break;
    case "RunCancelled":
    case "StudioRunCancelled":
      setStatus("cancelled");
      threadChanged();
      break;
    case "Gap":
      showError(`${record.missed} early events were dropped from this run's log`);
      break;
    default:
      break;
  }
}

function streamText(who, text) {
  const box = $("stream");
  if (state.streamNode !== who) {
    const label = document.createElement("span");
    label.className = "who";
    label.textContent = `${who}:`;
    box.appendChild(label);
    state.streamNode = who;
  }
  box.appendChild(document.createTextNode(text));
  box.scrollTop = box.scrollHeight;
}

function setStep(step) {
  if (typeof step === "number") $("run-step").textContent = String(step);
}

function addStep(record) {
  state.steps.push(record);
  record.before = state.current;
  if (record.state && !record.branch) state.current = record.state;
  const item = document.createElement("li");
  item.value = record.step;
  item.dataset.step = String(record.step);
  item.onclick = () => showStep(state.steps.indexOf(record), item);
  $("steps").appendChild(item);
  labelStep(record, item);
  showStep(state.steps.length - 1, item);
}

// A step's line: its node and the keys it changed (from the diff once its state is
// known; a stored run's events carry no update).
function labelStep(record, item) {
  const changes = record.state && record.before ? stateDiff(record.before, record.state) : null;
  let keys = changes ? changes.filter((c) => c.kind !== "same").map((c) => c.key) : [];
  // A branch's state is its own (merged after the fan-out): its update names what it wrote.
  if (!keys.length) keys = Object.keys(record.update || {});
  item.textContent = `${record.node}${keys.length ? ": " + keys.join(", ") : ""}`;
}

// A stored run's steps carry no state: the checkpoint saved after a node brings it.
function stateOfLastStep(data) {
  const index = state.steps.length - 1;
  const last = state.steps[index];
  if (!last || last.state) return;
  last.state = data;
  if (!last.branch) state.current = data;
  const item = $("steps").children[index];
  labelStep(last, item);
  if (state.selected === index) showStep(index, item);
}

// What a step changed: each key of the state before it and after it, as
// { key, kind: "same" | "changed" | "added" | "removed", old, new }.
function stateDiff(before, after) {
  const old = before || {};
  const keys = [...Object.keys(after)];
  for (const key of Object.keys(old)) if (!(key in after)) keys.push(key);
  return keys.map((key) => {
    if (!(key in after)) return { key, kind: "removed", old: old[key] };
    if (!(key in old)) return { key, kind: before ? "added" : "same", new: after[key] };
    const same = JSON.stringify(old[key]) === JSON.stringify(after[key]);
    return { key, kind: same ? "same" : "changed", old: old[key], new: after[key] };
  });
}

function showStep(index, item) {
  const record = state.steps[index];
  state.selected = index;
  for (const li of $("steps").children) li.classList.toggle("selected", li === item);
  const view = $("state-view");
  view.textContent = "";
  if (!record.state) return; // a stored step whose checkpoint has not arrived yet
  for (const change of stateDiff(record.before, record.state)) {
    const line = document.createElement("div");
    line.dataset.key = change.key;
    line.dataset.change = change.kind;
    const show = (value) => JSON.stringify(value);
    if (change.kind === "changed") line.textContent = `${change.key}: ${show(change.old)} → ${show(change.new)}`;
    else if (change.kind === "added") line.textContent = `+ ${change.key}: ${show(change.new)}`;
    else if (change.kind === "removed") line.textContent = `- ${change.key}: ${show(change.old)}`;
    else line.textContent = `${change.key}: ${show(change.new)}`;
    if (change.kind !== "same") line.className = `changed ${change.kind}`;
    // Keys the step's update wrote, where the diff cannot see them (a branch's update is
    // merged after the fan-out; an early event dropped) are marked all the same.
    else if (record.update && change.key in record.update) line.className = "changed";
    view.appendChild(line);
  }
}

// ------------------------------------------------------------------ questions
function showInterrupt(interrupts) {
  state.pending = interrupts || [];
  const form = $("interrupt-form");
  if (!state.pending.length) {
    form.classList.add("hidden");
    state.askedId = null;
    return;
  }
  const first = state.pending[0];
  if (state.askedId === first.id && !form.classList.contains("hidden")) return; // keep what is typed
  state.askedId = first.id;
  $("interrupt-prompt").textContent = first.prompt;
  const payload = $("interrupt-payload");
  payload.textContent = first.payload == null ? "" : JSON.stringify(first.payload, null, 2);
  payload.classList.toggle("hidden", first.payload == null);
  $("interrupt-answer").value = "";
  showAnswerError("");
  // A question with a response schema gets a field per property; others a free answer.
  state.answerForm = first.response_schema ? sgAnswerForm.build($("interrupt-fields"), first.response_schema) : null;
  $("interrupt-fields").classList.toggle("hidden", !state.answerForm);
  $("interrupt-free").classList.toggle("hidden", !!state.answerForm);
  form.classList.remove("hidden");
  const focus = state.answerForm ? $("interrupt-fields").querySelector("input, select, textarea") : $("interrupt-answer");
  if (focus) focus.focus();
}

function showAnswerError(message, errors) {
  const box = $("interrupt-error");
  box.textContent = message;
  box.classList.toggle("hidden", !message);
  if (state.answerForm) state.answerForm.showErrors(errors);
}

function parseLoose(text) {
  try { return JSON.parse(text); } catch { return text; }
}

async function answer(event) {
  event.preventDefault();
  const first = state.pending[0];
  if (!first) return;
  try {
    const run = await api(`api/runs/${encodeURIComponent(state.run)}/resume`, {
      body: { interrupt_id: first.id, answer: state.answerForm ? state.answerForm.value() : parseLoose($("interrupt-answer").value) },
    });
    // The status follows the stream (RunResumed, then how the run ends), which may
    // already have arrived: setting it here could undo a finished run.
    showInterrupt(null);
    // A run read from the store is driven by this studio now: follow its live log,
    // which starts with the stored events.
    if (!state.live) follow(run.run_id, run);
  } catch (error) {
    // Refused by the schema: said in the form, beside the fields it names; it stays open.
    if (error.body && error.body.errors) showAnswerError(error.message, error.body.errors);
    else showError(error.message);
  }
}

// ------------------------------------------------------------------ runs
async function startRun() {
  const text = $("run-input").value.trim();
  try {
    // An empty box starts from the state's defaults (null would mean "continue a run").
    const run = await api("api/runs", { body: { input: text ? parseLoose(text) : {} } });
    follow(run.run_id);
  } catch (error) {
    showError(error.message);
  }
}

async function listRuns() {
  const list = $("runs-list");
  list.textContent = "";
  try {
    for (const run of await api("api/runs")) {
      const item = document.createElement("li");
      const pick = document.createElement("input");
      pick.type = "checkbox";
      pick.className = "compare-pick";
      pick.title = "pick two runs to compare";
      pick.value = run.run_id;
      pick.onclick = (event) => event.stopPropagation();
      const at = typeof run.step === "number" ? `, step ${run.step}` : "";
      item.append(pick, `${run.run_id} (${run.status}${at})${run.thread_id ? " on thread " + run.thread_id : ""}`);
      item.dataset.runId = run.run_id;
      item.onclick = () => openRun(run.run_id);
      list.appendChild(item);
    }
  } catch (error) {
    showError(error.message);
  }
}

async function openRun(runId) {
  try {
    const run = await api(`api/runs/${encodeURIComponent(runId)}`);
    follow(runId, run);
    await showHistory(runId);
  } catch (error) {
    showError(error.message);
  }
}

async function showHistory(runId) {
  const box = $("history");
  box.textContent = "";
  let checkpoints = [];
  try { checkpoints = await api(`api/runs/${encodeURIComponent(runId)}/history`); } catch { return; }
  const heading = document.createElement("h3");
  heading.textContent = `Checkpoints of ${runId}`;
  box.appendChild(heading);
  const list = document.createElement("ol");
  for (const cp of checkpoints) {
    const item = document.createElement("li");
    item.textContent = `step ${cp.step} ${cp.trigger}${cp.node ? " at " + cp.node : ""} `;
    const fork = document.createElement("button");
    fork.type = "button";
    fork.textContent = "fork from here";
    fork.dataset.checkpointId = cp.checkpoint_id;
    fork.onclick = async () => {
      try {
        const run = await api(`api/runs/${encodeURIComponent(runId)}/fork`, {
          body: { checkpoint_id: cp.checkpoint_id },
        });
        follow(run.run_id, run);
      } catch (error) {
        showError(error.message);
      }
    };
    const edit = document.createElement("button");
    edit.type = "button";
    edit.textContent = "edit state & fork";
    edit.dataset.editCheckpointId = cp.checkpoint_id;
    edit.onclick = () => editCheckpoint(runId, cp, item);
    item.append(fork, edit);
    list.appendChild(item);
  }
  box.appendChild(list);
}

// The state at a checkpoint as JSON to edit; the fields changed are the fork's update.
async function editCheckpoint(runId, cp, item) {
  const old = item.querySelector(".cp-editor");
  if (old) { old.remove(); return; }
  let found;
  try {
    found = await api(`api/runs/${encodeURIComponent(runId)}/checkpoints/${encodeURIComponent(cp.checkpoint_id)}`);
  } catch (error) {
    showError(error.message);
    return;
  }
  const editor = document.createElement("div");
  editor.className = "cp-editor";
  const text = document.createElement("textarea");
  text.rows = 8;
  text.value = JSON.stringify(found.state, null, 2);
  const go = document.createElement("button");
  go.type = "button";
  go.className = "cp-fork-edited";
  go.textContent = "fork with this state";
  go.onclick = async () => {
    let edited;
    try { edited = JSON.parse(text.value); } catch (error) { showError(`the state is not JSON: ${error.message}`); return; }
    if (!edited || typeof edited !== "object" || Array.isArray(edited)) { showError("the state must be a JSON object"); return; }
    const update = {};
    for (const [key, value] of Object.entries(edited)) {
      if (JSON.stringify(value) !== JSON.stringify(found.state[key])) update[key] = value;
    }
    try {
      const run = await api(`api/runs/${encodeURIComponent(runId)}/fork`, {
        body: { checkpoint_id: cp.checkpoint_id, update },
      });
      follow(run.run_id, run);
    } catch (error) {
      showError(error.message);
    }
  };
  editor.append(text, go);
  item.appendChild(editor);
}

// Which run this one was forked from (and at which step), and the forks made from it.
function showLineage(described) {
  const box = $("run-lineage");
  box.textContent = "";
  const parent = described && described.forked_from;
  if (parent) {
    const link = document.createElement("a");
    link.href = "#";
    link.className = "parent-run";
    link.dataset.runId = parent.run_id || "";
    link.textContent = parent.run_id || parent.checkpoint_id;
    link.onclick = (event) => { event.preventDefault(); if (parent.run_id) openRun(parent.run_id); };
    box.append("forked from ", link, ` at step ${parent.step ?? "?"}`);
  }
  const forks = (described && described.forks) || [];
  if (forks.length) {
    box.append(parent ? "; forks: " : "forks: ");
    forks.forEach((fork, index) => {
      const link = document.createElement("a");
      link.href = "#";
      link.className = "fork-run";
      link.dataset.runId = fork.run_id;
      link.textContent = `${fork.run_id} (step ${fork.step})`;
      link.onclick = (event) => { event.preventDefault(); openRun(fork.run_id); };
      if (index) box.append(", ");
      box.append(link);
    });
  }
}

// ------------------------------------------------------------------ comparing two runs
async function compareRuns() {
  const picked = [...document.querySelectorAll("#runs-list .compare-pick:checked")].map((p) => p.value);
  if (picked.length !== 2) { showError(`pick two runs to compare (${picked.length} picked)`); return; }
  let result;
  try {
    result = await api(`api/compare?a=${encodeURIComponent(picked[0])}&b=${encodeURIComponent(picked[1])}`);
  } catch (error) {
    showError(error.message);
    return;
  }
  showError("");
  showComparison(result);
}

function cell(row, text, className) {
  const td = document.createElement(row.children.length ? "td" : "th");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
}

function showComparison(result) {
  const view = $("compare-view");
  view.textContent = "";
  view.classList.remove("hidden");
  const table = document.createElement("table");
  table.id = "compare-table";
  const duration = (s) => (s == null ? "?" : `${s.toFixed(2)}s`);
  const rows = [
    ["run", (r) => r.run_id],
    ["status", (r) => r.status],
    ["path", (r) => r.path.join(" → ") || "(no nodes)"],
    ["steps", (r) => String(r.steps)],
    ["tokens", (r) => `${r.input_tokens} in / ${r.output_tokens} out (${r.llm_calls} calls)`],
    ["cost", (r) => `$${r.cost_usd.toFixed(4)}`],
    ["duration", (r) => duration(r.duration_s)],
  ];
  for (const [name, show] of rows) {
    const row = document.createElement("tr");
    row.dataset.row = name;
    cell(row, name);
    const a = show(result.a), b = show(result.b);
    cell(row, a, a !== b && name !== "run" ? "differs" : "");
    cell(row, b, a !== b && name !== "run" ? "differs" : "");
    table.appendChild(row);
  }
  for (const [key, values] of Object.entries(result.state_differences)) {
    const row = document.createElement("tr");
    row.dataset.row = `state.${key}`;
    cell(row, `state.${key}`);
    cell(row, JSON.stringify(values.a), "differs");
    cell(row, JSON.stringify(values.b), "differs");
    table.appendChild(row);
  }
  const heading = document.createElement("h3");
  heading.textContent = "Two runs compared";
  const same = document.createElement("p");
  same.className = "compare-same";
  same.textContent = result.same.length ? `same state: ${result.same.join(", ")}` : "";
  view.append(heading, table, same);
}

// ------------------------------------------------------------------ threads
async function listThreads() {
  const list = $("threads-list");
  list.textContent = "";
  try {
    for (const thread of await api("api/threads")) {
      const item = document.createElement("li");
      item.textContent = `${thread.thread_id} (${thread.status}, ${thread.runs} run${thread.runs === 1 ? "" : "s"})`;
      item.dataset.threadId = thread.thread_id;
      item.onclick = () => openThread(thread.thread_id);
      list.appendChild(item);
    }
  } catch (error) {
    showError(error.message);
  }
}

async function openThread(threadId) {
  state.thread = threadId;
  $("thread-target").value = threadId;
  let thread;
  try {
    thread = await api(`api/threads/${encodeURIComponent(threadId)}`);
  } catch (error) {
    if (!/^no thread/.test(error.message)) { showError(error.message); return; }
    thread = { thread_id: threadId, status: "new", messages: [], thread_runs: [], metadata: {} };
  }
  if (state.thread !== threadId) return; // another thread was opened meanwhile
  showThread(thread);
}

function showThread(thread) {
  $("thread-view").classList.remove("hidden");
  $("thread-id").textContent = thread.thread_id;
  $("thread-status").textContent = `(${thread.status})`;
  $("thread-view").dataset.status = thread.status;
  const meta = [];
  if (thread.metadata && Object.keys(thread.metadata).length) meta.push(`metadata ${JSON.stringify(thread.metadata)}`);
  if (thread.expires_at) meta.push(`expires ${thread.expires_at}`);
  if (thread.status === "new") meta.push("a new thread: its first message starts it");
  if (thread.error) meta.push(thread.error);
  $("thread-meta").textContent = meta.join("\n");
  const messages = $("thread-messages");
  messages.textContent = "";
  for (const message of thread.messages) {
    const item = document.createElement("li");
    item.dataset.role = message.role;
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = `${message.role}${message.name ? " (" + message.name + ")" : ""}: `;
    item.append(role, document.createTextNode(message.text));
    messages.appendChild(item);
  }
  const runs = $("thread-runs");
  runs.textContent = "";
  for (const run of thread.thread_runs) {
    const item = document.createElement("li");
    const output = run.output == null ? "" : ` -> ${typeof run.output === "string" ? run.output : JSON.stringify(run.output)}`;
    item.textContent = `${run.run_id} (${run.status}${run.superseded ? ", took over " + run.superseded : ""})${output}`;
    item.dataset.runId = run.run_id;
    item.dataset.status = run.status;
    item.onclick = () => openRun(run.run_id);
    runs.appendChild(item);
  }
}

// A run ended or paused: the open thread's conversation and runs have changed.
function threadChanged() {
  if (state.thread) openThread(state.thread);
}

async function sendMessage(event) {
  event.preventDefault();
  const threadId = $("thread-target").value.trim();
  const text = $("thread-message").value;
  if (!threadId) { showError("name the thread to send the message on"); return; }
  try {
    const run = await api(`api/threads/${encodeURIComponent(threadId)}/runs`, {
      body: { input: text, strategy: $("thread-strategy").value },
    });
    $("thread-message").value = "";
    follow(run.run_id, run);
    await openThread(threadId);
  } catch (error) {
    showError(error.message);
  }
}

window.addEventListener("DOMContentLoaded", async () => {
  $("start-run").onclick = startRun;
  $("cancel-run").onclick = cancelRun;
  $("interrupt-form").onsubmit = answer;
  $("refresh-runs").onclick = listRuns;
  $("compare-runs").onclick = compareRuns;
  $("runs-panel").addEventListener("toggle", (e) => { if (e.target.open) listRuns(); });
  $("refresh-threads").onclick = listThreads;
  $("threads-panel").addEventListener("toggle", (e) => { if (e.target.open) listThreads(); });
  $("thread-form").onsubmit = sendMessage;
  try {
    await drawGraph();
    document.body.dataset.ready = "true";
    if (state.graph.reload) setInterval(watchReload, 1000);
  } catch (error) {
    showError(`cannot draw the graph: ${error.message}`);
  }
});
