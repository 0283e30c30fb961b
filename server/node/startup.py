"""What the node reads from disk before the core starts (``KafkaRaftServer`` /
``KafkaRaftManager`` start-up).

In order: meta.properties of the metadata log directory (cluster id, node id, directory id),
the metadata log (recovered: a corrupt tail is truncated by CRC), quorum-state, and the
bootstrap voters: those of the bootstrap checkpoint ``00000000000000000000-0000000000.checkpoint``
that formatting with ``--standalone`` / ``--initial-controllers`` writes (kraft.version 1), else
those of ``controller.quorum.voters`` (kraft.version 0), else none: a directory formatted with
``--no-initial-controllers`` starts as an observer that finds the voters through
``controller.quorum.bootstrap.servers``; and the bootstrap metadata: the
records of the 0-0 checkpoint when they hold metadata.version (Kafka 4.2+'s layout), else
``bootstrap.checkpoint`` (3.9's), else kwire's default release version.

Blocking file I/O throughout: the node calls :func:`load_stored_state` off the event loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from kwire.uuid import Uuid
from server.config import KRaftConfig
from server.controller.delegation_tokens import TokenSettings
from server.controller.operation_context import ControllerConfig
from server.node.plugins import load_plugins
from server.raft.control import voter_set_from_record
from server.raft.core import RaftCore
from server.raft.types import ElectionState, Endpoint, ReplicaIdentity, ReplicaKey, VoterSet
from server.storage_raft_log import StorageRaftLog
from storage.bootstrap import (
    BootstrapMetadata,
    bootstrap_from_checkpoint_records,
    default_bootstrap_metadata,
    read_bootstrap_checkpoint,
)
from storage.format import check_formatted
from storage.log import MetadataLog
from storage.quorum_state import FileQuorumStateStore, StoredElectionState
from storage.segment import LogConfig
from storage.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    load_snapshot_batches,
    read_snapshot,
    snapshot_path,
)

__all__ = [
    "NodeStartupError",
    "StoredState",
    "controller_config",
    "from_stored_election",
    "load_stored_state",
    "new_core",
    "to_stored_election",
]


class NodeStartupError(RuntimeError):
    """The node cannot start: unformatted directory, no voters, unreadable state."""


@dataclass(frozen=True, slots=True)
class StoredState:
    """What start-up read: the opened metadata log (the caller closes it), its quorum-state
    store, the identity, election state, voters and kraft.version the core starts from, and the
    bootstrap metadata a first active controller writes to an empty log."""

    metadata_log: MetadataLog
    store: FileQuorumStateStore
    cluster_id: str
    directory_id: Uuid
    election: ElectionState | None
    voters: VoterSet
    kraft_version: int
    bootstrap: BootstrapMetadata


def controller_config(config: KRaftConfig, cluster_id: str, *, guard_plugins: bool = False) -> ControllerConfig:
    """The settings the controller host decides by, from server.properties (``config``) and
    the cluster id meta.properties holds, with the plug-ins it names loaded and configured
    (``server.node.plugins``; raises ConfigError); ``guard_plugins`` (a running node) puts
    each plug-in call under ``kwire.plugin.timeout.ms`` (``server.node.plugin_guard``), off
    for the deterministic simulation, which must not depend on a wall clock."""
    return ControllerConfig(
        node_id=config.node_id,
        cluster_id=cluster_id,
        static_config=config.raw,
        quorum_node_ids=frozenset(v.node_id for v in config.controller_quorum_voters),
        min_insync_replicas=config.min_insync_replicas,
        session_timeout_ms=config.broker_session_timeout_ms,
        num_partitions=config.num_partitions,
        default_replication_factor=config.default_replication_factor,
        delete_topic_enable=config.delete_topic_enable,
        auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
        leader_imbalance_check_interval_ms=config.leader_imbalance_check_interval_seconds * 1000,
        unclean_leader_election_interval_ms=config.unclean_leader_election_interval_ms,
        max_idle_interval_ms=config.metadata_max_idle_interval_ms,
        snapshot_max_bytes=config.metadata_log_max_record_bytes_between_snapshots,
        snapshot_max_interval_ms=config.metadata_log_max_snapshot_interval_ms,
        unsafe_ack_on_append=config.unsafe_test_ack_on_append,
        authorizer=bool(config.authorizer_class_name),
        super_users=frozenset(config.super_users),
        allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
        tokens=TokenSettings(
            secret_key=config.delegation_token_secret_key,
            max_lifetime_ms=config.delegation_token_max_lifetime_ms,
            expiry_time_ms=config.delegation_token_expiry_time_ms,
            expiry_check_interval_ms=config.delegation_token_expiry_check_interval_ms,
        ),
        plugins=load_plugins(config.raw, guard=guard_plugins),
    )


def new_core(
    config: KRaftConfig, stored: StoredState, endpoints: tuple[Endpoint, ...], rng: random.Random, now_ms: int
) -> RaftCore:
    """The KRaft core of a node that advertises ``endpoints``, starting from what start-up read
    (``stored``) at ``now_ms``; ``rng`` draws its election timeouts."""
    return RaftCore(
        identity=ReplicaIdentity(
            node_id=config.node_id,
            directory_id=stored.directory_id,
            cluster_id=stored.cluster_id,
            endpoints=endpoints,
            supported_kraft_versions=(0, 1),
        ),
        log=StorageRaftLog(stored.metadata_log, unsafe_fsync_interval_ms=config.unsafe_test_fsync_interval_ms),
        voters=stored.voters,
        rng=rng,
        now_ms=now_ms,
        election=stored.election,
        kraft_version=stored.kraft_version,
        config=config.quorum_config(),
        bootstrap_servers=[
            Endpoint(config.controller_listener_names[0], b.host, b.port) for b in config.controller_quorum_bootstrap_servers
        ],
    )


def to_stored_election(state: ElectionState, voters: VoterSet) -> StoredElectionState:
    """The core's election state in quorum-state's form (with the voter ids data_version 0
    records)."""
    voted = state.voted_key
    return StoredElectionState(
        epoch=state.epoch,
        leader_id=state.leader_id,
        voted_id=None if voted is None else voted.id,
        voted_directory_id=None if voted is None else voted.directory_id,
        voters=voters.ids,
    )


def from_stored_election(state: StoredElectionState) -> ElectionState:
    """quorum-state's election state as the core's (the vote as a replica key)."""
    voted = None if state.voted_id is None else ReplicaKey.of(state.voted_id, state.voted_directory_id)
    return ElectionState(state.epoch, state.leader_id, voted)


def load_stored_state(config: KRaftConfig) -> StoredState:
    """Read everything the core starts from. Raises :class:`NodeStartupError` (unformatted or
    incomplete directory, no voters), ``storage.errors.KafkaStorageError`` for unreadable
    files; the metadata log is closed again when it raises."""
    meta = check_formatted(config.metadata_log_dir, config.node_id, config.log_dirs)
    if meta.cluster_id is None or meta.directory_id is None:
        raise NodeStartupError(f"meta.properties in {config.metadata_log_dir} is incomplete")
    metadata_log = MetadataLog.open(
        config.metadata_log_dir,
        config=LogConfig(segment_bytes=config.metadata_log_segment_bytes, segment_ms=config.metadata_log_segment_ms),
    )
    try:
        store = FileQuorumStateStore.in_partition_dir(metadata_log.dir)
        stored = store.read_election_state()
        checkpoint = snapshot_path(metadata_log.dir, BOOTSTRAP_SNAPSHOT_ID)
        kraft_version = 0
        voters: VoterSet | None = None
        bootstrap: BootstrapMetadata | None = None
        if Path(checkpoint).exists():
            content = read_snapshot(metadata_log.dir, BOOTSTRAP_SNAPSHOT_ID)
            kraft_version = content.kraft_version
            if content.voters is not None:
                voters = voter_set_from_record(content.voters)
            bootstrap = bootstrap_from_checkpoint_records(content.data_records(), str(checkpoint))
        elif metadata_log.latest_snapshot_id is not None:
            # log cleaning deleted the bootstrap checkpoint with the log below a newer
            # snapshot: its kraft.version and voters are the ones to start from
            latest = load_snapshot_batches(metadata_log.dir, metadata_log.latest_snapshot_id)
            kraft_version = latest.kraft_version
            if latest.voters is not None:
                voters = voter_set_from_record(latest.voters)
        if bootstrap is None:
            bootstrap = read_bootstrap_checkpoint(config.metadata_log_dir)
        if bootstrap is None:
            bootstrap = default_bootstrap_metadata()
        if voters is None and config.controller_quorum_voters:
            voters = VoterSet.static(
                {v.node_id: (v.host, v.port) for v in config.controller_quorum_voters},
                config.controller_listener_names[0],
            )
        if voters is None and config.controller_quorum_bootstrap_servers:
            # formatted with --no-initial-controllers: an observer that finds the voters
            # through controller.quorum.bootstrap.servers (KIP-853), as Kafka starts it
            voters = VoterSet(())
        if voters is None:
            raise NodeStartupError(
                "no voters: controller.quorum.voters and controller.quorum.bootstrap.servers are "
                f"empty and the metadata log directory {config.metadata_log_dir} has no bootstrap "
                "checkpoint (format it with --standalone or --initial-controllers)"
            )
    except BaseException:
        metadata_log.close()
        raise
    return StoredState(
        metadata_log,
        store,
        meta.cluster_id,
        meta.directory_id,
        None if stored is None else from_stored_election(stored),
        voters,
        kraft_version,
        bootstrap,
    )
