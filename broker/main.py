"""The broker process: ``odradek broker start server.properties`` (Kafka's kafka-server-start.sh).

Invariant: reads and validates the configuration before anything starts (a bad file is one
line and exit status 1), logs through Python logging (Twisted's log bridged to it), runs one
``KafkaServer`` on the reactor, and turns SIGTERM/SIGINT into one clean shutdown (a controlled
shutdown first); a fatal error (every log dir failed, startup failed) also shuts down cleanly,
then exits with status 1, where Kafka halts.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

from twisted.internet import defer

from .config.kafka_config import ConfigError, KafkaConfig
from .gc_schedule import CollectorSchedule
from .server import KafkaServer, StartupError

log = logging.getLogger(__name__)

# How long the reactor waits for the GIL while another thread runs Python (a checkpoint's walk of
# every partition, a cleaner pass, kazoo): CPython's default is 5 ms, and the reactor gives the GIL
# up at every system call, so a request handled meanwhile waited several such intervals
GIL_SWITCH_INTERVAL_S = 0.001


def setup_logging(level: str = "INFO") -> None:
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    root = logging.getLogger()
    if not any(getattr(h, "_odradek", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s"))
        handler._odradek = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    globalLogBeginner.beginLoggingTo([STDLibLogObserver(name="twisted")],  # type: ignore[list-item]
                                     redirectStandardIO=False)  # (it is an ILogObserver by @implementer)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="odradek broker", description="Run one odradek (Kafka) broker.")
    sub = p.add_subparsers(dest="action", required=True)
    start = sub.add_parser("start", help="start a broker in the foreground")
    start.add_argument("config", help="server.properties")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="override a property (repeatable)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"Error: --override expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 1
        overrides[key.strip()] = value.strip()
    try:
        config = KafkaConfig.from_properties_file(args.config, overrides)
    except ConfigError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    setup_logging()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    from twisted.internet import reactor as installed_reactor
    reactor: Any = installed_reactor  # the module's type hides the installed reactor's interfaces

    server = KafkaServer(config, reactor)
    exit_code = [0]

    def fatal() -> None:   # Kafka halts with status 1; odradek shuts down cleanly first
        exit_code[0] = 1
        stop_once()
    server.on_fatal = fatal

    def start() -> None:
        d = defer.Deferred.fromCoroutine(server.startup())

        def failed(f) -> None:
            if f.check(StartupError):
                log.error("startup failed: %s", f.value)
            else:
                log.error("startup failed: %s", f.getTraceback())
            exit_code[0] = 1
            stop_once()
        d.addErrback(failed)

    stopping = [False]

    def stop_once() -> None:
        """SIGTERM/SIGINT start one clean shutdown; a repeated signal while it runs is ignored."""
        if not stopping[0]:
            stopping[0] = True
            reactor.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: reactor.callFromThread(stop_once))
    reactor.callWhenRunning(start)
    reactor.callWhenRunning(CollectorSchedule(reactor).start)
    reactor.addSystemEventTrigger("before", "shutdown", lambda: defer.Deferred.fromCoroutine(server.shutdown()))
    reactor.run(installSignalHandlers=False)
    return exit_code[0]


if __name__ == "__main__":
    sys.exit(main())
