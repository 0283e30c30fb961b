"""The ApiVersions table the node advertises besides ApiVersions itself: what a controller
serves (``server.controller.admission.served_api_versions``), each RPC with the versions its
handler accepts: the union of the pinned Kafka releases' versions, as a controller of either
release serves them."""

from __future__ import annotations

from server.controller.admission import served_api_versions

__all__ = ["api_versions"]


def api_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (min version, max version)}`` the node advertises besides ApiVersions."""
    return served_api_versions()
