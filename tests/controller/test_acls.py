"""The ACL image and its rules (server.controller.acls) where the differential test against a
stock controller (compat/test_security_rpcs.py) cannot reach: replay errors, snapshots, the
per-request limits, and host patterns below metadata.version 4.4-IV1."""

from __future__ import annotations

import random

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from messages.metadata import encode_record
from server.controller import acls
from server.controller.acls import AclBinding, AclControlManager, AclFilter, host_pattern_error
from server.controller.cluster import ReplayError
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.features import CONTROLLER_UNREGISTRATION_LEVEL

NEWEST = CONTROLLER_UNREGISTRATION_LEVEL


def _binding(name: str, principal: str = "User:a", host: str = "*") -> AclBinding:
    return AclBinding(2, name, 3, principal, host, 3, 3)


def test_a_replayed_id_twice_or_a_removal_of_an_unknown_id_is_refused() -> None:
    image = AclControlManager()
    record = _binding("t").to_record(Uuid.from_longs(1, 1))
    image.replay(record)
    with pytest.raises(ReplayError):
        image.replay(record)
    with pytest.raises(ReplayError):
        image.replay(RemoveAccessControlEntryRecord(id=Uuid.from_longs(1, 2)))
    image.replay(RemoveAccessControlEntryRecord(id=Uuid.from_longs(1, 1)))
    assert not image.by_id


def test_a_snapshot_of_the_bindings_replays_to_the_same_image() -> None:
    controller = ControlManagers(bootstrap=())
    controller.feature_levels["metadata.version"] = NEWEST
    records, results = controller.acls.create([_binding("a"), _binding("b", host="10.0.0.0/8")], random.Random(1), NEWEST)
    assert results == [None, None]
    for record, version in records:
        controller.replay(encode_record(record, version))
    written = [(r, v) for r, v in controller.snapshot_records() if isinstance(r, AccessControlEntryRecord)]
    assert len(written) == 2
    again = ControlManagers(bootstrap=())
    again.reset([encode_record(r, v) for r, v in controller.snapshot_records()])
    assert again.acls.by_id == controller.acls.by_id


def test_more_new_bindings_than_one_request_may_write_is_a_policy_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acls, "MAX_RECORDS_PER_USER_OP", 3)
    image = AclControlManager()
    records, _ = image.create([_binding(n) for n in "abc"], random.Random(1), NEWEST)
    assert len(records) == 3
    with pytest.raises(ApiError) as refused:
        image.create([_binding(n) for n in "abcd"], random.Random(1), NEWEST)
    assert refused.value.error == Errors.POLICY_VIOLATION
    for record, _ in records:
        image.replay(record)
    image.replay(_binding("d").to_record(Uuid.from_longs(9, 9)))
    with pytest.raises(ApiError) as too_many:
        image.delete([AclFilter(1, None, 1, None, None, 1, 1)])
    assert too_many.value.error == Errors.INVALID_REQUEST


def test_cidr_hosts_need_metadata_version_4_4_iv1() -> None:
    below = host_pattern_error("10.0.0.0/8", acls.CIDR_LEVEL - 1)
    assert below is not None and below.error == Errors.UNSUPPORTED_VERSION
    assert host_pattern_error("10.0.0.0/8", acls.CIDR_LEVEL) is None
    assert host_pattern_error("10.0.0.1", acls.CIDR_LEVEL - 1) is None
    empty = host_pattern_error("", NEWEST)
    assert empty is not None and empty.message == "Host pattern cannot be null or empty"


def test_a_match_filter_finds_the_bindings_that_apply_to_a_name() -> None:
    image = AclControlManager()
    held = [AclBinding(2, "*", 3, "User:a", "*", 3, 3), AclBinding(2, "lo", 4, "User:a", "*", 3, 3),
            AclBinding(2, "log", 3, "User:a", "*", 3, 3), AclBinding(2, "lx", 4, "User:a", "*", 3, 3)]
    for i, binding in enumerate(held):
        image.replay(binding.to_record(Uuid.from_longs(3, i)))
    found = image.describe(AclFilter(2, "log", 2, None, None, 1, 1))
    assert found == held[:3]
    assert image.describe(AclFilter(2, "log", 1, None, None, 1, 1)) == [held[2]]
    assert image.describe(AclFilter(1, "lo", 4, None, None, 1, 1)) == [held[1]]
