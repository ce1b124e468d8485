"""``srt report``'s page in a real browser: Debian's chromium, headless, driven by selenium
through Debian's chromium-driver (a browser downloaded at install time is not reachable
here), opened from a ``file://`` URL with every network request sent to a closed port.

It runs in tox's ``report`` environment (SRT_REQUIRE_CHROMIUM=1: it fails there instead of
skipping when chromium is missing); elsewhere it skips without chromium.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import Jobs, events_of
from srt_services.testing.jobs import run_srt as srt

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

if not (CHROMIUM and DRIVER):
    if os.environ.get("SRT_REQUIRE_CHROMIUM") == "1":
        raise RuntimeError("SRT_REQUIRE_CHROMIUM=1 but chromium or chromedriver is missing")
    pytest.skip("needs Debian's chromium and chromium-driver", allow_module_level=True)

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402

RECIPE = """
schema: 2
name: rep-browser
observability:
  metrics: false
services:
  - name: flaky
    command: [bash, -c, "if [ -e {marker} ]; then echo up; exec sleep 1000; fi; touch {marker}; echo up; sleep 0.5; echo first; exit 3"]
    readiness: {{log: {{pattern: up}}}}
    restart: {{backoff_initial_seconds: 0.2, jitter: 0}}
  - name: steady
    command: [bash, -c, "echo up; exec sleep 1000"]
    readiness: {{log: {{pattern: up}}}}
  - name: broken
    critical: true
    command: [bash, -c, "echo starting; sleep 2.5; echo '<script>document.title=\\"pwned\\"</script>'; echo 'fatal: no disk'; exit 4"]
"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container: chromium's sandbox needs user namespaces
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # any request that leaves the page goes to a closed port and shows in the log
        "--proxy-server=http://127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=Service(executable_path=str(DRIVER), log_output=os.devnull)
    )
    try:
        yield driver
    finally:
        driver.quit()


def test_the_report_of_a_failed_job_in_a_browser(
    srt_jobs: Jobs, tmp_path: Path, browser: Any
) -> None:
    run = srt_jobs.run(RECIPE.format(marker=tmp_path / "marker"), timeout=60)
    assert run.code not in (0, None), run.stderr
    assert len(events_of(run, "launched", step="service_flaky")) == 2
    out = tmp_path / "report.html"
    made = srt("report", run.job_dir, "-o", str(out))
    assert made.returncode == 0, made.stderr

    browser.get_log("performance")  # what the browser's start-up page loaded: not ours
    browser.get(out.as_uri())
    assert_loaded_cleanly(browser)
    assert browser.title == "srt report: rep-browser (" + run.state()["job_id"] + ")"

    # one row per instance of the job, each on its node
    instances = run.state()["instances"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline g.row")
    assert sorted(r.get_attribute("data-step") for r in rows) == sorted(instances)
    assert all(r.get_attribute("data-node") == "node0" for r in rows)
    flaky = browser.find_element(By.CSS_SELECTOR, '#timeline g.row[data-step="service_flaky"]')
    assert flaky.get_attribute("data-restarts") == "1"
    assert len(flaky.find_elements(By.CSS_SELECTOR, "g.span")) == 2
    restart = flaky.find_element(By.CSS_SELECTOR, 'g.mark[data-kind="restart"]')
    exit_mark = flaky.find_element(By.CSS_SELECTOR, 'g.mark[data-kind="exit"]')
    box = browser.execute_script(
        "var b=arguments[0].getBoundingClientRect(); return [b.width, b.height]", restart
    )
    assert box[0] > 0 and box[1] > 0, "the restart mark is drawn"
    assert exit_mark.is_displayed()
    broken = browser.find_element(By.CSS_SELECTOR, '#timeline g.row[data-step="service_broken"]')
    assert broken.get_attribute("data-state") == "failed"
    assert broken.find_elements(By.CSS_SELECTOR, 'g.mark[data-kind="exit"]')
    assert browser.find_elements(By.CSS_SELECTOR, '#timeline g.job-mark[data-kind="stop"]')

    # hovering a mark says what it is
    webdriver.ActionChains(browser).move_to_element(restart).perform()
    assert "restarting" in browser.find_element(By.ID, "hover").text

    # the cause, and the failed instance's log: the <script> in it is text, never run
    cause = browser.find_element(By.ID, "cause")
    assert cause.is_displayed() and "broken" in cause.text
    tail = browser.find_element(By.CSS_SELECTOR, '.log-tail[data-step="service_broken"] pre')
    assert tail.is_displayed()
    assert '<script>document.title="pwned"</script>' in tail.text and "fatal: no disk" in tail.text
    assert "pwned" not in browser.title

    assert_nothing_fetched(browser, out)


def assert_loaded_cleanly(browser: Any) -> None:
    """The page's own script ran, and nothing on the page complained (a script refused by
    the policy, a failed load, a JavaScript error all land in the browser's log)."""
    assert browser.execute_script("return document.body.getAttribute('data-ready')") == "1"
    errors = [e for e in browser.get_log("browser") if e["level"] in {"SEVERE", "WARNING"}]
    assert not errors, errors


def assert_nothing_fetched(browser: Any, page: Path) -> None:
    """The page is the only request its document made, and the browser asked nothing of any
    network at all (its own chrome:// pages aside)."""
    ours, remote = [], []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if message["params"].get("documentURL") == page.as_uri():
                ours.append(url)
            if not url.startswith(("chrome://", "chrome-untrusted://", "file://", "data:")):
                remote.append(url)
    assert ours == [page.as_uri()], ours
    assert not remote, remote
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


PROMETHEUS = ("prometheus", "prometheus-node-exporter")


@pytest.mark.skipif(
    any(shutil.which(b) is None for b in PROMETHEUS)
    and os.environ.get("SRT_REQUIRE_CHROMIUM") != "1",
    reason="needs Debian's prometheus and prometheus-node-exporter",
)
def test_the_metrics_charts_of_a_recorded_job_in_a_browser(
    srt_jobs: Jobs, srt_free_port: Callable[[], int], tmp_path: Path, browser: Any
) -> None:
    pytest.importorskip("srt_exporters")
    prom = srt_free_port()
    # the job ends once Prometheus holds six node-exporter scrapes (at most 60 s): a fixed
    # sleep gave a one-point rate line when a loaded machine started Prometheus late
    wait = (
        "import json,time,urllib.request as u\n"
        "q='count_over_time(node_cpu_seconds_total%7Bmode=%22idle%22,cpu=%220%22%7D%5B2m%5D)'\n"
        "end=time.time()+60\n"
        "while time.time()<end:\n"
        "  try:\n"
        f"    r=json.load(u.urlopen('http://127.0.0.1:{prom}/api/v1/query?query='+q,timeout=2))\n"
        "    if any(float(x['value'][1])>=6 for x in r['data']['result']): break\n"
        "  except OSError: pass\n"
        "  time.sleep(0.5)\n"
    )
    run = srt_jobs.run(
        f"""
        schema: 2
        name: rep-metrics
        services:
          - name: prometheus
            type: prometheus
            options: {{port: {prom}, scrape_interval_seconds: 1}}
          - name: node-exporter
            type: node-exporter
            placement: {{node: head}}
            options: {{port: {srt_free_port()}}}
          - name: main
            terminal: true
            command: [python3, -c, {json.dumps(wait)}]
        """,
        timeout=120,
    )
    assert run.code == 0, run.stderr
    out = tmp_path / "report.html"
    made = srt("report", run.job_dir, "-o", str(out))
    assert made.returncode == 0, made.stderr

    browser.get_log("performance")
    browser.get(out.as_uri())
    assert_loaded_cleanly(browser)
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline g.row")
    assert sorted(r.get_attribute("data-step") for r in rows) == sorted(run.state()["instances"])
    assert browser.find_element(By.ID, "job-status").text == "succeeded"
    assert not browser.find_elements(By.CLASS_NAME, "plugin-error")
    charts = browser.find_elements(By.CSS_SELECTOR, "#metrics svg.metrics-chart")
    keys = {c.get_attribute("data-key") for c in charts}
    assert "cpu_busy" in keys, keys
    cpu = next(c for c in charts if c.get_attribute("data-key") == "cpu_busy")
    assert cpu.is_displayed()
    line = cpu.find_element(By.CSS_SELECTOR, "polyline.series")
    box = browser.execute_script(
        "var b=arguments[0].getBoundingClientRect(); return [b.width, b.height]", line
    )
    # a short job: the rate needs a few scrapes, so the line covers its last seconds only
    assert len((line.get_attribute("points") or "").split()) >= 2 and box[0] > 0
    assert_nothing_fetched(browser, out)
