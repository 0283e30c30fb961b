"""Answering ApiVersions (api key 18), which the network layer does itself (sans-IO).

Behaviour (Kafka's ``ApiVersionsRequest`` / ``ApiVersionsResponse`` / ``KafkaApis``, KIP-511):

* The response header is always v0, whatever the request version (``kwire.headers``).
* A version kwire has no codec for (too new, or negative) is not parsed: the answer is a
  **v0-format** body with ``UNSUPPORTED_VERSION`` and the supported API keys, so that the client
  can retry with ``ApiKeys[18].MaxVersion`` (Kafka's ``NetworkClient`` does).
* v3+ requests whose ``ClientSoftwareName`` or ``ClientSoftwareVersion`` does not match
  ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` get ``INVALID_REQUEST`` (body at the request
  version, no API keys).
* Otherwise: ``ErrorCode`` 0, every supported key, throttle 0 and, at v3+, the supported and
  finalized features; for requests below v4 supported features whose minimum level is 0 are
  left out, as Kafka does for clients that cannot parse a minimum of 0
  (``ApiVersionsResponse.java``, ``ControllerApis.scala``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from kwire.wire import ScatterBuffer
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import ApiVersion, ApiVersionsResponse
from messages.protocol import encode_response
from server.net.dispatcher import Dispatcher

__all__ = ["SOFTWARE_NAME_VERSION_PATTERN", "ApiVersionsResponder"]

SOFTWARE_NAME_VERSION_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

API_VERSIONS = int(ApiKey.API_VERSIONS)


class ApiVersionsResponder:
    """Builds ApiVersions response frames for one server.

    ``api_ranges`` are the dispatcher's keys (ApiVersions itself is added here).
    """

    __slots__ = ("_api_keys", "_dispatcher", "_unsupported_body")

    def __init__(self, api_ranges: Mapping[int, tuple[int, int]], dispatcher: Dispatcher) -> None:
        ranges = dict(api_ranges)
        ranges[API_VERSIONS] = (ApiVersionsRequest.LOWEST_VERSION, ApiVersionsRequest.HIGHEST_VERSION)
        self._api_keys = [ApiVersion(key, lo, hi) for key, (lo, hi) in sorted(ranges.items())]
        self._dispatcher = dispatcher
        self._unsupported_body = ApiVersionsResponse(
            error_code=Errors.UNSUPPORTED_VERSION, api_keys=self._api_keys
        )

    @property
    def api_keys(self) -> list[ApiVersion]:
        """A copy of the advertised ApiKeys entries (key, inclusive min and max version),
        ApiVersions itself included, sorted by key."""
        return list(self._api_keys)

    def unsupported_version(self, correlation_id: int) -> ScatterBuffer:
        """The frame (with size prefix) answering an ApiVersions version kwire cannot parse."""
        return encode_response(self._unsupported_body, 0, correlation_id)

    def respond(self, request: ApiVersionsRequest, version: int, correlation_id: int) -> ScatterBuffer:
        """The frame (with size prefix) answering a parsed ApiVersions request at ``version``."""
        if version >= 3 and not (
            SOFTWARE_NAME_VERSION_PATTERN.fullmatch(request.client_software_name)
            and SOFTWARE_NAME_VERSION_PATTERN.fullmatch(request.client_software_version)
        ):
            body = ApiVersionsResponse(error_code=Errors.INVALID_REQUEST)
            return encode_response(body, version, correlation_id)
        body = ApiVersionsResponse(error_code=Errors.NONE, api_keys=self._api_keys)
        if version >= 3:
            supported = self._dispatcher.supported_features()
            if version < 4:
                supported = [f for f in supported if f.min_version != 0]
            finalized = self._dispatcher.finalized_features()
            body.supported_features = list(supported)
            body.finalized_features_epoch = finalized.epoch
            body.finalized_features = list(finalized.features)
        return encode_response(body, version, correlation_id)
