"""TLS on SSL and SASL_SSL listeners and on kwire's own connections to them, with Kafka's
``ssl.*`` settings (``SslFactory``, ``DefaultSslEngineFactory``; KIP-651 PEM stores).

Settings are read per listener: ``listener.name.<listener>.ssl.<key>`` first, then
``ssl.<key>``:

* the key store: ``ssl.keystore.type`` PKCS12 (``ssl.keystore.location``,
  ``ssl.keystore.password``, ``ssl.key.password``) or PEM (``ssl.keystore.location`` naming a
  file with the key and its chain, or ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``
  given inline, the key encrypted with ``ssl.key.password`` when set); JKS, Kafka's default
  type, is Java's own format and is refused with a clear error;
* the trust store: ``ssl.truststore.type`` PKCS12 or PEM (``ssl.truststore.location``, or
  ``ssl.truststore.certificates`` inline); none: the system's trusted authorities;
* ``ssl.client.auth`` none, requested or required; ``ssl.enabled.protocols`` (TLSv1.2,
  TLSv1.3); ``ssl.endpoint.identification.algorithm`` https (check the server's name) or empty;
* ``ssl.principal.mapping.rules``: ``DEFAULT`` or ``RULE:pattern/replacement/[LU]`` entries, the
  first whose pattern matches a client certificate's distinguished name (RFC 2253 form) gives
  the connection's principal ``User:<name>`` (``SslPrincipalMapper``); a client without a
  certificate is ``User:ANONYMOUS``.

Python's ``ssl`` module loads keys and certificates from files only; keys given inline or read
from a PKCS12 store are written, for the moment of loading, to a private temporary file.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from server.config import ConfigError

__all__ = [
    "DEFAULT_PRINCIPAL_RULES", "PrincipalRule", "TlsError", "client_context", "principal_of", "principal_rules",
    "server_context", "tls_settings",
]

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsError(ConfigError):
    """A TLS setting that cannot be used (``key`` names it), or a client certificate that no
    ``ssl.principal.mapping.rules`` rule maps."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's ``ssl.*`` settings, the listener-prefixed ones applied."""

    listener: str
    values: Mapping[str, str]
    prefixed: frozenset[str] = frozenset()
    """The settings given with the listener's prefix."""

    def get(self, name: str, default: str | None = None) -> str | None:
        """The setting ``name`` (``ssl.keystore.type``, ...), ``default`` when unset."""
        return self.values.get(name, default)

    def key(self, name: str) -> str:
        """The property a setting came from, for errors."""
        return f"listener.name.{self.listener.lower()}.{name}" if name in self.prefixed else name


def tls_settings(props: Mapping[str, str], listener: str) -> TlsSettings:
    """``props``' ``ssl.*`` settings for ``listener`` (module docstring)."""
    prefix = f"listener.name.{listener.lower()}."
    values = {k: v for k, v in props.items() if k.startswith("ssl.")}
    prefixed = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix + "ssl.")}
    values.update(prefixed)
    return TlsSettings(listener.upper(), values, frozenset(prefixed))


def _password(settings: TlsSettings, name: str) -> bytes | None:
    value = settings.get(name)
    return None if value is None else value.encode()


def _with_key_file(pem_key: bytes, pem_chain: bytes, context: ssl.SSLContext, password: bytes | None) -> None:
    """Load a key and its chain given as PEM bytes (through a private temporary file)."""
    with tempfile.TemporaryDirectory(prefix="kwire-tls-") as scratch:
        path = Path(scratch) / "key.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(pem_key.strip() + b"\n" + pem_chain.strip() + b"\n")
        context.load_cert_chain(str(path), password=password)


def _load_keystore(settings: TlsSettings, context: ssl.SSLContext) -> bool:
    """Load the key store into ``context``; False when none is configured."""
    kind = (settings.get("ssl.keystore.type") or "JKS").upper()
    location = settings.get("ssl.keystore.location")
    inline_key = settings.get("ssl.keystore.key")
    if location is None and inline_key is None:
        return False
    key = settings.key("ssl.keystore.type")
    if kind == "JKS":
        raise TlsError(key, "JKS key stores are Java's own format; use PKCS12 or PEM")
    try:
        if kind == "PKCS12":
            if location is None:
                raise TlsError(settings.key("ssl.keystore.location"), "a PKCS12 key store needs a location")
            private_key, certificate, extra = pkcs12.load_key_and_certificates(
                Path(location).read_bytes(), _password(settings, "ssl.keystore.password"))
            if private_key is None or certificate is None:
                raise TlsError(settings.key("ssl.keystore.location"), f"{location} holds no key and certificate")
            pem_key = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption())
            chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [certificate, *extra])
            _with_key_file(pem_key, chain, context, None)
        elif kind == "PEM":
            password = _password(settings, "ssl.key.password")
            if inline_key is not None:
                chain_text = settings.get("ssl.keystore.certificate.chain")
                if chain_text is None:
                    raise TlsError(settings.key("ssl.keystore.certificate.chain"), "a PEM key needs its certificate chain")
                _with_key_file(inline_key.encode(), chain_text.encode(), context, password)
            else:
                assert location is not None
                context.load_cert_chain(location, password=password)
        else:
            raise TlsError(key, f"unknown key store type {kind} (PKCS12 or PEM)")
    except (OSError, ssl.SSLError, ValueError) as exc:
        if isinstance(exc, TlsError):
            raise
        raise TlsError(key, f"cannot load the {kind} key store: {exc}") from None
    return True


def _load_truststore(settings: TlsSettings, context: ssl.SSLContext, purpose: ssl.Purpose) -> None:
    """Load the trust store; none configured: the system's trusted authorities."""
    kind = (settings.get("ssl.truststore.type") or "JKS").upper()
    location = settings.get("ssl.truststore.location")
    inline = settings.get("ssl.truststore.certificates")
    if location is None and inline is None:
        context.load_default_certs(purpose)
        return
    key = settings.key("ssl.truststore.type")
    if kind == "JKS":
        raise TlsError(key, "JKS trust stores are Java's own format; use PKCS12 or PEM")
    try:
        if kind == "PKCS12":
            assert location is not None
            _, certificate, extra = pkcs12.load_key_and_certificates(
                Path(location).read_bytes(), _password(settings, "ssl.truststore.password"))
            certificates = [c for c in [certificate, *extra] if c is not None]
            data = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)
            context.load_verify_locations(cadata=data)
        elif kind == "PEM":
            if inline is not None:
                context.load_verify_locations(cadata=inline)
            else:
                context.load_verify_locations(cafile=location)
        else:
            raise TlsError(key, f"unknown trust store type {kind} (PKCS12 or PEM)")
    except (OSError, ssl.SSLError, ValueError) as exc:
        if isinstance(exc, TlsError):
            raise
        source = settings.key("ssl.truststore.certificates" if inline is not None else "ssl.truststore.location")
        raise TlsError(source, f"cannot load the {kind} trust store: {exc}") from None


def _protocols(settings: TlsSettings, context: ssl.SSLContext) -> None:
    names = [p.strip() for p in (settings.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [n for n in names if n not in _PROTOCOLS]
    if unknown or not names:
        raise TlsError(settings.key("ssl.enabled.protocols"), f"unsupported protocols {unknown} (TLSv1.2, TLSv1.3)")
    versions = sorted(_PROTOCOLS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The server side of a listener. Raises TlsError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(settings, context)
    if not _load_keystore(settings, context):
        raise TlsError(settings.key("ssl.keystore.location"), f"listener {settings.listener} has no key store")
    auth = (settings.get("ssl.client.auth") or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise TlsError(settings.key("ssl.client.auth"), f"{auth} is not none, requested or required")
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[auth]
    if auth != "none":
        _load_truststore(settings, context, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """kwire's side of a connection to a TLS listener of these settings. Raises TlsError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(settings, context)
    context.check_hostname = (settings.get("ssl.endpoint.identification.algorithm", "https") or "").lower() == "https"
    _load_truststore(settings, context, ssl.Purpose.SERVER_AUTH)
    _load_keystore(settings, context)
    return context


_RULE = re.compile(r"RULE:((?:[^/\\\\]|\\\\.)*)/((?:[^/\\\\]|\\\\.)*)/([LU]?)")
RULES_KEY = "ssl.principal.mapping.rules"


@dataclass(frozen=True, slots=True)
class PrincipalRule:
    """One rule of ``ssl.principal.mapping.rules`` (``SslPrincipalMapper``): ``DEFAULT``
    (``pattern`` None: the name as it is), or ``RULE:pattern/replacement/[LU]``."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        """The mapped name, None when the rule does not match ``name``."""
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(self.replacement, name)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped


DEFAULT_PRINCIPAL_RULES = (PrincipalRule(None),)


def principal_rules(text: str = "DEFAULT", key: str = RULES_KEY) -> tuple[PrincipalRule, ...]:
    """``ssl.principal.mapping.rules`` parsed, once, when a listener is set up (commas inside a
    rule's pattern stay). Raises TlsError, naming ``key``, for a rule or pattern that is not
    valid."""
    rules: list[PrincipalRule] = []
    remaining = text.strip()
    while remaining:
        if remaining.startswith("DEFAULT"):
            rules.append(PrincipalRule(None))
            remaining = remaining[len("DEFAULT"):]
        else:
            found = _RULE.match(remaining)
            if found is None:
                raise TlsError(key, f"invalid rules {text!r}")
            pattern, replacement, case = found.groups()
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise TlsError(key, f"invalid pattern {pattern!r}: {exc}") from None
            rules.append(PrincipalRule(compiled, re.sub(r"\$(\d)", r"\\\1", replacement), case))
            remaining = remaining[found.end():]
        remaining = remaining.lstrip().removeprefix(",").lstrip()
    return tuple(rules) or DEFAULT_PRINCIPAL_RULES


def principal_of(der_certificate: bytes | None, rules: tuple[PrincipalRule, ...] = DEFAULT_PRINCIPAL_RULES) -> str:
    """The principal of a client certificate (DER), ``User:ANONYMOUS`` without one: its subject
    in RFC 2253 form mapped by the first of ``rules`` that matches. Raises TlsError when none
    does (Kafka refuses the connection)."""
    if der_certificate is None:
        return "User:ANONYMOUS"
    name = x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            return f"User:{mapped}"
    raise TlsError(RULES_KEY, f"no rule matches the principal {name}")
