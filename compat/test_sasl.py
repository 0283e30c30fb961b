"""SASL over TLS on the controller listener (SASL_SSL; PLAIN and SCRAM-SHA-256), against a
stock controller of the newest pinned release.

Both nodes are standalone controllers with ``CONTROLLER:SASL_SSL`` (a certificate the test
authority of tools/pki.py signed, no client certificates), PLAIN users from the
listener's JAAS configuration (``admin``, ``bob``), ``sasl.mechanism.controller.protocol=PLAIN``
for their own connections (a controller registers with itself over its listener), and a SCRAM
credential of ``alice`` bootstrapped by ``kafka-storage format --add-scram``. The same exchanges
go to both on fresh connections, frame by frame: a request before the handshake, an unknown
mechanism, wrong and right PLAIN passwords, malformed PLAIN tokens, another authorization id,
SCRAM logins right, wrong and of an unknown user, the unframed exchange after a v0 handshake, a
SaslAuthenticate before any handshake, and SaslHandshake and SaslAuthenticate after the login.
Both have ``connections.max.reauth.ms`` (KIP-368): 2 s for PLAIN (the mechanism's key), 60 s
for SCRAM (the listener's), so each login's answer carries its session lifetime, and the
re-authentication scripts run on both: a re-authentication a second after the login (accepted),
another at once after it (the API layer's: ILLEGAL_SASL_STATE), one as another user, one on
another mechanism, and a request after the session expired.
What each node answered, and whether it then closed the connection, must be equal; and stock
``kafka-metadata-quorum`` logs in with PLAIN and with SCRAM to both and describes them.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import start_secured_pair
from compat.harness import KafkaRelease
from kwire.frame import FrameDecoder
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.protocol import decode_response, encode_request
from messages.runtime import Message
from server.net.client import KafkaConnectionError, open_connection
from server.net.sasl import SaslClient
from server.net.scram import ScramClient

pytestmark = pytest.mark.compat

SASL_SETTINGS = (
    "listener.security.protocol.map=CONTROLLER:SASL_SSL\n"
    "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
    "sasl.mechanism.controller.protocol=PLAIN\n"
    'listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
    'required username="admin" password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";\n'
    "listener.name.controller.scram-sha-256.sasl.jaas.config="
    "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
    "listener.name.controller.plain.connections.max.reauth.ms=2000\n"
    "listener.name.controller.connections.max.reauth.ms=60000\n"
)
PLAIN_SESSION_S = 2.0
ADMIN = SaslClient("PLAIN", "admin", "admin-secret")


def _tls_settings(pki: dict[str, Path]) -> str:
    return (f"ssl.keystore.type=PEM\nssl.keystore.location={pki['server']}\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n")


def _trusting(pki: dict[str, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki["ca"]))


async def _ready(port: int, context: ssl.SSLContext) -> bool:
    """The node leads and answers a logged-in DescribeQuorum."""
    try:
        async with await open_connection("localhost", port, "sasl-probe", request_timeout_ms=5000, sasl=ADMIN,
                                         ssl_context=context) as conn:
            answer = await conn.request(DescribeQuorumRequest(topics=[TopicData(
                topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]))
    except (KafkaConnectionError, OSError):
        return False
    partitions = [p for t in answer.topics for p in t.partitions]
    return bool(partitions) and partitions[0].leader_id == 1 and partitions[0].high_watermark > 0


@pytest.fixture
def sasl_pair(newest_kafka: KafkaRelease, tmp_path: Path, pki: dict[str, Path]) -> Iterator[dict[str, int]]:
    context = _trusting(pki)

    def ready(port: int) -> bool:
        return trio.run(_ready, port, context)

    with start_secured_pair(newest_kafka, tmp_path, SASL_SETTINGS + _tls_settings(pki), ready,
                            ["--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"]) as ports:
        yield ports


class _Raw:
    """One connection spoken frame by frame."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(1 << 20)
        self.correlation = 0

    async def frame(self) -> bytes | None:
        """The next frame, None once the peer closed the connection."""
        while (frame := self.decoder.next_frame()) is None:
            with trio.move_on_after(5):
                try:
                    data = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:  # reset by the peer
                    return None
                if not data:
                    return None
                self.decoder.feed(data)
                continue
            return None
        return frame

    async def call(self, body: Message, version: int) -> Any:
        self.correlation += 1
        try:
            sent = bytes(encode_request(body, version, self.correlation, "sasl-test"))
            await self.stream.send_all(len(sent).to_bytes(4, "big") + sent)
        except trio.BrokenResourceError:
            return "closed"
        frame = await self.frame()
        if frame is None:
            return "closed"
        api_key = body.API_KEY
        assert api_key is not None
        _, response = decode_response(frame, api_key, version)
        return response

    async def raw(self, token: bytes) -> Any:
        try:
            await self.stream.send_all(len(token).to_bytes(4, "big") + token)
        except trio.BrokenResourceError:
            return "closed"
        frame = await self.frame()
        return "closed" if frame is None else ("token", len(frame))


def _seen(response: Any) -> Any:
    if isinstance(response, (str, tuple)):
        return response
    json = response.to_json(response.HIGHEST_VERSION)
    for volatile in ("throttleTimeMs", "authBytes", "clusterId", "controllerId", "brokers", "endpointType"):
        json.pop(volatile, None)
    return type(response).__name__, json


def _handshake(mechanism: str, version: int = 1) -> tuple[Message, int]:
    return SaslHandshakeRequest(mechanism=mechanism), version


def _authenticate(token: bytes, version: int = 2) -> tuple[Message, int]:
    return SaslAuthenticateRequest(auth_bytes=token), version


DESCRIBE = (DescribeClusterRequest(include_cluster_authorized_operations=False), 1)


async def _exchange(port: int, script: str, context: ssl.SSLContext) -> list[Any]:
    """Run one scripted exchange on a fresh TLS connection; each step's answer, then whether
    the connection is closed afterwards."""
    stream = await trio.open_ssl_over_tcp_stream("localhost", port, ssl_context=context)
    conn = _Raw(stream)
    seen: list[Any] = []

    async def step(body: Message, version: int) -> Any:
        response = await conn.call(body, version)
        seen.append(_seen(response))
        return response

    try:
        if script == "request before the handshake":
            await step(*DESCRIBE)
        elif script == "unknown mechanism":
            await step(*_handshake("GSSAPI"))
        elif script.startswith("plain "):
            token = {"plain wrong password": b"\0admin\0nope", "plain right password": b"\0bob\0bob-secret",
                     "plain two tokens": b"admin\0admin-secret", "plain other authzid": b"carol\0bob\0bob-secret",
                     "plain no password": b"\0bob\0", "plain unknown user": b"\0zed\0pw"}[script]
            await step(*_handshake("PLAIN"))
            await step(*_authenticate(token))
            if script == "plain right password":
                await step(*DESCRIBE)
                await step(*_handshake("PLAIN"))
                await step(*_authenticate(b"\0bob\0bob-secret"))
        elif script.startswith("scram "):
            user, password = {"scram right password": ("alice", "alice-secret"),
                              "scram wrong password": ("alice", "wrong"),
                              "scram unknown user": ("zed", "pw")}[script]
            client = ScramClient("SCRAM-SHA-256", user, password, secrets.token_urlsafe(18))
            await step(*_handshake("SCRAM-SHA-256"))
            first = await step(*_authenticate(client.first()))
            if not isinstance(first, str) and first.error_code == 0:
                final = await step(*_authenticate(client.final(bytes(first.auth_bytes))))
                if not isinstance(final, str) and final.error_code == 0:
                    client.check(bytes(final.auth_bytes))
                    await step(*DESCRIBE)
        elif script == "unframed exchange after a v0 handshake":
            await step(*_handshake("PLAIN", 0))
            seen.append(await conn.raw(b"\0admin\0admin-secret"))
            await step(*DESCRIBE)
        elif script == "authenticate before a handshake":
            await step(*_authenticate(b"\0admin\0admin-secret"))
        elif script.startswith("reauthenticate "):
            await step(*_handshake("PLAIN"))
            await step(*_authenticate(b"\0bob\0bob-secret"))
            if script == "reauthenticate after the session expired":
                await trio.sleep(PLAIN_SESSION_S + 0.3)
                await step(*DESCRIBE)
            elif script == "reauthenticate twice":
                await trio.sleep(1.1)  # at most one re-authentication a second
                for _ in range(2):
                    await step(*_handshake("PLAIN"))
                    await step(*_authenticate(b"\0bob\0bob-secret"))
                    await step(*DESCRIBE)
            elif script == "reauthenticate as another user":
                await step(*_handshake("PLAIN"))
                await step(*_authenticate(b"\0admin\0admin-secret"))
            else:
                assert script == "reauthenticate on another mechanism", script
                await step(*_handshake("SCRAM-SHA-256"))
                await step(*_authenticate(ScramClient("SCRAM-SHA-256", "alice", "alice-secret", "n").first()))
        else:
            raise AssertionError(script)
        seen.append(("then", await _closed(conn)))
    finally:
        await stream.aclose()
    return seen


async def _closed(conn: _Raw) -> str:
    """Whether the peer closed the connection (a further ApiVersions goes unanswered)."""
    answer = await conn.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return "closed" if isinstance(answer, str) else "open"


SCRIPTS = [
    "request before the handshake", "unknown mechanism", "plain wrong password", "plain right password",
    "plain two tokens", "plain other authzid", "plain no password", "plain unknown user", "scram right password",
    "scram wrong password", "scram unknown user", "unframed exchange after a v0 handshake",
    "authenticate before a handshake", "reauthenticate twice", "reauthenticate as another user",
    "reauthenticate on another mechanism", "reauthenticate after the session expired",
]


def test_sasl_logins_answer_alike(
    sasl_pair: dict[str, int], newest_kafka: KafkaRelease, tmp_path: Path, pki: dict[str, Path]
) -> None:
    differences = []
    trace = []
    for script in SCRIPTS:
        answers = {name: trio.run(_exchange, port, script, _trusting(pki)) for name, port in sasl_pair.items()}
        trace.append(f"{script}: {answers['stock']}")
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{script}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    text = "\n".join(trace)
    assert "'errorCode': 58" in text and "'errorCode': 33" in text, text
    assert "'sessionLifetimeMs': 2000" in text and "'sessionLifetimeMs': 60000" in text, text
    assert "Cannot change principals during re-authentication" in text, text
    assert not differences, "\n".join(differences) + "\n" + text
    for mechanism, user, password in (("PLAIN", "bob", "bob-secret"), ("SCRAM-SHA-256", "alice", "alice-secret")):
        login = tmp_path / f"{mechanism}.properties"
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        login.write_text(
            f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n"
            f'sasl.jaas.config=org.apache.kafka.common.security.{module} required username="{user}" '
            f'password="{password}";\n', encoding="utf-8")
        for name, port in sasl_pair.items():
            out = newest_kafka.run_tool("metadata-quorum", ["--bootstrap-controller", f"localhost:{port}",
                                                            "--command-config", login, "describe", "--status"])
            assert "LeaderId:" in out.stdout and "CurrentVoters:" in out.stdout, (name, mechanism, out.stdout)
