"""odradek.pipeline.connect: Kafka Connect for odradek — workers (standalone and distributed),
the REST API, converters, single message transforms and built-in connectors.

Invariant: imports nothing of odradek but ``odradek.client`` and
``odradek.protocol``; the connector interface (``api``) imports nothing of the
worker, so connectors can be written and unit-tested without a cluster.

    from odradek.pipeline.connect import SourceConnector, SourceTask, SourceRecord
"""
from .api import (
    ConfigDef,
    ConfigException,
    ConnectException,
    ConnectRecord,
    Connector,
    DataException,
    RetriableException,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
)

__all__ = ["ConfigDef", "ConfigException", "ConnectException", "ConnectRecord", "Connector", "DataException",
           "RetriableException", "SinkConnector", "SinkRecord", "SinkTask", "SourceConnector", "SourceRecord",
           "SourceTask"]
