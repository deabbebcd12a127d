/** Starts the real agentwire binary for the suites, with the config all client suites share. */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before } from "node:test";

import { Client } from "../src/index.js";

export const root = resolve(import.meta.dirname, "../../..");
const binary = process.env.AGENTWIRE_BIN ?? join(root, "target/debug/agentwire");

/** The server config all client suites share. */
export const config = join(root, "clients/testdata/agentwire.toml");

/** A running server: its address, and how to stop it. */
export async function serve(
  configPath: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ address: string; stop: () => void }> {
  const dataDir = mkdtempSync(join(tmpdir(), "agentwire-ts-"));
  const child: ChildProcess = spawn(
    binary,
    ["serve", "--listen", "127.0.0.1:0", "--config", configPath, "--data-dir", dataDir],
    { stdio: ["ignore", "pipe", "ignore"], env },
  );
  const lines = createInterface({ input: child.stdout! });
  const ready: string = await new Promise((resolve) => lines.once("line", resolve));
  assert.match(ready, /^agentwire listening on /);
  const stop = () => {
    child.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { address: ready.replace("agentwire listening on ", ""), stop };
}


/** A server with the shared config for the whole file: started before its tests, stopped after. */
export function useServer(): { readonly address: string; readonly client: Client } {
  const shared = { address: "", client: undefined as unknown as Client };
  let stop = () => {};
  before(async () => {
    const served = await serve(config);
    shared.address = served.address;
    shared.client = new Client(served.address);
    stop = served.stop;
  });
  after(() => stop());
  return shared;
}
