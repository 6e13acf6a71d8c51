"""A headless Chromium for checking viewer pages: Debian's ``chromium`` and ``chromium-driver``
driven by selenium (the viewer's browser tests and ``scripts/bench_viewer.py`` use it).

Only the system browser and driver are used (`CHROMIUM`, `CHROMEDRIVER`: ``apt-get install
chromium chromium-driver``, as ``scripts/setup.sh`` does): selenium gets the driver's path
and runs offline (``SE_OFFLINE=true``), so Selenium Manager never downloads a driver or a
browser. Each browser gets a fresh profile directory, removed when it quits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xpgym.core.optional import import_optional

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "FLAGS",
    "browser_missing",
    "headless_chromium",
    "open_page",
]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
"""Chromium flags: headless, no GPU, no sandbox (containers), no network of its own."""


def browser_missing() -> str | None:
    """Why a headless Chromium cannot start here (`None` if it can): selenium, the browser
    or the driver is missing."""
    try:
        import_optional("selenium.webdriver", needed_by="the viewer's browser checks",
                        install='pip install "xpgym[dev]"')  # fmt: skip
    except ImportError as exc:
        return str(exc)
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing: apt-get install {package} (scripts/setup.sh does)"
    return None


@contextlib.contextmanager
def headless_chromium(*, width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A selenium ``webdriver.Chrome`` on `CHROMIUM` through `CHROMEDRIVER`, with `FLAGS`,
    a `width` x `height` window and a fresh profile; it quits on exit.

    Raises:
        ImportError: selenium is not installed.
        selenium.common.WebDriverException: the browser or driver does not start.
    """
    webdriver = import_optional(
        "selenium.webdriver", needed_by="headless_chromium", install='pip install "xpgym[dev]"'
    )
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not download anything
    profile = tempfile.mkdtemp(prefix="xpgym-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver: Any, path: str | os.PathLike[str], *, timeout: float = 120.0) -> None:
    """Load the viewer page at `path` (a local file) and wait until its script has run
    (``document.body.dataset.ready``); selenium's ``TimeoutException`` after `timeout` s."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_page_load_timeout(timeout)
    driver.get(Path(path).resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == "true"
    )
