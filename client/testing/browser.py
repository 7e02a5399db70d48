"""Real headless Chromium for tests that check a page as a person sees it (selenium with
Debian's ``chromium`` and ``chromium-driver``, which ``.ci/bootstrap`` installs).

Invariant: ``headless_chromium`` always ends the driver and the browser it started, also when
the test fails or the browser hangs: every call to chromedriver is bounded
(``COMMAND_TIMEOUT``; selenium's own default waits forever), and chromedriver runs in a
process group of its own, which is killed by its PID after ``driver.quit`` so that no
Chromium process outlives the test. The browser gets a fresh profile directory and the flags
that keep it off the network (this machine has none: without them Chromium floods refused
connections) and working as root.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--hide-scrollbars")
COMMAND_TIMEOUT = 60.0  # seconds for one WebDriver command (a script, a screenshot, quit)


@contextmanager
def headless_chromium(width: int = 1360, height: int = 1000) -> Iterator[Any]:
    """A selenium ``webdriver.Chrome`` driving a headless Chromium of ``width`` x ``height``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.remote.remote_connection import RemoteConnection

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        raise AssertionError("needs Debian's chromium and chromium-driver (bash .ci/bootstrap installs them)")
    profile = tempfile.mkdtemp(prefix="odradek-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    service = Service(driver_path, popen_kw={"start_new_session": True})
    driver = None
    try:
        driver = webdriver.Chrome(service=service, options=options)
        executor = driver.command_executor
        assert isinstance(executor, RemoteConnection)
        executor.client_config.timeout = COMMAND_TIMEOUT
        yield driver
    finally:
        try:
            if driver is not None:
                driver.quit()
        finally:
            process = getattr(service, "process", None)  # (None: chromedriver never started)
            if process is not None:  # chromedriver's group: it and every Chromium process
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(COMMAND_TIMEOUT)
            shutil.rmtree(profile, ignore_errors=True)
