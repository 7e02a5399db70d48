"""The Kafka Connect REST API over the stdlib HTTP server (one thread per request).

Invariant: every request gets a JSON answer with Kafka Connect's shapes and
status codes; errors are ``{"error_code": <status>, "message": ...}``, never a
dropped connection or an HTML page. A write that must run on the leader
(``NotLeader``) is forwarded once to the leader's URL (with ``forward=false``,
so it is never forwarded again) or answered 409 while no leader is known.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from .herder import NotLeader, RestError

log = logging.getLogger(__name__)

KAFKA_VERSION = "2.8.2"
COMMIT = "odradek"
REBALANCE_MSG = ("Cannot complete request momentarily due to no known leader URL, likely because a rebalance "
                 "was underway.")

_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(r"/"), "root"),
    ("GET", re.compile(r"/connectors/?"), "list"),
    ("POST", re.compile(r"/connectors/?"), "create"),
    ("GET", re.compile(r"/connectors/([^/]+)/?"), "info"),
    ("DELETE", re.compile(r"/connectors/([^/]+)/?"), "delete"),
    ("GET", re.compile(r"/connectors/([^/]+)/config/?"), "get_config"),
    ("PUT", re.compile(r"/connectors/([^/]+)/config/?"), "put_config"),
    ("GET", re.compile(r"/connectors/([^/]+)/status/?"), "status"),
    ("GET", re.compile(r"/connectors/([^/]+)/tasks/?"), "tasks"),
    ("GET", re.compile(r"/connectors/([^/]+)/tasks/(\d+)/status/?"), "task_status"),
    ("POST", re.compile(r"/connectors/([^/]+)/tasks/(\d+)/restart/?"), "restart_task"),
    ("PUT", re.compile(r"/connectors/([^/]+)/pause/?"), "pause"),
    ("PUT", re.compile(r"/connectors/([^/]+)/resume/?"), "resume"),
    ("POST", re.compile(r"/connectors/([^/]+)/restart/?"), "restart"),
    ("GET", re.compile(r"/connector-plugins/?"), "plugins"),
    ("PUT", re.compile(r"/connector-plugins/([^/]+)/config/validate/?"), "validate"),
]


class _Handler(BaseHTTPRequestHandler):
    server: "RestServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("rest: " + fmt, *args)

    def _reply(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise RestError(400, f"Invalid JSON: {exc}") from None

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        path = url.path
        try:
            body = self._body() if method in ("POST", "PUT") else None
            for m, pattern, name in _ROUTES:
                match = pattern.fullmatch(path)
                if match and m == method:
                    args = [unquote(a) for a in match.groups()]
                    status, out = getattr(self, "h_" + name)(*args, body=body, query=query)
                    self._reply(status, out)
                    return
            if any(p.fullmatch(path) for _, p, _ in _ROUTES):
                raise RestError(405, "HTTP 405 Method Not Allowed")
            raise RestError(404, "HTTP 404 Not Found")
        except NotLeader as nl:
            if nl.leader_url is None or query.get("forward") == ["false"]:
                self._reply(409, {"error_code": 409, "message": REBALANCE_MSG})
            else:
                self._forward(nl.leader_url, method, url, body)
        except RestError as exc:
            self._reply(exc.status, {"error_code": exc.status, "message": exc.message})
        except Exception as exc:  # a bug: still a JSON answer
            log.exception("rest: %s %s failed", method, path)
            self._reply(500, {"error_code": 500, "message": f"{type(exc).__name__}: {exc}"})

    def _forward(self, leader_url: str, method: str, url: Any, body: Any) -> None:
        sep = "&" if url.query else ""
        target = leader_url.rstrip("/") + url.path + "?" + url.query + sep + "forward=false"
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(target, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except OSError as exc:
            self._reply(409, {"error_code": 409, "message": f"{REBALANCE_MSG} (forwarding failed: {exc})"})
            return
        self._reply(status, json.loads(raw) if raw else None)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- handlers: (status, body) ---------------------------------------------------------------

    @property
    def herder(self) -> Any:
        return self.server.herder

    def h_root(self, body: Any, query: Any) -> tuple[int, Any]:
        return 200, {"version": KAFKA_VERSION, "commit": COMMIT, "kafka_cluster_id": self.herder.kafka_cluster_id}

    def h_list(self, body: Any, query: Any) -> tuple[int, Any]:
        names = self.herder.connectors()
        expand = query.get("expand", [])
        if not expand:
            return 200, names
        out: dict[str, Any] = {}
        for n in names:
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = self.herder.connector_status(n)
                if "info" in expand:
                    entry["info"] = self.herder.connector_info(n)
            except RestError:
                continue
            out[n] = entry
        return 200, out

    def h_create(self, body: Any, query: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("name"):
            raise RestError(400, "Connector name configuration must be provided in the request body")
        name = str(body["name"])
        config = dict(body.get("config") or {})
        if "name" in config and str(config["name"]) != name:
            raise RestError(400, f"Connector name configuration ({config['name']}) doesn't match connector name "
                                 f"in the URL ({name})")
        config["name"] = name
        _, info = self.herder.put_connector_config(name, config, allow_replace=False)
        return 201, info

    def h_info(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.connector_info(name)

    def h_delete(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        self.herder.delete_connector(name)
        return 204, None

    def h_get_config(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.connector_config(name)

    def h_put_config(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise RestError(400, "the request body must be a JSON object of connector settings")
        created, info = self.herder.put_connector_config(name, body, allow_replace=True)
        return (201 if created else 200), info

    def h_status(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.connector_status(name)

    def h_tasks(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.task_configs(name)

    def h_task_status(self, name: str, task: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.task_status(name, int(task))

    def h_restart_task(self, name: str, task: str, body: Any, query: Any) -> tuple[int, Any]:
        self.herder.restart_task(name, int(task))
        return 204, None

    def h_pause(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        self.herder.pause_connector(name)
        return 202, None

    def h_resume(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        self.herder.resume_connector(name)
        return 202, None

    def h_restart(self, name: str, body: Any, query: Any) -> tuple[int, Any]:
        self.herder.restart_connector(name)
        return 204, None

    def h_plugins(self, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.plugins()

    def h_validate(self, plugin: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self.herder.validate_plugin_config(plugin, dict(body or {}))


class RestServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, herder: Any) -> None:
        self.herder = herder
        super().__init__((host or "0.0.0.0", port), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, name="connect-rest", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
