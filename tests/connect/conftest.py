"""Fixtures for the Connect tests: Connect worker subprocesses, REST helpers, a PostgreSQL server.

Invariant: every process started here (workers, PostgreSQL) is stopped by PID
in the fixture teardown, also when the test fails (a worker's log tail is then
printed); ports are picked free; waits poll a condition with a deadline, never
a fixed sleep.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

from odradek_test_support import _failed, free_port
from odradek.testing import wait_until

ODRADEK = [sys.executable, "-c", "import sys; from odradek.zk.cli import main; sys.exit(main())"]


def wait_for(cond: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1, what: str = "condition") -> Any:
    """odradek.testing's wait, where any error counts as "not yet" (workers restart, REST 409s)."""
    return wait_until(cond, timeout, what, interval=interval, retry_on=(Exception,))


def rest(url: str, method: str = "GET", body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, (json.loads(raw) if raw else None)


def write_props(path: Path, props: dict[str, Any]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class WorkerProcess:
    """One ``odradek connect-standalone|connect-distributed`` subprocess."""

    def __init__(self, mode: str, args: list[str], log_path: Path, rest_port: int) -> None:
        self.mode, self.args, self.log_path, self.rest_port = mode, args, log_path, rest_port
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{rest_port}"

    def start(self) -> "WorkerProcess":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(ODRADEK + [f"connect-{self.mode}", *self.args], stdout=log,
                                     stderr=subprocess.STDOUT, cwd=str(self.log_path.parent),
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        wait_for(lambda: self._alive_and_serving(), 60, what=f"REST of worker on {self.rest_port}")
        return self

    def _alive_and_serving(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.log_tail()}")
        try:
            return rest(self.url + "/", timeout=2)[0] == 200
        except OSError:
            return False

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def get(self, path: str) -> tuple[int, Any]:
        return rest(self.url + path)


@pytest.fixture
def connect_workers(request: pytest.FixtureRequest):
    """``start(mode, args, log_path, rest_port)`` -> a started WorkerProcess; all stopped at teardown."""
    workers: list[WorkerProcess] = []

    def start(mode: str, args: list[str], log_path: Path, rest_port: int) -> WorkerProcess:
        w = WorkerProcess(mode, [str(a) for a in args], log_path, rest_port)
        workers.append(w)
        return w.start()

    try:
        yield start
    finally:
        failed = _failed(request)
        for w in workers:
            if failed:
                print(f"\n--- tail of {w.log_path}:\n{w.log_tail(80)}")
            try:
                w.kill()
            except Exception as exc:  # keep stopping the others
                print(f"error stopping worker: {exc!r}")


# ------------------------------------------------------------------ PostgreSQL

def _pg_bin() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).resolve().parent if found else None


class PostgresServer:
    """A throwaway PostgreSQL cluster in a temp dir, on a free loopback port, socket in the temp dir."""

    def __init__(self) -> None:
        bindir = _pg_bin()
        if bindir is None:
            raise RuntimeError("PostgreSQL (Debian package postgresql) is not installed")
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="odradek-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.user = "odradek"
        self._as = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
            import pwd
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run(self._as + list(args), check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)

    def start(self) -> "PostgresServer":
        os.chmod(self.dir, 0o755)
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust",
                  "-E", "UTF8", "--no-sync")
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.dir} "
                f"-c fsync=off -c max_connections=50")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "pg.log"),
                  "-o", opts, "-w", "-t", "60", "start")
        return self

    @property
    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        pid = self.pid
        if pid is not None:
            try:
                self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except Exception:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def postgres(request: pytest.FixtureRequest):
    # .ci/bootstrap installs Debian's postgresql and the test extra installs psycopg:
    # without them this fails rather than skips.
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        if _failed(request):
            try:
                tail = "\n".join((server.dir / "pg.log").read_text(errors="replace").splitlines()[-40:])
                print(f"\n--- tail of the PostgreSQL log:\n{tail}")
            except OSError:
                pass
        server.stop()
