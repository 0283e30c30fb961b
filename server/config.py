"""``server.properties``: Kafka's KRaft configuration keys, defaults and checks, as a typed
:class:`KRaftConfig`.

The file is a Java properties file (read with ``javaproperties``, so escapes, continuations and
``:`` separators behave as in ``java.util.Properties``). ``--override key=value`` pairs, as
``kafka-server-start.sh`` takes them, replace file entries before anything is checked.

Keys and defaults are Kafka's (``KRaftConfigs``, ``QuorumConfig``, ``SocketServerConfigs``,
``ServerLogConfigs``, ``MetadataLogConfig``). Keys kwire does not know are kept in
:attr:`KRaftConfig.raw` and otherwise ignored, as Kafka does (it only logs them). The cluster id
is not configuration: it lives in ``meta.properties`` in the metadata log directory.

Every problem raises :class:`ConfigError` whose message starts with the key at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

import javaproperties

from server.config_security import (
    SaslListenerSettings,
    check_authorizer,
    listener_sasl_settings,
    security_protocol_map,
)
from server.config_values import (
    BootstrapServer,
    ConfigError,
    Listener,
    QuorumVoter,
    parse_bootstrap_servers,
    parse_listeners,
    parse_overrides,
    parse_quorum_voters,
)
from server.config_values import split_list as _split_list
from server.raft.types import QuorumConfig

__all__ = [
    "BootstrapServer",
    "ConfigError",
    "KRaftConfig",
    "Listener",
    "QuorumVoter",
    "load_config",
    "parse_bootstrap_servers",
    "parse_listeners",
    "parse_overrides",
    "parse_quorum_voters",
]

PROCESS_ROLES = ("broker", "controller")


class _Reader:
    """Typed access to the raw properties, naming the key in every error."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = props

    def get(self, key: str) -> str | None:
        value = self.props.get(key)
        if value is None:
            return None
        value = value.strip()
        return value or None

    def string(self, key: str, default: str | None = None) -> str | None:
        value = self.get(key)
        return default if value is None else value

    def integer(self, key: str, default: int | None, *, minimum: int | None = None) -> int:
        text = self.get(key)
        if text is None:
            if default is None:
                raise ConfigError(key, "is required")
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(key, f"{text!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise ConfigError(key, f"{value} is below the minimum of {minimum}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """``true`` / ``false`` in any case (Java's ConfigDef BOOLEAN); ConfigError otherwise."""
        text = self.get(key)
        if text is None:
            return default
        value = text.strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(key, f"expected true or false, got {text!r}")
        return value == "true"

    def names(self, key: str) -> tuple[str, ...]:
        return tuple(_split_list(self.get(key) or ""))


_QUORUM_DEFAULTS = QuorumConfig()
"""Kafka's ``controller.quorum.*`` defaults, written once on ``QuorumConfig`` (as Kafka's
``KafkaConfig`` takes them from ``QuorumConfig``'s ConfigDef)."""


@dataclass(frozen=True, slots=True)
class KRaftConfig:
    """A checked ``server.properties``. Durations are in ms, sizes in bytes."""

    process_roles: tuple[str, ...]
    node_id: int
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    controller_listener_names: tuple[str, ...]
    listener_security_protocol_map: Mapping[str, str]
    metadata_log_dir: str
    log_dirs: tuple[str, ...]
    controller_quorum_voters: tuple[QuorumVoter, ...] = ()
    controller_quorum_bootstrap_servers: tuple[BootstrapServer, ...] = ()
    controller_quorum_election_timeout_ms: int = _QUORUM_DEFAULTS.election_timeout_ms
    controller_quorum_fetch_timeout_ms: int = _QUORUM_DEFAULTS.fetch_timeout_ms
    controller_quorum_election_backoff_max_ms: int = _QUORUM_DEFAULTS.election_backoff_max_ms
    controller_quorum_request_timeout_ms: int = _QUORUM_DEFAULTS.request_timeout_ms
    controller_quorum_retry_backoff_ms: int = _QUORUM_DEFAULTS.retry_backoff_ms
    controller_quorum_append_linger_ms: int = _QUORUM_DEFAULTS.append_linger_ms
    controller_quorum_auto_join_enable: bool = _QUORUM_DEFAULTS.auto_join
    socket_request_max_bytes: int = 104_857_600
    connections_max_idle_ms: int = 600_000
    metadata_log_segment_bytes: int = 1_073_741_824
    """``metadata.log.segment.bytes`` (at least 8 MiB), or ``internal.metadata.log.segment.bytes``
    when set (any size from 12 bytes, for tests, as in Kafka 4.x)."""
    metadata_log_segment_ms: int = 604_800_000
    metadata_max_idle_interval_ms: int = 500
    internal_metadata_max_batch_size_in_bytes: int = _QUORUM_DEFAULTS.max_batch_size_bytes
    """The largest metadata batch (Kafka 4.x's testing key; ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``)."""
    metadata_max_retention_bytes: int = 104_857_600
    metadata_max_retention_ms: int = 604_800_000
    metadata_log_max_record_bytes_between_snapshots: int = 20_971_520
    metadata_log_max_snapshot_interval_ms: int = 3_600_000
    min_insync_replicas: int = 1
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    num_partitions: int = 1
    """Partitions of a topic created without a count (``num.partitions``)."""
    default_replication_factor: int = 1
    """Replicas of a topic created without a replication factor (``default.replication.factor``)."""
    delete_topic_enable: bool = True
    """DeleteTopics may delete topics (``delete.topic.enable``)."""
    auto_leader_rebalance_enable: bool = True
    """The active controller moves leadership back to preferred replicas
    (``auto.leader.rebalance.enable``)."""
    unclean_leader_election_interval_ms: int = 300_000
    """How often the active controller elects leaders for leaderless partitions of topics with
    ``unclean.leader.election.enable`` (``unclean.leader.election.interval.ms``)."""
    leader_imbalance_check_interval_seconds: int = 300
    """How often it looks for partitions not led by their preferred replica
    (``leader.imbalance.check.interval.seconds``)."""
    metadata_log_clean_interval_ms: int = 60_000
    """``kwire.metadata.log.clean.interval.ms``: how often retention deletes old snapshots and
    segments; Kafka's fixed 60 s (``KafkaRaftClient``'s snapshot cleaner), settable for tests."""
    snapshot_build_in_child: bool = True
    """``kwire.metadata.snapshot.build.in.child``: build each metadata snapshot's bytes in a
    forked child at a lower priority (``server.node.forked``), where the platform forks and the
    image is big enough to be worth a fork (``server.node.snapshot_files.FORK_MIN_IMAGE_RECORDS``);
    false builds every one on the event loop a step at a time. kwire's own key (Kafka builds
    on a thread)."""
    prometheus_port: int | None = None
    """Serve metrics in Prometheus' format on this port (``kwire.prometheus.port``; 0 picks a
    free one; unset: no metrics server). kwire's own key: Kafka serves JMX only."""
    prometheus_host: str = "0.0.0.0"
    """The address the metrics server binds (``kwire.prometheus.host``)."""
    unsafe_test_failpoints: bool = False
    """TEST ONLY: ``kwire.unsafe.test.failpoints`` lets ``/failpoints`` beside ``/metrics`` arm
    the node's failpoints (``server.failpoints``), halt among them; off, it answers 404."""
    unsafe_test_fsync_interval_ms: int | None = None
    """TEST ONLY, and unsafe: ``kwire.unsafe.test.fsync.interval.ms`` makes the node fsync its
    log at most once per this many ms and take every flush as done at once, so it acknowledges
    records before they are durable. It exists so that the fault tests can show that their
    checker catches such a node (a positive control); never set it anywhere else."""
    unsafe_test_ack_on_append: bool = False
    """TEST ONLY, and unsafe: ``kwire.unsafe.test.ack.on.append=true`` makes the active
    controller answer a write as soon as its records are appended to its own log, before they
    commit, so a leader cut off from the quorum acknowledges writes that are then lost. It
    exists so that the fault tests can show that their history checker catches such a node (a
    positive control); never set it anywhere else."""
    authorizer_class_name: str = ""
    """``authorizer.class.name``: empty (no authorizer: the ACL RPCs answer SECURITY_DISABLED and
    every request is allowed) or Kafka's :data:`~server.config_security.STANDARD_AUTHORIZER`, the only one kwire has."""
    super_users: tuple[str, ...] = ()
    """``super.users``: principals (``Type:name``, separated by ``;``) allowed every operation."""
    allow_everyone_if_no_acl_found: bool = False
    """``allow.everyone.if.no.acl.found``: a resource no ACL names is open to everyone."""
    delegation_token_secret_key: str | None = None
    """``delegation.token.secret.key``: the HMAC key of delegation tokens; unset or empty
    disables them (Kafka 4 no longer reads 3.x's ``delegation.token.master.key``)."""
    delegation_token_max_lifetime_ms: int = 604_800_000
    delegation_token_expiry_time_ms: int = 86_400_000
    delegation_token_expiry_check_interval_ms: int = 3_600_000
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], overrides: Mapping[str, str] | None = None
    ) -> KRaftConfig:
        """Check and type ``props`` (with ``overrides`` applied on top)."""
        merged = dict(props)
        if overrides:
            merged.update(overrides)
        r = _Reader(merged)

        roles = r.names("process.roles")
        if not roles:
            raise ConfigError("process.roles", "is required (broker, controller or both)")
        for role in roles:
            if role not in PROCESS_ROLES:
                raise ConfigError("process.roles", f"unknown role {role!r}; expected broker or controller")
        if len(set(roles)) != len(roles):
            raise ConfigError("process.roles", "a role appears more than once")

        node_id = r.integer("node.id", None, minimum=0)

        listeners = parse_listeners("listeners", r.string("listeners", "PLAINTEXT://:9092") or "")
        if not listeners:
            raise ConfigError("listeners", "at least one listener is required")
        advertised_text = r.get("advertised.listeners")
        advertised = (
            parse_listeners("advertised.listeners", advertised_text)
            if advertised_text is not None
            else listeners
        )
        for listener in advertised:
            if listener.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    "advertised.listeners",
                    f"{listener} advertises a wildcard address; clients cannot connect to it",
                )

        controller_names = tuple(n.upper() for n in r.names("controller.listener.names"))
        if not controller_names:
            raise ConfigError("controller.listener.names", "is required in KRaft mode")
        listener_names = {listener.name for listener in listeners}
        if "controller" in roles:
            if not any(name in listener_names for name in controller_names):
                raise ConfigError(
                    "controller.listener.names",
                    "must contain at least one name that appears in 'listeners' "
                    "when process.roles contains controller",
                )
            if "broker" not in roles:
                extra = sorted(listener_names - set(controller_names))
                if extra:
                    raise ConfigError(
                        "listeners",
                        f"{', '.join(extra)} not in controller.listener.names; a controller-only "
                        "node may only have controller listeners",
                    )

        protocol_map = security_protocol_map(
            r.get("listener.security.protocol.map"), listeners, controller_names
        )

        log_dirs_text = r.get("log.dirs") or r.get("log.dir") or "/tmp/kafka-logs"
        log_dirs = tuple(_split_list(log_dirs_text))
        if not log_dirs:
            raise ConfigError("log.dirs", "is empty")
        metadata_log_dir = r.get("metadata.log.dir") or log_dirs[0]

        voters = parse_quorum_voters(
            "controller.quorum.voters", r.string("controller.quorum.voters", "") or ""
        )
        bootstrap = parse_bootstrap_servers(
            "controller.quorum.bootstrap.servers",
            r.string("controller.quorum.bootstrap.servers", "") or "",
        )
        if voters and "controller" in roles and not any(v.node_id == node_id for v in voters):
            # KafkaConfig.validateControllerQuorumVotersMustContainNodeIdForKRaftController
            raise ConfigError(
                "controller.quorum.voters",
                f"must contain this controller's node.id {node_id} when it is not empty",
            )
        if not voters and not bootstrap:
            # KafkaRaftClient: "Missing kraft bootstrap servers".
            raise ConfigError(
                "controller.quorum.bootstrap.servers",
                "is required when controller.quorum.voters is empty",
            )

        def integer(key: str, name: str, minimum: int = 0) -> int:
            # the default is the field's: each is written once, on the dataclass
            return r.integer(key, _FIELD_DEFAULTS[name], minimum=minimum)

        def q(key: str, minimum: int = 0) -> int:
            name = "controller_quorum_" + key.replace(".", "_")
            return integer(f"controller.quorum.{key}", name, minimum)

        return cls(
            process_roles=roles,
            node_id=node_id,
            listeners=listeners,
            advertised_listeners=advertised,
            controller_listener_names=controller_names,
            listener_security_protocol_map=protocol_map,
            metadata_log_dir=metadata_log_dir,
            log_dirs=log_dirs,
            controller_quorum_voters=voters,
            controller_quorum_bootstrap_servers=bootstrap,
            controller_quorum_election_timeout_ms=q("election.timeout.ms", 1),
            controller_quorum_fetch_timeout_ms=q("fetch.timeout.ms", 1),
            controller_quorum_election_backoff_max_ms=q("election.backoff.max.ms", 1),
            controller_quorum_request_timeout_ms=q("request.timeout.ms", 1),
            controller_quorum_retry_backoff_ms=q("retry.backoff.ms"),
            controller_quorum_append_linger_ms=q("append.linger.ms"),
            controller_quorum_auto_join_enable=r.boolean(
                "controller.quorum.auto.join.enable", _QUORUM_DEFAULTS.auto_join
            ),
            socket_request_max_bytes=integer(
                "socket.request.max.bytes", "socket_request_max_bytes", 1
            ),
            connections_max_idle_ms=integer("connections.max.idle.ms", "connections_max_idle_ms"),
            metadata_log_segment_bytes=(
                # the testing override Kafka 4.x reads first (MetadataLogConfig), then the
                # operator's key with its 8 MiB floor
                r.integer("internal.metadata.log.segment.bytes", 0, minimum=12)
                or integer("metadata.log.segment.bytes", "metadata_log_segment_bytes", 8 * 1024 * 1024)
            ),
            metadata_log_segment_ms=integer(
                "metadata.log.segment.ms", "metadata_log_segment_ms", 1
            ),
            internal_metadata_max_batch_size_in_bytes=integer(
                "internal.metadata.max.batch.size.in.bytes", "internal_metadata_max_batch_size_in_bytes", 1024
            ),
            metadata_max_idle_interval_ms=integer(
                "metadata.max.idle.interval.ms", "metadata_max_idle_interval_ms"
            ),
            metadata_max_retention_bytes=integer(
                "metadata.max.retention.bytes", "metadata_max_retention_bytes", -1
            ),
            metadata_max_retention_ms=integer(
                "metadata.max.retention.ms", "metadata_max_retention_ms", -1
            ),
            metadata_log_max_record_bytes_between_snapshots=integer(
                "metadata.log.max.record.bytes.between.snapshots",
                "metadata_log_max_record_bytes_between_snapshots",
                1,
            ),
            metadata_log_max_snapshot_interval_ms=integer(
                "metadata.log.max.snapshot.interval.ms", "metadata_log_max_snapshot_interval_ms"
            ),
            min_insync_replicas=integer("min.insync.replicas", "min_insync_replicas", 1),
            broker_session_timeout_ms=integer("broker.session.timeout.ms", "broker_session_timeout_ms", 1),
            broker_heartbeat_interval_ms=integer(
                "broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms", 1
            ),
            num_partitions=integer("num.partitions", "num_partitions", 1),
            default_replication_factor=integer("default.replication.factor", "default_replication_factor", 1),
            delete_topic_enable=r.boolean("delete.topic.enable", True),
            auto_leader_rebalance_enable=r.boolean("auto.leader.rebalance.enable", True),
            unclean_leader_election_interval_ms=integer(
                "unclean.leader.election.interval.ms", "unclean_leader_election_interval_ms", 1
            ),
            leader_imbalance_check_interval_seconds=integer(
                "leader.imbalance.check.interval.seconds", "leader_imbalance_check_interval_seconds", 1
            ),
            metadata_log_clean_interval_ms=integer(
                "kwire.metadata.log.clean.interval.ms", "metadata_log_clean_interval_ms", 1
            ),
            snapshot_build_in_child=r.boolean("kwire.metadata.snapshot.build.in.child", True),
            prometheus_port=(
                None if r.get("kwire.prometheus.port") is None
                else r.integer("kwire.prometheus.port", None, minimum=0)
            ),
            prometheus_host=r.string("kwire.prometheus.host", "0.0.0.0") or "0.0.0.0",
            unsafe_test_failpoints=r.boolean("kwire.unsafe.test.failpoints", False),
            unsafe_test_fsync_interval_ms=(
                None if r.get("kwire.unsafe.test.fsync.interval.ms") is None
                else r.integer("kwire.unsafe.test.fsync.interval.ms", None, minimum=1)
            ),
            unsafe_test_ack_on_append=r.boolean("kwire.unsafe.test.ack.on.append", False),
            authorizer_class_name=check_authorizer(r.string("authorizer.class.name", "") or ""),
            super_users=tuple(u.strip() for u in (r.string("super.users", "") or "").split(";") if u.strip()),
            allow_everyone_if_no_acl_found=r.boolean("allow.everyone.if.no.acl.found", False),
            delegation_token_secret_key=r.string("delegation.token.secret.key") or None,
            delegation_token_max_lifetime_ms=integer(
                "delegation.token.max.lifetime.ms", "delegation_token_max_lifetime_ms", 1),
            delegation_token_expiry_time_ms=integer(
                "delegation.token.expiry.time.ms", "delegation_token_expiry_time_ms", 1),
            delegation_token_expiry_check_interval_ms=integer(
                "delegation.token.expiry.check.interval.ms", "delegation_token_expiry_check_interval_ms", 1),
            raw=merged,
        )

    # -- derived views ----------------------------------------------------------------------

    def quorum_config(self) -> QuorumConfig:
        """The ``controller.quorum.*`` timings as the KRaft core takes them (all in ms)."""
        return QuorumConfig(
            election_timeout_ms=self.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=self.controller_quorum_fetch_timeout_ms,
            election_backoff_max_ms=self.controller_quorum_election_backoff_max_ms,
            request_timeout_ms=self.controller_quorum_request_timeout_ms,
            retry_backoff_ms=self.controller_quorum_retry_backoff_ms,
            append_linger_ms=self.controller_quorum_append_linger_ms,
            auto_join=self.controller_quorum_auto_join_enable,
            max_batch_size_bytes=self.internal_metadata_max_batch_size_in_bytes,
        )

    @property
    def is_controller(self) -> bool:
        """True when ``process.roles`` includes controller."""
        return "controller" in self.process_roles

    def listener(self, name: str) -> Listener:
        """The configured listener called ``name``; KeyError if there is none."""
        for listener in self.listeners:
            if listener.name == name.upper():
                return listener
        raise KeyError(name)

    def sasl_settings(self, listener_name: str) -> SaslListenerSettings | None:
        """The SASL settings of a SASL_PLAINTEXT or SASL_SSL listener, None for another; raises ConfigError
        for a mechanism kwire does not serve or one without its JAAS configuration (Kafka's
        ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, or ``sasl.jaas.config``;
        :func:`~server.config_security.listener_sasl_settings`)."""
        return listener_sasl_settings(self.listener_security_protocol_map, self.raw, listener_name)

    def controller_sasl_client(self) -> tuple[str, str, str] | None:
        """``(mechanism, username, password)`` this node logs in with on the controller listener
        of other controllers (``sasl.mechanism.controller.protocol``, default GSSAPI, and the
        ``username`` and ``password`` options of that mechanism's JAAS configuration), None when
        the controller listener is not a SASL one. Raises ConfigError."""
        listener = self.controller_listener_names[0]
        settings = self.sasl_settings(listener)
        if settings is None:
            return None
        key = "sasl.mechanism.controller.protocol"
        mechanism = self.raw.get(key, "GSSAPI").strip()
        if mechanism not in settings.mechanisms:
            raise ConfigError(key, f"{mechanism} is not among the SASL mechanisms listener {listener} enables "
                                   f"({', '.join(settings.mechanisms)})")
        options = settings.jaas[mechanism].options
        if "username" not in options or "password" not in options:
            raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                              "needs username and password options for this node's own logins")
        return mechanism, options["username"], options["password"]

    @property
    def controller_listeners(self) -> tuple[Listener, ...]:
        """The ``listeners`` entries named in ``controller.listener.names``, in that order."""
        by_name = {listener.name: listener for listener in self.listeners}
        return tuple(by_name[n] for n in self.controller_listener_names if n in by_name)

    def controller_endpoints(self) -> tuple[Listener, ...]:
        """What this controller advertises (``MetadataQuorumCommand.getControllerAdvertisedListeners``):
        for each name in ``controller.listener.names`` that has a listener, the
        ``advertised.listeners`` entry of that name if any, else the ``listeners`` one, with an
        empty host replaced by ``localhost``."""
        advertised = {listener.name: listener for listener in self.advertised_listeners}
        result = []
        for listener in self.controller_listeners:
            chosen = advertised.get(listener.name, listener)
            result.append(Listener(chosen.name, chosen.host or "localhost", chosen.port))
        return tuple(result)


_FIELD_DEFAULTS: dict[str, int] = {
    f.name: f.default for f in fields(KRaftConfig) if isinstance(f.default, int)
}
"""The integer settings' defaults, read from the fields of :class:`KRaftConfig`."""


def load_config(
    path: str | Path | None, overrides: Iterable[str] | Mapping[str, str] = ()
) -> KRaftConfig:
    """Read ``path`` (a properties file; None for none) and apply ``overrides``
    (``key=value`` strings or a mapping). Raises ConfigError, or OSError for an unreadable
    file."""
    props: dict[str, str] = {}
    if path is not None:
        # Binary: java.util.Properties.load(InputStream) reads ISO-8859-1 with \uXXXX escapes.
        with open(path, "rb") as f:
            props = dict(javaproperties.load(f))
    extra = dict(overrides) if isinstance(overrides, Mapping) else parse_overrides(overrides)
    return KRaftConfig.from_properties(props, extra)
