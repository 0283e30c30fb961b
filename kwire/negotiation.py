"""ApiVersions negotiation (sans-IO): which version of each API to use with a node.

Kafka's client rules (``NodeApiVersions.latestUsableVersion``, ``NetworkClient``):

* The version used for an API is the **maximum of the intersection** of what the client can
  encode and what the node advertises; an empty intersection, or a key the node does not list,
  is an error (Kafka's ``UnsupportedVersionException``: "The node does not support X").
* Keys the node lists that the client does not know are ignored.
* If an ApiVersions request gets ``UNSUPPORTED_VERSION`` (KIP-511; the body is v0-shaped), the
  client retries once with ``min(node's ApiKeys[18].MaxVersion, client max)`` — or 0 when the node
  does not list key 18; a failure at version 0 is final.

The response is taken duck-typed (anything with ``error_code`` and ``api_keys`` whose elements
have ``api_key``, ``min_version``, ``max_version``), so this module needs no generated codec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kwire.api_keys import ApiKey

__all__ = [
    "API_VERSIONS_KEY",
    "UNSUPPORTED_VERSION",
    "ApiVersionsError",
    "NodeApiVersions",
    "UnsupportedVersionError",
    "VersionRange",
    "api_versions_retry_version",
]

API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


class _ApiVersionLike(Protocol):
    api_key: int
    min_version: int
    max_version: int


class _ApiVersionsResponseLike(Protocol):
    error_code: int

    @property
    def api_keys(self) -> Iterable[_ApiVersionLike]: ...


class UnsupportedVersionError(ValueError):
    """No version of an API is usable with this node (Kafka's UnsupportedVersionException)."""

    def __init__(self, message: str, api_key: int) -> None:
        super().__init__(message)
        self.api_key = api_key


class ApiVersionsError(ValueError):
    """An ApiVersions response carried an error code (the connection cannot be used)."""

    def __init__(self, error_code: int) -> None:
        super().__init__(f"ApiVersions failed with error code {error_code}")
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive ``[min_version, max_version]`` range."""

    min_version: int
    max_version: int

    def intersect(self, other: VersionRange) -> VersionRange | None:
        """The inclusive overlap of the two ranges, or None when they share no version."""
        lo = max(self.min_version, other.min_version)
        hi = min(self.max_version, other.max_version)
        return VersionRange(lo, hi) if lo <= hi else None

    def __str__(self) -> str:
        return f"[{self.min_version}, {self.max_version}]"


def _name(api_key: int) -> str:
    try:
        return f"{ApiKey(api_key).name} ({api_key})"
    except ValueError:
        return f"api key {api_key}"


class NodeApiVersions:
    """The API version ranges one node advertised: api key (int16) -> inclusive VersionRange.

    Mirrors ``org.apache.kafka.clients.NodeApiVersions``.
    """

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Mapping[int, VersionRange]) -> None:
        self._ranges = dict(ranges)

    @classmethod
    def from_response(cls, response: _ApiVersionsResponseLike) -> NodeApiVersions:
        """From a successful ApiVersions response; ApiVersionsError if it carries an error.
        A key listed twice keeps its last range."""
        if response.error_code != 0:
            raise ApiVersionsError(response.error_code)
        return cls(
            {int(a.api_key): VersionRange(a.min_version, a.max_version) for a in response.api_keys}
        )

    @property
    def ranges(self) -> dict[int, VersionRange]:
        """A copy of every advertised range, keyed by api key (unknown keys included)."""
        return dict(self._ranges)

    def get(self, api_key: int) -> VersionRange | None:
        """The node's inclusive range for ``api_key``, or None when the node does not list it."""
        return self._ranges.get(api_key)

    def latest_usable_version(self, api_key: int, min_version: int, max_version: int) -> int:
        """Max of the intersection of ``[min_version, max_version]`` (what the caller can
        encode) and the node's range; UnsupportedVersionError when there is none."""
        node = self._ranges.get(api_key)
        if node is None:
            raise UnsupportedVersionError(f"The node does not support {_name(api_key)}", api_key)
        client = VersionRange(min_version, max_version)
        usable = client.intersect(node)
        if usable is None:
            raise UnsupportedVersionError(
                f"The node does not support {_name(api_key)} with version in range {client}. "
                f"The supported range is {node}.",
                api_key,
            )
        return usable.max_version

    def negotiate(
        self, client: Mapping[int, tuple[int, int]], required: Iterable[int] = ()
    ) -> dict[int, int]:
        """The version to use for every key in ``client`` (key -> inclusive ``(min, max)``) that
        the node can serve. Keys in ``required`` must all be usable (UnsupportedVersionError)."""
        chosen: dict[int, int] = {}
        for key, (lo, hi) in client.items():
            try:
                chosen[key] = self.latest_usable_version(key, lo, hi)
            except UnsupportedVersionError:
                continue
        for key in required:
            if key not in chosen:
                lo, hi = client.get(key, (0, -1))
                self.latest_usable_version(key, lo, hi)  # raises with the reason
        return chosen


def api_versions_retry_version(
    response: _ApiVersionsResponseLike, tried_version: int, client_max_version: int
) -> int | None:
    """After an ApiVersions response to a request at ``tried_version``: the version to retry
    with, or None when there is nothing to retry (success, another error, a failure at
    version 0, or no lower version to try).

    The retry version is ``min(node's ApiKeys[18].MaxVersion or 0, client_max_version)``, as
    ``NetworkClient.handleApiVersionsResponse`` does after UNSUPPORTED_VERSION (KIP-511).
    """
    if response.error_code != UNSUPPORTED_VERSION or tried_version <= 0:
        return None
    node_max = 0
    for a in response.api_keys:
        if a.api_key == API_VERSIONS_KEY:
            node_max = a.max_version
            break
    retry = max(0, min(node_max, client_max_version))
    return retry if retry < tried_version else None
