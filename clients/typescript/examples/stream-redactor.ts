/**
 * A remote stream rewriter: masks digits in the answer, taking its chunks in windows of up to 32
 * (held at most 50 ms), so it costs one round trip per window rather than one per token.
 *
 *     npx tsx examples/stream-redactor.ts   # with `digit-redactor` declared as a remote processor
 */
import { Processor, replace } from "../src/index.js";

export const redactor = new Processor("digit-redactor").on(
  "processOutputStream",
  (call) =>
    replace({
      parts: call.chunks.map((chunk) => {
        if (chunk.payload.case === "textDelta") {
          chunk.payload.value.text = chunk.payload.value.text.replace(/\d/g, "#");
        }
        return chunk;
      }),
    }),
  { window: { maxChunks: 32, maxDelayMs: 50 } },
);

if (import.meta.url === `file://${process.argv[1]}`) {
  await redactor.run(process.env.AGENTWIRE_ADDRESS ?? "127.0.0.1:50051");
}
