"""What every API handler gets: the broker's parts (BrokerContext) and the request's (RequestContext).

Invariant: handlers reach the rest of the broker only through ``BrokerContext``;
anything blocking (ZooKeeper) goes through ``ctx.run_in_thread`` and anything
timed through ``ctx.scheduler``, so handlers stay testable with an in-memory
metadata cache, a real LogManager in a tmp dir and ``task.Clock``.

Handler module contract (one module per API in this package):
``API`` (the protocol module), ``MIN_VERSION``/``MAX_VERSION`` (what we advertise),
``handle(ctx, rc, request) -> dict | None | Deferred[dict | None] | Completion[dict | None | Failure]``
(None = no response, e.g. acks=0) and ``error_response(request, version, code) -> dict``.
What the broker's parts answer later is a ``Completion`` (``broker/completion.py``); a handler
turns it into its response with ``respond_when``, a Completion of the response (or of the
Failure its building raised), which the request handler and the socket layer wait on as it is:
no Deferred on the path of a parked Produce or Fetch. A coroutine handler awaits ``to_deferred``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, TypeVar

from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from twisted.internet import defer
from twisted.python.failure import Failure

from odradek.broker.completion import Completion
from odradek.protocol.errors import ErrorCode, KafkaError

from ..features import FinalizedFeatures
from ..metadata_cache import MetadataCache
from ..replication.fetch_sessions import FetchSessionCache

if TYPE_CHECKING:  # the parts are built by KafkaServer; handlers only use them
    from odradek.zk.admin import AdminZkClient
    from odradek.zk.session import KafkaZkClient

    from ..config.kafka_config import KafkaConfig
    from ..security.authorizer import AclAuthorizer
    from ..security.delegation_tokens import DelegationTokenManager
    from ..controller.controller import KafkaController
    from ..group import GroupCoordinator
    from ..group.service import GroupCoordinatorService
    from ..log.manager import LogManager
    from ..log.producer_state import ProducerIdManager
    from ..quotas.request_quotas import QuotaManagers
    from ..replication.replica_manager import ReplicaManager
    from ..txn import TransactionCoordinator
    from .controller_common import ControllerView
    from .metadata_answers import MetadataAnswers

T = TypeVar("T")
R = TypeVar("R")


class RequestContext(NamedTuple):
    """Per-request facts: header fields, the listener the connection arrived on, and who sent
    it: the principal the connection authenticated as (``User:ANONYMOUS`` on a PLAINTEXT
    listener and on SSL without a client certificate, as in Kafka), and whether it logged in
    with a delegation token (the principal is then the token's owner). Built for every request:
    a tuple, cheaper to build than a dataclass."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str = "PLAINTEXT"
    peer: str = ""
    principal: str = "User:ANONYMOUS"
    token_authenticated: bool = False


@dataclass
class BrokerContext:
    """The broker's parts a handler may use. Built once by ``KafkaServer.startup``; parts that
    start later (the controller) or not at all in a handler test are None until set."""
    config: KafkaConfig
    broker_id: int
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    scheduler: Any                                   # IReactorTime: the reactor, or task.Clock in tests
    run_in_thread: Callable[..., defer.Deferred]     # deferToThread-like: every blocking (ZooKeeper) call
    zk: KafkaZkClient | None = None
    admin: AdminZkClient | None = None
    controller: KafkaController | None = None
    producer_ids: ProducerIdManager | None = None
    group_coordinator: GroupCoordinator | None = None
    group_service: GroupCoordinatorService | None = None   # WriteTxnMarkers tells it of offset markers
    txn_coordinator: TransactionCoordinator | None = None
    broker_epoch: int = -1
    controller_view: ControllerView | None = None    # who may send controller requests (None: nobody)
    authorizer: AclAuthorizer | None = None          # authorizer.class.name set: ACLs decide (broker/apis/authz.py)
    tokens: DelegationTokenManager | None = None     # delegation tokens (broker/security/delegation_tokens.py)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # the dynamic broker configs applied (``broker/config_changes.py``): /config/brokers/<id> and
    # /config/brokers/<default>; ``config`` is server.properties (``static_config``) under them
    dynamic_broker_config: dict[str, str] = field(default_factory=dict)
    dynamic_default_broker_config: dict[str, str] = field(default_factory=dict)
    static_config: KafkaConfig | None = None
    # the parts that take dynamic broker configs live (``broker/reconfigurables.py``)
    reconfigurables: list[Any] = field(default_factory=list)
    pending_auto_creates: set[str] = field(default_factory=set)
    features: FinalizedFeatures = field(default_factory=FinalizedFeatures)   # /feature (``broker/features.py``)
    quotas: QuotaManagers | None = None              # client quotas (``broker/quotas/``), kept by config_changes
    metadata_answers: MetadataAnswers | None = None  # Metadata's encoded pieces (``apis/metadata_answers.py``)
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)   # Fetch v7+ (KIP-227)

    @property
    def is_controller(self) -> bool:
        return self.controller is not None and self.controller.is_active

    def controller_admin(self) -> AdminZkClient | None:
        """The topic-admin client while this broker is the active controller (topic admin is
        the controller's job); None otherwise: the handler answers NOT_CONTROLLER."""
        return self.admin if self.is_controller else None


def wait_for_metadata(ctx: BrokerContext, condition: Callable[[], bool], timeout_ms: int) -> defer.Deferred:
    """A Deferred firing True once ``condition()`` holds after a metadata update, or False at timeout."""
    d: defer.Deferred = defer.Deferred()
    if condition():
        d.callback(True)
        return d
    timer: list[Optional[Any]] = [None]

    def check() -> None:
        if not d.called and condition():
            finish(True)

    def finish(result: bool) -> None:
        ctx.metadata_cache.remove_listener(check)
        t = timer[0]
        if t is not None and t.active():
            t.cancel()
        if not d.called:
            d.callback(result)

    ctx.metadata_cache.add_listener(check)
    timer[0] = ctx.scheduler.callLater(max(timeout_ms, 0) / 1000.0, finish, False)
    return d


# How long, beyond zookeeper.session.timeout.ms, a request answered from the metadata cache waits
# for this broker's first UpdateMetadata (``first_metadata``)
FIRST_METADATA_SLACK_MS = 3000


def first_metadata(ctx: BrokerContext) -> defer.Deferred:
    """A Deferred firing once this broker has had its first UpdateMetadata, for the requests
    answered from the metadata cache (Metadata, DescribeCluster) that arrive before it. From binding
    its listeners until then, the cache knows no broker, not even this one: a Metadata answer would
    tell a client the cluster has no brokers and no topics (librdkafka's "Partial response"), or
    that a named topic is missing and may be auto-created. Kafka 2.8 answers from the empty cache.
    A broker restarted after a kill -9 registers only once its previous ZooKeeper session has
    expired, so this waits up to zookeeper.session.timeout.ms plus FIRST_METADATA_SLACK_MS; then
    it fires anyway, and the request is answered with what is known."""
    cache = ctx.metadata_cache
    wait_ms = int(ctx.config["zookeeper.session.timeout.ms"]) + FIRST_METADATA_SLACK_MS
    return wait_for_metadata(ctx, lambda: cache.version > 0, wait_ms)


class CloseConnection(Exception):
    """Raised by the dispatcher (or a handler) to drop this client's connection, as Kafka does."""


def to_deferred(completion: Completion[T]) -> defer.Deferred:
    """A Deferred firing with the completion's value (at once if it is already done): where a
    Completion from below meets the handlers' Deferreds and coroutines."""
    d: defer.Deferred = defer.Deferred()
    completion.add_callback(d.callback)
    return d


def respond_when(done: Completion[T], build: Callable[[T], R]) -> R | Completion[R | Failure]:
    """``build(value)`` now when ``done`` is already complete (the fast path), else a Completion
    of it; an exception in ``build`` reaches the request handler either way: raised now, or later
    as the Completion's value, a Failure (whoever completes ``done``, a purgatory, is not hurt)."""
    if done.done:
        return build(done.result)
    return settle(done, build)


def settle(done: Completion[Any], fn: Callable[[Any], R]) -> Completion[R | Failure]:
    """A Completion of ``fn(value)`` once ``done`` completes; an exception raised by ``fn`` is its
    value, as a Failure. (The request layer's Completions carry a response or the Failure that
    stands in for one; ``fn`` gets those Failures too, and decides.)"""
    out: Completion[R | Failure] = Completion()

    def step(value: Any) -> None:
        try:
            result: R | Failure = fn(value)
        except Exception:
            result = Failure()
        out.complete(result)
    done.add_callback(step)
    return out


async def await_leaders(ctx: BrokerContext, wanted: dict[str, int], timeout_ms: int) -> list[str]:
    """Wait (up to ``timeout_ms``) until every topic in ``wanted`` has a leader for each of its
    ``wanted[t]`` partitions in the metadata cache; returns the topics still without them."""
    cache = ctx.metadata_cache

    def missing() -> list[str]:
        return [t for t, n in wanted.items() if not cache.topic_has_leaders(t, n)]

    if wanted and timeout_ms > 0:
        await wait_for_metadata(ctx, lambda: not missing(), timeout_ms)
    return missing() if timeout_ms > 0 else []


def admin_error(exc: Exception) -> tuple[ErrorCode, str | None]:
    """The error code a topic-admin request answers for ``exc`` raised while writing znodes:
    the KafkaError's own, NOT_CONTROLLER when the ZooKeeper session went away under the
    controller (retriable: clients find the new controller), else UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, KafkaError):
        return exc.code, exc.message
    if isinstance(exc, (SessionExpiredError, ConnectionLoss)):
        return ErrorCode.NOT_CONTROLLER, f"ZooKeeper unavailable to the controller: {type(exc).__name__}"
    return ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)
