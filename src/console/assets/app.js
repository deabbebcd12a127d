// The console's shell: the key form, the navigation, and one page at a time by the URL's hash
// (`#/runs`, `#/runs/<run id>`, `#/guardrails`, ...). A page's `render` may return a function that
// stops what it started (streams, timers) when another page opens.

import { apiKey, setApiKey } from "./api.js";
import { fill, h } from "./view.js";
import * as runs from "./runs.js";
import * as run from "./run.js";
import * as guardrails from "./guardrails.js";
import * as processors from "./processors.js";
import * as agents from "./agents.js";
import * as memory from "./memory.js";
import * as playground from "./playground.js";

const PAGES = { runs, run, guardrails, processors, agents, memory, playground };

const view = document.getElementById("view");
let stop = null;

function route() {
  const [path] = location.hash.replace(/^#\/?/, "").split("?");
  const [name = "runs", ...rest] = path.split("/").filter(Boolean);
  const pageName = name === "runs" && rest.length ? "run" : name;
  const page = PAGES[pageName] || runs;
  for (const link of document.querySelectorAll("nav a")) {
    const current = link.dataset.page === (pageName === "run" ? "runs" : pageName);
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (stop) stop();
  fill(view);
  stop = page.render(view, decodeURIComponent(rest.join("/"))) || null;
}

const form = document.getElementById("key-form");
form.key.value = apiKey();
form.addEventListener("submit", (event) => {
  event.preventDefault();
  setApiKey(form.key.value.trim());
  route();
});

window.addEventListener("hashchange", route);
if (!location.hash) history.replaceState(null, "", "#/runs");
route();
view.append(h("noscript", {}, "The console needs JavaScript."));
