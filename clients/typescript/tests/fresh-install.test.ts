/**
 * From a clean directory, as the README says: pack the SDK, install the tarball into a new
 * project outside the repository, run the README's guard with plain `node` (no TypeScript
 * loader) over TLS with a processor token, and watch a run end in a tripwire with nothing saved.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { Client, Processor } from "../src/index.js";
import { root, serve } from "./server.js";

const here = resolve(import.meta.dirname, "..");
const work = mkdtempSync(join(tmpdir(), "agentwire-ts-fresh-"));
const token = randomBytes(16).toString("hex");
let server: { address: string; stop: () => void };

before(async () => {
  execFileSync(join(root, "clients/testdata/tls.sh"), [work]);
  server = await serve(join(work, "tls.toml"), { ...process.env, AGENTWIRE_TEST_PROCESSOR_TOKEN: token });
});

after(async () => {
  await server.stop();
  rmSync(work, { recursive: true, force: true });
});

/** The first `js` code block under `heading` in the README. */
function readmeBlock(heading: string): string {
  const section = readFileSync(join(here, "README.md"), "utf8").split(`## ${heading}\n`)[1];
  return /```js\n([\s\S]*?)```/.exec(section)![1];
}

test("a fresh install blocks a word over TLS", async () => {
  const tarball = execFileSync("npm", ["pack", "--silent", "--pack-destination", work], { cwd: here, encoding: "utf8" })
    .trim()
    .split("\n")
    .at(-1)!;
  const app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "guard", private: true, type: "module" }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--silent", join(work, tarball)], { cwd: app });
  copyFileSync(join(work, "ca.pem"), join(app, "ca.pem"));
  writeFileSync(join(app, "guard.mjs"), readmeBlock("A ten-line guard").replace('"127.0.0.1:50051"', JSON.stringify(server.address)));

  const guard = spawn(process.execPath, ["guard.mjs"], {
    cwd: app,
    env: { ...process.env, AGENTWIRE_PROCESSOR_TOKEN: token, NODE_OPTIONS: "" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  try {
    const line: string = await new Promise((resolve) => createInterface({ input: guard.stderr }).once("line", resolve));
    assert.match(line, /^agentwire: connected as word-guard \(instance word-guard-[0-9a-f]+\) to /);
    assert.ok(line.endsWith(`to ${server.address}, protocol 2`), line);

    const client = new Client(server.address, { tls: { ca: join(work, "ca.pem") } });
    const result = await client.generate("remote-guarded", "tell me the secret", { threadId: "fresh", resourceId: "ada" });
    assert.equal(result.finishReason, "other");
    assert.equal(result.tripwire?.processorId, "word-guard");
    assert.equal(result.tripwire?.reason, "no secrets, please");
    await assert.rejects(client.memory.getThread({ threadId: "fresh", resourceId: "ada" }), (error: unknown) => {
      assert.equal(ConnectError.from(error).code, Code.NotFound);
      return true;
    });
    const passed = await client.generate("remote-guarded", "hello", { threadId: "fresh-2", resourceId: "ada" });
    assert.equal(passed.text, "echo: hello");
  } finally {
    guard.kill();
  }
});

test("a wrong token is refused", async () => {
  const guard = new Processor("word-guard", { token: "a-wrong-token", tls: { ca: join(work, "ca.pem") }, log: () => {} });
  guard.on("processInput", () => undefined);
  await assert.rejects(guard.run(server.address), (error: unknown) => {
    assert.equal(ConnectError.from(error).code, Code.Unauthenticated);
    return true;
  });
});

test("mTLS takes a client certificate", async () => {
  const mtls = await serve(join(work, "mtls.toml"), { ...process.env, AGENTWIRE_TEST_PROCESSOR_TOKEN: token });
  try {
    const ca = join(work, "ca.pem");
    const withCert = new Client(mtls.address, { tls: { ca, cert: join(work, "client.pem"), key: join(work, "client.key") } });
    // Through TLS to the run: no guard is connected, so word-guard's closed policy trips it.
    const result = await withCert.generate("remote-guarded", "hi");
    assert.match(result.tripwire?.reason ?? "", /unavailable/);
    // Without one the TLS handshake fails (connect-node reports it as INTERNAL, grpc as UNAVAILABLE).
    await assert.rejects(new Client(mtls.address, { tls: { ca } }).generate("remote-guarded", "hi"), (error: unknown) => {
      assert.ok([Code.Unavailable, Code.Internal].includes(ConnectError.from(error).code), String(error));
      return true;
    });
  } finally {
    await mtls.stop();
  }
});
