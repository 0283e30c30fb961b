"""A node whose log has a writer beside its controller: ``Node.append``, which ``kwire
test-raft-server``'s load uses, while the controller host writes its own records.

The host applies a write's records to its image as it appends them, at the offsets they will
have, and some records carry their offset (a broker's epoch is its RegisterBrokerRecord's
offset). The driver therefore hands the host's appends to the core before the appends it holds
for other writers: held ones that went first moved the host's records and made it go back to
its committed image ("append -2 applied ahead at offset 7 came back as ... base_offset=45",
then "going back to the committed image") within the first second of a fresh
``kwire test-raft-server``. And the activation line never counts a negative number of records
replayed (a single voter's first batch commits before its host sees the election).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from kwire.errors import Errors
from messages.generated.broker_registration_request import Feature
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.metadata import decode_record
from server.controller.host import ControllerRequest
from server.net.client import open_connection
from server.raft.events import CommittedBatch
from storage.control import read_kraft_batch
from storage.records import RecordBatch
from tests.controller.test_host import Harness, _registration
from tests.server.test_node import _Batches, _standalone_leader, _until

FOREIGN_RECORDS = 40


class _Offsets(_Batches):
    """Also the offset of each committed data record's value."""

    def __init__(self) -> None:
        super().__init__()
        self.offsets: list[tuple[int, bytes]] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        super().handle_commit(batch)
        if not batch.is_control:
            records = read_kraft_batch(RecordBatch(batch.data), validate_crc=True).records
            self.offsets += [(batch.base_offset + i, bytes(r)) for i, r in enumerate(records)]  # type: ignore[arg-type]


async def test_a_write_beside_another_writers_held_appends_lands_where_it_was_applied(
    tmp_path: Any, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kwire.controller")
    listener = _Offsets()
    async with _standalone_leader(tmp_path, 25, listener) as (node, epoch):
        host = node.host
        assert host is not None
        decide = host.request

        def another_writer_first(now_ms: int, request: ControllerRequest) -> None:
            # another writer's records, held for their linger as the host decides where its go
            node.append(tuple(b"foreign-%d" % i for i in range(FOREIGN_RECORDS)), epoch)
            decide(now_ms, request)

        host.request = another_writer_first  # type: ignore[method-assign]
        port = node.endpoints[0].port
        conn = await open_connection("127.0.0.1", port)
        try:
            registration = _registration(7)
            registration.cluster_id = node.cluster_id
            registration.features.append(Feature(name="kraft.version", min_supported_version=0, max_supported_version=1))
            answer = await conn.request(registration)
        finally:
            await conn.aclose()
        assert answer.error_code == Errors.NONE, answer
        await _until(lambda: any(v.startswith(b"foreign-") for _, v in listener.offsets))
    registered = [(offset, decode_record(value)[0]) for offset, value in listener.offsets
                  if not value.startswith(b"foreign-")]
    [(offset, record)] = [(o, r) for o, r in registered if isinstance(r, RegisterBrokerRecord) and r.broker_id == 7]
    assert record.broker_epoch == answer.broker_epoch == offset  # the epoch is the record's offset
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "came back as" in m or "going back to the committed image" in m], messages


def test_activation_never_counts_a_negative_number_of_records_replayed() -> None:
    """A single voter's LeaderChange batch commits in the step that elects it, so its host has
    replayed beyond the epoch start offset when it first sees the election."""
    lines: list[str] = []

    class Log:
        def info(self, msg: str, *args: Any) -> None:
            lines.append(msg % args)

        def error(self, msg: str, *args: Any) -> None:
            lines.append(msg % args)

    harness = Harness(stopping=True)  # elected, not active yet
    assert harness.host.replayed_offset > harness.core.state.epoch_start_offset  # type: ignore[attr-defined]
    harness.host.log = Log()
    harness.host.stopping = False
    harness.advance(1)
    [line] = [line for line in lines if "the active controller of epoch" in line]
    assert "(0 committed records replayed meanwhile up to the epoch start offset 0)" in line, line
