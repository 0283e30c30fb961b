"""The node's TLS and SASL settings as the network layer takes them (``server.net.tls``,
``server.net.sasl``): a server context per SSL and SASL_SSL listener, the client context of
this node's own connections to other controllers' controller listener, and each SASL
listener's mechanisms, PLAIN users and SCRAM credentials. A setting that cannot be used stops
the node at start with a ConfigError naming its key."""

from __future__ import annotations

import ssl
from collections.abc import Callable

from server.config import KRaftConfig
from server.controller.host import QuorumController
from server.controller.scram import MECHANISMS as SCRAM_MECHANISMS
from server.net.sasl import SaslServerConfig
from server.net.server import TlsListener
from server.net.tls import RULES_KEY, client_context, principal_rules, server_context, tls_settings
from storage.scram import ScramCredential

__all__ = ["controller_client_context", "sasl_listeners", "tls_listeners"]

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def tls_listeners(config: KRaftConfig) -> dict[str, TlsListener]:
    """A :class:`TlsListener` per SSL or SASL_SSL listener. Raises ConfigError (a TlsError)."""
    out = {}
    for listener in config.listeners:
        if config.listener_security_protocol_map.get(listener.name) in TLS_PROTOCOLS:
            settings = tls_settings(config.raw, listener.name)
            rules = principal_rules(settings.get(RULES_KEY) or "DEFAULT", settings.key(RULES_KEY))
            out[listener.name] = TlsListener(server_context(settings), rules)
    return out


def controller_client_context(config: KRaftConfig) -> ssl.SSLContext | None:
    """The TLS context of this node's connections to other controllers, None when the
    controller listener is not a TLS one. Raises ConfigError (a TlsError)."""
    listener = config.controller_listener_names[0]
    if config.listener_security_protocol_map.get(listener) not in TLS_PROTOCOLS:
        return None
    return client_context(tls_settings(config.raw, listener))


def sasl_listeners(config: KRaftConfig, host: Callable[[], QuorumController | None]) -> dict[str, SaslServerConfig]:
    """The SASL settings of each SASL listener (``server.net.sasl``): its mechanisms, its PLAIN
    users, and SCRAM credentials as the replayed metadata of ``host()`` holds them."""

    def scram_credential(mechanism: str, user: str) -> ScramCredential | None:
        current = host()
        code = next((c for c, (name, _) in SCRAM_MECHANISMS.items() if name == mechanism), None)
        if current is None or code is None:
            return None
        return current.controller.scram.credentials.get((user, code))

    out = {}
    for listener in config.listeners:
        settings = config.sasl_settings(listener.name)
        if settings is not None:
            out[listener.name] = SaslServerConfig(settings.mechanisms, settings.plain_users, scram_credential,
                                                  settings.max_reauth_ms)
    return out
