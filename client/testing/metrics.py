"""``scrape``: one broker's /metrics, parsed with prometheus_client's own text parser.

Invariant: the figures returned are exactly what a Prometheus server would store from that
scrape (sample name with its labels -> value); nothing is summed or renamed here, so a test
asserts on the names an operator's dashboards use.
"""
from __future__ import annotations

import urllib.request
from typing import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families


class Scrape(dict):
    """(sample name, frozenset of label items) -> value, with lookups by name and labels."""

    def value(self, name: str, **labels: str) -> float | None:
        return self.get((name, frozenset(labels.items())))

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), v) for (n, labels), v in self.items() if n == name]

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` carrying at least ``labels`` (one broker)."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.items() if n == name and want <= ls and (labels or not ls))


def scrape(url: str, timeout: float = 10.0) -> Scrape:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        text = resp.read().decode("utf-8")
    out = Scrape()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def scrape_all(urls: Mapping[int, str] | Iterable[str]) -> dict:
    """Every broker's scrape: {broker id or url: Scrape}."""
    items = urls.items() if isinstance(urls, Mapping) else ((u, u) for u in urls)
    return {key: scrape(url) for key, url in items}
