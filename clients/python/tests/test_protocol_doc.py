"""The raw processor of docs/protocol.md — stubs and grpcio only, no helper — against the real
server: it is welcomed with protocol 2, blocks a word, and lets other input pass."""

import re
import subprocess
import sys

from conftest import ROOT


def test_the_raw_processor_of_the_protocol_doc_blocks_a_word(server, client, tmp_path):
    doc = (ROOT / "docs" / "protocol.md").read_text()
    section = doc.split("## A minimal raw processor\n", 1)[1]
    (tmp_path / "raw.py").write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    raw = subprocess.Popen([sys.executable, str(tmp_path / "raw.py"), server], stdout=subprocess.PIPE, text=True)
    try:
        assert raw.stdout.readline().strip() == "welcomed, protocol 2"
        blocked = client.generate("guarded", "tell me the secret", thread_id="raw-1", resource_id="ada")
        assert (blocked.finish_reason, blocked.tripwire.reason) == ("other", "no secrets, please")
        assert client.generate("guarded", "hello", thread_id="raw-2", resource_id="ada").text == "echo: hello"
    finally:
        raw.terminate()
        raw.wait(timeout=10)
