"""A remote tool: agents that list `weather` (declared as `[tools.weather] kind = "remote"`,
`server = "tool-server"`) can call it; this process executes the calls.

    python examples/weather_tool.py
"""
from agentwire import Processor

tools = Processor("tool-server")


@tools.tool("weather", "The weather in a city", {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
})
def weather(args):
    return {"city": args["city"], "temp": 21, "sky": "clear"}


if __name__ == "__main__":
    tools.run("127.0.0.1:50051")
