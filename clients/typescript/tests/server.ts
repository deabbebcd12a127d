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

/** A running server: its address, how to stop it (its data directory removed once it has exited), and how to kill it (-9, data kept). */
export interface Served {
  address: string;
  stop: () => Promise<void>;
  kill: () => Promise<void>;
}

/** Starts a server; `listen` and `dataDir` default to a free port and a fresh directory (removed by `stop`). */
export async function serve(
  configPath: string,
  env: NodeJS.ProcessEnv = process.env,
  { listen = "127.0.0.1:0", dataDir }: { listen?: string; dataDir?: string } = {},
): Promise<Served> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), "agentwire-ts-"));
  const child: ChildProcess = spawn(binary, ["serve", "--listen", listen, "--config", configPath, "--data-dir", dir], {
    stdio: ["ignore", "pipe", "ignore"],
    env,
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const lines = createInterface({ input: child.stdout! });
  const ready: string = await new Promise((resolve) => lines.once("line", resolve));
  assert.match(ready, /^agentwire listening on /);
  // The directory goes only once the server has exited: it writes its store as it shuts down.
  const stop = async () => {
    child.kill("SIGTERM");
    await exited;
    if (dataDir === undefined) rmSync(dir, { recursive: true, force: true });
  };
  const kill = async () => {
    child.kill("SIGKILL");
    await exited;
  };
  return { address: ready.replace("agentwire listening on ", ""), stop, kill };
}

/** A server with the shared config for the whole file: started before its tests, stopped after. */
export function useServer(): { readonly address: string; readonly client: Client } {
  const shared = { address: "", client: undefined as unknown as Client };
  let stop = async () => {};
  before(async () => {
    const served = await serve(config);
    shared.address = served.address;
    shared.client = new Client(served.address);
    stop = served.stop;
  });
  after(() => stop());
  return shared;
}
