from pathlib import Path

import pytest

from server.config import (
    BootstrapServer,
    ConfigError,
    KRaftConfig,
    Listener,
    QuorumVoter,
    load_config,
    parse_listeners,
    parse_overrides,
)

REPO = Path(__file__).resolve().parents[2]

MINIMAL = {
    "process.roles": "controller",
    "node.id": "1",
    "listeners": "CONTROLLER://localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.bootstrap.servers": "localhost:9093",
}


def config(**changes: str | None) -> KRaftConfig:
    props = {k.replace("_", "."): v for k, v in changes.items() if v is not None}
    merged = dict(MINIMAL)
    merged.update(props)
    for k, v in changes.items():
        if v is None:
            merged.pop(k.replace("_", "."), None)
    return KRaftConfig.from_properties(merged)


def test_shipped_default_config() -> None:
    c = load_config(REPO / "config" / "server.properties")
    assert c.process_roles == ("controller",)
    assert c.node_id == 1
    assert c.listeners == (Listener("CONTROLLER", "localhost", 9093),)
    assert c.controller_listener_names == ("CONTROLLER",)
    assert c.controller_quorum_bootstrap_servers == (BootstrapServer("localhost", 9093),)
    assert c.metadata_log_dir == "./data"
    assert c.controller_endpoints() == (Listener("CONTROLLER", "localhost", 9093),)


def test_kafka_defaults() -> None:
    c = config()
    assert c.controller_quorum_election_timeout_ms == 1000
    assert c.controller_quorum_fetch_timeout_ms == 2000
    assert c.controller_quorum_election_backoff_max_ms == 1000
    assert c.controller_quorum_request_timeout_ms == 2000
    assert c.controller_quorum_retry_backoff_ms == 20
    assert c.controller_quorum_append_linger_ms == 25
    assert c.socket_request_max_bytes == 104_857_600
    assert c.metadata_log_segment_bytes == 1_073_741_824
    assert c.metadata_max_idle_interval_ms == 500
    assert c.metadata_max_retention_bytes == 104_857_600
    assert c.metadata_max_retention_ms == 604_800_000
    assert (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms) == (9000, 2000)
    assert c.log_dirs == ("/tmp/kafka-logs",)
    assert c.metadata_log_dir == "/tmp/kafka-logs"
    assert c.advertised_listeners == c.listeners
    assert c.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"


def test_file_with_overrides(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_bytes(
        b"process.roles = controller\n"
        b"node.id: 3\n"
        b"listeners=CONTROLLER://:0\n"
        b"controller.listener.names=CONTROLLER\n"
        b"controller.quorum.voters=1@h1:9093,2@[::1]:9094,\\\n    3@h3:9095\n"
        b"log.dirs=/a,/b\n"
        b"some.unknown.key=kept\n"
    )
    c = load_config(p, ["node.id=2", "controller.quorum.fetch.timeout.ms=5000"])
    assert c.node_id == 2
    assert c.controller_quorum_fetch_timeout_ms == 5000
    assert c.listeners == (Listener("CONTROLLER", None, 0),)
    assert c.controller_quorum_voters == (
        QuorumVoter(1, "h1", 9093),
        QuorumVoter(2, "::1", 9094),
        QuorumVoter(3, "h3", 9095),
    )
    assert c.log_dirs == ("/a", "/b")
    assert c.metadata_log_dir == "/a"
    assert c.raw["some.unknown.key"] == "kept"
    assert c.controller_endpoints() == (Listener("CONTROLLER", "localhost", 0),)


def test_listener_forms() -> None:
    assert parse_listeners("listeners", "controller://[::1]:9093, B://0.0.0.0:1,C://:2") == (
        Listener("CONTROLLER", "::1", 9093),
        Listener("B", "0.0.0.0", 1),
        Listener("C", None, 2),
    )
    assert str(Listener("X", "::1", 5)) == "X://[::1]:5"
    assert str(Listener("X", None, 5)) == "X://:5"


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("listeners", "CONTROLLER//localhost:9093", "NAME://host:port"),
        ("listeners", "CONTROLLER://localhost:70000", "out of range"),
        ("listeners", "CONTROLLER://a:1,controller://b:2", "more than once"),
        ("listeners", "CONTROLLER://a:1,OTHER://b:2", "controller-only"),
        ("node.id", "x", "not an integer"),
        ("node.id", "-1", "minimum"),
        ("node.id", None, "required"),
        ("process.roles", None, "required"),
        ("process.roles", "controller,zookeeper", "unknown role"),
        ("controller.listener.names", "OTHER", "at least one name"),
        ("controller.listener.names", None, "required"),
        ("controller.quorum.voters", "1@h", "id@host:port"),
        ("controller.quorum.voters", "1@h:1,1@h:2", "more than once"),
        ("controller.quorum.voters", "2@h:1,3@h:2", "node.id 1"),
        ("controller.quorum.bootstrap.servers", "nohost", "host:port"),
        ("controller.quorum.election.timeout.ms", "0", "minimum"),
        ("listener.security.protocol.map", "CONTROLLER:TLS", "unknown security protocol"),
        ("listener.security.protocol.map", "CONTROLLER:FOO", "unknown security protocol"),
        ("listener.security.protocol.map", "OTHER:PLAINTEXT", "no security protocol"),
        ("advertised.listeners", "CONTROLLER://0.0.0.0:9093", "wildcard"),
    ],
)
def test_errors_name_the_key(key: str, value: str | None, needle: str) -> None:
    props = dict(MINIMAL)
    if value is None:
        props.pop(key, None)
    else:
        props[key] = value
    with pytest.raises(ConfigError) as info:
        KRaftConfig.from_properties(props)
    assert str(info.value).startswith(key + ":"), str(info.value)
    assert needle in str(info.value)


def test_missing_bootstrap_and_voters() -> None:
    props = dict(MINIMAL)
    del props["controller.quorum.bootstrap.servers"]
    with pytest.raises(ConfigError, match="controller.quorum.bootstrap.servers"):
        KRaftConfig.from_properties(props)


def test_overrides() -> None:
    assert parse_overrides(["a=1", "b = x=y", "a=2"]) == {"a": "2", "b": "x=y"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["novalue"])
    c = KRaftConfig.from_properties(MINIMAL, {"node.id": "7"})
    assert c.node_id == 7


def test_combined_roles_and_advertised() -> None:
    c = config(
        process_roles="broker,controller",
        listeners="PLAINTEXT://:9092,CONTROLLER://:9093",
        advertised_listeners="PLAINTEXT://b1:9092,CONTROLLER://c1:19093",
    )
    assert c.is_controller
    assert c.controller_listeners == (Listener("CONTROLLER", None, 9093),)
    assert c.controller_endpoints() == (Listener("CONTROLLER", "c1", 19093),)
    assert c.listener("plaintext") == Listener("PLAINTEXT", None, 9092)
