"""The web page as a person uses it: headless Chromium (Debian's) against a real `placer serve`.

Uploads a graph, places it, sees the bar chart, the timeline and the ops
table, sees a clear error, starts a short training job (the fake trainer) and
sees its progress and curve. Set ``PLACER_SCREENSHOTS=DIR`` to save a PNG of
each view there (how ``docs/`` screenshots are made).
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.service.conftest import tiny_graph
from tests.service.test_server import Server, _free_port

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1300,1000"]

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)",
)


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path / 'profile'}"]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture
def server(tmp_path):
    srv = Server(tmp_path / "data", _free_port())
    srv.start()
    yield srv
    if srv.proc.poll() is None:
        srv.stop(signal.SIGTERM)


def _shot(driver, name):
    folder = os.environ.get("PLACER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def test_upload_place_timeline_and_train(browser, server, tmp_path):
    """Every view works end to end, and errors read as sentences."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    # a row found just before the page redraws its table is stale: the wait looks again
    d, wait = browser, WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
    find = lambda css: d.find_element(By.CSS_SELECTOR, css)  # noqa: E731
    graph_file = tmp_path / "tiny.json"
    graph_file.write_text(json.dumps(tiny_graph("e2e")))

    d.get(server.url + "/")
    wait.until(lambda _: find("#cluster").find_elements(By.TAG_NAME, "option"))
    assert "no API key needed" in find("#service-status").text

    find("#place-btn").click()  # no graph yet: the page says what to do
    assert find("#error").is_displayed() and "upload or pick a graph first" in find("#error-text").text

    find("#graph-file").send_keys(str(graph_file))
    find("#upload-btn").click()
    wait.until(lambda _: "3 ops" in find("#graph-info").text)
    assert not find("#error").is_displayed()

    Select(find("#cluster")).select_by_value("2gpu")
    Select(find("#method")).select_by_value("best")
    find("#place-btn").click()
    wait.until(lambda _: find("#result").is_displayed() or find("#error").is_displayed())
    assert not find("#error").is_displayed(), find("#error-text").text
    assert "step time" in find("#summary").text and "e2e on 2gpu" in find("#summary").text
    assert len(d.find_elements(By.CSS_SELECTOR, "#bars rect.bar")) >= 2  # this placement and baselines
    assert len(d.find_elements(By.CSS_SELECTOR, "#memory rect.mem")) == 3
    canvas = find("#timeline")
    assert int(canvas.get_attribute("data-drawn")) >= 3 and int(canvas.get_attribute("data-rows")) >= 1
    rows = d.find_elements(By.CSS_SELECTOR, "#ops-table tbody tr")
    assert sorted(r.find_elements(By.TAG_NAME, "td")[0].text for r in rows) == ["mm", "out", "x"]
    find("#op-search").send_keys("MatMul")
    assert [r.text.split()[0] for r in d.find_elements(By.CSS_SELECTOR, "#ops-table tbody tr")] == ["mm"]
    assert "1 of 3 ops" in find("#op-count").text
    _shot(d, "web-place.png")

    refine = find("#refine")  # the same placement, then local search: the summary says where it started
    refine.clear()
    refine.send_keys("1")
    Select(find("#method")).select_by_value("round_robin")
    find("#place-btn").click()
    wait.until(lambda _: "local search took it from" in find("#summary").text or find("#error").is_displayed())
    assert not find("#error").is_displayed(), find("#error-text").text
    assert "round_robin placed e2e" in find("#summary").text

    find("#tab-jobs").click()
    budget = find("#budget")
    budget.clear()
    budget.send_keys("9999999")  # over the API's 7-day limit
    find("#train-btn").click()  # the API's 422, shown with the field it names
    wait.until(lambda _: find("#error").is_displayed())
    assert find("#error-text").text.startswith("422") and "budget_seconds" in find("#error-text").text

    budget.clear()
    budget.send_keys("3")
    starts = find("#starts")
    starts.clear()
    starts.send_keys("2")  # races two warm starts: passed on as the job option
    find("#train-btn").click()
    wait.until(lambda _: find("#job-detail").is_displayed())
    try:
        wait.until(lambda _: (find("#job-stats").get_attribute("data-step") or "0") not in ("", "0"))
    except Exception:
        raise AssertionError(f"{find('#job-state').text} {find('#job-stats').text} {find('#job-error').text} {find('#error-text').text}")
    assert find("#job-state").text in ("running", "done")
    assert "best step time" in find("#job-stats").text
    wait.until(lambda _: find("#job-state").text == "done")
    assert d.find_elements(By.CSS_SELECTOR, "#curve path.curve-best")
    assert "best placement so far" in find("#job-result").text
    # the page redraws the jobs table once the job ends, maybe between finding a row and reading it
    wait.until(lambda _: find("#jobs-table tbody tr").text.split()[0].startswith("j_"))
    (job,) = httpx.get(f"{server.url}/v1/jobs").json()["data"]
    assert job["options"] == {"starts": 2}
    _shot(d, "web-jobs.png")


def test_large_graph_timeline_merged_and_table_virtualised(browser, server, tmp_path):
    """12k ops: the timeline says ops were merged, the table holds every op but draws only rows in view."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from placer.synthetic import layered_graph

    d, wait = browser, WebDriverWait(browser, 120, ignored_exceptions=[StaleElementReferenceException])
    find = lambda css: d.find_element(By.CSS_SELECTOR, css)  # noqa: E731
    graph_file = tmp_path / "big.json"
    graph_file.write_text(json.dumps(layered_graph(12_000, seed=1).to_dict()))

    d.get(server.url + "/")
    wait.until(lambda _: find("#cluster").find_elements(By.TAG_NAME, "option"))
    find("#graph-file").send_keys(str(graph_file))
    find("#upload-btn").click()
    wait.until(lambda _: 12_000 in _numbers(find("#graph-info").text))
    Select(find("#cluster")).select_by_value("8gpu")
    Select(find("#method")).select_by_value("round_robin")
    find("#baselines").click()  # off: one placement is enough here
    find("#place-btn").click()
    wait.until(lambda _: find("#result").is_displayed() or find("#error").is_displayed())
    assert not find("#error").is_displayed(), find("#error-text").text

    assert find("#timeline-note").is_displayed() and "Downsampled for display" in find("#timeline-note").text
    assert "merged" in find("#legend").text
    assert _numbers(find("#op-count").text) == [12_000, 12_000]  # every op matches (any locale's digits)
    rendered = int(find("#ops-table").get_attribute("data-rendered"))
    assert 0 < rendered < 200  # the rows in view, not 12,000
    first = find("#ops-table tbody tr:not(.spacer) td").text
    d.execute_script("document.querySelector('#ops-scroll').scrollTop = 22 * 6000;")
    wait.until(lambda _: find("#ops-table tbody tr:not(.spacer) td").text != first)
    assert int(find("#ops-table").get_attribute("data-rendered")) < 200


def _numbers(text: str) -> list[int]:
    """The whole numbers in `text`, with any locale's thousands separators."""
    return [int(re.sub(r"\D", "", m)) for m in re.findall(r"\d[\d.,\u202f\u00a0]*\d|\d", text)]
