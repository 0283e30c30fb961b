"""The values of ``server.properties`` that are lists of endpoints, and the error every
problem with a setting raises (:class:`ConfigError`): ``listeners`` (Kafka's
``SocketServerConfigs``), ``controller.quorum.bootstrap.servers``,
``controller.quorum.voters`` (``QuorumConfig``) and ``--override key=value`` pairs.
``server.config`` reads the file and re-exports all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "BootstrapServer",
    "ConfigError",
    "Listener",
    "QuorumVoter",
    "parse_bootstrap_servers",
    "parse_listeners",
    "parse_overrides",
    "parse_quorum_voters",
    "split_list",
]


class ConfigError(ValueError):
    """An invalid or missing configuration value; the message names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class Listener:
    """One entry of ``listeners`` / ``advertised.listeners``: ``NAME://host:port``.

    ``host`` is None for an empty host (every interface); IPv6 hosts are kept without their
    brackets. ``port`` 0 asks for an ephemeral port.
    """

    name: str
    host: str | None
    port: int

    def __str__(self) -> str:
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BootstrapServer:
    """One ``host:port`` of ``controller.quorum.bootstrap.servers`` (Kafka parses them to
    ``InetSocketAddress``es); no listener name, unlike ``server.raft.types.Endpoint``."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class QuorumVoter:
    """One entry of ``controller.quorum.voters``: ``id@host:port``."""

    node_id: int
    host: str
    port: int


# Kafka's SocketServer listener regex (``Endpoint.uriParseExp``): NAME://host:port, with the
# host optionally in brackets (IPv6) and possibly empty.
_LISTENER_RE = re.compile(r"^(?P<name>[^:/\s]+)://\[?(?P<host>[0-9a-zA-Z\-%._:]*)\]?:(?P<port>-?[0-9]+)$")
_HOST_PORT_RE = re.compile(r"^\[?(?P<host>[0-9a-zA-Z\-%._:]+?)\]?:(?P<port>[0-9]+)$")


def split_list(value: str) -> list[str]:
    """A comma-separated config value's items, stripped, empty ones dropped (Kafka's
    ``ConfigDef.Type.LIST`` parsing)."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _port(key: str, text: str, *, allow_zero: bool) -> int:
    port = int(text)
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise ConfigError(key, f"port {port} is out of range")
    return port


def parse_listeners(key: str, value: str) -> tuple[Listener, ...]:
    """``NAME://host:port,...`` (Kafka's ``listeners`` format). Names are upper-cased, as
    Kafka's ``ListenerName.normalised`` does, and must be unique."""
    listeners: list[Listener] = []
    for item in split_list(value):
        m = _LISTENER_RE.match(item)
        if m is None:
            raise ConfigError(key, f"{item!r} is not of the form NAME://host:port")
        name = m["name"].upper()
        if any(existing.name == name for existing in listeners):
            raise ConfigError(key, f"listener name {name} appears more than once")
        listeners.append(Listener(name, m["host"] or None, _port(key, m["port"], allow_zero=True)))
    return tuple(listeners)


def parse_bootstrap_servers(key: str, value: str) -> tuple[BootstrapServer, ...]:
    """``host:port,...`` (``controller.quorum.bootstrap.servers``)."""
    servers: list[BootstrapServer] = []
    for item in split_list(value):
        m = _HOST_PORT_RE.match(item)
        if m is None:
            raise ConfigError(key, f"{item!r} is not of the form host:port")
        servers.append(BootstrapServer(m["host"], _port(key, m["port"], allow_zero=False)))
    return tuple(servers)


def parse_quorum_voters(key: str, value: str) -> tuple[QuorumVoter, ...]:
    """``id@host:port,...`` (``controller.quorum.voters``, ``QuorumConfig.parseVoterConnections``)."""
    voters: list[QuorumVoter] = []
    for item in split_list(value):
        node_text, at, address = item.partition("@")
        m = _HOST_PORT_RE.match(address) if at else None
        if m is None or not re.fullmatch(r"-?[0-9]+", node_text.strip()):
            raise ConfigError(key, f"{item!r} is not of the form id@host:port")
        node_id = int(node_text)
        if node_id < 0:
            raise ConfigError(key, f"voter id {node_id} is negative")
        if any(v.node_id == node_id for v in voters):
            raise ConfigError(key, f"voter id {node_id} appears more than once")
        voters.append(QuorumVoter(node_id, m["host"], _port(key, m["port"], allow_zero=False)))
    return tuple(voters)


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """``key=value`` strings (``--override``) as a dict; a later key wins."""
    result: dict[str, str] = {}
    for item in overrides:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(item, "an override must be of the form key=value")
        result[key.strip()] = value.strip()
    return result
