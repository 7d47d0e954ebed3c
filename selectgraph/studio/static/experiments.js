// selectgraph studio: the experiments `selectgraph eval` kept in the store, one's cases,
// and two compared case by case (fixed, broke, changed, same, added, removed), as
// `selectgraph experiments show` and `compare` print them. A case opens its run's timeline.
// Uses $, api, showError and openRun from studio.js; text is set with textContent only.
"use strict";

const experiments = { listed: [] };

function expText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function expRow(table, cells, header) {
  const row = document.createElement("tr");
  for (const value of cells) {
    const cell = document.createElement(header ? "th" : "td");
    if (value instanceof Node) cell.appendChild(value);
    else cell.textContent = value;
    row.appendChild(cell);
  }
  table.appendChild(row);
  return row;
}

function expWhen(iso) {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleString();
}

async function listExperiments() {
  const table = $("experiments-list");
  table.textContent = "";
  try {
    experiments.listed = await api("api/experiments");
  } catch (error) {
    showError(error.message);
    return;
  }
  expRow(table, ["", "experiment", "dataset", "cases", "passed", "tokens", "cost", "when"], true);
  if (!experiments.listed.length) {
    const row = expRow(table, ["no experiments in this store yet: selectgraph eval GRAPH DATASET --store ..."]);
    row.firstChild.colSpan = 8;
    return;
  }
  for (const found of experiments.listed) {
    const pick = document.createElement("input");
    pick.type = "checkbox";
    pick.className = "experiment-pick";
    pick.title = "pick two experiments to compare";
    pick.value = found.name;
    const open = document.createElement("a");
    open.href = "#";
    open.className = "experiment-open";
    open.textContent = found.name;
    open.onclick = (event) => { event.preventDefault(); openExperiment(found.name); };
    const rate = `${found.passed}/${found.cases} (${Math.round(found.pass_rate * 100)}%)`;
    const row = expRow(table, [
      pick, open, found.dataset, String(found.cases), rate, String(found.tokens),
      `$${found.cost_usd.toFixed(4)}`, expWhen(found.updated),
    ]);
    row.dataset.experiment = found.name;
  }
}

async function openExperiment(name) {
  let found;
  try {
    found = await api(`api/experiments/${encodeURIComponent(name)}`);
  } catch (error) {
    showError(error.message);
    return;
  }
  showError("");
  const view = $("experiment-view");
  view.textContent = "";
  view.classList.remove("hidden");
  view.dataset.experiment = found.name;
  const heading = document.createElement("h3");
  heading.textContent = `Experiment ${found.name}`;
  const summary = document.createElement("p");
  summary.className = "experiment-summary";
  const passed = found.cases.filter((c) => c.passed).length;
  summary.textContent = `dataset ${found.dataset}: ${passed} of ${found.cases.length} cases passed ` +
    `(${Math.round(found.pass_rate * 100)}%), ${found.tokens} tokens, $${found.cost_usd.toFixed(4)}`;
  const table = document.createElement("table");
  table.id = "experiment-cases";
  table.className = "exp-table";
  expRow(table, ["case", "input", "output", "expected", "scores", "result", "seconds", "tokens", "run"], true);
  for (const item of found.cases) {
    const result = item.error ? `error: ${item.error}` : item.passed ? "pass" : "fail";
    const row = expRow(table, [
      item.case, expText(item.inputs), expText(item.output), expText(item.expected),
      scoresText(item.scores), result, item.seconds.toFixed(2), String(item.tokens), runLink(item),
    ]);
    row.dataset.case = item.case;
    row.dataset.passed = String(item.passed);
  }
  view.append(heading, summary, table);
}

function scoresText(scores) {
  return Object.entries(scores || {})
    .map(([name, value]) => `${name} ${typeof value === "boolean" ? (value ? "✔" : "✗") : expText(value)}`)
    .join(", ");
}

function runLink(item) {
  if (!item.run_id) return "";
  const link = document.createElement("a");
  link.href = "#";
  link.className = "case-run";
  link.dataset.runId = item.run_id;
  link.textContent = "timeline";
  link.title = `open run ${item.run_id} (thread ${item.thread_id})`;
  link.onclick = (event) => {
    event.preventDefault();
    openRun(item.run_id);
    window.scrollTo(0, 0);
  };
  return link;
}

async function compareExperiments() {
  const picked = [...document.querySelectorAll("#experiments-list .experiment-pick:checked")].map((p) => p.value);
  if (picked.length !== 2) { showError(`pick two experiments to compare (${picked.length} picked)`); return; }
  // The one run first is the baseline, as `selectgraph experiments compare BASELINE CANDIDATE`.
  const started = (name) => (experiments.listed.find((e) => e.name === name) || {}).started || "";
  picked.sort((a, b) => started(a).localeCompare(started(b)));
  let result;
  try {
    result = await api(`api/compare-experiments?a=${encodeURIComponent(picked[0])}&b=${encodeURIComponent(picked[1])}`);
  } catch (error) {
    showError(error.message);
    return;
  }
  showError("");
  showExperimentComparison(result);
}

function outcomeText(outcome) {
  if (!outcome) return "—";
  const verdict = outcome.passed ? "pass" : "fail";
  return `${verdict}: ${outcome.error ? "error: " + outcome.error : expText(outcome.output)}`;
}

function showExperimentComparison(result) {
  const view = $("experiments-compare");
  view.textContent = "";
  view.classList.remove("hidden");
  const heading = document.createElement("h3");
  heading.textContent = `${result.baseline.name} → ${result.candidate.name}`;
  const counts = document.createElement("p");
  counts.className = "experiment-counts";
  const rate = (r) => `${Math.round(r * 100)}%`;
  const changed = Object.entries(result.counts).filter(([, n]) => n).map(([change, n]) => `${n} ${change}`);
  counts.textContent = `pass rate ${rate(result.baseline.pass_rate)} → ${rate(result.candidate.pass_rate)}; ${changed.join(", ")}`;
  const table = document.createElement("table");
  table.id = "experiments-compare-table";
  table.className = "exp-table";
  expRow(table, ["case", "change", result.baseline.name, result.candidate.name], true);
  for (const row of result.cases) {
    const tr = expRow(table, [row.case, row.change, outcomeText(row.baseline), outcomeText(row.candidate)]);
    tr.dataset.case = row.case;
    tr.dataset.change = row.change;
  }
  view.append(heading, counts, table);
}

window.addEventListener("DOMContentLoaded", () => {
  $("refresh-experiments").onclick = listExperiments;
  $("compare-experiments").onclick = compareExperiments;
  $("experiments-panel").addEventListener("toggle", (e) => { if (e.target.open) listExperiments(); });
});
