"""The "brokers" simulation: simulated brokers and an admin send controller RPCs to the simulated
quorum's leader while leaders crash and the network splits; every node runs the node's own
controller host (``server.controller.host.QuorumController``) beside its core.

The simulation drives each host with the node's own stepping function
(``server.controller.stepping.steps``, as ``server.node.driver`` does): every event the core
takes, and the host's deadline (a Tick that lets it replay its next slice), is one turn of
core and host, in which the host is polled after the core's step and its appends step the core
at once (consecutive ones in one step); the core feeds the host what it commits, the snapshots
it loads and the results of its appends. The simulation writes the host's snapshots to the
in-memory log and routes the host's replies back to the broker or admin that asked. Everything the controller decides (activation, writes applied as they are
appended and the return to the committed image when a leadership is lost with some in flight,
broker sessions and fencing, NoOps, periodic elections, snapshot triggers) is the host's.

Brokers (each with at most one request in flight, resent after :data:`REQUEST_TIMEOUT_MS`)
register until they have an epoch, then heartbeat (reporting the leader's high watermark as
their metadata offset); they crash (stop heartbeating), shut down in a controlled way
(heartbeats asking to shut down until the controller says they may) and come back as new
incarnations. An admin creates and deletes topics, starts and cancels partition
reassignments, and sends the AlterPartitions of partition leaders that shrink and expand their
ISR (which complete reassignments). Half the seeds finalize eligible.leader.replicas.

Checked after every committed batch, on every node whose image holds nothing beyond it (the
active controller applies its writes when it appends them, so its image is checked at the
batches that leave nothing applied ahead):

* the records replay without a fault (the host's ERROR log fails the run);
* a new incarnation's broker epoch is the offset its registration's batch starts at (the
  changes of its predecessor's partitions, then its RegisterBrokerRecord), so broker epochs
  are unique; the same incarnation re-registering keeps its epoch;
* every node that replayed up to the same offset holds the same image (registrations, feature
  levels, topics, partitions, configs and producer ids);
* a node that loads a snapshot holds the image every node held at its offset;
* every partition's leader is in its ISR (or there is none), its ISR is within its replicas,
  its epochs never go back, and no two leaders ever share one leader epoch of a partition;
* a partition's replicas are distinct, its adding and removing replicas are among them, and
  the image's index of reassigning partitions names exactly those with either (the two lists
  may overlap: a move that replaces one in progress and adds nothing keeps the old adding
  replicas, as Kafka's controller does);
* no partition is led by a broker that is fenced or in controlled shutdown.

At the end, with the network healed and every broker back, each broker is registered and
unfenced within a bounded time.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from kwire.uuid import Uuid
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.runtime import Message
from server.controller.cluster import ReplayError
from server.controller.host import ControllerOutbox, QuorumController
from server.controller.operation_context import ControllerConfig
from server.controller.stepping import run_steps, steps
from server.raft.events import AppendResult, Event, Outbox, Tick
from server.raft.types import OffsetAndEpoch
from storage.snapshots import read_snapshot_content
from tools.simulate.broker_checks import BrokerChecks, image_digest
from tools.simulate.broker_clients import CLUSTER_ID, BrokerClients
from tools.simulate.cluster import Cluster
from tools.simulate.nodes import SimNode
from tools.simulate.trace import trace_line

__all__ = ["BALANCE_INTERVAL_MS", "SESSION_TIMEOUT_MS", "BrokerCluster"]

SESSION_TIMEOUT_MS = 3000
"""``broker.session.timeout.ms`` of the seeded runs' controllers."""
BALANCE_INTERVAL_MS = 2000
"""``leader.imbalance.check.interval.seconds`` of the simulated controllers, short enough to
run a few times a run."""


class _FailingLog:
    """The host's log: an ERROR (a committed record that does not replay) fails the run."""

    def __init__(self, cluster: BrokerCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    def info(self, msg: str, *args: Any) -> None:
        if "going back to the committed image" in msg:
            self.cluster.reverts += 1

    def error(self, msg: str, *args: Any) -> None:
        self.cluster.fail(f"ReplayFault: node {self.node_id}: {msg % args}")


class BrokerCluster(Cluster, BrokerClients, BrokerChecks):
    """A simulated quorum whose nodes run a controller host each (module docstring)."""

    def __init__(self, seed: int, voters: int, *, metadata_version: int, elr: bool, snapshot_bytes: int, **kwargs: Any) -> None:
        self.metadata_version = metadata_version
        self.bootstrap = [(FeatureLevelRecord(name="metadata.version", feature_level=metadata_version), 0)]
        if elr:
            self.bootstrap.append((FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0))
        self.snapshot_bytes = snapshot_bytes
        self.hosts: dict[int, QuorumController] = {}
        self.host_timers: dict[int, int] = {}
        """node id -> when its host wants to be polled next."""
        self.next_serial = 0
        self.pending: dict[int, tuple[Any, Any]] = {}
        """request serial -> (who asked: a SimBroker or "admin", what the admin remembers)"""
        self.admin_in_flight: int | None = None
        self.admin_sent_ms = 0
        self.image_snapshot_loads = 0
        self.values_before: dict[int, int] = {}
        """offset -> how many data records were committed before it (for the base scenario's
        committed-data check after a snapshot load)."""
        self.images: dict[int, bytes] = {}
        """offset -> digest of the image every node holds once it replayed up to it."""
        self.decoded: dict[bytes, list[Message | None]] = {}
        """Bytes of a committed batch -> its records the checks read, decoded (None for the
        others): decoded once for every node, as the checks only read them."""
        self.partition_reprs: dict[int, tuple[Any, str]] = {}
        """The reprs of the partitions of the images digested (``image_digest``)."""
        self.registrations: dict[int, dict[int, tuple[Uuid, int]]] = {}
        """node id -> broker id -> (incarnation, epoch) of its latest replayed registration."""
        self.epochs_seen: dict[tuple[int, int], Uuid] = {}
        """(broker id, broker epoch) -> the incarnation that registered with it."""
        self.broker_ops = 0
        self.partition_leaders: dict[tuple[Uuid, int, int], int] = {}
        """(topic id, partition, leader epoch) -> the leader any node replayed for it."""
        self.admin_rng = random.Random(f"admin/{seed}")
        self.topics_created = 0
        self.topics_ever: set[str] = set()
        """Names of the topics any node replayed."""
        self.isr_changes = 0
        self.reassignments = 0
        """Partitions AlterPartitionReassignments moved or cancelled."""
        self.reassignments_completed = 0
        """AlterPartition changes that completed a reassignment."""
        self.controlled_shutdowns = 0
        self.leader_moves = 0
        self.speculative_commits = 0
        self.reverts = 0
        """Times a host went back to its committed image."""
        """Batches committed while the active controller's image held records beyond them."""
        """PartitionChangeRecords committed with a broker's fencing, unfencing, shutdown or new incarnation."""
        super().__init__(seed, voters, **kwargs)

    # ------------------------------------------------------------------ driving the hosts

    def host(self, node: SimNode) -> QuorumController:
        """The node's host, new for each incarnation of the node (a restart starts empty)."""
        host = self.hosts.get(node.node_id)
        if host is None or host.raft is not node.core:
            assert node.core is not None
            host = self.hosts[node.node_id] = QuorumController(
                self.controller_config(node),
                bootstrap=self.bootstrap,
                raft=node.core,
                now_ms=self.now,
                rng=random.Random(f"controller/{self.seed}/{node.node_id}/{node.incarnation}"),
                log=self.host_log(node),
            )
            self.registrations[node.node_id] = {}
            self.host_timers.pop(node.node_id, None)
        return host

    def controller_config(self, node: SimNode) -> ControllerConfig:
        """The settings of the node's host: short sessions and rebalance intervals, so that a
        seeded run of a few simulated seconds sees them act."""
        return ControllerConfig(
            node_id=node.node_id,
            cluster_id=CLUSTER_ID,
            static_config={},
            session_timeout_ms=SESSION_TIMEOUT_MS,
            leader_imbalance_check_interval_ms=BALANCE_INTERVAL_MS,
            unclean_leader_election_interval_ms=BALANCE_INTERVAL_MS,
            snapshot_max_bytes=self.snapshot_bytes,
            snapshot_max_interval_ms=0,
        )

    def host_log(self, node: SimNode) -> Any:
        """The host's log: an ERROR line fails the run."""
        return _FailingLog(self, node.node_id)

    def step(self, node_id: int, event: Event, seen_text: str | None = None) -> None:
        """Every event steps the node's core and host together, as the node's driver does
        (:meth:`turn`); a timer's Tick lets the host replay its next slice."""
        self.turn(self.nodes[node_id], [event], load=isinstance(event, Tick), seen_text=seen_text)

    def turn(self, node: SimNode, events: list[Event], *, load: bool, seen_text: str | None = None) -> None:
        """One turn of the node's core and host (``server.controller.stepping.steps``, the
        driver's own): each core step traced and carried out (its fsync completes later, as a
        scheduled event), each host outbox carried out."""
        core = node.core
        assert core is not None
        stepped: list[Sequence[Event]] = []
        text = [seen_text]  # the delivered message's trace text, for the first step's line only

        def apply(out: Outbox) -> bool:
            self.touched.add(node.node_id)
            if self.tracing:
                texts = self.texts = {}
                self.trace.update(trace_line(self.now, node.node_id, stepped[-1], out, core,
                                             text.pop() if text else None, texts))
            Cluster.apply(self, node, out)
            return False

        run_steps(steps(core, self.host(node), events, lambda: self.now, load=load, on_step=stepped.append),
                  apply, lambda out: self.carry_out(node, out))

    def carry_out(self, node: SimNode, out: ControllerOutbox) -> None:
        for handle, response in out.replies:
            self.on_reply(handle, response)
        if out.snapshot is not None:
            self.write_snapshot(node, out.snapshot.snapshot_id, out.snapshot.build())
        deadline = out.next_deadline_ms
        if deadline is not None and self.host_timers.get(node.node_id) != deadline:
            self.host_timers[node.node_id] = deadline
            incarnation = node.incarnation
            self.schedule(max(deadline, self.now), "call", lambda: self._host_timer(node.node_id, incarnation, deadline))

    def _host_timer(self, node_id: int, incarnation: int, deadline: int) -> None:
        node = self.nodes[node_id]
        if node.running and node.incarnation == incarnation and self.host_timers.get(node_id) == deadline:
            del self.host_timers[node_id]
            self.turn(node, [Tick()], load=True)  # the driver's deadline: a Tick, the host may load

    def write_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        core = node.core
        assert core is not None
        if snapshot_id.offset <= node.log.log_start_offset:
            return
        core.view.validate_snapshot_id(snapshot_id)
        node.log.create_snapshot(snapshot_id, data)
        node.log.delete_before_snapshot()
        self.snapshots_taken += 1

    def on_append_result(self, node: SimNode, result: AppendResult) -> None:
        self.host(node).append_result(result)

    def on_load_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch) -> None:
        """The node's host starts again from the snapshot's image; it must then hold the image
        every node held at that offset (SnapshotImage). The committed-data check of the base
        scenario goes on from the values committed before the snapshot."""
        size = node.log.snapshot_size(snapshot_id)
        assert size is not None
        records = read_snapshot_content(node.log.read_snapshot(snapshot_id, 0, size)).data_records()
        node.values = list(self.committed_values[: self.values_before[snapshot_id.offset]])
        node.delivered_next = snapshot_id.offset
        host = self.host(node)
        try:
            host.load_snapshot(self.now, snapshot_id, records)
        except ReplayError as exc:
            self.fail(f"ReplayFault: node {node.node_id} loading snapshot {snapshot_id}: {exc}")
        self.registrations[node.node_id] = {
            r.broker_id: (r.incarnation_id, r.epoch) for r in host.controller.cluster.registrations.values()
        }
        self.image_snapshot_loads += 1
        if image_digest(host.controller, self.partition_reprs) != self.images[snapshot_id.offset]:
            self.fail(f"SnapshotImage: node {node.node_id} loaded snapshot {snapshot_id} into another image")

    def on_committed(self, node: SimNode, batch: Any) -> None:
        super().on_committed(node, batch)
        first_time = batch.last_offset + 1 not in self.images
        if not batch.is_control:
            self._check_records(node, batch, first_time)
        self.values_before.setdefault(batch.last_offset + 1, len(node.values))
        host = self.host(node)
        host.commit(self.now, batch)
        if host.speculating:
            self.speculative_commits += 1
            return  # the active controller's image is ahead of the batch: checked once it is not
        controller = host.controller
        self._check_partitions(node, controller)
        self.topics_ever.update(controller.replication.topic_ids)
        digest = image_digest(controller, self.partition_reprs)
        known = self.images.setdefault(batch.last_offset + 1, digest)
        if known != digest:
            self.fail(f"SameImage: node {node.node_id} differs from another node at offset {batch.last_offset + 1}")

