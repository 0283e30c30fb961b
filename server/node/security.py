"""The node's TLS settings as the network layer takes them (``server.net.tls``): a server
context per SSL and SASL_SSL listener, and the client context of this node's own connections to
other controllers' controller listener. A setting that cannot be used stops the node at start
with a ConfigError naming its key."""

from __future__ import annotations

import ssl

from server.config import KRaftConfig
from server.net.server import TlsListener
from server.net.tls import RULES_KEY, client_context, principal_rules, server_context, tls_settings

__all__ = ["controller_client_context", "tls_listeners"]

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
