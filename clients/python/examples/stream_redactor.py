"""A remote stream rewriter: masks digits in the answer, taking its chunks in windows of up to 32
(held at most 50 ms), so it costs one round trip per window rather than one per token.

    python examples/stream_redactor.py
"""
import re

from agentwire import Processor, Window, replace

redactor = Processor("digit-redactor")


@redactor.on("processOutputStream", window=Window(max_chunks=32, max_delay_ms=50))
def mask_digits(call):
    parts = []
    for chunk in call.chunks:
        if chunk.type == "text-delta":
            chunk.text_delta.text = re.sub(r"\d", "#", chunk.text_delta.text)
        parts.append(chunk)
    return replace(parts=parts)


if __name__ == "__main__":
    redactor.run("127.0.0.1:50051")
