// Processors: the remote instances connected now — their hooks, calls in flight, calls, errors
// and latency — refreshed every two seconds.

import { call } from "./api.js";
import { dateTime, errorBox, fill, h, table } from "./view.js";

const REFRESH_MS = 2000;

const hookName = (hook) => hook.replace(/^HOOK_/, "").toLowerCase().replace(/_([a-z])/g, (_, letter) => letter.toUpperCase())
  .replace("Llm", "LLM").replace("Api", "API");

const COLUMNS = [
  { title: "Processor", cell: (row) => row.processor_id },
  { title: "Instance", cell: (row) => h("code", {}, row.instance_id) },
  { title: "Hooks", cell: (row) => row.hooks.map(hookName).join(", ") },
  { title: "In flight", num: true, cell: (row) => row.in_flight },
  { title: "Calls", num: true, cell: (row) => row.calls },
  { title: "Errors", num: true, cell: (row) => row.errors },
  { title: "Dropped", num: true, cell: (row) => row.dropped },
  { title: "Mean latency", num: true, cell: (row) => `${Number(row.mean_latency_ms).toFixed(2)} ms` },
  { title: "Connected", cell: (row) => dateTime(row.connected_at) },
];

export function render(view) {
  const body = h("div", { class: "panel" });
  view.append(h("h2", {}, "Processors"), h("p", { class: "muted" }, "Remote processor instances connected to this server, live."), body);
  async function load() {
    try {
      const { instances } = await call("ProcessorService/ListProcessors", {});
      fill(body, table(COLUMNS, instances, { empty: "No remote processor is connected." }));
    } catch (error) {
      fill(body, errorBox(error));
    }
  }
  load();
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  return () => clearInterval(timer);
}
