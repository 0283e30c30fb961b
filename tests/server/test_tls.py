"""TLS settings and principals (server.net.tls, server.node.security) beyond the differential
test against a stock controller (compat/test_tls.py): PKCS12 stores, refused settings, and the
principal mapping rules."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from compat.pki import make_pki
from server.config import ConfigError, KRaftConfig
from server.net.tls import TlsError, principal_of, server_context, tls_settings
from server.node.security import tls_listeners


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _der(pki: dict[str, Path], who: str) -> bytes:
    return x509.load_pem_x509_certificate(pki[who].read_bytes()).public_bytes(serialization.Encoding.DER)


def test_principals_follow_the_mapping_rules(pki: dict[str, Path]) -> None:
    assert principal_of(None) == "User:ANONYMOUS"
    assert principal_of(_der(pki, "alice")) == "User:CN=alice"
    assert principal_of(_der(pki, "alice"), "RULE:^CN=([^,]*).*$/$1/U,DEFAULT") == "User:ALICE"
    assert principal_of(_der(pki, "alice"), "RULE:^O=(.*)$/$1/,DEFAULT") == "User:CN=alice"
    with pytest.raises(TlsError):
        principal_of(_der(pki, "alice"), "RULE:^O=(.*)$/$1/")


def test_a_pkcs12_key_store_serves_and_jks_is_refused(pki: dict[str, Path], tmp_path: Path) -> None:
    text = pki["server"].read_bytes()
    key = serialization.load_pem_private_key(text, None)
    certificate = x509.load_pem_x509_certificate(text[text.index(b"-----BEGIN CERTIFICATE"):])
    store = tmp_path / "server.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", key, certificate, None, serialization.BestAvailableEncryption(b"secret")))  # type: ignore[arg-type]
    props = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store), "ssl.keystore.password": "secret"}
    assert isinstance(server_context(tls_settings(props, "CONTROLLER")), ssl.SSLContext)
    with pytest.raises(TlsError) as refused:
        server_context(tls_settings({**props, "listener.name.controller.ssl.keystore.type": "JKS"}, "CONTROLLER"))
    assert refused.value.key == "listener.name.controller.ssl.keystore.type"


def test_a_tls_listener_without_a_key_store_stops_the_node_at_start() -> None:
    config = KRaftConfig.from_properties({
        "process.roles": "controller", "node.id": "1", "controller.quorum.bootstrap.servers": "localhost:9093",
        "controller.listener.names": "CONTROLLER", "listeners": "CONTROLLER://localhost:9093", "log.dirs": "/tmp/x",
        "listener.security.protocol.map": "CONTROLLER:SSL",
    })
    with pytest.raises(ConfigError):
        tls_listeners(config)
