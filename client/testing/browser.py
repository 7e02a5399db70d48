"""Real headless Chromium for tests that check a page as a person sees it (selenium with
Debian's ``chromium`` and ``chromium-driver``, which ``.ci/bootstrap`` installs).

Invariant: ``headless_chromium`` always ends the driver and the browser it started, also when
the test fails (``driver.quit`` in a ``finally``); the browser gets a fresh profile directory
and the flags that keep it off the network (this machine has none: without them Chromium
floods refused connections) and working as root.
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--hide-scrollbars")


@contextmanager
def headless_chromium(width: int = 1360, height: int = 1000) -> Iterator[Any]:
    """A selenium ``webdriver.Chrome`` driving a headless Chromium of ``width`` x ``height``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        raise AssertionError("needs Debian's chromium and chromium-driver (bash .ci/bootstrap installs them)")
    profile = tempfile.mkdtemp(prefix="odradek-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = None
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
