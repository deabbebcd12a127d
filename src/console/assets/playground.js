// Playground: run an agent with a text, watch the chunks stream in, and read the run's timeline
// beside them once it is recorded.

import { ApiError, call, stream } from "./api.js";
import { render as renderRun } from "./run.js";
import { errorBox, field, fill, h, hashQuery } from "./view.js";

/** The record of `runId`, once the server has written it (records are written in batches). */
async function recordOf(runId, signal) {
  for (let attempt = 0; attempt < 40 && !signal.aborted; attempt++) {
    try {
      return await call("RunService/GetRun", { run_id: runId }, signal);
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== "NOT_FOUND") throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return null;
}

export function render(view) {
  const agent = h("select", { name: "agent", required: true });
  const text = h("textarea", { name: "text", required: true, placeholder: "Say something to the agent" });
  const resource = h("input", { name: "resource", size: 16, placeholder: "optional" });
  const thread = h("input", { name: "thread", size: 16, placeholder: "optional" });
  const answer = h("div", { class: "answer", "aria-live": "polite", id: "answer" });
  const chunks = h("div", { class: "chunks", id: "chunks" });
  const outcome = h("div", { role: "status", id: "outcome" });
  const timeline = h("div", { id: "timeline" });
  const send = h("button", { type: "submit" }, "Run");
  let controller = null;

  view.append(
    h("h2", {}, "Playground"),
    h("form", { class: "panel", onsubmit: (event) => { event.preventDefault(); run(); } },
      h("div", { class: "filters" }, field("Agent", agent), field("Resource", resource), field("Thread", thread)),
      field("Text", text), h("p", {}, send, " ", h("span", { class: "muted" }, "Ctrl+Enter runs"))),
    h("div", { class: "grid" },
      h("section", { class: "panel" }, h("h3", {}, "Answer"), answer, outcome, h("h3", {}, "Chunks"), chunks),
      h("section", { class: "panel" }, h("h3", {}, "Timeline"), timeline)),
  );
  text.addEventListener("keydown", (event) => { if (event.key === "Enter" && event.ctrlKey) run(); });

  call("AgentService/ListAgents", {}).then(({ agents }) => {
    const wanted = hashQuery().get("agent");
    fill(agent, agents.map((item) => h("option", { value: item.id, selected: item.id === wanted }, item.id)));
  }).catch((error) => fill(outcome, errorBox(error)));

  async function run() {
    if (controller) controller.abort();
    controller = new AbortController();
    const signal = controller.signal;
    fill(answer); fill(chunks); fill(outcome); fill(timeline);
    send.disabled = true;
    let runId = "";
    try {
      await stream("AgentService/Stream", {
        agent_id: agent.value, text: text.value, resource_id: resource.value.trim(), thread_id: thread.value.trim(),
      }, (chunk) => {
        runId = chunk.run_id || runId;
        const { run_id: _, type, ...payload } = chunk;
        chunks.append(`${type} ${JSON.stringify(Object.values(payload)[0] ?? {})}\n`);
        chunks.scrollTop = chunks.scrollHeight;
        if (chunk.text_delta) answer.append(chunk.text_delta.text);
        if (chunk.tripwire) fill(outcome, errorBox(new ApiError("TRIPWIRE", `${chunk.tripwire.processor_id}: ${chunk.tripwire.reason}`)));
        if (chunk.error) fill(outcome, errorBox(new ApiError("ERROR", chunk.error.message)));
        if (chunk.finish) fill(outcome, h("p", { class: "muted" }, `finished: ${chunk.finish.finish_reason}`));
      }, signal);
    } catch (error) {
      if (error.name !== "AbortError") fill(outcome, errorBox(error));
    } finally {
      send.disabled = false;
    }
    if (!runId || signal.aborted) return;
    try {
      const record = await recordOf(runId, signal);
      if (record) renderRun(timeline, runId);
      else fill(timeline, h("p", { class: "muted" }, "The run left no record (records are off, or there is no store)."));
    } catch (error) {
      fill(timeline, errorBox(error));
    }
  }
  return () => controller && controller.abort();
}
