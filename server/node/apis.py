"""The ApiVersions table the node advertises besides ApiVersions itself: exactly the RPCs the
KRaft core handles (``server.raft.registry``), the controller's (``server.controller.registry``),
Envelope, and SaslHandshake and SaslAuthenticate (``server.net.sasl``), each with the versions its handler accepts: the union of the pinned Kafka
releases' versions, as a controller of either release serves them."""

from __future__ import annotations

from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from server.controller import registry as controller_registry
from server.raft import registry as raft_registry

__all__ = ["api_versions"]


def api_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (min version, max version)}`` the node advertises besides ApiVersions."""
    versions = raft_registry.DEFAULT.advertised_versions()
    versions.update(controller_registry.advertised_versions())
    assert EnvelopeRequest.API_KEY is not None
    versions[EnvelopeRequest.API_KEY] = (EnvelopeRequest.LOWEST_VERSION, EnvelopeRequest.HIGHEST_VERSION)
    for sasl in (SaslHandshakeRequest, SaslAuthenticateRequest):
        assert sasl.API_KEY is not None
        versions[sasl.API_KEY] = (sasl.LOWEST_VERSION, sasl.HIGHEST_VERSION)
    return versions
