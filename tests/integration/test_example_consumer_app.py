"""The example project (examples/consumer-app) passes its own tests, run as its users run them:
``pytest`` in its folder, with odradek's plugin loaded by the entry point (issue 19)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "consumer-app"


def test_example_consumer_app_tests_pass(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                             f"--basetemp={tmp_path / 'basetemp'}"],
                            cwd=EXAMPLE, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "2 passed" in result.stdout
