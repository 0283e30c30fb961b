"""Which request and response header version goes with an API version
(Kafka's ``ApiMessageType.requestHeaderVersion`` / ``responseHeaderVersion``).

* Request header v2 (with a tagged-field section) iff the request version is flexible, else v1;
  v0 (no ClientId) only for ControlledShutdown v0.
* Response header v1 (with tagged fields) iff the response version is flexible, else v0; except
  ApiVersions, whose response header is always v0 so that a client that does not yet know the
  server's versions can parse it (KIP-511).

The header codecs themselves are generated from RequestHeader.json and ResponseHeader.json in
``messages``; this module holds the rules, which need only whether a version is flexible.
"""

from __future__ import annotations

from kwire.api_keys import ApiKey


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """The RequestHeader version (0, 1 or 2) for request ``api_key`` at ``api_version``.

    ``flexible`` says whether that request version uses the flexible (tagged-field) encoding.
    Mirrors ``ApiMessageType.requestHeaderVersion``; raises nothing, unknown keys follow the
    general rule.
    """
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if flexible else 1


def response_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """The ResponseHeader version (0 or 1) for the response to ``api_key`` at ``api_version``.

    ``flexible`` says whether that response version is flexible; ApiVersions is always 0
    (KIP-511). Mirrors ``ApiMessageType.responseHeaderVersion``; raises nothing.
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if flexible else 0
