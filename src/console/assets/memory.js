// Memory: a resource's threads, a thread's messages, and working memory (the resource's and the
// thread's).

import { call } from "./api.js";
import { dateTime, errorBox, field, fill, h, hashQuery, messageText, table } from "./view.js";

async function workingMemory(scope, resourceId) {
  try {
    const memory = await call("MemoryService/GetWorkingMemory", { scope, resource_id: resourceId });
    return memory.version ? h("pre", { class: "mono" }, memory.content) : h("p", { class: "muted" }, "Never written.");
  } catch (error) {
    return errorBox(error);
  }
}

export function render(view) {
  const resource = h("input", { name: "resource", value: hashQuery().get("resource") || "", size: 24, required: true });
  const threads = h("div");
  const thread = h("div");
  view.append(
    h("h2", {}, "Memory"),
    h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); load(); } },
      field("Resource", resource), h("button", { type: "submit" }, "Open")),
    h("div", { class: "grid" }, threads, thread),
  );

  async function openThread(row) {
    fill(thread, h("section", { class: "panel" }, h("h3", {}, `Thread ${row.id}`), h("p", { class: "muted" }, "Loading…")));
    try {
      const { messages } = await call("MemoryService/ListMessages", { thread_id: row.id, resource_id: row.resource_id, page_size: 200 });
      fill(thread, h("section", { class: "panel" },
        h("h3", {}, row.title ? `${row.title} (${row.id})` : `Thread ${row.id}`),
        messages.map((message) => h("div", { class: "message" },
          h("span", { class: "role" }, message.role), h("span", { class: "muted" }, dateTime(message.created_at)),
          h("pre", {}, messageText(message)))),
        messages.length ? null : h("p", { class: "muted" }, "No messages."),
        h("h3", {}, "Thread working memory"), await workingMemory({ thread_id: row.id }, row.resource_id)));
    } catch (error) {
      fill(thread, errorBox(error));
    }
  }

  async function load() {
    const id = resource.value.trim();
    if (!id) return;
    fill(thread);
    try {
      const listed = await call("MemoryService/ListThreads", { resource_id: id, page_size: 200 });
      fill(threads, h("section", { class: "panel" },
        h("h3", {}, `Threads of ${id}`),
        table([
          { title: "Thread", cell: (row) => row.title || row.id },
          { title: "Messages", num: true, cell: (row) => row.message_count },
          { title: "Updated", cell: (row) => dateTime(row.updated_at) },
        ], listed.threads, { onOpen: openThread, empty: "This resource has no threads." }),
        h("h3", {}, "Resource working memory"), await workingMemory({ resource_id: id }, "")));
    } catch (error) {
      fill(threads, errorBox(error));
    }
  }
  if (resource.value) load();
}
