/**
 * A remote input guardrail: any run whose input mentions "secret" ends in a tripwire.
 *
 *     npx tsx examples/word-blocker.ts   # with `word-guard` declared as a remote processor
 */
import { Processor, abort } from "../src/index.js";

export const guard = new Processor("word-guard").on("processInput", (call) =>
  call.inputText.toLowerCase().includes("secret") ? abort("no secrets, please", { metadata: { word: "secret" } }) : undefined,
);

if (import.meta.url === `file://${process.argv[1]}`) {
  await guard.run(process.env.AGENTWIRE_ADDRESS ?? "127.0.0.1:50051");
}
