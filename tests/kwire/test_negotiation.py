from __future__ import annotations

import pytest

from kwire.negotiation import (
    ApiVersionsError,
    NodeApiVersions,
    UnsupportedVersionError,
    VersionRange,
    api_versions_retry_version,
)
from messages.generated.api_versions_response import ApiVersion, ApiVersionsResponse


def response(*keys: tuple[int, int, int], error_code: int = 0) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=error_code, api_keys=[ApiVersion(*k) for k in keys])


def test_latest_usable_is_max_of_intersection() -> None:
    node = NodeApiVersions.from_response(response((55, 0, 2), (1, 4, 17), (999, 0, 9)))
    assert node.latest_usable_version(55, 0, 2) == 2
    assert node.latest_usable_version(55, 0, 1) == 1
    assert node.latest_usable_version(1, 4, 18) == 17
    assert node.latest_usable_version(1, 13, 13) == 13
    assert node.get(999) == VersionRange(0, 9)


def test_no_intersection_is_a_clear_error() -> None:
    node = NodeApiVersions.from_response(response((1, 4, 17)))
    with pytest.raises(UnsupportedVersionError, match=r"FETCH \(1\) with version in range \[0, 3\]. The supported range is \[4, 17\]"):
        node.latest_usable_version(1, 0, 3)
    with pytest.raises(UnsupportedVersionError, match=r"does not support DESCRIBE_QUORUM \(55\)") as info:
        node.latest_usable_version(55, 0, 2)
    assert info.value.api_key == 55


def test_negotiate_table() -> None:
    node = NodeApiVersions.from_response(response((55, 0, 2), (60, 0, 1), (80, 1, 1)))
    client = {55: (0, 2), 60: (0, 2), 80: (0, 0), 52: (0, 2)}
    assert node.negotiate(client) == {55: 2, 60: 1}
    assert node.negotiate(client, required=[55, 60]) == {55: 2, 60: 1}
    with pytest.raises(UnsupportedVersionError, match="ADD_RAFT_VOTER"):
        node.negotiate(client, required=[80])
    with pytest.raises(UnsupportedVersionError, match="VOTE"):
        node.negotiate(client, required=[52])


def test_error_response_is_refused() -> None:
    with pytest.raises(ApiVersionsError) as info:
        NodeApiVersions.from_response(response((18, 0, 3), error_code=42))
    assert info.value.error_code == 42


def test_retry_rules() -> None:
    unsupported = response((18, 0, 3), error_code=35)
    assert api_versions_retry_version(unsupported, 5, 5) == 3
    assert api_versions_retry_version(unsupported, 5, 2) == 2
    assert api_versions_retry_version(unsupported, 0, 5) is None  # v0 failures are final
    assert api_versions_retry_version(unsupported, 3, 5) is None  # nothing lower to try
    # No key 18 in the error body: retry at 0 (Kafka's NetworkClient).
    assert api_versions_retry_version(response(error_code=35), 4, 5) == 0
    assert api_versions_retry_version(response((18, 0, 3)), 5, 5) is None
    assert api_versions_retry_version(response((18, 0, 3), error_code=42), 5, 5) is None
