// selectgraph studio: a run's timeline, built from its events (live or read from the store).
// Each node's visit is a bar over the run's own time (first event to last), parallel
// branches are bars side by side in time, subgraph nodes are indented under their
// subgraph node; retries and interrupts are marked. Under a node: its LLM calls (model,
// tokens, cost, latency) and tool calls (name, duration, error); clicking one shows its
// prompt and response, or its arguments and result, when the run captured content.
// Text is set with textContent only: nothing from a run is parsed as HTML.
"use strict";

const Timeline = (() => {
  let rows = [];
  let open = {}; // the latest visit of each node path (and branch), by key
  let calls = {}; // calls by id
  let shown = new Set(); // calls whose details are open: kept across redraws
  let first = null;
  let last = null;
  let scheduled = false;
  let box = null;

  function reset(element) {
    box = element;
    rows = [];
    open = {};
    calls = {};
    shown = new Set();
    first = null;
    last = null;
    if (box) box.textContent = "";
  }

  function keyOf(record) {
    const branch = record.branch ? `#${record.branch.task_id || record.branch.index}` : "";
    return `${(record.node_path || []).join("/")}${branch}`;
  }

  function rowFor(record, start) {
    const key = keyOf(record);
    let row = open[key];
    if (!row) {
      row = newRow(record, start);
      open[key] = row;
    }
    return row;
  }

  function newRow(record, start) {
    const path = record.node_path || [record.node];
    const row = {
      node: record.node || path[path.length - 1],
      depth: Math.max(0, path.length - 1),
      visit: record.visit || 1,
      branch: record.branch ? (record.branch.label || `branch ${record.branch.index}`) : null,
      start, end: null, duration: null, outcome: null, error: null,
      retries: [], interrupted: false, calls: [], step: record.step,
    };
    rows.push(row);
    return row;
  }

  function callFor(record, kind, start) {
    let call = calls[record.call_id];
    if (!call) {
      call = { id: record.call_id, kind, start, duration: null, error: null };
      calls[record.call_id] = call;
      rowFor(record, start).calls.push(call);
    }
    return call;
  }

  // Take one record of the run's event stream.
  function add(record) {
    const ts = typeof record.timestamp === "number" ? record.timestamp : null;
    if (ts !== null) {
      first = first === null ? ts : Math.min(first, ts);
      last = last === null ? ts : Math.max(last, ts);
    }
    switch (record.event) {
      case "NodeStarted": {
        const row = newRow(record, ts);
        open[keyOf(record)] = row;
        break;
      }
      case "NodeFinished": {
        const ms = record.duration_ms || 0;
        const row = rowFor(record, ts === null ? null : ts - ms / 1000);
        row.duration = ms;
        row.end = row.start === null ? ts : row.start + ms / 1000;
        row.outcome = record.outcome;
        // An interrupted visit's "error" is its question's id: the mark says it asked.
        row.error = record.outcome === "interrupted" ? null : record.error || null;
        if (record.outcome === "interrupted") row.interrupted = true;
        row.step = record.step;
        break;
      }
      case "NodeRetried":
        rowFor(record, ts).retries.push(record.error || "");
        break;
      case "InterruptRaised":
        rowFor(record, ts).interrupted = true;
        break;
      case "RunFailed":
        // A node that raised gets no NodeFinished: the run's failure closes its bar.
        for (const row of rows) {
          if (row.outcome === null && !row.interrupted && (!record.node || row.node === record.node)) {
            row.outcome = "failure";
            row.error = record.error || null;
            if (ts !== null && row.start !== null) {
              row.end = ts;
              row.duration = (ts - row.start) * 1000;
            }
          }
        }
        break;
      case "LLMCallStarted": {
        const call = callFor(record, "llm", ts);
        call.model = record.model;
        call.provider = record.provider;
        if (record.messages) call.messages = record.messages;
        break;
      }
      case "LLMCallFinished": {
        const call = callFor(record, "llm", ts === null ? null : ts - (record.duration_ms || 0) / 1000);
        Object.assign(call, {
          model: record.response_model || record.model, provider: record.provider,
          duration: record.duration_ms, input: record.input_tokens || 0,
          output: record.output_tokens || 0, cost: record.cost_usd, error: record.error || null,
        });
        if (record.text !== undefined) call.reply = record.text;
        break;
      }
      case "ToolCallStarted": {
        const call = callFor(record, "tool", ts);
        call.tool = record.tool;
        if (record.arguments !== undefined) call.arguments = record.arguments;
        break;
      }
      case "ToolCallFinished": {
        const call = callFor(record, "tool", ts);
        call.tool = record.tool;
        call.duration = record.duration_ms;
        call.error = record.error || null;
        if (record.tool_result !== undefined) call.result = record.tool_result;
        break;
      }
      default:
        if (ts === null) return;
    }
    schedule();
  }

  // The run's duration, from its own events: a reopened or forked run shows its real time.
  function elapsed() {
    return first === null ? 0 : last - first;
  }

  function schedule() {
    if (scheduled || !box) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; draw(); });
  }

  function ms(value) {
    if (value === null || value === undefined) return "…";
    return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function draw() {
    if (!box) return;
    box.textContent = "";
    const span = Math.max(elapsed(), 0.001);
    for (const row of rows) {
      const line = el("div", "tl-row");
      line.dataset.node = row.node;
      line.dataset.depth = String(row.depth);
      line.dataset.outcome = row.outcome || (row.interrupted ? "interrupted" : "running");
      const label = el("span", "tl-label");
      label.style.paddingLeft = `${row.depth * 14}px`;
      label.textContent = `${row.depth ? "↳ " : ""}${row.node}${row.visit > 1 ? " #" + row.visit : ""}`
        + (row.branch ? ` [${row.branch}]` : "");
      const track = el("span", "tl-track");
      const bar = el("span", "tl-bar");
      const start = row.start === null ? first : row.start;
      const end = row.end === null ? last : row.end;
      bar.style.left = `${(((start ?? 0) - (first ?? 0)) / span) * 100}%`;
      bar.style.width = `${Math.max(0.5, (((end ?? 0) - (start ?? 0)) / span) * 100)}%`;
      track.appendChild(bar);
      const facts = el("span", "tl-duration", ms(row.duration));
      line.append(label, track, facts);
      // An empty cell for a node without LLM calls keeps the bars' tracks aligned.
      line.appendChild(usageOf(row) || el("span", "tl-usage-none"));
      if (row.retries.length) {
        const mark = el("span", "tl-retry", `retried ${row.retries.length}×`);
        mark.title = row.retries.join("\n");
        line.appendChild(mark);
      }
      if (row.interrupted) line.appendChild(el("span", "tl-interrupt", "asked"));
      if (row.error) line.appendChild(el("span", "tl-error", row.error));
      box.appendChild(line);
      for (const call of row.calls) box.appendChild(drawCall(call, row.depth));
    }
  }

  // A node's LLM calls summed: its tokens (in + out) and cost, beside its duration.
  function usageOf(row) {
    const llm = row.calls.filter((call) => call.kind === "llm");
    if (!llm.length) return null;
    let input = 0, output = 0, cost = 0, priced = false;
    for (const call of llm) {
      input += call.input || 0;
      output += call.output || 0;
      if (typeof call.cost === "number") { cost += call.cost; priced = true; }
    }
    const usage = el("span", "tl-usage",
      `${input + output} tokens${priced ? ` · $${cost.toFixed(4)}` : ""}`);
    usage.title = `${llm.length} LLM call${llm.length === 1 ? "" : "s"}: ${input} in / ${output} out tokens`;
    usage.dataset.tokens = String(input + output);
    return usage;
  }

  function drawCall(call, depth) {
    const item = el("div", `tl-call tl-${call.kind}`);
    item.dataset.callId = call.id;
    item.dataset.kind = call.kind;
    item.style.marginLeft = `${depth * 14 + 18}px`;
    const head = el("button", "tl-call-head");
    head.type = "button";
    if (call.kind === "llm") {
      const cost = typeof call.cost === "number" ? ` · $${call.cost.toFixed(4)}` : "";
      head.textContent = `LLM ${call.model || "?"} · ${call.input ?? 0} in / ${call.output ?? 0} out tokens${cost} · ${ms(call.duration)}`;
    } else {
      head.textContent = `tool ${call.tool || "?"} · ${ms(call.duration)}`;
    }
    if (call.error) head.textContent += ` · failed: ${call.error}`;
    head.onclick = () => {
      if (shown.has(call.id)) shown.delete(call.id); else shown.add(call.id);
      draw();
    };
    item.appendChild(head);
    if (shown.has(call.id)) item.appendChild(details(call));
    return item;
  }

  function details(call) {
    const pre = el("pre", "tl-detail");
    const captured = call.kind === "llm" ? call.messages !== undefined || call.reply !== undefined
      : call.arguments !== undefined || call.result !== undefined;
    if (!captured) {
      pre.dataset.captured = "false";
      pre.textContent = call.kind === "llm"
        ? "The prompt and response were not captured: start the studio with capture_content=True, or store runs with event_log=\"content\"."
        : "The arguments and result were not captured: start the studio with capture_content=True, or store runs with event_log=\"content\".";
      return pre;
    }
    pre.dataset.captured = "true";
    const lines = [];
    if (call.kind === "llm") {
      lines.push("prompt:");
      for (const message of call.messages || []) lines.push(`  ${message.role}: ${message.text}`);
      lines.push("response:", `  ${typeof call.reply === "string" ? call.reply : JSON.stringify(call.reply)}`);
    } else {
      lines.push(`arguments: ${JSON.stringify(call.arguments, null, 2)}`);
      lines.push(`result: ${call.result === undefined ? "" : call.result}`);
    }
    pre.textContent = lines.join("\n");
    return pre;
  }

  return { reset, add, elapsed };
})();
