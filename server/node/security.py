"""The node's TLS settings as the network layer takes them (``server.net.tls``): a server
context per SSL and SASL_SSL listener, and the client context of this node's own connections to
other controllers' controller listener. A setting that cannot be used stops the node at start
with a ConfigError naming its key."""

from __future__ import annotations

import ssl

from server.config import ConfigError, KRaftConfig
from server.net.server import TlsListener
from server.net.tls import TlsError, client_context, server_context, tls_settings

__all__ = ["controller_client_context", "tls_listeners"]

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def tls_listeners(config: KRaftConfig) -> dict[str, TlsListener]:
    """A :class:`TlsListener` per SSL or SASL_SSL listener. Raises ConfigError."""
    out = {}
    for listener in config.listeners:
        if config.listener_security_protocol_map.get(listener.name) in TLS_PROTOCOLS:
            settings = tls_settings(config.raw, listener.name)
            try:
                context = server_context(settings)
            except TlsError as exc:
                raise ConfigError(exc.key, str(exc).split(": ", 1)[1]) from None
            out[listener.name] = TlsListener(context, settings.get("ssl.principal.mapping.rules") or "DEFAULT")
    return out


def controller_client_context(config: KRaftConfig) -> ssl.SSLContext | None:
    """The TLS context of this node's connections to other controllers, None when the
    controller listener is not a TLS one. Raises ConfigError."""
    listener = config.controller_listener_names[0]
    if config.listener_security_protocol_map.get(listener) not in TLS_PROTOCOLS:
        return None
    try:
        return client_context(tls_settings(config.raw, listener))
    except TlsError as exc:
        raise ConfigError(exc.key, str(exc).split(": ", 1)[1]) from None
