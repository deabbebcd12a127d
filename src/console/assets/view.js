// Building pages: a small element builder and the formats every page shares.

/** An element: `h("td", { class: "num" }, "12")`; `on*` attributes become listeners. */
export function h(tag, attributes, ...children) {
  const svg = SVG_TAGS.has(tag);
  const element = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : value);
  }
  append(element, children);
  return element;
}

const SVG_TAGS = new Set(["svg", "g", "rect", "line", "polyline", "text", "title", "circle", "path"]);

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces `element`'s content. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** A table of `rows`, each rendered by `columns` ({ title, cell(row), num }). */
export function table(columns, rows, { onOpen, empty = "Nothing yet." } = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((column) => h("th", { class: column.num ? "num" : null, scope: "col" }, column.title))));
  const body = h("tbody", {}, rows.map((row) => tableRow(columns, row, onOpen)));
  if (!rows.length) body.append(h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, empty)));
  return h("table", {}, head, body);
}

/** One row of `table`; with `onOpen`, Enter or a click opens it. */
export function tableRow(columns, row, onOpen) {
  const open = onOpen && (() => onOpen(row));
  return h("tr", {
    class: open ? "link" : null,
    tabindex: open ? "0" : null,
    onclick: open,
    onkeydown: open && ((event) => event.key === "Enter" && open()),
  }, columns.map((column) => h("td", { class: column.num ? "num" : null }, column.cell(row))));
}

export function badge(text, kind = text) {
  return h("span", { class: `badge ${kind}` }, text);
}

export function errorBox(error) {
  const hint = error.code === "UNAUTHENTICATED" ? " Enter an API key above." :
    error.code === "PERMISSION_DENIED" ? " This key may not see it: an admin key sees everything." : "";
  return h("div", { class: "error-box", role: "alert" }, `${error.code || "ERROR"}: ${error.message}${hint}`);
}

export function time(ms) {
  if (!ms) return "";
  const date = new Date(Number(ms));
  return date.toLocaleTimeString([], { hour12: false }) + "." + String(date.getMilliseconds()).padStart(3, "0");
}

export function dateTime(ms) {
  return ms ? new Date(Number(ms)).toLocaleString([], { hour12: false }) : "";
}

/** Microseconds as the unit that reads best. */
export function micros(us) {
  us = Number(us || 0);
  if (us < 1000) return `${us} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

export function duration(run) {
  return run.ended_at ? micros((run.ended_at - run.started_at) * 1000) : "";
}

/** A form field with its label. */
export function field(label, input) {
  return h("label", {}, label, input);
}

/** The query of the current hash (`#/runs?agent=a`). */
export function hashQuery() {
  return new URLSearchParams(location.hash.split("?")[1] || "");
}

/** A message's parts as text: tool calls and results, files and reasoning marked. */
export function messageText(message) {
  return message.parts.map((part) => {
    if (part.text) return part.text.text;
    if (part.reasoning) return `(reasoning) ${part.reasoning.text}`;
    if (part.tool_call) return `→ ${part.tool_call.tool_name}(${JSON.stringify(part.tool_call.args ?? {})})`;
    if (part.tool_result) return `← ${part.tool_result.tool_name}: ${JSON.stringify(part.tool_result.result ?? "")}`;
    if (part.file) return `(file ${part.file.media_type || ""})`;
    return JSON.stringify(part);
  }).join("\n");
}
