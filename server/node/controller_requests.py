"""The active controller's requests on a node: :class:`ControllerRequests`.

Kafka's controller applies a write's records to its in-memory image as it appends them, so each
operation sees the ones before it. This controller applies committed records only, so the node
runs controller requests one at a time: a request that arrives while an earlier write is
uncommitted is parked, and runs once that write has committed (:meth:`ControllerRequests.
finish_writes` posts :class:`Resume`). A write's records go to the log as one ``ClientAppend``;
its answer leaves when that batch commits, NOT_CONTROLLER if leadership is lost first. Off the
active controller every request gets NOT_CONTROLLER at once.

Handled here: ControllerRegistration and UpdateFeatures (KIP-919, ``server.controller.features``),
BrokerRegistration, BrokerHeartbeat, UnregisterBroker and AllocateProducerIds
(``server.controller.cluster`` and ``.replication``), CreateTopics, DeleteTopics and
CreatePartitions (``server.controller.topics``), AlterPartition and AssignReplicasToDirs
(``server.controller.alter_partition``), ElectLeaders (``server.controller.elections``),
AlterPartitionReassignments and ListPartitionReassignments (``server.controller.reassignments``),
IncrementalAlterConfigs and AlterConfigs (``server.controller.configs``), and the session-expiry check that fences a broker every
``broker.session.timeout.ms`` / 8.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import trio

from kwire.errors import Errors
from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.generated.update_features_request import UpdateFeaturesRequest
from messages.metadata import encode_record
from messages.runtime import Message
from server.config import KRaftConfig
from server.controller.activation import ELIGIBLE_LEADER_REPLICAS_FEATURE
from server.controller.alter_partition import (
    BrokerPartitionEffects,
    TopicConfigLayers,
    alter_partition,
    assign_replicas_to_dirs,
)
from server.controller.configs import ConfigContext, incremental_alter_configs, legacy_alter_configs
from server.controller.controller import QuorumController
from server.controller.elections import (
    balance_partition_leaders,
    elect_leaders,
    elect_unclean_leaders,
)
from server.controller.errors import ApiError
from server.controller.features import ClusterSupport, update_features
from server.controller.reassignments import (
    alter_partition_reassignments,
    list_partition_reassignments,
)
from server.controller.replication import PRODUCER_ID_BLOCK_SIZE
from server.controller.topics import TopicDefaults, create_partitions, create_topics, delete_topics
from server.net import PendingRequest
from server.node.apis import CONTROLLER_OPS, supported_features
from server.node.controller_apis import (
    allocate_producer_ids_response,
    alter_configs_response,
    alter_partition_reassignments_response,
    alter_partition_response,
    assign_replicas_to_dirs_response,
    broker_heartbeat_response,
    broker_registration_response,
    create_partitions_response,
    create_topics_response,
    delete_topics_response,
    elect_leaders_response,
    feature_updates,
    incremental_alter_configs_response,
    list_partition_reassignments_response,
    not_controller,
    registration_response,
    unregister_broker_response,
    update_features_response,
)
from server.node.event_times import EventTimes
from server.raft.core import RaftCore
from server.raft.events import AppendResult, ClientAppend, Event, UpgradeKRaftVersion
from server.raft.kraft_upgrade import UpgradeRefused
from server.raft.roles import Leader

MAX_ELECTIONS_PER_IMBALANCE = 1000
"""Preferred-leader elections one balancing pass writes at most (``maxElectionsPerImbalance``)."""

__all__ = ["CONTROLLER_OPS", "ControllerHost", "ControllerRequests", "Resume"]

log = logging.getLogger("kwire.node")




@dataclass(slots=True)
class _ControllerWrite:
    """A controller write whose records are on their way to the log: ``answer`` is told the
    outcome (None: success) once the batch up to ``last_offset`` is committed, and
    ``committed`` the batch's last offset; ``answer`` is None for the controller's own writes
    (fencing a broker whose session expired)."""

    answer: Callable[[ApiError | None], None] | None
    last_offset: int | None = None
    committed: Callable[[int], None] | None = None


def _answering(pending: PendingRequest, respond: Callable[[ApiError | None], Message]) -> Callable[[ApiError | None], None]:
    """Answer ``pending`` with ``respond(outcome)``, unless it was answered already."""

    def answer(error: ApiError | None) -> None:
        if not pending.done:
            pending.respond(respond(error))

    return answer


@dataclass(frozen=True, slots=True)
class Resume:
    """The controller's writes are all committed (or abandoned): run the parked requests."""


def _level(controller: QuorumController) -> int:
    """The active controller's metadata.version (always replayed by then)."""
    assert controller.metadata_version is not None
    return controller.metadata_version


def _elr_enabled(controller: QuorumController) -> bool:
    """The eligible.leader.replicas.version feature is finalized at 1 or more."""
    return controller.feature_levels.get(ELIGIBLE_LEADER_REPLICAS_FEATURE, 0) >= 1


class ControllerHost(Protocol):
    """What the requests read of the node that hosts them (``server.node.driver.Node``)."""

    core: RaftCore | None
    controller: QuorumController | None
    config: KRaftConfig
    rng: random.Random

    def now_ms(self) -> int:
        """The node's clock in milliseconds."""


class ControllerRequests:
    """The controller requests of ``node`` (module docstring). ``step`` feeds the node's core
    an event and carries out its Outbox, ``post`` puts an item on the node's channel,
    ``take_token`` gives a fresh append token."""

    def __init__(
        self,
        node: ControllerHost,
        *,
        step: Callable[[Event], Awaitable[None]],
        post: Callable[[Any], None],
        take_token: Callable[[], int],
    ) -> None:
        self._node = node
        self.queue_times = EventTimes()
        """``ControllerEventManager`` EventQueueTimeMs (``server.node.event_times``)."""
        self.processing_times = EventTimes()
        """``ControllerEventManager`` EventQueueProcessingTimeMs."""
        self._step = step
        self._post = post
        self._take_token = take_token
        self.writes: dict[int, _ControllerWrite] = {}
        """Controller writes by the token of their append."""
        self.parked: deque[PendingRequest] = deque()
        """Requests waiting for the writes before them to commit."""
        self.next_check_ms: int | None = None
        """When the active controller next looks for an expired broker session."""
        self.next_balance_ms: int | None = None
        """When the active controller next looks for partitions to give back to their preferred
        leaders (``auto.leader.rebalance.enable``)."""
        self.next_unclean_ms: int | None = None
        """When the active controller next elects leaders for leaderless partitions of topics
        with ``unclean.leader.election.enable``."""

    async def resume(self) -> None:
        """Run the parked requests, in order, until one of them writes again."""
        while self.parked and not self.writes:
            await self.handle(self.parked.popleft())

    def activated(self) -> None:
        """This node became the active controller: sessions are checked from now on, and
        leadership balanced when ``auto.leader.rebalance.enable``."""
        config = self._node.config
        now = self._node.now_ms()
        self.next_check_ms = now + max(1, config.broker_session_timeout_ms // 8)
        self.next_balance_ms = (
            now + config.leader_imbalance_check_interval_seconds * 1000 if config.auto_leader_rebalance_enable else None
        )
        self.next_unclean_ms = now + config.unclean_leader_election_interval_ms

    def _due(self, timer: str) -> tuple[QuorumController, int] | None:
        """The active controller and the time now, for the periodic task whose next run is the
        attribute ``timer``; None when the task cannot run now: off the active controller (the
        timer is cleared) or while a write is uncommitted (it runs 10 ms later)."""
        controller = self.active_controller()
        if controller is None:
            setattr(self, timer, None)
            return None
        now = self._node.now_ms()
        if self.writes:  # after the writes before it are committed
            setattr(self, timer, now + 10)
            return None
        return controller, now

    async def balance_leaders(self) -> None:
        """Every ``leader.imbalance.check.interval.seconds`` the active controller elects the
        preferred replica of each partition another replica leads
        (``QuorumController.maybeBalancePartitionLeaders``)."""
        await self._run_elections(
            "next_balance_ms", balance_partition_leaders,
            self._node.config.leader_imbalance_check_interval_seconds * 1000,
            "moving leadership of %d partition(s) back to their preferred replicas",
        )

    async def elect_unclean_leaders(self) -> None:
        """Every ``unclean.leader.election.interval.ms`` the active controller elects a leader
        for each leaderless partition of a topic with ``unclean.leader.election.enable``
        (``QuorumController``'s electUnclean task)."""
        await self._run_elections(
            "next_unclean_ms", elect_unclean_leaders, self._node.config.unclean_leader_election_interval_ms,
            "unclean leader election for %d leaderless partition(s)",
        )

    async def _run_elections(self, timer: str, elect: Callable[..., list[Any]], interval_ms: int, message: str) -> None:
        """One run of a periodic election task whose next run is the attribute ``timer``: up
        to :data:`MAX_ELECTIONS_PER_IMBALANCE` records from ``elect``, appended as one write;
        the next run ``interval_ms`` later, or at once when it wrote that many."""
        due = self._due(timer)
        if due is None:
            return
        controller, now = due
        records = elect(
            image=controller.replication, cluster=controller.cluster, configs=self._topic_configs(controller),
            metadata_version=_level(controller), elr_enabled=_elr_enabled(controller),
            max_elections=MAX_ELECTIONS_PER_IMBALANCE,
        )
        setattr(self, timer, now + (0 if len(records) >= MAX_ELECTIONS_PER_IMBALANCE else interval_ms))
        if records:
            log.info(message, len(records))
            await self._append(records, None)

    def append_result(self, result: AppendResult) -> bool:
        """Note where a controller write will land (or answer NOT_CONTROLLER when it was
        refused); False when ``result`` is not a controller write's."""
        write = self.writes.get(result.token)
        if write is None:
            return False
        if result.error_code != Errors.NONE:
            del self.writes[result.token]
            if write.answer is not None:
                write.answer(self.not_controller())
            if not self.writes and self.parked:
                self._post(Resume())
        else:
            write.last_offset = result.last_offset
        return True

    async def handle(self, pending: PendingRequest) -> None:
        """A controller RPC. Kafka's controller applies a write's records to its state before
        they commit, so each operation sees the ones before it; this controller applies
        committed records only, so an operation waits (parked) until the writes before it
        are committed, and then runs. A heartbeat's contact counts at once
        (``trackBrokerHeartbeat``)."""
        body = pending.request.body
        version = pending.request.header.request_api_version
        controller = self._node.controller
        if isinstance(body, BrokerHeartbeatRequest) and controller is not None:
            controller.cluster.track_heartbeat(body.broker_id, body.broker_epoch, self._node.now_ms())
        if self.writes and self.active_controller() is not None:
            self.parked.append(pending)
            return
        started = trio.current_time()
        self.queue_times.record((started - pending.received_at) * 1000)
        try:
            await self._dispatch(pending, body, version)
        finally:
            self.processing_times.record((trio.current_time() - started) * 1000)

    async def _dispatch(self, pending: PendingRequest, body: Message, version: int) -> None:
        if isinstance(body, ControllerRegistrationRequest):
            await self._operate(pending, lambda c: (c.register_controller(body), None), registration_response)
        elif isinstance(body, UpdateFeaturesRequest):
            await self._update_features(pending, body, version)
        elif isinstance(body, BrokerRegistrationRequest):
            await self._register_broker(pending, body)
        elif isinstance(body, BrokerHeartbeatRequest):
            await self._broker_heartbeat(pending, body)
        elif isinstance(body, UnregisterBrokerRequest):
            await self._operate(
                pending,
                lambda c: (c.cluster.unregister_broker(body.broker_id, self._partition_effects(c)), None),
                unregister_broker_response,
            )
        elif isinstance(body, AllocateProducerIdsRequest):
            await self._allocate_producer_ids(pending, body)
        elif isinstance(body, CreateTopicsRequest):
            await self._operate(pending, partial(self._create_topics, body), partial(create_topics_response, body))
        elif isinstance(body, DeleteTopicsRequest):
            await self._operate(
                pending,
                lambda c: delete_topics(body, version, image=c.replication, delete_enabled=self._node.config.delete_topic_enable),
                partial(delete_topics_response, body, version),
            )
        elif isinstance(body, CreatePartitionsRequest):
            await self._operate(
                pending,
                lambda c: create_partitions(
                    body, image=c.replication, cluster=c.cluster, metadata_version=_level(c), rng=self._node.rng
                ),
                partial(create_partitions_response, body),
            )
        elif isinstance(body, AlterPartitionRequest):
            await self._operate(
                pending,
                lambda c: alter_partition(body, version, **self._partition_context(c)),
                alter_partition_response,
            )
        elif isinstance(body, ElectLeadersRequest):
            await self._operate(
                pending,
                lambda c: elect_leaders(body, version, **self._partition_context(c)),
                partial(elect_leaders_response, body),
            )
        elif isinstance(body, AlterPartitionReassignmentsRequest):
            await self._operate(
                pending,
                lambda c: alter_partition_reassignments(body, version, **self._partition_context(c)),
                partial(alter_partition_reassignments_response, body),
            )
        elif isinstance(body, ListPartitionReassignmentsRequest):
            await self._operate(
                pending,
                lambda c: ([], list_partition_reassignments(body, image=c.replication)),
                partial(list_partition_reassignments_response, body),
            )
        elif isinstance(body, AssignReplicasToDirsRequest):
            await self._operate(
                pending,
                lambda c: assign_replicas_to_dirs(
                    body, **self._partition_context(c),
                ),
                assign_replicas_to_dirs_response,
            )
        elif isinstance(body, IncrementalAlterConfigsRequest):
            await self._operate(
                pending,
                lambda c: incremental_alter_configs(body, self._config_context(c)),
                partial(incremental_alter_configs_response, body),
            )
        elif isinstance(body, AlterConfigsRequest):
            await self._operate(
                pending,
                lambda c: legacy_alter_configs(body, self._config_context(c)),
                partial(alter_configs_response, body),
            )

    async def _operate(
        self,
        pending: PendingRequest,
        operation: Callable[[QuorumController], tuple[list[tuple[Message, int]], Any]],
        respond: Callable[[Any], Message],
    ) -> None:
        """Run ``operation`` on the active controller: its records go to the log as one batch
        and ``respond`` builds the answer from its result once they commit (at once when there
        are none). NOT_CONTROLLER off the active controller, or an ApiError the operation
        raises, is answered at once through ``respond`` too."""
        controller = self.active_controller()
        if controller is None:
            pending.respond(respond(self.not_controller()))
            return
        try:
            records, result = operation(controller)
        except ApiError as exc:
            pending.respond(respond(exc))
            return
        await self._append_write(pending, records, lambda error: respond(error or result))

    def _topic_configs(self, controller: QuorumController) -> TopicConfigLayers:
        """The layers a topic's effective configs come from, on this node."""
        config = self._node.config
        return TopicConfigLayers(controller.replication, config.node_id, config.raw)

    def _partition_context(self, controller: QuorumController) -> dict[str, Any]:
        """What the partition operations (AlterPartition, ElectLeaders, AssignReplicasToDirs)
        read: the image, the brokers, the topic configs, the metadata.version and whether ELR
        is enabled."""
        return {
            "image": controller.replication, "cluster": controller.cluster, "configs": self._topic_configs(controller),
            "metadata_version": _level(controller), "elr_enabled": _elr_enabled(controller),
        }

    def _partition_effects(self, controller: QuorumController) -> BrokerPartitionEffects:
        """What a broker's state change does to the partitions, on this node's image."""
        return BrokerPartitionEffects(**self._partition_context(controller))

    def _config_context(self, controller: QuorumController) -> ConfigContext:
        """What config changes are checked against: the image, the node ids a broker resource
        may name (registered brokers and controllers, voters), this node's properties."""
        known = set(controller.cluster.registrations) | set(controller.controllers)
        core = self._node.core
        if core is not None:
            known |= core.voters.ids
        return ConfigContext(controller.replication, frozenset(known), self._node.config.raw, _elr_enabled(controller))

    def _create_topics(self, body: CreateTopicsRequest, controller: QuorumController) -> tuple[list[Any], Any]:
        """CreateTopics (``server.controller.topics.create_topics``), each topic's outcome logged."""
        config = self._node.config
        records, results = create_topics(
            body,
            image=controller.replication,
            cluster=controller.cluster,
            metadata_version=_level(controller),
            elr_enabled=_elr_enabled(controller),
            defaults=TopicDefaults(
                num_partitions=config.num_partitions,
                replication_factor=config.default_replication_factor,
                node_id=config.node_id,
                static_config=config.raw,
            ),
            rng=self._node.rng,
        )
        for result in results:
            log.info("CreateTopics %s: %s %s", result.name, Errors.of(result.error_code).name, result.error_message or "")
        return records, results

    def _finalized_with_kraft(self, controller: QuorumController) -> dict[str, int]:
        """The finalized levels a broker registers against: the FeatureLevelRecords' and the
        quorum's kraft.version (``QuorumController.registerBroker``)."""
        assert self._node.core is not None
        finalized = {name: level for name, level in controller.feature_levels.items() if level > 0}
        finalized["kraft.version"] = self._node.core.kraft_version
        return finalized

    async def _register_broker(self, pending: PendingRequest, body: BrokerRegistrationRequest) -> None:
        """BrokerRegistration (``ClusterControlManager.registerBroker``): a new incarnation's
        epoch is the offset its batch will start at."""
        controller, core = self.active_controller(), self._node.core
        if controller is None or core is None:
            pending.respond(broker_registration_response(self.not_controller()))
            return
        next_offset = core.next_append_offset
        assert next_offset is not None and controller.metadata_version is not None
        try:
            records, epoch = controller.cluster.register_broker(
                body,
                new_epoch=next_offset,
                finalized=self._finalized_with_kraft(controller),
                metadata_version=controller.metadata_version,
                now_ms=self._node.now_ms(),
                request_version=pending.request.header.request_api_version,
                partitions=self._partition_effects(controller),
            )
        except ApiError as exc:
            log.info("broker %d registration refused: %s %s", body.broker_id, exc.error.name, exc.message)
            pending.respond(broker_registration_response(exc))
            return
        log.info("registering broker %d (incarnation %s) with broker epoch %d", body.broker_id, body.incarnation_id, epoch)
        await self._append_write(pending, records, lambda error: broker_registration_response(error, epoch))

    async def _broker_heartbeat(self, pending: PendingRequest, body: BrokerHeartbeatRequest) -> None:
        """BrokerHeartbeat (``QuorumController.processBrokerHeartbeat``): answered when its
        records (a fencing change) are committed, at once when it has none."""
        controller = self.active_controller()
        if controller is None:
            pending.respond(broker_heartbeat_response(self.not_controller()))
            return
        assert controller.metadata_version is not None
        try:
            records, reply = controller.cluster.process_heartbeat(
                body, metadata_version=controller.metadata_version, partitions=self._partition_effects(controller)
            )
        except ApiError as exc:
            pending.respond(broker_heartbeat_response(exc))
            return
        for record, _ in records:
            log.info("broker %d heartbeat: %s", body.broker_id, record)
        committed = None
        if reply.in_controlled_shutdown:
            broker_id = body.broker_id
            committed = lambda offset: controller.cluster.controlled_shutdown_committed(broker_id, offset)  # noqa: E731
        await self._append_write(
            pending, records, lambda error: broker_heartbeat_response(error or reply), committed=committed
        )

    async def _allocate_producer_ids(self, pending: PendingRequest, body: AllocateProducerIdsRequest) -> None:
        """AllocateProducerIds (``ProducerIdControlManager``): a block of 1000 ids for a
        registered broker at its epoch, answered once the record moving the next id is
        committed. STALE_BROKER_EPOCH for another epoch."""
        controller = self.active_controller()
        if controller is None:
            pending.respond(allocate_producer_ids_response(self.not_controller()))
            return
        try:
            controller.cluster.check_broker_epoch(body.broker_id, body.broker_epoch)
            records, start = controller.replication.allocate_producer_ids(body.broker_id, body.broker_epoch)
        except ApiError as exc:
            pending.respond(allocate_producer_ids_response(exc))
            return
        await self._append_write(
            pending, records, lambda error: allocate_producer_ids_response(error, start, PRODUCER_ID_BLOCK_SIZE)
        )

    async def check_sessions(self) -> None:
        """Every ``broker.session.timeout.ms`` / 8 the active controller fences one broker whose
        session expired, and looks again at once after it found one
        (``QuorumController.registerMaybeFenceStaleBroker``)."""
        due = self._due("next_check_ms")
        if due is None:
            return
        controller, now = due
        assert controller.metadata_version is not None
        records = controller.cluster.maybe_fence_stale_broker(
            now, metadata_version=controller.metadata_version, partitions=self._partition_effects(controller)
        )
        self.next_check_ms = now + (0 if records is not None else max(1, self._node.config.broker_session_timeout_ms // 8))
        if records:
            for record, _ in records:
                log.info("fencing a broker whose session expired: %s", record)
            await self._append(records, None)

    def active_controller(self) -> QuorumController | None:
        """The controller when this node is the active one and has replayed a
        metadata.version (Kafka's active controller knows it from its first record on)."""
        core, controller = self._node.core, self._node.controller
        if (
            core is None
            or controller is None
            or not isinstance(core.state, Leader)
            or controller.active_epoch != core.epoch
            or controller.metadata_version is None
        ):
            return None
        return controller

    def not_controller(self) -> ApiError:
        """NOT_CONTROLLER naming the leader, or none while this node leads without being the
        active controller yet."""
        core = self._node.core
        leader = None if core is None else core.leader_and_epoch.leader_id
        return not_controller(None if leader == self._node.config.node_id and self.active_controller() is None else leader)

    async def _append_write(
        self,
        pending: PendingRequest,
        records: list[tuple[Message, int]],
        respond: Callable[[ApiError | None], Message],
        *,
        committed: Callable[[int], None] | None = None,
    ) -> None:
        if not records:
            pending.respond(respond(None))
            return
        await self._append(records, _answering(pending, respond), committed)

    async def _append(
        self,
        records: list[tuple[Message, int]],
        answer: Callable[[ApiError | None], None] | None,
        committed: Callable[[int], None] | None = None,
    ) -> None:
        """Append ``records`` as one batch and remember the write until it commits."""
        token = self._take_token()
        self.writes[token] = _ControllerWrite(answer, committed=committed)
        # controller writes run one at a time: nothing can join this one while it lingers
        await self._step(ClientAppend(token, tuple(encode_record(m, v) for m, v in records), drain_now=True))

    def finish_writes(self, committed_offset: int | None) -> None:
        """Answer the writes committed up to ``committed_offset`` (inclusive); with None, fail
        every write with NOT_CONTROLLER (leadership lost)."""
        for token, write in list(self.writes.items()):
            if committed_offset is None:
                error: ApiError | None = self.not_controller()
            elif write.last_offset is not None and write.last_offset <= committed_offset:
                error = None
            else:
                continue
            del self.writes[token]
            if error is None and write.committed is not None and write.last_offset is not None:
                write.committed(write.last_offset)
            if write.answer is not None:
                write.answer(error)
        if not self.writes and self.parked:
            self._post(Resume())

    async def _update_features(self, pending: PendingRequest, body: UpdateFeaturesRequest, version: int) -> None:
        """UpdateFeatures (``QuorumController.updateFeatures``, ``server.controller.features``):
        a kraft.version upgrade is checked by the raft leader and its control batch appended
        before the request's own records (a NoOpRecord)."""
        controller, core = self.active_controller(), self._node.core
        if controller is None or core is None:
            pending.respond(update_features_response(body, version, self.not_controller(), wrong_controller=True))
            return
        epoch = controller.active_epoch
        assert epoch is not None
        kraft_level: int | None = None

        def upgrade_kraft(level: int, validate_only: bool) -> None:
            nonlocal kraft_level
            assert core is not None
            try:
                needed = core.check_kraft_upgrade(epoch, level)
            except UpgradeRefused as exc:
                raise ApiError(exc.error, exc.message) from None
            if needed and not validate_only:
                kraft_level = level

        finalized = {name: level for name, level in controller.feature_levels.items() if level > 0}
        try:
            records = update_features(
                feature_updates(body, version),
                finalized=finalized,
                kraft_version=core.kraft_version,
                support=ClusterSupport(
                    node_id=self._node.config.node_id,
                    local={f.name: (f.min_version, f.max_version) for f in supported_features()},
                    brokers={i: r.features for i, r in controller.cluster.registrations.items()},
                    controllers={i: r.features for i, r in controller.controllers.items()},
                    quorum_node_ids=frozenset(v.node_id for v in self._node.config.controller_quorum_voters),
                ),
                validate_only=bool(body.validate_only) if version >= 1 else False,
                upgrade_kraft=upgrade_kraft,
            )
        except ApiError as exc:
            pending.respond(update_features_response(body, version, exc))
            return
        if kraft_level is not None:
            await self._step(UpgradeKRaftVersion(kraft_level))
        await self._append_write(pending, records, lambda error: update_features_response(body, version, error))

    # ------------------------------------------------------------------ registration
