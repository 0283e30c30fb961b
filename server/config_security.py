"""The security settings of ``server.properties``, for :class:`~server.config.KRaftConfig`:
the listeners' security protocols (``listener.security.protocol.map``, Kafka's
``KafkaConfig.effectiveListenerSecurityProtocolMap``), a SASL listener's mechanisms and JAAS
entries (``sasl.enabled.mechanisms``, ``sasl.jaas.config``, ``connections.max.reauth.ms``,
listener-prefixed or not, as ``SaslChannelBuilder`` reads them) and ``authorizer.class.name``.

Every problem raises :class:`~server.config_values.ConfigError` whose message starts with the
key at fault.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from server.config_values import ConfigError, Listener
from server.config_values import split_list as _split_list

__all__ = [
    "DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP",
    "KNOWN_SECURITY_PROTOCOLS",
    "SASL_MECHANISMS",
    "STANDARD_AUTHORIZER",
    "SUPPORTED_SECURITY_PROTOCOLS",
    "JaasEntry",
    "SaslListenerSettings",
    "check_authorizer",
    "listener_sasl_settings",
    "parse_jaas_config",
    "security_protocol_map",
]

SUPPORTED_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"})
KNOWN_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
)


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""The ``authorizer.class.name`` of Kafka's KRaft authorizer (KIP-801), whose ACLs live in the
metadata log."""


def check_authorizer(name: str) -> str:
    """``authorizer.class.name`` checked: empty or :data:`STANDARD_AUTHORIZER`."""
    name = name.strip()
    if name not in ("", STANDARD_AUTHORIZER):
        raise ConfigError(
            "authorizer.class.name",
            f"{name} is not supported: kwire has one authorizer, {STANDARD_AUTHORIZER} (or leave it unset)",
        )
    return name


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""The SASL mechanisms kwire serves."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One JAAS login module entry: its class, its control flag and its options."""

    login_module: str
    flag: str
    options: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class SaslListenerSettings:
    """A SASL listener's mechanisms (``sasl.enabled.mechanisms``) and, per mechanism, its JAAS
    entry. PLAIN's ``user_<name>="<password>"`` options are the users the listener accepts."""

    listener: str
    mechanisms: tuple[str, ...]
    jaas: Mapping[str, JaasEntry]
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    """``connections.max.reauth.ms`` per mechanism where set (KIP-368): how long a session lasts
    before the client must re-authenticate; 0 or less, or unset, for ever."""

    @property
    def plain_users(self) -> dict[str, str]:
        """PLAIN's users and passwords (``PlainServerCallbackHandler``)."""
        entry = self.jaas.get("PLAIN")
        if entry is None:
            return {}
        return {key[5:]: value for key, value in entry.options.items() if key.startswith("user_")}


_JAAS_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([^\s=;"]+)|(=)|(;))')


def parse_jaas_config(key: str, text: str) -> JaasEntry:
    """A ``sasl.jaas.config`` value (Kafka's ``JaasConfig``): ``LoginModuleClass flag
    key=value ...;`` with quoted or bare values. Raises ConfigError."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        found = _JAAS_TOKEN.match(text, pos)
        if found is None or found.end() == pos:
            raise ConfigError(key, f"cannot parse the JAAS configuration at {text[pos:pos + 20]!r}")
        quoted, word, equals, semicolon = found.groups()
        if quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted[1:-1])))
        elif word is not None:
            tokens.append(("word", word))
        elif equals is not None:
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
        pos = found.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[-1][0] != ";":
        raise ConfigError(key, "a JAAS configuration is 'LoginModule flag key=value ...;'")
    flag = tokens[1][1].lower()
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise ConfigError(key, f"invalid JAAS control flag {tokens[1][1]!r}")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise ConfigError(key, "JAAS options must be key=value pairs")
    for i in range(0, len(body), 3):
        (kind, name), (eq, _), (_, value) = body[i], body[i + 1], body[i + 2]
        if kind != "word" or eq != "=":
            raise ConfigError(key, f"invalid JAAS option near {name!r}")
        options[name] = value
    return JaasEntry(tokens[0][1], flag, options)


def security_protocol_map(
    explicit: str | None, listeners: tuple[Listener, ...], controller_names: tuple[str, ...]
) -> dict[str, str]:
    """``listener.security.protocol.map`` checked (``explicit``: its value, stripped, None when
    unset): ``NAME:PROTOCOL`` pairs, Kafka's default map when unset, where an unnamed controller
    listener is PLAINTEXT (``KafkaConfig.effectiveListenerSecurityProtocolMap``); every listener
    needs a protocol kwire supports. Raises ConfigError."""
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for item in _split_list(explicit or DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP):
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or not protocol:
            raise ConfigError(key, f"{item!r} is not of the form NAME:PROTOCOL")
        if protocol not in KNOWN_SECURITY_PROTOCOLS:
            raise ConfigError(key, f"unknown security protocol {protocol!r} for {name}")
        mapping[name] = protocol
    # Kafka (KafkaConfig.effectiveListenerSecurityProtocolMap): when the map is not set, a
    # controller listener with a non-protocol name defaults to PLAINTEXT.
    if explicit is None:
        for name in controller_names:
            mapping.setdefault(name, "PLAINTEXT")
    for listener in listeners:
        used = mapping.get(listener.name)
        if used is None:
            raise ConfigError(key, f"no security protocol for listener {listener.name}")
        if used not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(
                key,
                f"listener {listener.name} uses {used}; kwire supports {', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))} listeners",
            )
    return mapping


def listener_sasl_settings(
    protocol_map: Mapping[str, str], raw: Mapping[str, str], listener_name: str
) -> SaslListenerSettings | None:
    """The SASL settings of a SASL_PLAINTEXT or SASL_SSL listener (``protocol_map``: the checked
    ``listener.security.protocol.map``; ``raw``: the node's properties), None for another;
    raises ConfigError for a mechanism kwire does not serve or one without its JAAS
    configuration (Kafka's ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, or
    ``sasl.jaas.config``)."""
    name = listener_name.upper()
    if protocol_map.get(name) not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None
    prefix = f"listener.name.{name.lower()}."
    key = prefix + "sasl.enabled.mechanisms"
    if key not in raw:
        key = "sasl.enabled.mechanisms"
    mechanisms = tuple(m.strip() for m in raw.get(key, "GSSAPI").split(",") if m.strip())
    if not mechanisms:
        raise ConfigError(key, f"listener {name} enables no SASL mechanism")
    jaas: dict[str, JaasEntry] = {}
    max_reauth_ms: dict[str, int] = {}
    for mechanism in mechanisms:
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(key, f"SASL mechanism {mechanism} is not supported by kwire "
                                   f"(it serves {', '.join(SASL_MECHANISMS)})")
        jaas_key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        text = raw.get(jaas_key, raw.get("sasl.jaas.config"))
        if text is None:
            raise ConfigError(jaas_key, f"listener {name} enables {mechanism} but has no JAAS configuration for it")
        jaas[mechanism] = parse_jaas_config(jaas_key, text)
        # SaslChannelBuilder.createConnectionsMaxReauthMsMap: the mechanism's key, then the
        # listener's, each listener-prefixed or not
        for reauth_key in (f"{prefix}{mechanism.lower()}.connections.max.reauth.ms",
                           f"{prefix}connections.max.reauth.ms", "connections.max.reauth.ms"):
            if reauth_key in raw:
                try:
                    max_reauth_ms[mechanism] = int(raw[reauth_key].strip())
                except ValueError:
                    raise ConfigError(reauth_key, f"{raw[reauth_key]!r} is not a number of ms") from None
                break
    return SaslListenerSettings(name, mechanisms, jaas, max_reauth_ms)
