"""UpdateFeatures (key 57, v0): change the cluster's finalized features (KIP-584), as Kafka 2.8's
KafkaApis.handleUpdateFeatures and KafkaController.processFeatureUpdates answer it.

Invariant: checked in Kafka's order, each a top-level error: Alter on the Cluster
(CLUSTER_AUTHORIZATION_FAILED), the active controller (NOT_CONTROLLER), feature versioning on
(inter.broker.protocol.version >= 2.7, else INVALID_REQUEST "Feature versioning system is
disabled."). Then each update is judged with Kafka's messages against the finalized features
/feature holds and the features this broker supports — none in Kafka 2.8, so every addition or
upgrade is INVALID_REQUEST (not supported), and only deleting a finalized feature someone wrote
into /feature by hand can succeed. /feature is rewritten (at the version read, status enabled)
only when the valid updates change it; a failed write makes those updates FEATURE_UPDATE_FAILED.
A refused update changes nothing.
"""
from __future__ import annotations

from twisted.internet import defer

from odradek.protocol.apis import update_features as API
from odradek.protocol.errors import ErrorCode
from odradek.zk.znodes import FeatureZNode

from ..features import SUPPORTED, feature_versioning_enabled
from .authz import ALTER, CLUSTER, authorize
from .context import BrokerContext, RequestContext

MIN_VERSION = 0
MAX_VERSION = 0

MESSAGES = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
            ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
            ErrorCode.FEATURE_UPDATE_FAILED: "Unable to update finalized features due to an unexpected server error."}


def judge(update, existing: tuple[int, int] | None) -> str | tuple[int, int] | None:
    """Kafka's validateFeatureUpdate: the INVALID_REQUEST message, or the new (min, max) range,
    or None to delete the feature."""
    name, level, downgrade = update.feature, update.max_version_level, update.allow_downgrade
    if not name:
        return "Feature name can not be empty."
    if level < 1 and downgrade:
        return None if existing is not None else "Can not delete non-existing finalized feature."
    if level < 1:
        return (f"Can not provide maxVersionLevel: {level} less than 1 without setting the allowDowngrade "
                "flag to true in the request.")
    if existing is not None:
        if level == existing[1]:
            return (f"Can not {'downgrade' if downgrade else 'upgrade'} a finalized feature from existing "
                    f"maxVersionLevel:{existing[1]} to the same value.")
        if level < existing[1] and not downgrade:
            return (f"Can not downgrade finalized feature from existing maxVersionLevel:{existing[1]} to "
                    f"provided maxVersionLevel:{level} without setting the allowDowngrade flag in the request.")
        if downgrade and level > existing[1]:
            return (f"When the allowDowngrade flag set in the request, the provided maxVersionLevel:{level} "
                    f"can not be greater than existing maxVersionLevel:{existing[1]}.")
    supported = SUPPORTED.get(name)
    if supported is None:
        return "Could not apply finalized feature update because the provided feature is not supported."
    if not supported[0] <= level <= supported[1]:
        return ("Could not apply finalized feature update because brokers were found to have incompatible "
                "versions for the feature.")
    return (existing[0] if existing is not None else supported[0], level)


def handle(ctx: BrokerContext, rc: RequestContext, req) -> defer.Deferred:
    return defer.Deferred.fromCoroutine(_handle(ctx, rc, req))


async def _handle(ctx: BrokerContext, rc: RequestContext, req) -> dict:
    if not authorize(ctx, rc, ALTER, CLUSTER):
        return error_response(req, 0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if not ctx.is_controller or ctx.zk is None:
        return error_response(req, 0, ErrorCode.NOT_CONTROLLER)
    if not feature_versioning_enabled(str(ctx.config["inter.broker.protocol.version"])):
        return _response(ErrorCode.INVALID_REQUEST, "Feature versioning system is disabled.", [])
    node = await ctx.run_in_thread(ctx.zk.get_feature)
    existing = dict(node[1]) if node is not None and node[0] == FeatureZNode.ENABLED else {}
    target = dict(existing)
    results: dict[str, tuple[ErrorCode, str | None]] = {}
    for u in req.feature_updates:
        verdict = judge(u, existing.get(u.feature))
        if isinstance(verdict, str):
            results[u.feature] = (ErrorCode.INVALID_REQUEST, verdict)
            continue
        if verdict is None:
            target.pop(u.feature, None)
        else:
            target[u.feature] = verdict
        results[u.feature] = (ErrorCode.NONE, None)
    if target != existing:
        try:
            await ctx.run_in_thread(ctx.zk.set_finalized_features, target, node[2] if node else -1)
        except Exception:
            failed = (ErrorCode.FEATURE_UPDATE_FAILED, MESSAGES[ErrorCode.FEATURE_UPDATE_FAILED])
            results = {f: failed if code == ErrorCode.NONE else (code, m) for f, (code, m) in results.items()}
    return _response(ErrorCode.NONE, None, [{"feature": f, "error_code": int(c), "error_message": m}
                                            for f, (c, m) in results.items()])


def _response(code: ErrorCode, message: str | None, results: list[dict]) -> dict:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "results": results}


def error_response(req, version: int, code: ErrorCode) -> dict:
    return _response(code, MESSAGES.get(code), [])
