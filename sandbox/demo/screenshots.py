"""``fleetgate demo --screenshots DIR``: the dashboard's four pages as PNG files, taken in
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium) while the
demo runs; docs/dashboard.md shows them. The browser options are the ones the dashboard's
tests use (tests/dashboard/browser.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

# Chromium on a closed network: nothing of its own goes out, and no sandbox when run as root
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--disable-extensions", "--disable-default-apps",
    "--no-default-browser-check",
)  # fmt: skip
WINDOW = "--window-size=1400,1400"  # tall enough for a job's page down to its Events
PAGES = (  # file name, the page's address after the dashboard's, what shows it is drawn
    ("job", "#/job/{job}", "[data-region=live] > *"),  # first: a waiting job may soon start
    # its rows, or "no jobs": at the demo's speed the jobs seen running may all have ended
    # (and no other come yet) by the time a slow machine's browser opens this page
    ("jobs", "#/jobs?namespace=*", "[data-table=jobs] tbody tr"),
    ("queues", "#/queues", "[data-table=queues] tbody tr"),
    ("fleet", "#/fleet", "[data-table=clusters] tbody tr"),
)
DRAWN = 30.0  # real seconds a page may take to draw


class ScreenshotError(Exception):
    """The screenshots could not be taken: no browser, or a page that never drew."""


def tools() -> tuple[str, str]:
    """The paths of ``chromium`` and ``chromedriver``."""
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if None in found:
        raise ScreenshotError(
            "--screenshots needs Debian's chromium and chromium-driver "
            "(sudo apt-get install chromium chromium-driver)"
        )
    return found[0] or "", found[1] or ""


def chrome_options(binary: str, profile: Path, window: str = WINDOW) -> Any:
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = binary
    for flag in (*FLAGS, window, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    os.environ.setdefault("SE_AVOID_STATS", "true")  # Selenium Manager: no telemetry
    return options


def take(dashboard: str, job: str, out: Path) -> list[Path]:
    """Each page of the dashboard at ``dashboard`` (``job``: NAMESPACE/NAME for the Job page)
    as ``out/dashboard-PAGE.png``."""
    binary, driver_path = tools()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        raise ScreenshotError("--screenshots needs selenium (pip install selenium)") from error
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="fleetgate-chromium-") as profile:
        driver = webdriver.Chrome(
            options=chrome_options(binary, Path(profile)), service=Service(driver_path)
        )
        try:
            for name, fragment, drawn in PAGES:
                driver.get(dashboard + fragment.format(job=job))
                _wait_drawn(driver, drawn, name)
                path = out / f"dashboard-{name}.png"
                driver.save_screenshot(str(path))
                written.append(path)
        finally:
            driver.quit()
    return written


def _wait_drawn(driver: Any, css: str, page: str) -> None:
    script = "return document.querySelector(arguments[0]) !== null"
    deadline = time.monotonic() + DRAWN
    while not driver.execute_script(script, css):
        if time.monotonic() > deadline:
            raise ScreenshotError(f"the {page} page did not draw within {DRAWN:g} s")
        time.sleep(0.1)
