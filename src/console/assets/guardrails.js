// Guardrails: over a window, tripwires by processor and reason, warnings by processor and kind,
// and hook latency by processor — as plots over time and as tables — with failures and
// `open`-policy skips. Refreshes itself.

import { call } from "./api.js";
import { linePlot } from "./plot.js";
import { errorBox, field, fill, h, micros, table } from "./view.js";

const WINDOWS = [["15 minutes", 15 * 60e3], ["1 hour", 3600e3], ["6 hours", 6 * 3600e3], ["24 hours", 24 * 3600e3], ["7 days", 7 * 24 * 3600e3]];
const REFRESH_MS = 5000;

/**
 * A series per key of `pick(bucket)` (a map). Counts (`zero`) read 0 in buckets without runs, from
 * `from` to `to` every `step`; latencies have points only where there were calls.
 */
function series(buckets, pick, { zero, from, to, step }) {
  const names = [...new Set(buckets.flatMap((bucket) => Object.keys(pick(bucket))))].sort();
  const byStart = new Map(buckets.map((bucket) => [bucket.start, pick(bucket)]));
  const starts = [];
  if (zero) for (let start = Math.floor(from / step) * step; start <= to; start += step) starts.push(start);
  return names.map((name) => ({
    name,
    points: zero ? starts.map((start) => [start, Number((byStart.get(start) || {})[name] ?? 0)])
      : buckets.filter((bucket) => name in pick(bucket)).map((bucket) => [bucket.start, Number(pick(bucket)[name])]),
  }));
}

const TRIPWIRES = [
  { title: "Processor", cell: (row) => row.processor_id },
  { title: "Reason", cell: (row) => row.reason },
  { title: "Runs", num: true, cell: (row) => row.count },
];

const WARNINGS = [
  { title: "Processor", cell: (row) => row.processor_id },
  { title: "Kind", cell: (row) => row.kind },
  { title: "Warnings", num: true, cell: (row) => row.count },
];

const HOOKS = [
  { title: "Processor", cell: (row) => row.processor_id },
  { title: "Hook", cell: (row) => row.hook },
  { title: "Calls", num: true, cell: (row) => row.calls },
  { title: "p50", num: true, cell: (row) => micros(row.p50_us) },
  { title: "p95", num: true, cell: (row) => micros(row.p95_us) },
  { title: "p99", num: true, cell: (row) => micros(row.p99_us) },
  { title: "max", num: true, cell: (row) => micros(row.max_us) },
  { title: "Aborts", num: true, cell: (row) => row.aborts },
  { title: "Failures", num: true, cell: (row) => row.failures },
  { title: "Skipped (open)", num: true, cell: (row) => row.skipped },
];

export function render(view) {
  const windowSelect = h("select", { name: "window" }, WINDOWS.map(([label, ms], index) => h("option", { value: ms, selected: index === 1 }, label)));
  const agent = h("input", { name: "agent", size: 14 });
  const resource = h("input", { name: "resource", size: 14 });
  const body = h("div");
  view.append(
    h("h2", {}, "Guardrails"),
    h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); load(); } },
      field("Window", windowSelect), field("Agent", agent), field("Resource", resource), h("button", { type: "submit" }, "Show")),
    body,
  );

  async function load() {
    const span = Number(windowSelect.value);
    const now = Date.now();
    const bucket = Math.max(1000, Math.ceil(span / 60 / 1000) * 1000);
    try {
      const stats = await call("RunService/GetStats", {
        agent_id: agent.value.trim(), resource_id: resource.value.trim(), since: now - span, until: now + 1000, bucket_ms: bucket,
      });
      const buckets = stats.buckets;
      const axis = { from: now - span, to: now, step: bucket };
      const counts = { ...axis, zero: true };
      const latency = (key) => (bucket) => Object.fromEntries(Object.entries(bucket.latency).map(([name, value]) => [name, value[key]]));
      const tripped = Object.entries(stats.outcomes).map(([outcome, count]) => `${count} ${outcome}`).join(", ");
      fill(body,
        h("p", { class: "muted" }, `${stats.runs} runs${tripped ? ` (${tripped})` : ""}${stats.complete ? "" : " — the newest 10,000 of the window"}.`),
        h("div", { class: "grid" },
          h("section", { class: "panel" }, h("h3", {}, "Tripwires per processor"), linePlot(series(buckets, (bucket) => bucket.tripwires, counts), { ...axis, label: "Tripwires per processor over time" })),
          h("section", { class: "panel" }, h("h3", {}, "Warnings per processor"), linePlot(series(buckets, (bucket) => bucket.warnings, counts), { ...axis, label: "Warnings per processor over time" })),
          h("section", { class: "panel" }, h("h3", {}, "Hook latency p95 per processor"), linePlot(series(buckets, latency("p95_us"), axis), { ...axis, label: "p95 hook latency per processor over time", format: micros })),
          h("section", { class: "panel" }, h("h3", {}, "Runs by outcome"), linePlot(series(buckets, (bucket) => bucket.outcomes, counts), { ...axis, label: "Runs by outcome over time" })),
        ),
        h("section", { class: "panel" }, h("h3", {}, "Tripwires by processor and reason"), table(TRIPWIRES, stats.tripwires, { empty: "No tripwires in this window." })),
        h("section", { class: "panel warnings-by-kind" }, h("h3", {}, "Warnings by processor and kind"), table(WARNINGS, stats.warnings, { empty: "No warnings in this window." })),
        h("section", { class: "panel" }, h("h3", {}, "Hooks by processor"), table(HOOKS, stats.hooks, { empty: "No hook calls in this window." })),
      );
    } catch (error) {
      fill(body, errorBox(error));
    }
  }

  load();
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  return () => clearInterval(timer);
}
