"""odradek.testing: what tests of Kafka applications (odradek's own first) need around a real
cluster — waiting on a condition, creating a topic that is ready to use.

Invariant: nothing here sleeps for a fixed time to let the cluster "settle": every wait polls a
condition a user could check and fails with an ``AssertionError`` naming what it waited for,
after how long, and the last value or error it saw. This package may use every layer of
odradek (it starts and inspects clusters), and no product code imports it.
"""
from __future__ import annotations

from .metrics import scrape, scrape_all
from .topics import create_topic
from .waits import wait_until

__all__ = ["create_topic", "scrape", "scrape_all", "wait_until"]
