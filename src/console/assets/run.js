// One run: how it ended, what blocked it, what processors warned of, and its timeline as a
// waterfall — every hook call by processor and step, every model and tool call, every warning —
// with the remote instance that answered.

import { call } from "./api.js";
import { badge, dateTime, duration, errorBox, fill, h, messageText, micros, table } from "./view.js";

const stepOf = (call) => (call.step === undefined || call.step === null ? "" : ` · step ${call.step}`);

/** What a timeline entry is, for its row label. */
function describe(entry) {
  if (entry.hook) {
    const hook = entry.hook;
    return { kind: "hook", label: `${hook.processor_id} · ${hook.hook}${stepOf(hook)}`, decision: hook.decision };
  }
  if (entry.warning) {
    const warning = entry.warning;
    return { kind: "warning", label: `${warning.processor_id} · ${warning.hook}${stepOf(warning)} · ${warning.kind}`, decision: "warned" };
  }
  if (entry.model) return { kind: "model", label: `model ${entry.model.model} · step ${entry.model.step}`, decision: entry.model.error ? "failed" : "continue" };
  return { kind: "tool", label: `tool ${entry.tool.name} · step ${entry.tool.step}`, decision: entry.tool.error ? "failed" : "continue" };
}

function detail(entry) {
  if (entry.hook) {
    const hook = entry.hook;
    const parts = [];
    if (hook.reason) parts.push(hook.reason);
    if (hook.retry) parts.push("asked for a retry");
    if (hook.calls > 1) parts.push(`${hook.calls} calls, longest ${micros(hook.max_us)}`);
    if (hook.retry_count) parts.push(`retry ${hook.retry_count}`);
    if (hook.metadata !== null && hook.metadata !== undefined && hook.decision === "abort") parts.push(`metadata ${JSON.stringify(hook.metadata)}`);
    return parts.join(" · ");
  }
  if (entry.model) {
    const model = entry.model;
    const usage = model.usage ? `${model.usage.input_tokens ?? 0} in / ${model.usage.output_tokens ?? 0} out tokens` : "";
    return [model.error, model.first_token_us ? `first token ${micros(model.first_token_us)}` : "", usage, model.from_cache ? "from cache" : ""].filter(Boolean).join(" · ");
  }
  if (entry.warning) {
    const warning = entry.warning;
    return [warning.message, warning.count > 1 ? `${warning.count} warnings (the first shown)` : ""].filter(Boolean).join(" · ");
  }
  return entry.tool.error || "";
}

/** The timeline as bars on one time axis, a row per entry. */
function waterfall(record) {
  const entries = record.timeline;
  const total = Math.max(1, ...entries.map((entry) => Number(entry.at_us) + Number(entry.duration_us)));
  const [labelWidth, width, row] = [300, 980, 20];
  const scale = (us) => (Number(us) / total) * (width - labelWidth - 80);
  const svg = h("svg", { class: "waterfall", viewBox: `0 0 ${width} ${entries.length * row + 24}`, width: "100%", role: "img", "aria-label": "Timeline of the run's calls" });
  entries.forEach((entry, index) => {
    const { kind, label, decision } = describe(entry);
    const y = index * row + 4;
    const x = labelWidth + scale(entry.at_us);
    const text = h("text", { x: 0, y: y + 12 }, label.length > 46 ? label.slice(0, 45) + "…" : label);
    if (kind === "warning") {
      const mid = y + (row - 6) / 2;
      svg.append(text, h("path", { class: "mark warning", d: `M${x} ${mid - 7} L${x + 7} ${mid} L${x} ${mid + 7} L${x - 7} ${mid} Z` },
        h("title", {}, `${label} at +${micros(entry.at_us)}: ${entry.warning.message}`)));
      return;
    }
    const classes = ["bar", kind === "hook" ? "" : kind, ["abort", "failed", "skipped"].includes(decision) ? decision : ""].join(" ");
    svg.append(
      text,
      h("rect", { class: classes, x, y, width: Math.max(2, scale(entry.duration_us)), height: row - 6 },
        h("title", {}, `${label}: ${micros(entry.duration_us)} at +${micros(entry.at_us)} (${decision})`)),
      h("text", { x: x + Math.max(2, scale(entry.duration_us)) + 4, y: y + 12 }, micros(entry.duration_us)),
    );
  });
  svg.append(h("text", { x: labelWidth, y: entries.length * row + 18 }, `0 — ${micros(total)}`));
  return svg;
}

const COLUMNS = [
  { title: "At", num: true, cell: (entry) => `+${micros(entry.at_us)}` },
  { title: "Call", cell: (entry) => describe(entry).label },
  { title: "Decision", cell: (entry) => badge(describe(entry).decision) },
  { title: "Took", num: true, cell: (entry) => (entry.warning ? "" : micros(entry.duration_us)) },
  { title: "Instance", cell: (entry) => (entry.hook && entry.hook.instance_id) || (entry.hook ? "in process" : "") },
  { title: "Detail", cell: detail },
];

function blocked(record) {
  const trip = record.tripwire;
  if (record.outcome !== "tripwire" || !trip) return null;
  const call = record.timeline.find((entry) => entry.hook && entry.hook.decision === "abort" && entry.hook.processor_id === trip.processor_id);
  const where = call ? `${call.hook.hook}${call.hook.step === undefined || call.hook.step === null ? "" : `, step ${call.hook.step}`}` : "";
  return h("section", { class: "panel blocked", "aria-label": "What blocked the run" },
    h("h3", {}, "Blocked"),
    h("dl", { class: "kv" },
      h("dt", {}, "Processor"), h("dd", { class: "blocked-processor" }, trip.processor_id),
      h("dt", {}, "Hook"), h("dd", { class: "blocked-hook" }, where || "—"),
      h("dt", {}, "Reason"), h("dd", { class: "blocked-reason" }, trip.reason),
      trip.metadata !== null && trip.metadata !== undefined ? [h("dt", {}, "Metadata"), h("dd", {}, h("code", {}, JSON.stringify(trip.metadata)))] : null,
      call && call.hook.instance_id ? [h("dt", {}, "Instance"), h("dd", {}, call.hook.instance_id)] : null,
    ));
}

/** What processors warned of without stopping the run. */
function warned(record) {
  const warnings = record.timeline.filter((entry) => entry.warning).map((entry) => entry.warning);
  if (!warnings.length) return null;
  return h("section", { class: "panel warnings", "aria-label": "What processors warned of" },
    h("h3", {}, `Warnings (${warnings.reduce((sum, warning) => sum + warning.count, 0)})`),
    h("ul", {}, warnings.map((warning) => h("li", { class: "warning" },
      h("strong", {}, warning.processor_id), ` · ${warning.hook}${stepOf(warning)} · `, badge(warning.kind), " ",
      warning.message, warning.count > 1 ? ` (×${warning.count})` : "",
      warning.details !== null && warning.details !== undefined ? [" ", h("code", {}, JSON.stringify(warning.details))] : null))));
}

/** What the model saw at each step and what the client got, for an agent that keeps it. */
function content(record) {
  const kept = record.content;
  if (!kept) {
    return h("section", { class: "panel" }, h("h3", {}, "Content"),
      h("p", { class: "muted" }, "Not kept: set [agents.record] content = true on the agent to keep the prompt the model saw and the chunks the client got."));
  }
  const answer = kept.chunks.filter((chunk) => chunk.text_delta).map((chunk) => chunk.text_delta.text).join("");
  const others = kept.chunks.filter((chunk) => !chunk.text_delta).map((chunk) => chunk.type);
  return [
    h("section", { class: "panel prompts", "aria-label": "What the model saw" },
      h("h3", {}, "What the model saw"),
      kept.system_withheld ? h("p", { class: "muted" }, "System messages left out: this key may not read the agent's instructions ([[auth.keys]] instructions).") : null,
      kept.prompts.length ? kept.prompts.map((prompt) => h("div", { class: "prompt" },
        h("h4", {}, `Step ${prompt.step}`),
        h("dl", { class: "kv" }, prompt.messages.map((message) => [h("dt", {}, message.role), h("dd", {}, h("pre", {}, messageText(message)))]))))
        : h("p", { class: "muted" }, "No model call (blocked before one, or answered by a processor).")),
    h("section", { class: "panel delivered", "aria-label": "What the client got" },
      h("h3", {}, "What the client got"),
      h("pre", { class: "answer" }, answer || "(no text)"),
      h("p", { class: "muted" }, `Chunks: ${others.join(", ")}${kept.truncated ? " — truncated: more was sent than a record keeps" : ""}`)),
  ];
}

export function render(view, runId) {
  view.append(h("p", {}, h("a", { href: "#/runs" }, "← Live runs")), h("h2", {}, "Run ", h("code", {}, runId)));
  const body = h("div", { "aria-busy": "true" });
  view.append(body);
  call("RunService/GetRun", { run_id: runId }).then((record) => {
    body.removeAttribute("aria-busy");
    const usage = record.usage || {};
    // `fill` leaves out the panels a record has nothing for (null).
    fill(body,
      h("section", { class: "panel" }, h("dl", { class: "kv" },
        h("dt", {}, "Outcome"), h("dd", {}, badge(record.outcome), record.finish_reason ? ` (${record.finish_reason})` : ""),
        h("dt", {}, "Agent"), h("dd", {}, h("a", { href: `#/agents?agent=${encodeURIComponent(record.agent_id)}` }, record.agent_id)),
        h("dt", {}, "Resource / thread"), h("dd", {}, [record.resource_id, record.thread_id].filter(Boolean).join(" / ") || "—"),
        h("dt", {}, "API key"), h("dd", {}, record.key_name || "—"),
        h("dt", {}, "Started"), h("dd", {}, dateTime(record.started_at)),
        h("dt", {}, "Took"), h("dd", {}, duration(record)),
        h("dt", {}, "Tokens"), h("dd", {}, `${usage.input_tokens ?? 0} in / ${usage.output_tokens ?? 0} out`),
        record.error && record.error.message ? [h("dt", {}, "Error"), h("dd", {}, `${record.error.origin || record.error.source}: ${record.error.message}`)] : null,
      )),
      blocked(record),
      warned(record),
      h("section", { class: "panel" }, h("h3", {}, "Timeline"), record.timeline.length ? waterfall(record) : h("p", { class: "muted" }, "No calls recorded.")),
      h("section", { class: "panel" }, h("h3", {}, "Every call"), table(COLUMNS, record.timeline)),
      content(record),
    );
  }).catch((error) => {
    body.removeAttribute("aria-busy");
    body.append(errorBox(error));
  });
}
