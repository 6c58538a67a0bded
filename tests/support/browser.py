"""A headless Chromium for the web page's tests, driven with Selenium through the system's own
driver (Debian: ``chromium`` and ``chromium-driver``; nothing is downloaded, nothing leaves
127.0.0.1). Without them the tests skip and say what to install, unless
``HEFSEARCH_REQUIRE_BROWSER`` is set (``.ci/run`` installs both and sets it): then they fail.

Screenshots go to ``out/browser/`` (git ignores ``/out/``), kept after the run as artifacts.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

SCREENSHOTS = Path(__file__).resolve().parents[2] / "out" / "browser"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
INSTALL = "apt-get install chromium chromium-driver (Debian) and pip install selenium (the test extra)"


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed; " + INSTALL
    if not any(shutil.which(b) for b in BROWSERS):
        return "no chromium on PATH; " + INSTALL
    if not shutil.which("chromedriver"):
        return "no chromedriver on PATH; " + INSTALL
    return None


def required() -> bool:
    return bool(os.environ.get("HEFSEARCH_REQUIRE_BROWSER"))


def need_browser() -> None:
    reason = missing()
    if reason is None:
        return
    if required():
        pytest.fail(f"the browser tests must run here (HEFSEARCH_REQUIRE_BROWSER is set): {reason}")
    pytest.skip(reason)


def open_browser(width: int = 1280, height: int = 900):
    """A headless Chromium (the system's), its console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--password-store=basic", f"--window-size={width},{height}", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def wait(driver, condition, timeout: float = 20.0, what: str = "the page"):
    """``condition()``'s first truthy value, polled; fails naming ``what`` and the page's summary."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition())
    except TimeoutException:
        summary = driver.execute_script("return document.getElementById('summary')?.textContent")
        raise AssertionError(f"timed out after {timeout} s waiting for {what} (page says: {summary!r}, "
                             f"url {driver.current_url})") from None


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def set_dark(driver, dark: bool) -> None:
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})


def set_phone(driver, phone: bool) -> None:
    if phone:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    else:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
