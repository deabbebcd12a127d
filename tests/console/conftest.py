"""The console suite's fixtures: the real agentwire binary (with its console on a free port), a
Python guard connected to it through the SDK, and headless Chromium driven by Selenium."""

import os
import pathlib
import subprocess
import tempfile

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("AGENTWIRE_BIN", str(ROOT / "target" / "debug" / "agentwire"))
CONFIG = pathlib.Path(__file__).resolve().parent / "agentwire.toml"
SHOTS = pathlib.Path(os.environ.get("AGENTWIRE_ARTEFACTS", ROOT / "target" / "artefacts")) / "console"

ADMIN_KEY = "console-admin-key"
TENANT_KEY = "console-tenant-key"


class Server:
    """A running server: its gRPC address and its console's URL."""

    def __init__(self, address, console):
        self.address = address
        self.console = console


@pytest.fixture(scope="session")
def server():
    with tempfile.TemporaryDirectory() as data_dir:
        process = subprocess.Popen(
            [BINARY, "serve", "--listen", "127.0.0.1:0", "--config", str(CONFIG), "--data-dir", data_dir],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            ready = process.stdout.readline().strip()
            assert ready.startswith("agentwire listening on "), ready
            console = process.stdout.readline().strip()
            assert console.startswith("agentwire console on "), console
            yield Server(ready.removeprefix("agentwire listening on "), console.removeprefix("agentwire console on "))
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def guard(server):
    """`word-guard` in Python: blocks any input that says "forbidden"."""
    from agentwire import Processor, abort

    processor = Processor("word-guard")

    @processor.on("processInput")
    def no_forbidden(call):
        if "forbidden" in call.input_text.lower():
            return abort("the word 'forbidden' is not allowed", metadata={"word": "forbidden"})
        return None

    processor.start(server.address)
    yield processor
    processor.stop()


@pytest.fixture(scope="session")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="agentwire-console-chromium-")
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1400,1000", f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


@pytest.fixture
def shot(browser, request):
    """Saves a screenshot of the page under the test's name (and a suffix)."""
    SHOTS.mkdir(parents=True, exist_ok=True)

    def save(suffix=""):
        name = request.node.name + (f"-{suffix}" if suffix else "")
        browser.save_screenshot(str(SHOTS / f"{name}.png"))

    yield save
    save("end")
