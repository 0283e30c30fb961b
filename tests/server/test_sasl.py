"""SASL on a listener (server.net.sasl, server.net.scram) and its settings (server.config):
what the differential test against a stock controller (compat/test_sasl.py) does not reach."""

from __future__ import annotations

import logging
import math

import pytest
import trio
import trio.testing
from scramp import ScramClient as ReferenceClient
from scramp import ScramMechanism

from kwire.errors import Errors
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from server.config import ConfigError, KRaftConfig, Listener
from server.config_security import parse_jaas_config
from server.net.client import KafkaConnectionError, open_connection
from server.net.sasl import SaslClient, SaslServerConfig, SaslSession
from server.net.scram import ScramClient, ScramFailure, ScramServer, credential_of
from server.net.server import RunningServer, serve
from tests.server.test_net import dq_request, make_sasl_table

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_bob="b\\"ob";')


def _props(**extra: str) -> dict[str, str]:
    props = {
        "process.roles": "controller", "node.id": "1", "controller.quorum.bootstrap.servers": "localhost:9093",
        "controller.listener.names": "CONTROLLER", "listeners": "CONTROLLER://localhost:9093", "log.dirs": "/tmp/x",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN", "listener.name.controller.plain.sasl.jaas.config": JAAS,
    }
    props.update(extra)
    return props


def test_jaas_options_give_the_plain_users_and_this_nodes_login() -> None:
    config = KRaftConfig.from_properties(_props())
    settings = config.sasl_settings("CONTROLLER")
    assert settings is not None and settings.plain_users == {"admin": "admin-secret", "bob": 'b"ob'}
    assert config.controller_sasl_client() == ("PLAIN", "admin", "admin-secret")
    assert parse_jaas_config("k", "a.B required;").options == {}


@pytest.mark.parametrize("extra", [
    {"sasl.enabled.mechanisms": "GSSAPI"},
    {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"},  # no JAAS entry for SCRAM-SHA-512
    {"sasl.mechanism.controller.protocol": "SCRAM-SHA-256"},  # not enabled
    {"listener.name.controller.plain.sasl.jaas.config": "PlainLoginModule maybe;"},
])
def test_settings_kwire_cannot_serve_are_refused(extra: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        config = KRaftConfig.from_properties(_props(**extra))
        config.sasl_settings("CONTROLLER")
        config.controller_sasl_client()


def test_scram_interoperates_with_a_reference_implementation_both_ways() -> None:
    credential = credential_of("SCRAM-SHA-512", "pw", b"twelve-bytes", 4096)
    server = ScramServer("SCRAM-SHA-512", lambda user: credential if user == "al,ice" else None, "server-nonce")
    reference = ReferenceClient(["SCRAM-SHA-512"], "al,ice", "pw")
    reference.set_server_first(server.first(reference.get_client_first().encode()).decode())
    reference.set_server_final(server.final(reference.get_client_final().encode()).decode())
    assert server.user == "al,ice"
    mechanism = ScramMechanism("SCRAM-SHA-512")
    reference_server = mechanism.make_server(
        lambda user: (credential.salt, credential.stored_key, credential.server_key, credential.iterations))
    client = ScramClient("SCRAM-SHA-512", "al,ice", "pw", "client-nonce")
    reference_server.set_client_first(client.first().decode())
    reference_server.set_client_final(client.final(reference_server.get_server_first().encode()).decode())
    client.check(reference_server.get_server_final().encode())


def test_a_short_salt_kafka_accepts_logs_in() -> None:
    credential = credential_of("SCRAM-SHA-256", "pw", b"salt", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda user: credential, "n")
    client = ScramClient("SCRAM-SHA-256", "u", "pw", "c")
    client.check(server.final(client.final(server.first(client.first()))))
    wrong = ScramClient("SCRAM-SHA-256", "u", "bad", "c")
    server = ScramServer("SCRAM-SHA-256", lambda user: credential, "n")
    with pytest.raises(ScramFailure):
        server.final(wrong.final(server.first(wrong.first())))


def test_a_session_logs_in_once_and_refuses_a_second_handshake() -> None:
    session = SaslSession(SaslServerConfig(("PLAIN",), {"bob": "pw"}))
    answer, close = session.handshake(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert answer.error_code == Errors.NONE and not close
    response, close = session.authenticate(SaslAuthenticateRequest(auth_bytes=b"\0bob\0pw"))
    assert response.error_code == Errors.NONE and not close and session.user == "bob"
    again, close = session.handshake(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert again.error_code == Errors.ILLEGAL_SASL_STATE and close


async def test_kwires_client_reauthenticates_before_its_session_expires(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture,
) -> None:
    """KIP-368 both ways in kwire: a listener with ``connections.max.reauth.ms`` 2,000 gives
    that lifetime, kwire's client logs in again 85-95% into it, and a client that does not is
    closed at its first request after the expiry; a refused login is logged with the user and
    the peer's address. (Against a stock controller:
    compat/test_sasl.py and compat/test_secured_cluster.py.)"""
    mock_clock.autojump_threshold = 0.1  # real seconds idle before the clock jumps
    caplog.set_level(logging.INFO, logger="server.net")
    table = make_sasl_table()
    running: RunningServer = await nursery.start(lambda task_status: serve(
        [Listener("SASL", "127.0.0.1", 0)], table, task_status=task_status,
        sasl={"SASL": SaslServerConfig(("PLAIN",), {"admin": "pw"}, max_reauth_ms={"PLAIN": 2000})},
    ))
    started = trio.current_time()
    async with await open_connection("127.0.0.1", running.port(), sasl=SaslClient("PLAIN", "admin", "pw")) as conn:
        while trio.current_time() - started < 10:
            assert (await conn.request(dq_request(3))).topics[0].partitions[0].leader_id == 3
            await trio.sleep(0.5)
    renewed = [r for r in caplog.records if "re-authenticated as User:admin" in r.getMessage()]
    assert 4 <= len(renewed) <= 6, [r.getMessage() for r in caplog.records]
    async with await open_connection("127.0.0.1", running.port(), sasl=SaslClient("PLAIN", "admin", "pw")) as conn:
        conn._reauthenticate_at = math.inf  # a client without KIP-368
        await trio.sleep(2.1)
        with pytest.raises(KafkaConnectionError):
            await conn.request(dq_request(3))
    assert any("its SASL session (User:admin, 2000 ms) expired" in r.getMessage() for r in caplog.records)
    with pytest.raises(KafkaConnectionError, match="Invalid username or password"):
        await open_connection("127.0.0.1", running.port(), sasl=SaslClient("PLAIN", "admin", "wrong"))
    refused = [r.getMessage() for r in caplog.records if "failed with SASL mechanism PLAIN" in r.getMessage()]
    assert len(refused) == 1 and "from 127.0.0.1:" in refused[0] and "for admin" in refused[0], refused


def test_reauth_lifetimes_come_from_the_mechanisms_key_then_the_listeners_then_the_nodes() -> None:
    scram = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
             "listener.name.controller.scram-sha-512.sasl.jaas.config": "a.ScramLoginModule required;"}
    config = KRaftConfig.from_properties(_props(**scram, **{
        "listener.name.controller.plain.connections.max.reauth.ms": "2000", "connections.max.reauth.ms": "9000"}))
    settings = config.sasl_settings("CONTROLLER")
    assert settings is not None and settings.max_reauth_ms == {"PLAIN": 2000, "SCRAM-SHA-512": 9000}
    config = KRaftConfig.from_properties(_props(**scram, **{"listener.name.controller.connections.max.reauth.ms": "7"}))
    settings = config.sasl_settings("CONTROLLER")
    assert settings is not None and settings.max_reauth_ms == {"PLAIN": 7, "SCRAM-SHA-512": 7}
    settings = KRaftConfig.from_properties(_props()).sasl_settings("CONTROLLER")
    assert settings is not None and settings.max_reauth_ms == {}
    with pytest.raises(ConfigError, match="connections.max.reauth.ms"):
        KRaftConfig.from_properties(_props(**{"connections.max.reauth.ms": "soon"})).sasl_settings("CONTROLLER")
