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
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if flexible else 1


def response_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if flexible else 0
