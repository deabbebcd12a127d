// Agents: each agent's pipeline as a diagram — input, output and error processors in call
// order, the memory processors the runtime adds dashed, remote processors outlined — with each
// processor's kind, hooks and options (timeouts, failure policies, strategies).

import { call } from "./api.js";
import { errorBox, fill, h, hashQuery } from "./view.js";

const STAGES = [["input", "Input — before the model"], ["output", "Output — after the model"], ["error", "Error — when the model rejects a call"]];

function options(processor) {
  const entries = Object.entries(processor.options || {});
  if (!entries.length) return null;
  return h("div", { class: "kind mono" }, entries.map(([key, value]) => h("div", {}, `${key} = ${JSON.stringify(value)}`)));
}

function node(processor) {
  const classes = ["node", processor.kind === "remote" ? "remote" : "", processor.automatic ? "automatic" : ""].join(" ");
  return h("div", { class: classes, role: "listitem" },
    h("strong", {}, processor.id),
    h("div", { class: "kind" }, processor.kind === processor.id ? "" : processor.kind, processor.automatic ? " (memory, runs with a thread)" : ""),
    processor.hooks.length ? h("div", { class: "kind" }, processor.hooks.join(", ")) : null,
    options(processor));
}

function pipeline(agent) {
  return STAGES.map(([stage, title]) => {
    const processors = agent.pipeline.filter((processor) => processor.stage === stage);
    const chain = [];
    processors.forEach((processor, index) => {
      if (index) chain.push(h("span", { class: "arrow", "aria-hidden": "true" }, "→"));
      chain.push(node(processor));
    });
    return [h("div", { class: "stage" }, title),
      processors.length ? h("div", { class: "pipeline", role: "list", "aria-label": `${agent.id} ${stage} processors` }, chain) : h("div", { class: "muted" }, "none")];
  });
}

export function render(view) {
  const wanted = hashQuery().get("agent");
  const body = h("div");
  view.append(h("h2", {}, "Agents"), body);
  call("AgentService/ListAgents", {}).then(({ agents }) => {
    const shown = wanted ? agents.filter((agent) => agent.id === wanted) : agents;
    fill(body, shown.map((agent) => h("section", { class: "panel agent", id: `agent-${agent.id}` },
      h("h3", {}, agent.name && agent.name !== agent.id ? `${agent.name} (${agent.id})` : agent.id),
      h("p", { class: "muted" }, `model ${agent.model} · up to ${agent.max_steps} steps`, agent.tools.length ? ` · tools ${agent.tools.join(", ")}` : ""),
      pipeline(agent),
      h("p", {}, h("a", { href: `#/playground?agent=${encodeURIComponent(agent.id)}` }, "Try it in the playground"), " · ",
        h("a", { href: `#/runs?agent=${encodeURIComponent(agent.id)}` }, "Its runs")))));
    if (!shown.length) fill(body, h("p", { class: "muted" }, "No agent this key may use."));
  }).catch((error) => fill(body, errorBox(error)));
}
