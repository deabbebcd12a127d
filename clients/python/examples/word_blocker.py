"""A remote input guardrail: any run whose input says "secret" ends in a tripwire.

Serve an agent that names it (examples/agentwire.toml's `remote-guarded`), then:
    python examples/word_blocker.py
"""
from agentwire import Processor, abort

guard = Processor("word-guard")


@guard.on("processInput")
def no_secrets(call):
    if "secret" in call.input_text.lower():
        return abort("no secrets, please", metadata={"word": "secret"})


if __name__ == "__main__":
    guard.run("127.0.0.1:50051")
