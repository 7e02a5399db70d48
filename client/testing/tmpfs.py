"""``TmpfsMount``: a small tmpfs a test can fill to ENOSPC (a full disk under a broker's log dir).

Invariant: mounting needs root (or CAP_SYS_ADMIN); when it is refused ``TmpfsMount`` raises
``FaultUnavailable`` saying so and leaves nothing behind. ``unmount()`` always removes the
mount point (lazily if the filesystem is still busy).
"""
from __future__ import annotations

import errno
import shutil
import subprocess
from pathlib import Path


class FaultUnavailable(RuntimeError):
    """A fault this machine cannot inject (the message says what is missing)."""


class TmpfsMount:
    """A tmpfs of ``size`` (e.g. "16m") mounted at ``path`` until ``unmount()``."""

    def __init__(self, path: Path, size: str):
        self.path = path
        path.mkdir(parents=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            path.rmdir()
            raise FaultUnavailable(f"a full disk needs a tmpfs, which needs root or CAP_SYS_ADMIN: "
                                   f"mount -t tmpfs at {path} failed: {r.stderr.strip()}")

    def fill(self) -> None:
        """Write files until the filesystem is full (ENOSPC)."""
        for name, size in (("filler", 1 << 20), ("filler-tail", 4096)):
            chunk = b"\0" * size
            with open(self.path / name, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise

    def free(self) -> None:
        for name in ("filler", "filler-tail"):
            (self.path / name).unlink(missing_ok=True)

    def unmount(self) -> None:
        if subprocess.run(["umount", str(self.path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)
