"""A secured cluster: a stock broker on a kwire controller whose listener is SASL_SSL, both
authorizing with Kafka's StandardAuthorizer (the newest pinned release in ``make test``, each
pinned release with ``KWIRE_SECURED_ALL_RELEASES=1``, as ``make nightly`` runs it).

The controller is formatted with ``kwire storage format --add-scram`` credentials for ``admin``
and ``broker`` (SCRAM-SHA-512); its listener takes PLAIN (its own connections) and
SCRAM-SHA-512 (the broker's) over TLS. The broker's client listener is SASL_PLAINTEXT with
SCRAM-SHA-512; ``super.users`` is ``User:admin;User:broker`` on both. Through the broker, with
the stock tools: ``kafka-configs`` adds SCRAM credentials for alice and bob (the broker forwards
AlterUserScramCredentials to kwire, which writes them to the log the broker reads them from);
``kafka-topics`` creates a topic and the console producer writes to it as admin;
``kafka-acls`` lets alice read it; alice's console consumer reads every record, bob's is refused
with TOPIC_AUTHORIZATION_FAILED; a ``producer_byte_rate`` quota ``kafka-configs`` sets for alice
throttles her producer (its produce-throttle-time above 0); ``kafka-delegation-tokens`` creates
a token for admin and a client logging in with the token lists the topics.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio

from compat import kafka as _kafka
from compat.harness import (
    CLUSTER_ID,
    KafkaRelease,
    controller_properties,
    free_port,
    newest_pinned_release,
    start_kwire,
    stop_processes,
    wait_until,
)
from server.config import load_config
from tools import storage_cmd
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

RELEASES = (
    _kafka.PINNED_VERSIONS if os.environ.get("KWIRE_SECURED_ALL_RELEASES") == "1" else (newest_pinned_release().version,)
)
"""The brokers' releases: the newest in ``make test``, every pinned one in ``make nightly``."""

AUTHORIZER = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:admin;User:broker\n"
    "delegation.token.secret.key=token-secret\n"
)


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}"{extra};'


def _client(path: Path, user: str, password: str, extra: str = "") -> Path:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={_jaas('scram.ScramLoginModule', user, password, extra)}\n", encoding="utf-8")
    return path


async def _controller_ready(port: int, ca: Path) -> bool:
    import ssl

    from server.net.client import KafkaConnectionError, open_connection
    from server.net.sasl import SaslClient

    try:
        async with await open_connection("localhost", port, "probe", request_timeout_ms=5000,
                                         sasl=SaslClient("PLAIN", "admin", "admin-secret"),
                                         ssl_context=ssl.create_default_context(cafile=str(ca))):
            return True
    except (KafkaConnectionError, OSError):
        return False


async def _broker_ready(port: int) -> bool:
    """The broker lists itself in a Metadata answer to admin logged in with SCRAM-SHA-512."""
    from messages.generated.metadata_request import MetadataRequest
    from server.net.client import KafkaConnectionError, open_connection
    from server.net.sasl import SaslClient

    try:
        async with await open_connection("localhost", port, "probe", request_timeout_ms=5000,
                                         sasl=SaslClient("SCRAM-SHA-512", "admin", "admin-secret")) as conn:
            answer = await conn.request(MetadataRequest(topics=[], allow_auto_topic_creation=False))
    except (KafkaConnectionError, OSError):
        return False
    return [b.node_id for b in answer.brokers] == [101]


@pytest.fixture
def secured(release: KafkaRelease, tmp_path: Path, pki: dict[str, Path]) -> Iterator[tuple[StockBrokers, str]]:
    port, broker_port = free_port(), free_port()
    settings = (
        "listener.security.protocol.map=CONTROLLER:SASL_SSL\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\nsasl.mechanism.controller.protocol=PLAIN\n"
        "listener.name.controller.plain.sasl.jaas.config="
        + _jaas("plain.PlainLoginModule", "admin", "admin-secret", ' user_admin="admin-secret"') + "\n"
        + "listener.name.controller.scram-sha-512.sasl.jaas.config="
        + "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={pki['server']}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n" + AUTHORIZER
    )
    props = controller_properties(tmp_path / "kwire.properties", tmp_path / "kwire", port, settings)
    status = storage_cmd.format_command(
        load_config(str(props)), cluster_id=CLUSTER_ID, standalone=True,
        add_scram=["SCRAM-SHA-512=[name=admin,password=admin-secret]", "SCRAM-SHA-512=[name=broker,password=broker-secret]"],
    )
    assert status == 0
    (tmp_path / "logs").mkdir()
    procs: list[subprocess.Popen[bytes]] = [start_kwire(props, tmp_path / "logs" / "kwire.txt")]
    brokers: StockBrokers | None = None
    try:
        wait_until("kwire ready over SASL_SSL", partial(trio.run, _controller_ready, port, pki["ca"]), 60.0, alive=procs)
        scram = _jaas("scram.ScramLoginModule", "broker", "broker-secret")
        brokers = StockBrokers.create(
            tmp_path / "brokers", release.version, cluster_id=CLUSTER_ID,
            bootstrap_controllers=f"localhost:{port}", ports={101: broker_port},
            properties={
                "listeners": f"CLIENT://localhost:{broker_port}",
                "inter.broker.listener.name": "CLIENT",
                "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_SSL",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                "listener.name.client.scram-sha-512.sasl.jaas.config": scram,
                "listener.name.controller.scram-sha-512.sasl.jaas.config": scram,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["ca"]),
                "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                "group.initial.rebalance.delay.ms": "0",
                **dict(line.split("=", 1) for line in AUTHORIZER.splitlines()),
            },
        )
        brokers.start()
        wait_until("the broker serves admin over SCRAM", partial(trio.run, _broker_ready, broker_port), 90.0,
                   alive=procs)
        yield brokers, f"localhost:{broker_port}"
    finally:
        if brokers is not None:
            brokers.stop()
        stop_processes(procs)
        print("--- kwire\n" + (tmp_path / "logs" / "kwire.txt").read_text(errors="replace")[-4000:])
        if brokers is not None:
            print(brokers.report(60))


@pytest.fixture(params=RELEASES, ids=lambda v: f"kafka-{v}")
def release(request: pytest.FixtureRequest) -> KafkaRelease:
    _kafka.require_kafka(request.param)
    return KafkaRelease(request.param)


def test_a_secured_cluster_on_a_kwire_controller(
    secured: tuple[StockBrokers, str], release: KafkaRelease, tmp_path: Path
) -> None:
    brokers, bootstrap = secured
    admin = _client(tmp_path / "admin.properties", "admin", "admin-secret")

    def tool(name: str, *args: str, config: Path = admin, **kwargs: object) -> subprocess.CompletedProcess[str]:
        flag = "--command-config" if name in ("configs", "topics", "acls", "delegation-tokens") else "--consumer.config"
        if name == "console-producer":
            flag = "--producer.config"
        return release.run_tool(name, ["--bootstrap-server", bootstrap, flag, str(config), *args], **kwargs)

    for user in ("alice", "bob"):
        tool("configs", "--alter", "--add-config", f"SCRAM-SHA-512=[password={user}-secret]",
             "--entity-type", "users", "--entity-name", user)
    tool("topics", "--create", "--topic", "secured", "--partitions", "1", "--replication-factor", "1")
    values = [f"value-{i}" for i in range(20)]
    tool("console-producer", "--topic", "secured", input="\n".join(values) + "\n", timeout=120.0)
    tool("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "secured",
         "--group", "readers")
    listed = tool("acls", "--list", "--topic", "secured").stdout
    assert "User:alice" in listed and "READ" in listed, listed

    def consume(user: str) -> subprocess.CompletedProcess[str]:
        config = _client(tmp_path / f"{user}.properties", user, f"{user}-secret")
        return tool("console-consumer", "--topic", "secured", "--group", "readers", "--from-beginning",
                    "--max-messages", str(len(values)), "--timeout-ms", "30000", config=config, check=False,
                    timeout=120.0)

    read = consume("alice")
    assert [line for line in read.stdout.splitlines() if line.startswith("value-")] == values, read.stdout + read.stderr
    refused = consume("bob")
    assert "TopicAuthorizationException" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    # a quota kafka-configs sets through the broker (kwire writes the ClientQuotaRecord the
    # broker enforces) throttles alice's producer
    tool("configs", "--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "users",
         "--entity-name", "alice")
    tool("acls", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "secured")
    wait_until("the broker knows alice's quota",  # it reads the record a moment after kwire commits it
               lambda: tool("configs", "--describe", "--entity-type", "users", "--entity-name", "alice").stdout,
               60.0, ok=lambda out: "producer_byte_rate=4096" in out)
    alice = _client(tmp_path / "alice.properties", "alice", "alice-secret")
    perf = release.run_tool("producer-perf-test", [
        "--topic", "secured", "--num-records", "100", "--record-size", "1000", "--throughput", "-1",
        "--producer.config", str(alice), "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1",
        "--print-metrics"], timeout=120.0).stdout
    throttle = re.search(r"producer-metrics:produce-throttle-time-max:\{[^}]*\}\s*:\s*([\d.]+)", perf)
    assert throttle is not None and float(throttle.group(1)) > 0, perf[-3000:]
    created = tool("delegation-tokens", "--create", "--max-life-time-period", "-1").stdout
    token_line = next(line for line in created.splitlines() if line.strip() and not line.startswith(("Calling", "Created",
                                                                                                      "TOKENID")))
    token_id, token_hmac = token_line.split()[:2]
    with_token = _client(tmp_path / "token.properties", token_id, token_hmac, ' tokenauth="true"')
    # the broker learns of the token from the metadata log a moment after kwire commits it
    with_token_listed = wait_until("a client logs in to the broker with the token",
                                   lambda: tool("topics", "--list", config=with_token, check=False), 60.0,
                                   ok=lambda out: out.returncode == 0)
    assert "secured" in with_token_listed.stdout, with_token_listed.stdout
