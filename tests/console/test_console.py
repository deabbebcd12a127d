"""The console in a real browser, against a server with traffic: each page shows what it should."""

import time

import grpc

from agentwire import Client
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import ADMIN_KEY, TENANT_KEY

WAIT = 15


def open_page(browser, server, page, key=ADMIN_KEY):
    """Opens `#/page` with `key` entered in the key form."""
    browser.get(f"{server.console}#/{page}")
    field = WebDriverWait(browser, WAIT).until(seen.presence_of_element_located((By.ID, "key")))
    field.clear()
    if key:
        field.send_keys(key)
    field.send_keys(Keys.ENTER)


def recorded(client, run_id):
    """Waits until the server has written the run's record (records are written in batches)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return client.get_run(run_id)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def wait_text(browser, selector, text):
    WebDriverWait(browser, WAIT).until(seen.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text))
    return browser.find_element(By.CSS_SELECTOR, selector).text


def test_a_blocked_run_appears_live_and_its_detail_names_the_processor_hook_and_reason(browser, server, guard, shot):
    """A run the Python guard blocks shows up on the live page as it happens; opening it shows the
    processor, hook and reason, and the timeline with every hook call's time."""
    open_page(browser, server, "runs")
    wait_text(browser, "main", "No runs yet")
    with Client(server.address, api_key=ADMIN_KEY) as client:
        result = client.generate("remote-guarded", "say the forbidden word", thread_id="t-live", resource_id="tenant-ada")
    assert result.tripwire.processor_id == "word-guard"
    row_text = wait_text(browser, "main tbody", "word-guard: the word 'forbidden' is not allowed")
    assert "tripwire" in row_text
    shot("live")
    row = browser.find_element(By.XPATH, "//tbody/tr[contains(., 'word-guard')]")
    row.click()
    assert wait_text(browser, ".blocked-processor", "word-guard") == "word-guard"
    assert browser.find_element(By.CSS_SELECTOR, ".blocked-hook").text == "processInput"
    assert browser.find_element(By.CSS_SELECTOR, ".blocked-reason").text == "the word 'forbidden' is not allowed"
    assert browser.find_elements(By.CSS_SELECTOR, "svg.waterfall rect.bar.abort"), "the abort is marked in the waterfall"
    calls = browser.find_element(By.XPATH, "//h3[.='Every call']/following-sibling::table").text
    assert "word-guard · processInput" in calls and "abort" in calls
    assert "word-guard-" in calls, "the remote instance that answered is named"


def test_the_live_page_is_usable_from_the_keyboard(browser, server, guard):
    """A run row takes focus and opens with Enter."""
    with Client(server.address, api_key=ADMIN_KEY) as client:
        client.generate("echo", "hello keyboard", resource_id="tenant-ada")
    open_page(browser, server, "runs")
    wait_text(browser, "main tbody", "echo")
    row = browser.find_element(By.XPATH, "//tbody/tr[contains(., 'echo')]")
    row.send_keys(Keys.ENTER)
    wait_text(browser, "main h2", "Run")
    assert "#/runs/" in browser.current_url


def test_the_live_page_filters_by_thread(browser, server, guard):
    """A thread filter (with its resource) shows that thread's runs only; without the resource the
    page says which field is missing."""
    with Client(server.address, api_key=ADMIN_KEY) as client:
        for thread in ("t-one", "t-two"):
            recorded(client, client.generate("echo", f"hello {thread}", thread_id=thread, resource_id="tenant-dee").run_id)
    open_page(browser, server, "runs?resource=tenant-dee&thread=t-two")
    rows = wait_text(browser, "main tbody", "t-two")
    assert "t-one" not in rows
    open_page(browser, server, "runs?thread=t-two")
    assert "thread_id" in wait_text(browser, ".error-box", "thread_id")


def test_the_processors_page_shows_the_connected_python_guard(browser, server, guard, shot):
    """The pool lists the Python guard's instance and its hook."""
    open_page(browser, server, "processors")
    text = wait_text(browser, "main tbody", "word-guard")
    assert guard.connected(), "the guard is connected"
    assert "processInput" in text
    assert "word-guard-" in text


def test_the_agents_page_draws_each_pipeline(browser, server, shot):
    """Each agent's stages in order, with kinds and options; the remote guard and the automatic
    memory processors are marked."""
    open_page(browser, server, "agents")
    wait_text(browser, "#agent-guarded", "no-secrets")
    guarded = browser.find_element(By.ID, "agent-guarded").text
    assert "content-filter" in guarded and "blocked_words" in guarded and "word-counter" in guarded
    remote = browser.find_element(By.CSS_SELECTOR, "#agent-remote-guarded .node.remote").text
    assert "word-guard" in remote and "on_failure" in remote
    automatic = browser.find_elements(By.CSS_SELECTOR, "#agent-remote-guarded .node.automatic")
    assert [node.find_element(By.TAG_NAME, "strong").text for node in automatic] == ["message-history", "message-history"]


def test_the_playground_streams_an_answer_with_the_timeline_beside_it(browser, server, shot):
    """Running an agent from the page streams its chunks and then shows the run's timeline."""
    open_page(browser, server, "playground")
    WebDriverWait(browser, WAIT).until(lambda driver: Select(driver.find_element(By.NAME, "agent")).options)
    Select(browser.find_element(By.NAME, "agent")).select_by_value("echo")
    text = browser.find_element(By.NAME, "text")
    text.send_keys("streams word by word")
    text.send_keys(Keys.CONTROL, Keys.ENTER)
    assert wait_text(browser, "#answer", "streams word by word").strip() == "echo: streams word by word"
    assert "text-delta" in browser.find_element(By.ID, "chunks").text
    assert "finished" in wait_text(browser, "#timeline", "finished")
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline svg.waterfall")


def test_the_guardrails_page_counts_tripwires_by_processor_and_reason(browser, server, guard, shot):
    """Tripwires of the window, by processor and reason, with plots and hook percentiles."""
    with Client(server.address, api_key=ADMIN_KEY) as client:
        for _ in range(3):
            client.generate("guarded", "a secret", resource_id="tenant-bob")
    open_page(browser, server, "guardrails")
    tripwires = wait_text(browser, "main", "Blocked content detected in input")
    assert "no-secrets" in tripwires
    hooks = browser.find_element(By.XPATH, "//h3[.='Hooks by processor']/following-sibling::table").text
    assert "no-secrets processInput" in hooks
    assert browser.find_elements(By.CSS_SELECTOR, "svg.plot polyline"), "the plots draw lines"


def test_warnings_show_on_the_run_and_the_guardrails_pages(browser, server, guard, shot):
    """A `warn` strategy's finding is listed on the run's page, marked in its waterfall, and counted
    by processor and kind on the guardrails page."""
    with Client(server.address, api_key=ADMIN_KEY) as client:
        result = client.generate("guarded", "write to ann@example.com", resource_id="tenant-bob")
        recorded(client, result.run_id)
    assert not result.HasField("tripwire")
    open_page(browser, server, f"runs/{result.run_id}")
    warnings = wait_text(browser, ".warnings", "pii-warn")
    assert "processInput" in warnings and "email" in warnings
    assert browser.find_elements(By.CSS_SELECTOR, "svg.waterfall path.mark.warning"), "the warning is marked"
    shot("run-warnings")
    open_page(browser, server, "guardrails")
    by_kind = wait_text(browser, ".warnings-by-kind table", "pii-warn")
    assert "pii" in by_kind
    shot("guardrails-warnings")


def test_a_run_of_an_agent_that_keeps_content_shows_the_prompt_and_the_answer(browser, server, guard, shot):
    """With `[agents.record] content = true`, the run's page shows what the model saw and what the
    client got; an agent without it says the content is not kept."""
    with Client(server.address, api_key=ADMIN_KEY) as client:
        kept = client.generate("echo", "show me the prompt", resource_id="tenant-ada")
        plain = client.generate("guarded", "nothing kept here", resource_id="tenant-ada")
        recorded(client, kept.run_id)
        recorded(client, plain.run_id)
    open_page(browser, server, f"runs/{kept.run_id}")
    assert "show me the prompt" in wait_text(browser, ".prompts", "show me the prompt")
    assert "echo: show me the prompt" in browser.find_element(By.CSS_SELECTOR, ".delivered .answer").text
    assert "null" not in browser.find_element(By.TAG_NAME, "main").text
    shot("content")
    open_page(browser, server, f"runs/{plain.run_id}")
    assert "Not kept" in wait_text(browser, "main", "Not kept")


def test_the_memory_page_shows_a_resources_threads_and_messages(browser, server, guard, shot):
    """A resource's threads, and a thread's messages when opened."""
    with Client(server.address, api_key=ADMIN_KEY) as client:
        client.generate("remote-guarded", "remember the blue door", thread_id="t-memory", resource_id="tenant-cy")
    browser.get(f"{server.console}#/memory?resource=tenant-cy")
    open_page(browser, server, "memory?resource=tenant-cy")
    wait_text(browser, "main tbody", "t-memory")
    browser.find_element(By.XPATH, "//tbody/tr[contains(., 't-memory')]").click()
    messages = wait_text(browser, "main", "remember the blue door")
    assert "user" in messages and "assistant" in messages


def test_without_a_key_the_console_asks_for_one_and_a_tenant_key_sees_only_its_own(browser, server, guard):
    """The console has the gRPC API's keys and scopes: no key is refused, a tenant key may not
    see the pool and must name its resource to list runs."""
    open_page(browser, server, "runs", key="")
    assert "UNAUTHENTICATED" in wait_text(browser, ".error-box", "UNAUTHENTICATED")
    open_page(browser, server, "processors", key=TENANT_KEY)
    assert "PERMISSION_DENIED" in wait_text(browser, ".error-box", "PERMISSION_DENIED")
    open_page(browser, server, "runs?resource=tenant-ada", key=TENANT_KEY)
    rows = wait_text(browser, "main tbody", "tenant-ada")
    assert "tenant-bob" not in rows
    time.sleep(0.2)
