"""The active controller's broker RPCs on a whole node (``server.node.driver``), on loopback in one
Trio process with the autojump clock (as ``tests/server/test_node.py``):

* two registrations sent at once on two connections, naming the same log directory: the second
  runs after the first committed, so it sees the directory taken (INVALID_REGISTRATION), as
  Kafka's controller, which applies the first's record before running the second;
* a registered broker is unfenced by a caught-up heartbeat and fenced once its session expires
  (``broker.session.timeout.ms`` plus one expiry-check period);
* an UnregisterBroker forwarded in an Envelope is answered inside the EnvelopeResponse;
* the periodic unclean election (``unclean.leader.election.interval.ms``) gives a leaderless
  partition a leader once its topic allows unclean elections;
* a write far larger than 8 KiB (a topic of 2,000 partitions, then the fencing that leaves all
  of them leaderless) commits as one batch: Kafka's batch limit is 8 MiB
  (``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``).
"""

from __future__ import annotations

import random
from pathlib import Path

import trio

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.alter_partition_request import PartitionData as AlterData
from messages.generated.alter_partition_request import TopicData as AlterTopic
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.protocol import decode_response, encode_request
from server.config import KRaftConfig
from server.net.client import open_connection
from server.node import Node
from tests.server.test_node import _config, _free_port, _inline, _until
from tools.storage_format import format_standalone

SHARED_DIR = Uuid.from_longs(42, 4242)
PRINCIPAL = b"\x00\x00" + b"\x05User" + b"\x0aANONYMOUS" + b"\x00" + b"\x00"


def _registration(node: Node, broker_id: int, log_dir: Uuid) -> BrokerRegistrationRequest:
    assert node.cluster_id is not None
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=node.cluster_id,
        incarnation_id=Uuid.from_longs(broker_id, 1),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
        features=[
            Feature(name="metadata.version", min_supported_version=1, max_supported_version=33),
            Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
        ],
        rack=None,
        log_dirs=[log_dir],
    )


async def _started(tmp_path: Path, nursery: trio.Nursery, **settings: str) -> tuple[Node, int]:
    port = _free_port()
    config = _config(tmp_path / "data", 1, port)
    if settings:
        config = KRaftConfig.from_properties({**config.raw, **settings})
    format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(3), run_blocking=_inline)
    await nursery.start(node.run)
    await _until(lambda: node.controller is not None and node.controller.metadata_version is not None)
    return node, port


async def test_registrations_at_once_run_one_after_the_other(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        node, port = await _started(tmp_path, nursery)
        answers: dict[int, int] = {}

        async def register(broker_id: int) -> None:
            async with await open_connection("127.0.0.1", port) as conn:
                answers[broker_id] = (await conn.request(_registration(node, broker_id, SHARED_DIR), 4)).error_code

        async with trio.open_nursery() as both:
            both.start_soon(register, 5)
            both.start_soon(register, 6)
        assert sorted(answers.values()) == [Errors.NONE, Errors.INVALID_REGISTRATION], answers
        assert node.controller is not None and len(node.controller.cluster.registrations) == 1
        node.stop()


async def test_a_broker_is_unfenced_then_fenced_when_its_session_expires(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        node, port = await _started(tmp_path, nursery)
        async with await open_connection("127.0.0.1", port) as conn:
            registered = await conn.request(_registration(node, 7, Uuid.from_longs(7, 7)), 4)
            assert registered.error_code == Errors.NONE and registered.broker_epoch > 0
            beat = BrokerHeartbeatRequest(
                broker_id=7, broker_epoch=registered.broker_epoch, current_metadata_offset=registered.broker_epoch,
                want_fence=False, want_shut_down=False,
            )
            answer = await conn.request(beat, 2)
            assert (answer.error_code, answer.is_caught_up, answer.is_fenced) == (Errors.NONE, True, False)
        assert node.controller is not None
        cluster = node.controller.cluster
        assert not cluster.registrations[7].fenced
        silent_since = trio.current_time()
        await _until(lambda: cluster.registrations[7].fenced, timeout_s=30)
        waited = trio.current_time() - silent_since
        assert 9.0 <= waited <= 9.0 + 9.0 / 8 + 0.5, waited
        node.stop()


async def test_a_forwarded_request_is_answered_in_its_envelope(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        node, port = await _started(tmp_path, nursery)
        inner = encode_request(UnregisterBrokerRequest(broker_id=77), 0, 31, "adminclient-1")
        envelope = EnvelopeRequest(request_data=inner, request_principal=PRINCIPAL, client_host_address=b"\x7f\x00\x00\x01")
        async with await open_connection("127.0.0.1", port) as conn:
            answer = await conn.request(envelope, 0)
        assert answer.error_code == Errors.NONE
        header, response = decode_response(answer.response_data, 64, 0)
        assert header.correlation_id == 31
        assert (response.error_code, response.error_message) == (
            Errors.BROKER_ID_NOT_REGISTERED, "Broker ID 77 is not currently registered"
        )
        node.stop()


async def test_writes_larger_than_eight_kib_commit(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    partitions = 2000
    async with trio.open_nursery() as nursery:
        node, port = await _started(tmp_path, nursery)
        async with await open_connection("127.0.0.1", port) as conn:
            registered = await conn.request(_registration(node, 7, Uuid.from_longs(7, 7)), 4)
            assert registered.error_code == Errors.NONE
            beat = BrokerHeartbeatRequest(broker_id=7, broker_epoch=registered.broker_epoch, current_metadata_offset=1 << 40)
            assert not (await conn.request(beat, 1)).is_fenced
            topic = CreatableTopic(
                name="wide", num_partitions=-1, replication_factor=-1,
                assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=[7]) for i in range(partitions)],
            )
            created = await conn.request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
            assert [(t.name, t.error_code) for t in created.topics] == [("wide", Errors.NONE)]
            fenced = await conn.request(
                BrokerHeartbeatRequest(broker_id=7, broker_epoch=registered.broker_epoch, want_fence=True), 1
            )
            assert fenced.error_code == Errors.NONE and fenced.is_fenced
        controller = node.controller
        assert controller is not None
        image = controller.replication
        wide = image.topics[image.topic_ids["wide"]]
        assert len(wide.partitions) == partitions
        assert all(p.leader == -1 for p in wide.partitions.values())  # its one replica was fenced
        node.stop()


async def test_the_periodic_unclean_election_leads_a_leaderless_partition(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Partition 0 of "u" (replicas 7 and 8) shrinks its ISR to 7, then 7 is fenced: no
    leader, as unclean elections are off. Once the topic allows them, the next periodic run
    (every second here) elects 8."""
    async with trio.open_nursery() as nursery:
        node, port = await _started(tmp_path, nursery, **{"unclean.leader.election.interval.ms": "1000"})
        async with await open_connection("127.0.0.1", port) as conn:
            epochs = {}
            for broker_id in (7, 8):
                registered = await conn.request(_registration(node, broker_id, Uuid.from_longs(broker_id, 7)), 4)
                epochs[broker_id] = registered.broker_epoch
                beat = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epochs[broker_id], current_metadata_offset=1 << 40)
                assert not (await conn.request(beat, 1)).is_fenced
            topic = CreatableTopic(
                name="u", num_partitions=-1, replication_factor=-1,
                assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[7, 8])],
            )
            created = await conn.request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
            topic_id = created.topics[0].topic_id
            shrink = AlterPartitionRequest(broker_id=7, broker_epoch=epochs[7], topics=[AlterTopic(
                topic_id=topic_id, partitions=[AlterData(partition_index=0, leader_epoch=0, new_isr=[7], partition_epoch=0)],
            )])
            shrunk = await conn.request(shrink, 2)
            assert shrunk.error_code == Errors.NONE and shrunk.topics[0].partitions[0].error_code == Errors.NONE
            fence = BrokerHeartbeatRequest(broker_id=7, broker_epoch=epochs[7], want_fence=True)
            assert (await conn.request(fence, 1)).is_fenced
            assert node.controller is not None
            partition = node.controller.replication.topics[topic_id].partitions[0]
            assert (partition.leader, partition.isr) == (-1, (7,))
            await trio.sleep(3)  # periodic runs with unclean elections still off
            assert node.controller.replication.topics[topic_id].partitions[0].leader == -1
            allow = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=2, resource_name="u",
                configs=[AlterableConfig(name="unclean.leader.election.enable", config_operation=0, value="true")],
            )])
            assert (await conn.request(allow, 1)).responses[0].error_code == Errors.NONE

            async def keep_8_alive() -> None:
                beat = BrokerHeartbeatRequest(broker_id=8, broker_epoch=epochs[8], current_metadata_offset=1 << 40)
                async with await open_connection("127.0.0.1", port) as other:
                    while True:
                        await other.request(beat, 1)
                        await trio.sleep(1)

            async with trio.open_nursery() as alive:
                alive.start_soon(keep_8_alive)
                # well before broker 7's old session expires (9 s after its last heartbeat), whose
                # fencing record would elect 8 on its own
                await _until(lambda: node.controller.replication.topics[topic_id].partitions[0].leader == 8, 2.5)
                alive.cancel_scope.cancel()
        node.stop()

