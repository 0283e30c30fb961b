"""The security of kwire's admin tools' connections, from a Kafka client configuration: what
Kafka's admin client takes from ``--command-config`` (``AdminClientConfig``, with the keys of
``CommonClientConfigs``, ``SaslConfigs`` and ``SslConfigs``).

Keys read:

* ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism`` (default GSSAPI, which kwire's client does not speak: PLAIN,
  SCRAM-SHA-256 and SCRAM-SHA-512 are accepted) and ``sasl.jaas.config``, whose ``username``
  and ``password`` options are the login;
* the ``ssl.*`` keys kwire's listeners take (``ssl.truststore.type`` PEM or PKCS12,
  ``ssl.truststore.location`` / ``ssl.truststore.certificates``, ``ssl.keystore.*`` for a
  client certificate, ``ssl.enabled.protocols``, ``ssl.endpoint.identification.algorithm``,
  default ``https``: the server's name is checked).

Other keys (``client.id``, timeouts, ...) are left alone, as the admin client's own defaults
hold for these tools. A key that cannot be used raises ConfigError naming it.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import javaproperties

from server.config import ConfigError
from server.config_security import SASL_MECHANISMS, parse_jaas_config
from server.net.sasl import SaslClient
from server.net.tls import client_context, tls_settings

__all__ = ["PLAINTEXT", "ClientSecurity", "client_security", "load_client_security"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a tool's connection logs in: ``sasl`` (None: no SASL) over TLS with ``ssl_context``
    (None: plain TCP). Pass both to ``server.net.client.open_connection``."""

    sasl: SaslClient | None = None
    ssl_context: ssl.SSLContext | None = None


PLAINTEXT = ClientSecurity()
"""A connection with neither TLS nor SASL (``security.protocol=PLAINTEXT``)."""


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """The :class:`ClientSecurity` of a client configuration's ``props`` (module docstring).
    Raises ConfigError."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise ConfigError("security.protocol", f"{protocol} is not one of {', '.join(_PROTOCOLS)}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = client_context(tls_settings(props, "client"))  # a TlsError is a ConfigError
    sasl = None
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError("sasl.mechanism", f"{mechanism} is not supported by kwire's client "
                                                f"(it speaks {', '.join(SASL_MECHANISMS)})")
        text = props.get("sasl.jaas.config")
        if text is None:
            raise ConfigError("sasl.jaas.config", f"{protocol} with {mechanism} needs a JAAS configuration")
        options = parse_jaas_config("sasl.jaas.config", text).options
        if "username" not in options or "password" not in options:
            raise ConfigError("sasl.jaas.config", "needs username and password options")
        sasl = SaslClient(mechanism, options["username"], options["password"])
    return ClientSecurity(sasl, context)


def load_client_security(path: str | Path | None) -> ClientSecurity:
    """:func:`client_security` of the properties file at ``path``; :data:`PLAINTEXT` for None.
    Raises ConfigError (also for a file that cannot be read)."""
    if path is None:
        return PLAINTEXT
    try:
        with open(path, "rb") as f:  # java.util.Properties.load: ISO-8859-1 with \uXXXX escapes
            props = dict(javaproperties.load(f))
    except OSError as exc:
        raise ConfigError("--command-config", f"cannot read {path}: {exc.strerror or exc}") from None
    return client_security(props)
