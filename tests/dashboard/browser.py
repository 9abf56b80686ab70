"""Headless Chromium driven by Selenium (Debian's ``chromium`` and ``chromium-driver``, with the
options of ``fleetgate demo --screenshots``), and what a test asserts about a page besides its
content: what the console said, and every URL the page asked for (the performance log)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from sandbox.demo.screenshots import chrome_options
from tests.conftest import require_tool
from tests.waiting import eventually_value


class Browser:
    def __init__(self, driver: webdriver.Chrome) -> None:
        self.driver = driver
        self.requested: list[str] = []
        self.console: list[dict[str, Any]] = []

    def open(self, url: str) -> None:
        self.driver.get(url)

    def texts(self, css: str) -> list[str]:
        """The text of every element ``css`` selects, read at one moment (the page redraws
        its data every few seconds, so elements found earlier go stale)."""
        script = "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)"
        return [" ".join(str(t).split()) for t in self.driver.execute_script(script, css)]

    def text(self, css: str) -> str:
        found = self.texts(css)
        return found[0] if found else ""

    def attributes(self, css: str, name: str) -> list[str]:
        script = (
            "return [...document.querySelectorAll(arguments[0])]"
            ".map(e => e.getAttribute(arguments[1]))"
        )
        return [str(v) for v in self.driver.execute_script(script, css, name)]

    def wait_for(self, css: str, timeout: float = 30) -> str:
        """The text of the first element ``css`` selects, once there is one."""
        return eventually_value(lambda: next(iter(self.texts(css)), None), timeout)

    def wait_text(self, css: str, wanted: Callable[[str], bool], timeout: float = 30) -> str:
        return eventually_value(lambda: t if wanted(t := self.text(css)) else None, timeout)

    def collect(self) -> None:
        """Move what Chromium logged since the last call into ``requested`` and ``console``."""
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                self.requested.append(message["params"]["request"]["url"])
        self.console.extend(self.driver.get_log("browser"))

    def errors(self) -> list[str]:
        """What the page's scripts logged as errors, and the errors they raised."""
        self.collect()
        return [
            str(e.get("message"))
            for e in self.console
            if e.get("level") == "SEVERE" and e.get("source") != "network"
        ]

    def refused(self) -> list[str]:
        """The requests Chromium logged as failed (a 4xx or 5xx answer, or none)."""
        self.collect()
        return [
            str(e.get("message"))
            for e in self.console
            if e.get("level") == "SEVERE" and e.get("source") == "network"
        ]


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Browser]:
    """A new headless Chromium with an empty profile in ``profile``; quit on the way out."""
    options = chrome_options(require_tool("chromium"), profile, "--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=require_tool("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    try:
        yield Browser(driver)
    finally:
        driver.quit()
