"""A secured cluster: a stock broker on a three-node controller quorum whose listener is
SASL_SSL, both authorizing with Kafka's StandardAuthorizer, through a kill -9 of the active
controller. Two quorums: three kwire controllers (``kwire``), and two kwire controllers with a
stock one (``mixed``), where kwire leads first and the stock controller leads after the kill,
so that each kind leads while the other follows. ``make test`` runs the mixed quorum on the
newest pinned release (kwire leads the secured cluster first, so it serves every step before the
kill, and kwire replicates to kwire and to stock over SASL_SSL); ``KWIRE_SECURED_ALL=1`` (``make
nightly``) runs both quorums on each pinned release.

Every controller is formatted with ``--add-scram`` credentials for ``admin`` and ``broker``
(SCRAM-SHA-512; kwire's ``storage format`` or the stock tool, each node by its own kind). The
controller listener takes PLAIN, which the controllers log in to each other with (Kafka cannot
check SCRAM between controllers: the credentials live in the metadata log, KAFKA-15513), and
SCRAM-SHA-512, which the broker logs in with, over TLS. The broker's client listener is
SASL_PLAINTEXT with SCRAM-SHA-512; ``super.users`` is ``User:admin;User:broker``. Sessions on
the controller listener last ``connections.max.reauth.ms`` = 5 s (KIP-368), so the broker and the
controllers re-authenticate every few seconds throughout.

Asserted, through the broker with the stock tools unless said otherwise:

* stock ``kafka-metadata-quorum --command-config`` and ``kwire metadata-quorum
  --command-config``, given the same SASL_SSL client properties, describe the same leader,
  epoch, cluster and voters, and ``kwire health --command-config`` finds the quorum healthy;
* before the kill: ``kafka-configs`` adds SCRAM credentials for alice and bob (the broker
  forwards AlterUserScramCredentials to the active controller, which writes them to the log the
  broker reads them from); ``kafka-topics`` creates a topic and the console producer writes to
  it as admin; ``kafka-acls`` lets alice read it and lists the ACL; alice's console consumer
  reads every record, bob's is refused with TOPIC_AUTHORIZATION_FAILED;
  ``kafka-delegation-tokens`` creates a token; a ``producer_byte_rate`` quota set for alice
  throttles her producer (its produce-throttle-time above 0);
* the kill: on the kwire quorum, kill -9 of the active controller and a new one elected; on the
  mixed quorum, kill -9 of the kwire follower, then (once the high watermark has passed what it
  could hold) of the kwire leader, so that only the stock controller's log can win the election
  when the follower comes back; the killed controllers are restarted and follow;
* after the kill, each change needs what the new active controller read from the log: the token
  is renewed and a client logs in to the broker with it; bob's credential is deleted (an unknown
  one is RESOURCE_NOT_FOUND); alice reads the records written after the kill, exactly the rest;
  her read ACL is removed and ``kafka-acls --list`` no longer shows it;
* at the end every controller's log holds the same batches, byte for byte, below the high
  watermark, with the ACL, SCRAM, quota and token records of all of the above; and the kwire
  controllers logged re-authentications of the broker and of their own connections (on the mixed
  quorum, of theirs to the stock controller, and of the stock controller's to them).
"""

from __future__ import annotations

import os
import re
import ssl
import subprocess
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import trio

from compat import kafka as _kafka
from compat.harness import (
    CLUSTER_ID,
    ELECTION_BOUND_S,
    PARTITION,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    batches_below,
    free_port,
    kwire_cli,
    log_batches,
    newest_pinned_release,
    wait_until,
)
from messages.metadata import decode_record
from server.net.sasl import SaslClient
from tools.client_config import ClientSecurity
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ALL = os.environ.get("KWIRE_SECURED_ALL") == "1"
SHAPES = ("kwire", "mixed") if ALL else ("mixed",)
RELEASES = (
    _kafka.PINNED_VERSIONS if ALL else (newest_pinned_release().version,)
)
"""The releases: the newest in ``make test``, every pinned one in ``make nightly``."""

KWIRE_IDS = {"kwire": {1, 2, 3}, "mixed": {1, 2}}
"""The kwire controllers of each quorum; the others (node 3 of ``mixed``) are stock."""

BROKER = 101
SESSION_MS = 5000
"""The controllers' ``connections.max.reauth.ms``."""

AUTHORIZER = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:admin;User:broker\n"
    "delegation.token.secret.key=token-secret\n"
)

SCRAM_BOOTSTRAP = ("--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                   "--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]")


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'org.apache.kafka.common.security.{module} required username="{user}" password="{password}"{extra};'


def _client(path: Path, user: str, password: str, extra: str = "") -> Path:
    """Client properties logging in to the broker's SASL_PLAINTEXT listener with SCRAM-SHA-512."""
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={_jaas('scram.ScramLoginModule', user, password, extra)}\n", encoding="utf-8")
    return path


def _controller_settings(pki: dict[str, Path]) -> str:
    return (
        "listener.security.protocol.map=CONTROLLER:SASL_SSL\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\nsasl.mechanism.controller.protocol=PLAIN\n"
        "listener.name.controller.plain.sasl.jaas.config="
        + _jaas("plain.PlainLoginModule", "admin", "admin-secret", ' user_admin="admin-secret"') + "\n"
        + "listener.name.controller.scram-sha-512.sasl.jaas.config="
        + "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={pki['server']}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n"
        f"connections.max.reauth.ms={SESSION_MS}\n" + AUTHORIZER
    )


async def _broker_ready(port: int) -> bool:
    """The broker lists itself in a Metadata answer to admin logged in with SCRAM-SHA-512."""
    from messages.generated.metadata_request import MetadataRequest
    from server.net.client import KafkaConnectionError, open_connection

    try:
        async with await open_connection("localhost", port, "probe", request_timeout_ms=5000,
                                         sasl=SaslClient("SCRAM-SHA-512", "admin", "admin-secret")) as conn:
            answer = await conn.request(MetadataRequest(topics=[], allow_auto_topic_creation=False))
    except (KafkaConnectionError, OSError):
        return False
    return [b.node_id for b in answer.brokers] == [BROKER]


def _status_fields(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if v}


def _same_status(stock: str, kwire: str) -> None:
    """The two tools' ``describe --status`` name the same cluster, leader, epoch and voters (the
    high watermark and lags move between the two calls)."""
    a, b = _status_fields(stock), _status_fields(kwire)
    for key in ("ClusterId", "LeaderId", "LeaderEpoch"):
        assert a[key] == b[key], f"{key}: stock {a[key]!r}, kwire {b[key]!r}\n{stock}\n{kwire}"
    voters = re.compile(r'"id":\s*(\d+)')
    assert sorted(voters.findall(a["CurrentVoters"])) == sorted(voters.findall(b["CurrentVoters"])) == ["1", "2", "3"], (
        stock + kwire
    )


def _security_records(data: Path) -> Counter[str]:
    """How many of each ACL, SCRAM, quota and delegation-token record the log under ``data`` holds."""
    kinds: Counter[str] = Counter()
    for batch in log_batches(data / PARTITION):
        if batch.is_control:
            continue
        for value in batch.iter_values():
            assert value is not None
            name = type(decode_record(value)[0]).__name__
            if any(k in name for k in ("AccessControl", "Scram", "Quota", "DelegationToken")):
                kinds[name] += 1
    return kinds


@pytest.fixture(params=RELEASES, ids=lambda v: f"kafka-{v}")
def release(request: pytest.FixtureRequest) -> KafkaRelease:
    _kafka.require_kafka(request.param)
    return KafkaRelease(request.param)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_secured_cluster_through_a_controller_kill(
    release: KafkaRelease, shape: str, tmp_path: Path, pki: dict[str, Path]
) -> None:
    security = ClientSecurity(SaslClient("PLAIN", "admin", "admin-secret"),
                              ssl.create_default_context(cafile=str(pki["ca"])))
    quorum = Quorum(release, tmp_path, KWIRE_IDS[shape], dynamic=True, extra=_controller_settings(pki),
                    format_args=SCRAM_BOOTSTRAP, security=security)
    broker_port = free_port()
    scram = _jaas("scram.ScramLoginModule", "broker", "broker-secret")
    brokers = StockBrokers.create(
        tmp_path / "brokers", release.version, cluster_id=CLUSTER_ID, bootstrap_controllers=quorum.bootstrap,
        ports={BROKER: broker_port},
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
    bootstrap = f"localhost:{broker_port}"
    admin = _client(tmp_path / "admin.properties", "admin", "admin-secret")
    controller_admin = tmp_path / "controller-admin.properties"
    controller_admin.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={_jaas('plain.PlainLoginModule', 'admin', 'admin-secret')}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n", encoding="utf-8",
    )

    def tool(name: str, *args: str, config: Path = admin, **kwargs: object) -> subprocess.CompletedProcess[str]:
        flag = {"console-producer": "--producer.config", "console-consumer": "--consumer.config"}.get(
            name, "--command-config")
        return release.run_tool(name, ["--bootstrap-server", bootstrap, flag, str(config), *args], **kwargs)

    def consume(user: str, count: int) -> subprocess.CompletedProcess[str]:
        config = _client(tmp_path / f"{user}.properties", user, f"{user}-secret")
        return tool("console-consumer", "--topic", "secured", "--group", "readers", "--from-beginning",
                    "--max-messages", str(count), "--timeout-ms", "30000", config=config, check=False,
                    timeout=120.0)

    def read_values(out: subprocess.CompletedProcess[str]) -> list[str]:
        return [line for line in out.stdout.splitlines() if line.startswith("value-")]

    values = [f"value-{i}" for i in range(40)]
    try:
        # kwire first: in the mixed quorum only the kwire controllers can win the first election
        quorum.start(1)
        quorum.start(2)
        first_leader, _, _ = quorum.wait_leader(START_TIMEOUT_S)
        quorum.start(3)
        brokers.start()
        wait_until("the broker serves admin over SCRAM", partial(trio.run, _broker_ready, broker_port), 90.0,
                   alive=list(quorum.procs.values()))
        quorum.settled_high_watermark()
        stock_status = release.run_tool("metadata-quorum", [
            "--bootstrap-controller", quorum.bootstrap, "--command-config", str(controller_admin), "describe",
            "--status"]).stdout
        kwire_status = kwire_cli(["metadata-quorum", "--bootstrap-controller", quorum.bootstrap, "--command-config",
                                  controller_admin, "describe", "--status"], check=True).stdout
        _same_status(stock_status, kwire_status)
        health = kwire_cli(["health", "--bootstrap-controller", quorum.bootstrap, "--command-config",
                            controller_admin])
        assert health.returncode == 0 and "Status: healthy" in health.stdout, health.stdout + health.stderr

        # before the kill
        for user in ("alice", "bob"):
            tool("configs", "--alter", "--add-config", f"SCRAM-SHA-512=[password={user}-secret]",
                 "--entity-type", "users", "--entity-name", user)
        tool("topics", "--create", "--topic", "secured", "--partitions", "1", "--replication-factor", "1")
        tool("console-producer", "--topic", "secured", input="\n".join(values[:20]) + "\n", timeout=120.0)
        tool("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "secured",
             "--group", "readers")
        listed = tool("acls", "--list", "--topic", "secured").stdout
        assert "User:alice" in listed and "READ" in listed, listed
        read = consume("alice", 20)
        assert read_values(read) == values[:20], read.stdout + read.stderr
        refused = consume("bob", 20)
        assert "TopicAuthorizationException" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
        created = tool("delegation-tokens", "--create", "--max-life-time-period", "-1").stdout
        token_line = next(line for line in created.splitlines()
                          if line.strip() and not line.startswith(("Calling", "Created", "TOKENID")))
        token_id, token_hmac = token_line.split()[:2]
        _quota_throttles(release, tool, tmp_path, bootstrap)

        # the kill
        if shape == "kwire":
            quorum.kill(first_leader)
            new_leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=first_leader)
            quorum.start(first_leader)
        else:
            new_leader = _stock_takes_over(quorum, first_leader)
        print(f"{shape}: controller {first_leader} led, killed; controller {new_leader} leads")

        # after the kill: each change needs what the new active controller read from the log
        renewed = tool("delegation-tokens", "--renew", "--renew-time-period", "-1", "--hmac", token_hmac).stdout
        assert "Completed renew operation" in renewed, renewed
        with_token = _client(tmp_path / "token.properties", token_id, token_hmac, ' tokenauth="true"')
        listed_with_token = wait_until("a client logs in to the broker with the token",
                                       lambda: tool("topics", "--list", config=with_token, check=False), 60.0,
                                       ok=lambda out: out.returncode == 0)
        assert "secured" in listed_with_token.stdout, listed_with_token.stdout
        tool("configs", "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
             "--entity-name", "bob")
        tool("console-producer", "--topic", "secured", input="\n".join(values[20:]) + "\n", timeout=120.0)
        read = consume("alice", 20)
        assert read_values(read) == values[20:], read.stdout + read.stderr
        tool("acls", "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic",
             "secured")
        wait_until("the broker drops alice's read ACL",  # it reads the removal a moment after it is committed
                   lambda: tool("acls", "--list", "--topic", "secured").stdout, 60.0,
                   ok=lambda out: "User:alice" not in out)
        high_watermark = quorum.settled_high_watermark()
    except BaseException:
        print(quorum.report())
        print(brokers.report(60))
        raise
    finally:
        try:
            brokers.stop()
        finally:
            quorum.stop()
    logs = {i: batches_below(tmp_path / f"data{i}", high_watermark) for i in (1, 2, 3)}
    assert logs[1] == logs[2] == logs[3], {i: len(b) for i, b in logs.items()}
    kinds = _security_records(tmp_path / "data1")
    expected = {
        "UserScramCredentialRecord": 4,  # admin and broker at format time, alice and bob
        "RemoveUserScramCredentialRecord": 1,
        "AccessControlEntryRecord": 3,  # alice's Read on the topic and on the group, Write on the quota's topic
        "RemoveAccessControlEntryRecord": 1,
        "DelegationTokenRecord": 2,  # created, renewed
        "ClientQuotaRecord": 1,
    }
    assert kinds == Counter(expected), kinds
    logged = "\n".join((tmp_path / f"{i}.out").read_text(errors="replace") for i in sorted(KWIRE_IDS[shape]))
    renewed = ["re-authenticated as User:broker", "re-authenticated as User:admin", "re-authenticated to localhost:"]
    if shape == "mixed":
        renewed.append(f"re-authenticated to localhost:{quorum.ports[3]} as admin")
    assert all(line in logged for line in renewed), [line for line in renewed if line not in logged]


def _quota_throttles(release: KafkaRelease, tool: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path,
                     bootstrap: str) -> None:
    """A ``producer_byte_rate`` quota ``kafka-configs`` sets through the broker (the active
    controller writes the ClientQuotaRecord the broker enforces) throttles alice's producer. The
    broker measures a rate over its quota window (11 one-second samples, at least ten seconds),
    so 40 KB sent at once is about twice the 2 KiB/s quota: the answers carry a throttle time,
    and the producer is not held for long (100 KB against 4 KiB/s held it for ~17 s)."""
    tool("configs", "--alter", "--add-config", "producer_byte_rate=2048", "--entity-type", "users",
         "--entity-name", "alice")
    tool("topics", "--create", "--topic", "throttled", "--partitions", "1", "--replication-factor", "1")
    tool("acls", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "throttled")
    wait_until("the broker knows alice's quota",  # it reads the record a moment after the controller commits it
               lambda: tool("configs", "--describe", "--entity-type", "users", "--entity-name", "alice").stdout,
               60.0, ok=lambda out: "producer_byte_rate=2048" in out)
    alice = _client(tmp_path / "alice.properties", "alice", "alice-secret")
    perf = release.run_tool("producer-perf-test", [
        "--topic", "throttled", "--num-records", "40", "--record-size", "1000", "--throughput", "-1",
        "--producer.config", str(alice), "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1",
        "--print-metrics"], timeout=120.0).stdout
    throttle = re.search(r"producer-metrics:produce-throttle-time-max:\{[^}]*\}\s*:\s*([\d.]+)", perf)
    assert throttle is not None and float(throttle.group(1)) > 0, perf[-3000:]


def _stock_takes_over(quorum: Quorum, kwire_leader: int) -> int:
    """In the mixed quorum led by kwire node ``kwire_leader``: kill -9 the other kwire node, wait
    until the high watermark (which the leader and the stock node 3 now make alone) passes the
    leader's log end offset at that moment, which bounds what the killed node holds; kill -9 the
    leader and restart the other: node 3's log is longer than the restarted node's, so only node
    3 can be elected (KIP-595's vote rule). Then restart the old leader. Returns the new leader."""
    follower = ({1, 2} - {kwire_leader}).pop()
    quorum.kill(follower)
    view = quorum.describe(kwire_leader).partition
    bound = next(v.log_end_offset for v in view.current_voters if v.replica_id == kwire_leader)
    wait_until(f"the high watermark past {bound}", lambda: quorum.describe(kwire_leader).partition.high_watermark,
               30.0, ok=lambda hwm: hwm > bound)
    quorum.kill(kwire_leader)
    quorum.start(follower)
    new_leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=kwire_leader)
    assert new_leader == 3, f"controller {new_leader} was elected, not the stock controller 3"
    quorum.start(kwire_leader)
    return new_leader
