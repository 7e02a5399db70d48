"""Throughput from the brokers' Prometheus endpoints: the text parsed, the counters turned into
rates, the last points kept per broker for the sparklines.

Invariant: sans-IO (text in, numbers out; the clock is a parameter); a counter that goes
backwards (a restarted broker) starts its series anew instead of giving a negative rate; a
line that does not parse is skipped, never fatal.
"""
from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field

# The JMX exporter's names for Kafka's BrokerTopicMetrics, as the brokers serve them.
COUNTERS = {
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
}
POINTS = 60

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of each sample line of Prometheus text exposition format."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in _LABEL.findall(m.group(3) or "")}
        out.append((m.group(1), labels, value))
    return out


def broker_totals(text: str) -> dict[str, float]:
    """The broker-wide total of each of ``COUNTERS``: the sample without a ``topic`` label (the
    all-topics MBean) when served, else the sum over the topics. Absent counters are left out."""
    whole: dict[str, float] = {}
    per_topic: dict[str, float] = {}
    names = {v: k for k, v in COUNTERS.items()}
    for name, labels, value in parse_samples(text):
        key = names.get(name)
        if key is None or math.isnan(value):
            continue
        if "topic" in labels:
            per_topic[key] = per_topic.get(key, 0.0) + value
        else:
            whole[key] = whole.get(key, 0.0) + value
    return {**per_topic, **whole}


@dataclass
class RateSeries:
    """One broker's counters over time: ``feed`` the totals of each scrape, read the rates."""
    points: int = POINTS
    last: tuple[float, dict[str, float]] | None = None
    rates: dict[str, deque[float]] = field(default_factory=dict)

    def feed(self, now: float, totals: dict[str, float]) -> None:
        if self.last is not None and now > self.last[0]:
            then, before = self.last
            for key, value in totals.items():
                series = self.rates.setdefault(key, deque(maxlen=self.points))
                if key in before and value >= before[key]:
                    series.append((value - before[key]) / (now - then))
                else:
                    series.clear()  # a restarted broker's counters start again from 0
        self.last = (now, dict(totals))

    def as_json(self) -> dict[str, list[float]]:
        return {key: [round(v, 3) for v in series] for key, series in self.rates.items()}
