/**
 * A remote tool: agents that list `weather` (declared as `[tools.weather] kind = "remote"`,
 * `server = "tool-server"`) can call it; this process executes the calls.
 *
 *     npx tsx examples/weather-tool.ts
 */
import { Processor } from "../src/index.js";

export const tools = new Processor("tool-server").tool(
  "weather",
  {
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
  (args) => ({ city: args.city ?? null, temp: 21, sky: "clear" }),
);

if (import.meta.url === `file://${process.argv[1]}`) {
  await tools.run(process.env.AGENTWIRE_ADDRESS ?? "127.0.0.1:50051");
}
