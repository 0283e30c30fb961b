"""TLS on the controller listener (SSL, client certificates required) against a stock
controller of the newest pinned release.

A test authority signs the nodes' certificate (``CN=server``, for ``localhost``) and the
clients' (``CN=admin``, ``CN=alice``, and one that has expired); another authority signs an
untrusted one. Both nodes run ``CONTROLLER:SSL`` with PEM stores, ``ssl.client.auth=required``,
``ssl.principal.mapping.rules=RULE:^CN=([^,]*).*$/$1/,DEFAULT`` and Kafka's StandardAuthorizer
with ``super.users=User:server;User:admin`` (a node registers with itself over its listener).
The same connections go to both: stock ``kafka-metadata-quorum`` over TLS as admin; kwire's
client as admin and as alice (whose DescribeQuorum the authorizer refuses: her certificate
gave her principal); and connections each node must close: a plaintext client, a client with no
certificate, an untrusted one and an expired one.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import start_secured_pair
from compat.harness import KafkaRelease
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from messages.protocol import encode_request
from server.net.client import KafkaConnectionError, open_connection

pytestmark = pytest.mark.compat


def _settings(pki: dict[str, Path]) -> str:
    return (
        "listener.security.protocol.map=CONTROLLER:SSL\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={pki['server']}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n"
        "ssl.client.auth=required\n"
        "ssl.principal.mapping.rules=RULE:^CN=([^,]*).*$/$1/,DEFAULT\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:server;User:admin\n"
    )


def _client_context(pki: dict[str, Path], who: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    if who is not None:
        context.load_cert_chain(str(pki[who]))
    return context


DESCRIBE = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                   partitions=[PartitionData(partition_index=0)])])


async def _describe(port: int, context: ssl.SSLContext) -> Any:
    """DescribeQuorum's error code over TLS, or why the connection failed."""
    try:
        async with await open_connection("localhost", port, "tls-test", request_timeout_ms=10_000,
                                         ssl_context=context) as conn:
            return int((await conn.request(DESCRIBE)).error_code)
    except (KafkaConnectionError, OSError):  # in TLS 1.3 a refused client certificate shows on the first read
        return "refused"


async def _ready(port: int, context: ssl.SSLContext) -> bool:
    try:
        async with await open_connection("localhost", port, "tls-probe", request_timeout_ms=5000,
                                         ssl_context=context) as conn:
            answer = await conn.request(DESCRIBE)
    except (KafkaConnectionError, OSError):
        return False
    partitions = [p for t in answer.topics for p in t.partitions]
    return bool(partitions) and partitions[0].leader_id == 1 and partitions[0].high_watermark > 0


async def _plaintext(port: int) -> str:
    """A plaintext ApiVersions to the TLS port: the node must close without an answer."""
    stream = await trio.open_tcp_stream("localhost", port)
    frame = bytes(encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, 1, "t"))
    try:
        await stream.send_all(len(frame).to_bytes(4, "big") + frame)
        with trio.move_on_after(15):
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return "closed"
        return "open"
    except trio.BrokenResourceError:
        return "closed"
    finally:
        await stream.aclose()


@pytest.fixture
def tls_pair(newest_kafka: KafkaRelease, tmp_path: Path, pki: dict[str, Path]) -> Iterator[dict[str, int]]:
    admin = _client_context(pki, "admin")
    with start_secured_pair(newest_kafka, tmp_path, _settings(pki), lambda port: trio.run(_ready, port, admin)) as ports:
        yield ports


def test_tls_connections_are_accepted_and_refused_alike(
    tls_pair: dict[str, int], pki: dict[str, Path], newest_kafka: KafkaRelease, tmp_path: Path
) -> None:
    cases = {
        "admin's certificate": lambda port: trio.run(_describe, port, _client_context(pki, "admin")),
        "alice's certificate": lambda port: trio.run(_describe, port, _client_context(pki, "alice")),
        "no certificate": lambda port: trio.run(_describe, port, _client_context(pki, None)),
        "an untrusted certificate": lambda port: trio.run(_describe, port, _client_context(pki, "stranger")),
        "an expired certificate": lambda port: trio.run(_describe, port, _client_context(pki, "expired")),
        "a plaintext client": lambda port: trio.run(_plaintext, port),
    }
    answers = {case: {name: run(port) for name, port in tls_pair.items()} for case, run in cases.items()}
    assert answers["admin's certificate"]["stock"] == 0, answers
    assert answers["alice's certificate"]["stock"] == 31, answers  # her principal is User:alice
    assert answers["a plaintext client"]["stock"] == "closed", answers
    assert {answers[case]["stock"] for case in ("no certificate", "an untrusted certificate", "an expired certificate")} == {
        "refused"}, answers
    differences = {case: seen for case, seen in answers.items() if seen["stock"] != seen["kwire"]}
    assert not differences, (differences, answers)
    login = tmp_path / "admin.properties"
    login.write_text(f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={pki['admin']}\n"
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n", encoding="utf-8")
    for name, port in tls_pair.items():
        out = newest_kafka.run_tool("metadata-quorum", ["--bootstrap-controller", f"localhost:{port}",
                                                        "--command-config", login, "describe", "--status"])
        assert "LeaderId:" in out.stdout and "CurrentVoters:" in out.stdout, (name, out.stdout)
