"""odradek.broker.log: Kafka's on-disk partition logs (segments, indexes, checkpoints).

Invariant: this package owns every file under the log dirs; nothing else writes there.
"""
from .checkpoint import (CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                         META_PROPERTIES, RECOVERY_POINT_CHECKPOINT, CheckpointError, OffsetCheckpointFile)
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, LeaderEpochFileCache
from .index import CorruptIndexError, OffsetIndex, TimeIndex
from .log import (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log, LogAppendInfo, UnexpectedAppendOffsetError,
                  parse_topic_partition)
from .manager import LogDirError, LogManager, TopicPartition
from .segment import LogSegment

__all__ = [
    "CLEAN_SHUTDOWN_FILE", "HIGH_WATERMARK_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT", "META_PROPERTIES",
    "RECOVERY_POINT_CHECKPOINT", "CheckpointError", "OffsetCheckpointFile", "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochFileCache", "CorruptIndexError", "OffsetIndex",
    "TimeIndex", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "Log", "LogAppendInfo",
    "UnexpectedAppendOffsetError", "parse_topic_partition", "LogDirError", "LogManager", "TopicPartition",
    "LogSegment",
]
