/**
 * Protocol version 2 from TypeScript, against the real server: one test per capability a remote
 * processor gained — tagged system messages, data parts, answering in the model's place, a step's
 * settings seen and changed, a failed tool, repaired messages before an API-error retry, and the
 * steps and message sources of a call.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { MessageSchema, Processor, replace, retryApiCall, textDelta } from "../src/index.js";
import { useServer } from "./server.js";

const server = useServer();

/** Serves `processor` while `run` runs. */
async function serving<T>(processor: Processor, run: () => Promise<T>): Promise<T> {
  await processor.start(server.address);
  try {
    return await run();
  } finally {
    await processor.stop();
  }
}

const user = (text: string) =>
  create(MessageSchema, { role: "user", parts: [{ part: { case: "text", value: { text } } }] });

test("tagged system messages survive into the next step", async () => {
  const seen: string[][] = [];
  const v2 = new Processor("v2").on("processInputStep", (call) => {
    if (call.raw.step === 0) return replace({ taggedSystemMessages: { policy: "Answer in French." } });
    seen.push(call.raw.taggedSystemMessages.map((tagged) => `${tagged.tag}=${tagged.text}`));
    return replace({ model: "mock/inspect" });
  });
  const result = await serving(v2, () => server.client.generate("v2-tagged", "1 + 1?"));
  assert.deepEqual(seen, [["policy=Answer in French."]]);
  assert.deepEqual(JSON.parse(result.text).system, ["Answer in French."]);
});

test("data parts reach a stream processor that asks", async () => {
  const types: string[] = [];
  const v2 = new Processor("v2")
    .on("processInput", (call) => call.emit("data-audit", { checked: true }))
    .on("processOutputStream", (call) => void types.push(call.part?.type ?? ""), { dataParts: true });
  await serving(v2, () => server.client.generate("v2-data", "hi"));
  assert.ok(types.includes("data-audit"), types.join(", "));
});

test("processLLMRequest answers in the model's place", async () => {
  const v2 = new Processor("v2").on("processLLMRequest", () =>
    replace({ response: [textDelta("from "), textDelta("the cache")] }),
  );
  const result = await serving(v2, () => server.client.generate("v2-cache", "hello"));
  assert.equal(result.finishReason, "stop");
  assert.equal(result.text, "from the cache");
});

test("every setting of a step is seen and changed", async () => {
  const seen: string[] = [];
  const v2 = new Processor("v2")
    .on("processInputStep", (call) => {
      const step = call.raw.stepInput;
      seen.push(`input step ${step?.tools.map((tool) => tool.name)} ${step?.settings?.temperature}`);
      return replace({
        tools: [{ name: "lookup", description: "Looks things up" }],
        modelSettings: { temperature: 0.9 },
        providerOptions: { reasoning_effort: "low" },
        structuredOutput: { type: "object" },
        toolChoice: "required",
      });
    })
    .on("processLLMRequest", (call) => {
      const step = call.raw.stepInput;
      seen.push(`request ${step?.tools.map((tool) => tool.name)} ${step?.toolChoice}`);
    });
  const answer = JSON.parse((await serving(v2, () => server.client.generate("v2-settings", "look it up"))).text);
  assert.deepEqual(seen, ["input step calculator 0.3", "request lookup required"]);
  assert.deepEqual(answer.tools, ["lookup"]);
  assert.equal(answer.tool_choice, "required");
  assert.equal(answer.settings.temperature, 0.9);
  assert.deepEqual(answer.provider_options, { reasoning_effort: "low" });
  assert.deepEqual(answer.structured_output, { type: "object" });
});

test("tool failures, steps and message sources are shown", async () => {
  const seen: string[] = [];
  const v2 = new Processor("v2")
    .on("processToolResult", (call) => void seen.push(`tool is_error ${call.raw.toolResult?.isError}`))
    .on("processOutputStep", (call) => {
      const calls = call.raw.steps.map((step) => step.toolCalls.length);
      seen.push(`step ${call.raw.step} steps ${calls} sources ${[...new Set(call.sources)].sort()}`);
    });
  const result = await serving(v2, () => server.client.generate("v2-tool-error", "1 +"));
  assert.equal(result.text, "sorry");
  assert.deepEqual(seen, [
    "step 0 steps 1 sources input,response",
    "tool is_error true",
    "step 1 steps 1,0 sources input,response",
  ]);
});

test("processAPIError repairs the messages before the retry", async () => {
  const v2 = new Processor("v2")
    .on("processAPIError", () => retryApiCall([user("a shorter question")]))
    .on("processInputStep", (call) => (call.raw.retryCount > 0 ? replace({ model: "mock/inspect" }) : undefined));
  const answer = JSON.parse((await serving(v2, () => server.client.generate("v2-repair", "a very long question"))).text);
  assert.deepEqual(
    answer.messages.map((message: { text: string }) => message.text),
    ["a shorter question"],
  );
});
