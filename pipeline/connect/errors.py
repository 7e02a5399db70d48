"""Error handling for record processing: retries, tolerance and the dead letter queue
(Kafka Connect's ``errors.*`` settings).

Invariant: a failure in a tolerable stage (key/value/header conversion,
transformation) is retried while it is a RetriableException and
``errors.retry.timeout`` allows; then, with ``errors.tolerance=all``, the
record is skipped (logged with ``errors.log.enable``, written with its original
bytes to ``errors.deadletterqueue.topic.name`` for sinks, with
``__connect.errors.*`` headers when ``errors.deadletterqueue.context.headers.enable``),
and with ``errors.tolerance=none`` the task fails with ``ConnectException("Tolerance
exceeded in error handler")`` caused by the original error. A DLQ write is
acknowledged before the consumer offsets that cover its record are committed
(the sink task flushes the DLQ producer before committing).
"""
from __future__ import annotations

import logging
import time
import traceback
from typing import Any, Callable

from odradek.client import Producer

from .api import ConnectException, RetriableException
from .config import ConnectorConfig
from .kafka_log import ensure_topic

log = logging.getLogger(__name__)

KEY_CONVERTER = "KEY_CONVERTER"
VALUE_CONVERTER = "VALUE_CONVERTER"
HEADER_CONVERTER = "HEADER_CONVERTER"
TRANSFORMATION = "TRANSFORMATION"
TASK_PUT = "TASK_PUT"
TASK_POLL = "TASK_POLL"
KAFKA_PRODUCE = "KAFKA_PRODUCE"

SKIPPED = object()  # what ``execute`` returns for a tolerated failure


def java_exception_name(exc: BaseException) -> str:
    return {"DataException": "org.apache.kafka.connect.errors.DataException",
            "ConnectException": "org.apache.kafka.connect.errors.ConnectException",
            "RetriableException": "org.apache.kafka.connect.errors.RetriableException"
            }.get(type(exc).__name__, f"{type(exc).__module__}.{type(exc).__qualname__}")


class DeadLetterQueueReporter:
    """Writes failed sink records to the DLQ topic (created with 1 partition if missing)."""

    def __init__(self, cc: ConnectorConfig, task_id: int, producer_props: dict[str, Any],
                 admin_props: dict[str, Any]) -> None:
        self.cc, self.task_id = cc, task_id
        ensure_topic(admin_props, cc.dlq_topic, 1, cc.dlq_rf, configs={"cleanup.policy": "delete"})
        self.producer = Producer({**producer_props, "acks": "all"})
        self.errors: list[BaseException] = []

    def report(self, raw: Any, stage: str, where: str, exc: BaseException) -> None:
        headers = list(getattr(raw, "headers", None) or [])
        if self.cc.dlq_headers:
            ctx = [("__connect.errors.topic", raw.topic), ("__connect.errors.partition", str(raw.partition)),
                   ("__connect.errors.offset", str(raw.offset)),
                   ("__connect.errors.connector.name", self.cc.name),
                   ("__connect.errors.task.id", str(self.task_id)), ("__connect.errors.stage", stage),
                   ("__connect.errors.class.name", where),
                   ("__connect.errors.exception.class.name", java_exception_name(exc)),
                   ("__connect.errors.exception.message", str(exc)),
                   ("__connect.errors.exception.stacktrace",
                    "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))]
            headers += [(k, v.encode("utf-8")) for k, v in ctx]
        self.producer.send(self.cc.dlq_topic, value=raw.value, key=raw.key, headers=headers,
                           callback=self._on_dlq_ack)

    def _on_dlq_ack(self, _metadata: Any, err: Exception | None) -> None:
        if err is not None:
            self.errors.append(err)

    def flush(self) -> None:
        self.producer.flush(30)
        if self.errors:
            raise ConnectException(f"writing to the dead letter queue failed: {self.errors[0]}")

    def close(self) -> None:
        self.producer.close(5)


class RetryWithToleranceOperator:
    """Runs one stage of one record under the connector's retry and tolerance rules."""

    def __init__(self, cc: ConnectorConfig, task_label: str, dlq: DeadLetterQueueReporter | None = None) -> None:
        self.cc, self.task_label, self.dlq = cc, task_label, dlq
        self.total_failures = 0
        self.total_skipped = 0

    def execute(self, stage: str, where: str, fn: Callable[[], Any], raw: Any = None) -> Any:
        """``fn()``'s result, or SKIPPED when it failed and the failure is tolerated."""
        deadline = time.monotonic() + self.cc.errors_retry_timeout_ms / 1000.0
        delay = 0.3
        while True:
            try:
                return fn()
            except RetriableException as exc:
                if time.monotonic() + delay < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, self.cc.errors_retry_max_delay_ms / 1000.0)
                    continue
                return self._failed(stage, where, exc, raw)
            except Exception as exc:
                return self._failed(stage, where, exc, raw)

    def _failed(self, stage: str, where: str, exc: Exception, raw: Any) -> Any:
        self.total_failures += 1
        if not self.cc.errors_tolerance_all:
            raise ConnectException("Tolerance exceeded in error handler") from exc
        self.total_skipped += 1
        if self.cc.errors_log_enable:
            log.error("Error encountered in task %s. Executing stage '%s' with class '%s'%s: %s",
                      self.task_label, stage, where,
                      f", where consumed record is {{topic='{raw.topic}', partition={raw.partition}, "
                      f"offset={raw.offset}}}" if raw is not None and hasattr(raw, "offset") else "", exc)
        if self.dlq is not None and raw is not None and hasattr(raw, "offset"):
            self.dlq.report(raw, stage, where, exc)
        return SKIPPED
