"""odradek.testing: what tests of Kafka applications (odradek's own first) need around a real
cluster — waiting on a condition, creating a topic that is ready to use, a cluster to break on
purpose (``KafkaCluster``), checking that nothing acknowledged was lost — and the pytest plugin
(``odradek.testing.plugin``, loaded by the ``pytest11`` entry point) that serves them as fixtures.

Invariant: nothing here sleeps for a fixed time to let the cluster "settle": every wait polls a
condition a user could check and fails with an ``AssertionError`` naming what it waited for,
after how long, and the last value or error it saw. This package may use every layer of
odradek (it starts and inspects clusters), and no product code imports it.
"""
from __future__ import annotations

from .ledger import Delivered, DeliveryLedger, assert_no_loss, loss_report
from .tmpfs import FaultUnavailable
from .metrics import scrape, scrape_all
from .topics import create_topic
from .waits import wait_through_faults, wait_until


def __getattr__(name: str) -> object:
    if name == "KafkaCluster":  # imports the cluster machinery only when asked for
        from .cluster import KafkaCluster
        return KafkaCluster
    if name == "ObservedCluster":
        from .observers import ObservedCluster
        return ObservedCluster
    raise AttributeError(name)


__all__ = ["create_topic", "scrape", "scrape_all", "wait_until", "wait_through_faults", "DeliveryLedger", "Delivered", "assert_no_loss",
           "loss_report", "FaultUnavailable", "KafkaCluster", "ObservedCluster"]
