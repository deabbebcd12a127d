"""A remote stream rewriter: masks digits in every text delta of the answer.

    python examples/stream_redactor.py
"""
import re

from agentwire import Processor, replace

redactor = Processor("digit-redactor")


@redactor.on("processOutputStream")
def mask_digits(call):
    if call.part is not None and call.part.type == "text-delta":
        part = type(call.part)()
        part.CopyFrom(call.part)
        part.text_delta.text = re.sub(r"\d", "#", part.text_delta.text)
        return replace(part=part)


if __name__ == "__main__":
    redactor.run("127.0.0.1:50051")
