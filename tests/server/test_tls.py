"""TLS settings and principals (server.net.tls, server.node.security) beyond the differential
test against a stock controller (compat/test_tls.py): PKCS12 stores, refused settings, and the
principal mapping rules; and clients that stop in the middle of a TLS or SASL handshake."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trio
import trio.testing
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kwire.frame import frame
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.protocol import encode_request
from server.config import ConfigError, KRaftConfig, Listener
from server.net.client import open_connection
from server.net.sasl import SaslClient, SaslServerConfig
from server.net.server import TLS_HANDSHAKE_TIMEOUT_S, RunningServer, TlsListener, serve
from server.net.tls import TlsError, principal_of, principal_rules, server_context, tls_settings
from server.node.security import tls_listeners
from tests.server.test_net import assert_closed, dq_request, make_sasl_table, read_frame


def _der(pki: dict[str, Path], who: str) -> bytes:
    return x509.load_pem_x509_certificate(pki[who].read_bytes()).public_bytes(serialization.Encoding.DER)


def test_principals_follow_the_mapping_rules(pki: dict[str, Path]) -> None:
    assert principal_of(None) == "User:ANONYMOUS"
    assert principal_of(_der(pki, "alice")) == "User:CN=alice"
    assert principal_of(_der(pki, "alice"), principal_rules("RULE:^CN=([^,]*).*$/$1/U,DEFAULT")) == "User:ALICE"
    assert principal_of(_der(pki, "alice"), principal_rules("RULE:^O=(.*)$/$1/,DEFAULT")) == "User:CN=alice"
    with pytest.raises(TlsError):
        principal_of(_der(pki, "alice"), principal_rules("RULE:^O=(.*)$/$1/"))


def test_bad_mapping_rules_stop_the_listener_at_start() -> None:
    """A rule or a pattern that is not valid is a ConfigError naming the key when the listener
    is set up, not a failure on the first client certificate."""
    key = "listener.name.controller.ssl.principal.mapping.rules"
    for text in ("RULE:^CN=(.*$/$1/", "RULES:x/y/", "DEFAULT,oops"):
        with pytest.raises(ConfigError) as refused:
            principal_rules(text, key)
        assert refused.value.key == key, text


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


async def test_a_client_that_stops_mid_handshake_is_closed_and_no_one_else_waits(
    pki: dict[str, Path], nursery: trio.Nursery, mock_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that sends the start of a TLS record and stops is closed once
    TLS_HANDSHAKE_TIMEOUT_S has passed, with a line naming it; one that stops after
    SaslHandshake is closed when it has been idle ``connections.max.idle.ms``; clients that
    come meanwhile are served."""
    mock_clock.autojump_threshold = 0.1  # real seconds idle before the clock jumps: the TLS round trips are real
    settings = tls_settings({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki["server"])}, "CONTROLLER")
    listeners = [Listener("SECURED", "127.0.0.1", 0), Listener("SASL", "127.0.0.1", 0)]
    table = make_sasl_table()
    running: RunningServer = await nursery.start(lambda task_status: serve(
        listeners, table, idle_timeout_ms=60_000, task_status=task_status,
        tls={"SECURED": TlsListener(server_context(settings))},
        sasl={"SASL": SaslServerConfig(("PLAIN",), {"admin": "admin-secret"})},
    ))
    stalled = await trio.open_tcp_stream("127.0.0.1", running.port("SECURED"))
    await stalled.send_all(b"\x16\x03\x01\x02\x00")  # a TLS handshake record header, then nothing
    half_logged_in = await trio.open_tcp_stream("127.0.0.1", running.port("SASL"))
    await half_logged_in.send_all(frame(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1, "stalled")))
    started = trio.current_time()
    client = ssl.create_default_context(cafile=str(pki["ca"]))
    async with await open_connection("localhost", running.port("SECURED"), ssl_context=client) as conn:
        assert (await conn.request(dq_request(1))).topics[0].partitions[0].leader_id == 1
    async with await open_connection("127.0.0.1", running.port("SASL"),
                                     sasl=SaslClient("PLAIN", "admin", "admin-secret")) as conn:
        assert (await conn.request(dq_request(2))).topics[0].partitions[0].leader_id == 2
    assert trio.current_time() - started < 1
    await assert_closed(stalled, timeout_s=TLS_HANDSHAKE_TIMEOUT_S + 5)
    assert TLS_HANDSHAKE_TIMEOUT_S <= trio.current_time() - started < TLS_HANDSHAKE_TIMEOUT_S + 5
    assert any("TLS handshake not done within 10 s" in r.getMessage() and "127.0.0.1" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    await read_frame(half_logged_in)  # the SaslHandshake answer
    await assert_closed(half_logged_in, timeout_s=120)
    assert 60 <= trio.current_time() - started < 120
