"""The metadata-log readers of ``compat/watch.py`` on logs written here (no JVM): the checks the
controller swap makes after its run must find a fencing, a controlled shutdown or a second
registration when the log has one, and name the leader of each epoch its LeaderChange records
name. Cost: well under a CPU-second."""

from __future__ import annotations

from pathlib import Path

from compat.harness import PARTITION
from compat.watch import leader_of_each_epoch, registration_changes
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.no_op_record import NoOpRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.metadata import encode_record
from messages.runtime import Message
from storage.control import build_control_batch, build_data_batch


def _write_log(data: Path, entries: list[tuple[int, Message | LeaderChangeMessage]]) -> None:
    """A metadata log under ``data``: each entry (epoch, record) one batch, at offsets 0, 1, ..."""
    part = data / PARTITION
    part.mkdir(parents=True)
    batches = bytearray()
    for offset, (epoch, record) in enumerate(entries):
        if isinstance(record, LeaderChangeMessage):
            batches += build_control_batch([record], base_offset=offset, partition_leader_epoch=epoch,
                                           append_time_ms=1_000 + offset)
        else:
            batches += build_data_batch([encode_record(record, record.HIGHEST_VERSION)], base_offset=offset,
                                        partition_leader_epoch=epoch, append_time_ms=1_000 + offset)
    (part / f"{0:020d}.log").write_bytes(bytes(batches))


def _registered(broker: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id=broker, broker_epoch=10 + broker, fenced=True)


def _unfenced(broker: int) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(broker_id=broker, broker_epoch=10 + broker, fenced=-1)


def test_a_clean_log_has_no_registration_change_and_names_each_epochs_leader(tmp_path: Path) -> None:
    _write_log(tmp_path, [
        (1, LeaderChangeMessage(leader_id=2)), (1, _registered(101)), (1, _registered(102)), (1, _unfenced(101)),
        (2, LeaderChangeMessage(leader_id=4)), (2, UnfenceBrokerRecord(id=102, epoch=112)), (2, NoOpRecord()),
        (3, LeaderChangeMessage(leader_id=7)), (3, NoOpRecord()),
    ])
    assert registration_changes(tmp_path, below=9) == (0, [])
    assert leader_of_each_epoch(tmp_path, below=9) == {1: 2, 2: 4, 3: 7}
    assert leader_of_each_epoch(tmp_path, below=7) == {1: 2, 2: 4}  # epoch 3's record not committed


def test_fencing_shutdown_and_reregistration_after_unfencing_are_found(tmp_path: Path) -> None:
    _write_log(tmp_path, [
        (1, _registered(101)), (1, _registered(102)), (1, _registered(103)),
        (1, _unfenced(101)), (1, UnfenceBrokerRecord(id=102, epoch=112)), (1, _unfenced(103)),
        (2, BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=111, fenced=1)),
        (2, FenceBrokerRecord(id=102, epoch=112)),
        (2, BrokerRegistrationChangeRecord(broker_id=103, broker_epoch=113, in_controlled_shutdown=1)),
        (2, _registered(101)),
    ])
    first, changes = registration_changes(tmp_path, below=10)
    assert first == 0
    assert [line.split(":")[0] for line in changes] == ["6", "7", "8", "9"]
    assert "BrokerRegistrationChangeRecord" in changes[0] and "FenceBrokerRecord" in changes[1]
    assert "RegisterBrokerRecord" in changes[3]
    assert registration_changes(tmp_path, below=7)[1] == changes[:1]  # what lies past the bound is not read


def test_a_fenced_start_before_the_first_unfencing_is_not_a_change(tmp_path: Path) -> None:
    """A broker registers fenced, may register again (a restart while starting), and is
    unfenced: nothing of that is a change the swap could have caused."""
    _write_log(tmp_path, [(1, _registered(101)), (1, _registered(101)), (1, _unfenced(101))])
    assert registration_changes(tmp_path, below=3) == (0, [])
