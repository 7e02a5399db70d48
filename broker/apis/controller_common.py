"""What the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) share: they are
served only when they come from the controller ZooKeeper has now, to this very registration.

Invariant: a controller request reaches its handler's work only if its broker epoch equals
this broker's current registration (the czxid of /brokers/ids/<id>, owned by our session)
and its controller id and epoch equal /controller and /controller_epoch; otherwise it is
answered STALE_BROKER_EPOCH or STALE_CONTROLLER_EPOCH and changes nothing. This goes beyond
Kafka 2.8, which takes any higher controller epoch on trust and a broker epoch of -1 (or a
request version without one): a plain socket can no longer delete a partition, hijack the
broker's controller epoch or advertise a foreign host. What ZooKeeper said last is cached
(``ControllerView``); a request naming a controller epoch or broker epoch newer than the
cache costs one ZooKeeper read in the thread pool, so each election or re-registration
costs one read per broker, and the steady state none.
"""
from __future__ import annotations

import logging
from typing import Callable, TypeVar

from twisted.internet import defer

from odradek.protocol.errors import ErrorCode

from .context import BrokerContext

log = logging.getLogger(__name__)

R = TypeVar("R")
ControllerState = tuple[int, int, int]   # (controller id, controller epoch, our broker epoch); -1 = none


class ControllerView:
    """The controller and this broker's epoch as ZooKeeper said last; ``read`` asks again
    (blocking: run in the thread pool)."""

    def __init__(self, read: Callable[[], ControllerState]) -> None:
        self.read = read
        self.known: ControllerState | None = None

    def learn(self, state: ControllerState) -> None:
        """Take what ZooKeeper said, unless an answer to a later read came first (both epochs
        only grow)."""
        known = self.known
        if known is None or (state[1], state[2]) >= (known[1], known[2]):
            self.known = state

    def judge(self, controller_id: int, controller_epoch: int, broker_epoch: int, *,
              settled: bool = False) -> ErrorCode | None:
        """The verdict from what is known, or None when the request is newer than that and
        ZooKeeper must be asked first; ``settled`` (ZooKeeper was just asked): newer is stale."""
        known = self.known
        if known is None:
            return ErrorCode.STALE_CONTROLLER_EPOCH if settled else None
        known_id, known_epoch, own_epoch = known
        if broker_epoch != own_epoch:
            return ErrorCode.STALE_BROKER_EPOCH if settled or broker_epoch < own_epoch else None
        if controller_epoch != known_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH if settled or controller_epoch < known_epoch else None
        return ErrorCode.NONE if controller_id == known_id else ErrorCode.STALE_CONTROLLER_EPOCH


def from_the_controller(ctx: BrokerContext, name: str, req, has_broker_epoch: bool,
                        serve: Callable[[], R], refuse: Callable[[ErrorCode], R]) -> R | defer.Deferred:
    """``serve()`` if ``req`` comes from the current controller to this registration, else
    ``refuse(code)``; a Deferred of either when ZooKeeper had to be asked."""
    view = ctx.controller_view
    broker_epoch = req.broker_epoch if has_broker_epoch else -1

    def decide(verdict: ErrorCode) -> R:
        if verdict == ErrorCode.NONE:
            return serve()
        log.warning("refusing %s from controller %d (controller epoch %d, broker epoch %d): %s; ZooKeeper "
                    "has controller %s", name, req.controller_id, req.controller_epoch, broker_epoch,
                    verdict.name, None if view is None else view.known)
        return refuse(verdict)

    if view is None:
        return decide(ErrorCode.STALE_CONTROLLER_EPOCH)   # no view of ZooKeeper: trust no one
    verdict = view.judge(req.controller_id, req.controller_epoch, broker_epoch)
    if verdict is not None:
        return decide(verdict)

    def learned(state: ControllerState) -> R:
        view.learn(state)
        settled = view.judge(req.controller_id, req.controller_epoch, broker_epoch, settled=True)
        assert settled is not None
        return decide(settled)
    return ctx.run_in_thread(view.read).addCallback(learned)
