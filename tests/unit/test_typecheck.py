"""mypy over odradek as CI runs it: ``protocol/`` under ``--strict``; ``broker/``, ``zk/``,
``client/`` (with ``odradek.testing``) and ``pipeline/`` in mypy's default mode; all with the
[mypy] configuration in setup.cfg.

Invariant: the check runs against the ``odradek.*`` package names (the repository's folders
are mapped to them by setup.cfg's package_dir): an ``odradek/`` tree of symlinks to the
folders goes on MYPYPATH, so the check does not depend on how the project is installed.
A failure lists every error mypy reported.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"protocol": "protocol", "zk": "zk", "broker": "broker", "client": "client",
            "pipeline": "pipeline", "testing": "client/testing"}


@pytest.fixture(scope="module")
def mypy_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mypy_path")
    (base / "odradek").mkdir()
    for name, folder in PACKAGES.items():
        (base / "odradek" / name).symlink_to(ROOT / folder, target_is_directory=True)
    return base


def _mypy(mypy_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MYPYPATH=str(mypy_path))
    cache = mypy_path / ".mypy_cache"
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "setup.cfg"),
         "--cache-dir", str(cache), "--no-error-summary", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _errors(result: subprocess.CompletedProcess[str]) -> list[str]:
    """mypy's error lines, with paths relative to the repository's folders."""
    return [re.sub(r"^.*?odradek/", "", line) for line in result.stdout.splitlines()
            if ": error:" in line]


def test_protocol_passes_mypy_strict(mypy_path: Path) -> None:
    result = _mypy(mypy_path, "--strict", "-p", "odradek.protocol")
    errors = _errors(result)
    assert result.returncode == 0 and not errors, (
        f"mypy --strict -p odradek.protocol: {len(errors)} errors\n" + "\n".join(errors)
        + ("" if errors else result.stdout + result.stderr))


@pytest.mark.parametrize("packages", [("broker",), ("zk", "client", "pipeline")])
def test_the_other_packages_pass_mypy(mypy_path: Path, packages: tuple[str, ...]) -> None:
    """(``odradek.client`` includes ``client/testing``, the ``odradek.testing`` package's folder.)"""
    args = [a for name in packages for a in ("-p", f"odradek.{name}")]
    result = _mypy(mypy_path, *args)
    errors = _errors(result)
    assert result.returncode == 0 and not errors, (
        f"mypy {' '.join(args)}: {len(errors)} errors\n" + "\n".join(errors)
        + ("" if errors else result.stdout + result.stderr))
