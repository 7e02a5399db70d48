"""Feature versioning (KIP-584) as Kafka 2.8 has it in ZooKeeper mode: this broker's supported
features and its cache of the cluster's finalized features (Kafka's BrokerFeatures,
FinalizedFeatureCache and FinalizedFeatureChangeListener).

Invariants: Kafka 2.8 defines no feature, so ``SUPPORTED`` is empty (the broker registration's
``features`` is ``{}`` and ApiVersions v3's supported_features is empty). The cache holds what
/feature held when last read, on the reactor: an enabled node's features and its zk version
as the epoch; a disabled or absent node is no finalized features and epoch -1 (ApiVersions
then leaves finalized_features_epoch out). Every change of /feature is read again (a watch on
each read, the read in the thread pool); a failed read keeps the last answer and is retried
after a second. The controller creates and enables /feature at failover when
inter.broker.protocol.version is 2.7 or later (``feature_versioning_enabled``), else disables it.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable

from twisted.internet import defer

log = logging.getLogger(__name__)

SUPPORTED: dict[str, tuple[int, int]] = {}   # feature name -> (min, max) version this broker supports
NO_EPOCH = -1
RETRY_S = 1.0


def _at_least(inter_broker_protocol_version: str, wanted: tuple[int, int, int]) -> bool:
    """IBP ``major.minor[.patch][-IVn]`` at or after ``wanted`` (major, minor, IV); a version
    without IV is its release's last IV; one this parser does not read counts as newest."""
    m = re.match(r"(\d+)\.(\d+)(?:\.\d+)?(?:-IV(\d+))?$", inter_broker_protocol_version.strip())
    if m is None:
        return True
    iv = int(m.group(3)) if m.group(3) is not None else 1 << 30
    return (int(m.group(1)), int(m.group(2)), iv) >= wanted


def feature_versioning_enabled(inter_broker_protocol_version: str) -> bool:
    """Kafka's ApiVersion.isFeatureVersioningSupported: IBP 2.7-IV0 or later."""
    return _at_least(inter_broker_protocol_version, (2, 7, 0))


def alter_isr_enabled(inter_broker_protocol_version: str) -> bool:
    """Kafka's ApiVersion.isAlterIsrSupported: IBP 2.7-IV2 or later (leaders send AlterIsr to the
    controller; below it they write the state znode and /isr_change_notification themselves)."""
    return _at_least(inter_broker_protocol_version, (2, 7, 2))


class FinalizedFeatures:
    """The cluster's finalized features as this broker last read them (module invariants)."""

    def __init__(self) -> None:
        self.features: dict[str, tuple[int, int]] = {}   # name -> (min_version_level, max_version_level)
        self.epoch = NO_EPOCH

    def update(self, node: tuple[int, dict[str, tuple[int, int]], int] | None) -> None:
        from odradek.zk.znodes import FeatureZNode
        if node is None or node[0] != FeatureZNode.ENABLED:
            self.features, self.epoch = {}, NO_EPOCH
        elif node[2] >= self.epoch:
            self.features, self.epoch = dict(node[1]), node[2]

    def api_versions_fields(self) -> dict[str, Any]:
        """ApiVersions v3's tagged fields."""
        return {"supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                                       for n, (lo, hi) in sorted(SUPPORTED.items())],
                "finalized_features_epoch": self.epoch,
                "finalized_features": [{"name": n, "max_version_level": hi, "min_version_level": lo}
                                       for n, (lo, hi) in sorted(self.features.items())]}


class FeatureChangeListener:
    """Keeps a FinalizedFeatures current from /feature (a watch per read)."""

    def __init__(self, zk: Any, reactor: Any, run_in_thread: Callable[..., defer.Deferred],
                 cache: FinalizedFeatures) -> None:
        self.zk = zk
        self.reactor = reactor
        self.run_in_thread = run_in_thread
        self.cache = cache
        self._stopped = False

    def start(self) -> defer.Deferred:
        return self.changed()

    def stop(self) -> None:
        self._stopped = True

    def _watch(self, event: Any = None) -> None:   # a kazoo thread
        self.reactor.callFromThread(self.changed)

    def changed(self) -> defer.Deferred:
        if self._stopped:
            return defer.succeed(None)

        def failed(f: Any) -> None:
            log.warning("reading /feature failed (retrying): %s", f.getErrorMessage())
            if not self._stopped:
                self.reactor.callLater(RETRY_S, self.changed)
        d = self.run_in_thread(self.zk.get_feature, self._watch)
        d.addCallbacks(self.cache.update, failed)
        return d
