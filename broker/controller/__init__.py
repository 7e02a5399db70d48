"""odradek.broker.controller: the classic (ZooKeeper) controller.

``KafkaController`` (Twisted shell) drives ``ControllerCore`` (decisions), the
partition/replica state machines, topic deletion and the channel manager.
"""
from .controller import KafkaController  # noqa: F401
