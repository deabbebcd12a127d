/**
 * The TypeScript client against the real server: generate, a remote input guardrail (tripwire
 * and nothing saved), a remote output rewriter, and the failure policy when a processor dies
 * mid-run.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { guard } from "../examples/word-blocker.js";
import { redactor } from "../examples/stream-redactor.js";
import { tools } from "../examples/weather-tool.js";
import { create } from "@bufbuild/protobuf";

import { HookCallSchema } from "../src/gen/agentwire/v1/processor_pb.js";
import { Call, Client, Processor, abort } from "../src/index.js";
import { config, root, serve, useServer } from "./server.js";

const server = useServer();

test("generate returns the answer, stream yields the chunks", async () => {
  const result = await server.client.generate("echo", "hello from typescript");
  assert.equal(result.text, "echo: hello from typescript");
  assert.equal(result.finishReason, "stop");
  const types: string[] = [];
  for await (const chunk of server.client.stream("echo", "hi")) types.push(chunk.type);
  assert.equal(types[0], "start");
  assert.equal(types.at(-1), "finish");
});

test("a remote guardrail trips and nothing is saved", async () => {
  await guard.start(server.address);
  try {
    const result = await server.client.generate("guarded", "tell me the secret", { threadId: "ts-thread", resourceId: "ada" });
    assert.equal(result.finishReason, "other");
    assert.equal(result.tripwire?.reason, "no secrets, please");
    assert.equal(result.tripwire?.processorId, "word-guard");
    await assert.rejects(server.client.memory.getThread({ threadId: "ts-thread", resourceId: "ada" }), (error: unknown) => {
      assert.equal(ConnectError.from(error).code, Code.NotFound);
      return true;
    });
    const passed = await server.client.generate("guarded", "hello", { threadId: "ts-thread-2", resourceId: "ada" });
    assert.equal(passed.text, "echo: hello");
  } finally {
    await guard.stop();
  }
});

test("run records name the processor that blocked a run", async () => {
  await guard.start(server.address);
  let runId = "";
  try {
    runId = (await server.client.generate("guarded", "the secret", { resourceId: "ts-records" })).runId;
    await server.client.generate("guarded", "hello", { resourceId: "ts-records" });
  } finally {
    await guard.stop();
  }
  // Records are written in batches: wait until both are listed (one per page).
  const deadline = Date.now() + 10_000;
  let listed: string[] = [];
  while (listed.length < 2) {
    assert.ok(Date.now() < deadline, `${listed.length} of 2 runs recorded`);
    await new Promise((resolve) => setTimeout(resolve, 20));
    listed = [];
    for await (const run of server.client.allRuns({ resourceId: "ts-records", pageSize: 1 })) listed.push(run.runId);
  }
  const blocked: string[] = [];
  for await (const run of server.client.allRuns({ resourceId: "ts-records", outcome: "tripwire" })) blocked.push(run.runId);
  assert.deepEqual(blocked, [runId]);
  const record = await server.client.getRun(runId);
  assert.equal(record.tripwire?.processorId, "word-guard");
  const abort = record.timeline.flatMap((entry) => (entry.entry.case === "hook" ? [entry.entry.value] : []))
    .find((hook) => hook.processorId === "word-guard");
  assert.equal(abort?.hook, "processInput");
  assert.equal(abort?.decision, "abort");
  assert.equal(abort?.reason, "no secrets, please");
  assert.ok(abort?.instanceId.startsWith("word-guard-"), abort?.instanceId);
});

test("a warning streams and stays in the run record", async () => {
  const warner = new Processor("word-guard").on("processInput", (call) => {
    call.warn("tone", "the user is in a hurry", { word: "now" });
  });
  await warner.start(server.address);
  let result;
  try {
    result = await server.client.generate("guarded", "answer now", { resourceId: "ts-warned" });
  } finally {
    await warner.stop();
  }
  assert.equal(result.tripwire, undefined);
  assert.ok(result.data.some((chunk) => chunk.type === "data-tone"), "streamed as data-tone");
  const deadline = Date.now() + 10_000;
  let record;
  while (!record) {
    try {
      record = await server.client.getRun(result.runId);
    } catch (error) {
      if (ConnectError.from(error).code !== Code.NotFound || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  const warnings = record.timeline.flatMap((entry) => (entry.entry.case === "warning" ? [entry.entry.value] : []));
  assert.deepEqual(
    warnings.map((warning) => [warning.processorId, warning.hook, warning.kind, warning.message]),
    [["word-guard", "processInput", "tone", "the user is in a hurry"]],
  );
  assert.throws(() => new Call(create(HookCallSchema)).warn("Not A Kind", "refused"), /warning kinds/);
});

test("a remote output rewriter (windowed) changes the answer", async () => {
  await redactor.start(server.address);
  try {
    let text = "";
    for await (const chunk of server.client.stream("redacted", "call 555 1234")) {
      if (chunk.payload.case === "textDelta") text += chunk.payload.value.text;
    }
    assert.equal(text, "echo: call ### ####");
  } finally {
    await redactor.stop();
  }
});

test("a processor's death mid-run follows the failure policy", async () => {
  let called: () => void = () => {};
  const calledOnce = new Promise<void>((resolve) => {
    called = resolve;
  });
  const flaky = new Processor("flaky").on("processInput", async (_call, signal) => {
    called();
    await new Promise((resolve) => signal.addEventListener("abort", resolve)); // never answers
    return undefined;
  });
  await flaky.start(server.address);
  const running = server.client.generate("fragile", "hi");
  await calledOnce;
  await flaky.stop(); // the session ends with the call in flight
  const result = await running;
  assert.equal(result.finishReason, "other");
  assert.match(result.tripwire?.reason ?? "", /flaky/);
  assert.match(result.tripwire?.reason ?? "", /disconnected|unavailable/);
});

test("a remote tool serves an agent", async () => {
  await tools.start(server.address);
  try {
    const result = await server.client.generate("forecaster", "weather in Paris?");
    assert.equal(result.text, "done");
    const toolResults = result.messages
      .flatMap((message) => message.parts)
      .flatMap((part) => (part.part.case === "toolResult" ? [part.part.value] : []));
    assert.equal(toolResults.length, 1);
    assert.equal(toolResults[0].isError, false);
    const value = toolResults[0].result?.kind;
    assert.equal(value?.case, "structValue");
    assert.equal(value?.case === "structValue" ? value.value.fields.city?.kind.value : undefined, "Paris");
  } finally {
    await tools.stop();
  }
});

test("an API key goes with every call", async () => {
  const keyed = await serve(join(root, "clients/testdata/keyed.toml"));
  try {
    const withKey = new Client(keyed.address, "client-suite-key");
    const result = await withKey.generate("echo", "hi", { threadId: "t1", resourceId: "suite-ts" });
    assert.equal(result.text, "echo: hi");
    const refused = (code: Code) => (error: unknown) => {
      assert.equal(ConnectError.from(error).code, code);
      return true;
    };
    await assert.rejects(withKey.generate("echo", "hi", { resourceId: "someone-else" }), refused(Code.PermissionDenied));
    await assert.rejects(new Client(keyed.address, "").generate("echo", "hi"), refused(Code.Unauthenticated));
  } finally {
    await keyed.stop();
  }
});

test("a bad answer fails the run at once, naming it", async () => {
  // Not a result: the run fails now with a failure naming the bug, not by the timeout's tripwire.
  const sloppy = new Processor("word-guard", { log: () => {} }).on("processInput", () => "blocked" as never);
  await sloppy.start(server.address);
  try {
    const result = await server.client.generate("guarded", "hi", { threadId: "ts-bad", resourceId: "ada" });
    assert.equal(result.finishReason, "error");
    assert.equal(result.tripwire, undefined);
    assert.match(result.error?.message ?? "", /TypeError: the processInput handler returned string/);
  } finally {
    await sloppy.stop();
  }
});

test("one processor serves every replica (a list, and a dns:/// name)", async () => {
  const second = await serve(join(root, "clients/testdata/agentwire.toml"));
  const blocker = new Processor("word-guard", { log: () => {} }).on("processInput", (call) =>
    call.text.includes("secret") ? abort("no secrets, please") : undefined,
  );
  try {
    const port = second.address.slice(second.address.lastIndexOf(":") + 1);
    await blocker.start([server.address, `dns:///localhost:${port}`], 5000);
    assert.deepEqual(blocker.connected(), [server.address, second.address].sort());
    for (const address of [server.address, second.address]) {
      const client = new Client(address);
      const result = await client.generate("guarded", "tell me the secret");
      assert.equal(result.tripwire?.reason, "no secrets, please", address);
      assert.equal((await client.generate("guarded", "hello")).text, "echo: hello", address);
    }
  } finally {
    await blocker.stop();
    await second.stop();
  }
  assert.deepEqual(blocker.connected(), []);
});

test("a replica that goes away and comes back is served again", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "agentwire-ts-churn-"));
  let replica = await serve(config, process.env, { dataDir });
  const address = replica.address;
  const blocker = new Processor("word-guard", { log: () => {} }).on("processInput", (call) =>
    call.text.includes("secret") ? abort("no secrets, please") : undefined,
  );
  const waitFor = async (what: string, ready: (connected: string[]) => boolean) => {
    const deadline = Date.now() + 20_000;
    while (!ready(blocker.connected())) {
      assert.ok(Date.now() < deadline, `${what}: connected ${blocker.connected()}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const guarded = async (at: string) => {
    const result = await new Client(at).generate("guarded", "tell me the secret");
    assert.equal(result.tripwire?.reason, "no secrets, please", at);
  };
  try {
    await blocker.start([server.address, address], 5000);
    await replica.kill();
    await waitFor("the killed replica leaves", (connected) => connected.length === 1 && connected[0] === server.address);
    await guarded(server.address);
    replica = await serve(config, process.env, { listen: address, dataDir });
    await waitFor("the replica, back, is reconnected", (connected) => connected.includes(address));
    await guarded(address);
  } finally {
    await blocker.stop();
    await replica.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
