// Live runs: the newest runs (ListRuns), then every run as it starts and ends (WatchRuns), with
// filters. Enter or a click opens a run.

import { ApiError, call, stream } from "./api.js";
import { badge, duration, errorBox, field, fill, h, hashQuery, table, time } from "./view.js";

const OUTCOMES = ["", "finished", "tripwire", "error", "cancelled", "timed-out"];
const KEEP = 200;

const COLUMNS = [
  { title: "Started", cell: (run) => time(run.started_at) },
  { title: "Agent", cell: (run) => run.agent_id },
  { title: "Outcome", cell: (run) => badge(run.outcome || "running") },
  { title: "Blocked by", cell: (run) => blockedBy(run) },
  { title: "Resource / thread", cell: (run) => [run.resource_id, run.thread_id].filter(Boolean).join(" / ") },
  { title: "Key", cell: (run) => run.key_name },
  { title: "Took", num: true, cell: duration },
  { title: "Run", cell: (run) => h("code", {}, run.run_id) },
];

function blockedBy(run) {
  if (run.tripwire && run.tripwire.processor_id) return `${run.tripwire.processor_id}: ${run.tripwire.reason}`;
  if (run.error && run.error.message) return `${run.error.origin || run.error.source}: ${run.error.message}`;
  return "";
}

function open(run) {
  location.hash = `#/runs/${encodeURIComponent(run.run_id)}`;
}

export function render(view) {
  const query = hashQuery();
  const inputs = {
    agent_id: h("input", { name: "agent", value: query.get("agent") || "", size: 14 }),
    resource_id: h("input", { name: "resource", value: query.get("resource") || "", size: 14 }),
    thread_id: h("input", { name: "thread", value: query.get("thread") || "", size: 14, title: "A thread of the resource" }),
    outcome: h("select", { name: "outcome" }, OUTCOMES.map((outcome) => h("option", { value: outcome, selected: outcome === (query.get("outcome") || "") }, outcome || "any"))),
    processor_id: h("input", { name: "processor", value: query.get("processor") || "", size: 14 }),
  };
  const status = h("span", { class: "muted", role: "status" });
  const problem = h("div");
  const list = h("div", { class: "panel" });
  const form = h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); start(); } },
    field("Agent", inputs.agent_id), field("Resource", inputs.resource_id), field("Thread", inputs.thread_id), field("Outcome", inputs.outcome),
    field("Processor", inputs.processor_id), h("button", { type: "submit" }, "Filter"), status);
  view.append(h("h2", {}, "Live runs"), form, problem, list);

  let controller = null;
  let runs = [];
  const draw = () => fill(list, table(COLUMNS, runs, { onOpen: open, empty: "No runs yet: they appear here as they start." }));

  async function start() {
    if (controller) controller.abort();
    controller = new AbortController();
    const filter = Object.fromEntries(Object.entries(inputs).map(([name, input]) => [name, input.value.trim()]));
    fill(problem);
    try {
      runs = (await call("RunService/ListRuns", { ...filter, page_size: 50 }, controller.signal)).runs;
      draw();
      fill(status, "live");
      await stream("RunService/WatchRuns", filter, (event) => {
        if (event.started) {
          runs = [event.started, ...runs.filter((run) => run.run_id !== event.started.run_id)].slice(0, KEEP);
        } else if (event.ended) {
          const index = runs.findIndex((run) => run.run_id === event.ended.run_id);
          if (index >= 0) runs[index] = event.ended;
          else runs = [event.ended, ...runs].slice(0, KEEP);
        } else if (event.missed) {
          fill(status, `live (missed ${event.missed} events)`);
        }
        draw();
      }, controller.signal);
      fill(status, "the server ended the stream");
    } catch (error) {
      if (error.name === "AbortError") return;
      fill(status);
      fill(problem, errorBox(error instanceof ApiError ? error : new ApiError("UNAVAILABLE", error.message)));
    }
  }

  start();
  return () => controller && controller.abort();
}

