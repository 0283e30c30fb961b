"""``kwire api-versions``: connect to a node, negotiate, and print what it advertises (API
version ranges, the version kwire would use for each, and the feature levels), like Kafka's
``kafka-broker-api-versions.sh``.

Text form, one tab-indented line per API key (Kafka's ``NodeApiVersions.toString``)::

    localhost:9093 -> (
        ApiVersions(18): 0 to 5 [usable: 5],
        DescribeQuorum(55): 0 to 2 [usable: 2],
        ...
    )

followed by the supported and finalized features. ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kwire.api_keys import ApiKey
from kwire.negotiation import ApiVersionsError, UnsupportedVersionError
from tools.client_config import PLAINTEXT, ClientSecurity

__all__ = ["add_parser", "describe", "format_text", "run", "to_json"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "api-versions",
        help="print the API versions and features a node advertises",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--bootstrap-controller", metavar="HOST:PORT", help="a controller")
    target.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a broker")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--timeout-ms", type=int, default=30_000, help="connect and request timeout")
    parser.add_argument("--client-id", default="kwire-api-versions")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties: security.protocol, sasl.*, ssl.* (as Kafka's admin client)")
    return parser


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a HOST:PORT address: {text!r}")
    return host.strip("[]"), int(port)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).spec_name
    except ValueError:
        return "UNKNOWN"


def _usable(api_key: int, lo: int, hi: int) -> tuple[int | None, str]:
    """(version kwire would use, text) for one advertised range."""
    from messages.generated.registry import REQUESTS

    cls = REQUESTS.get(api_key)
    if cls is None:
        return None, "unusable: no codec in kwire"
    if hi < cls.LOWEST_VERSION:
        return None, "unusable: node too old"
    if lo > cls.HIGHEST_VERSION:
        return None, "unusable: node too new"
    version = min(hi, cls.HIGHEST_VERSION)
    return version, f"usable: {version}"


async def describe(
    address: str, client_id: str, timeout_ms: int, security: ClientSecurity = PLAINTEXT,
) -> dict[str, Any]:
    """Connect (logging in as ``security`` says), negotiate and return the node's ApiVersions
    as the JSON-ready dict that :func:`to_json` documents."""
    from server.net.client import open_connection

    host, port = _host_port(address)
    async with await open_connection(host, port, client_id, request_timeout_ms=timeout_ms, sasl=security.sasl,
                                     ssl_context=security.ssl_context) as conn:
        response = conn.api_versions_response
        assert response is not None
        return to_json(address, conn.api_versions_version, response)


def to_json(address: str, version: int, response: Any) -> dict[str, Any]:
    """``{"node", "apiVersionsVersion", "errorCode", "apiKeys": [{"apiKey", "name",
    "minVersion", "maxVersion", "usableVersion"}], "supportedFeatures": [{"name",
    "minVersion", "maxVersion"}], "finalizedFeaturesEpoch", "finalizedFeatures": [{"name",
    "minVersionLevel", "maxVersionLevel"}]}``; ``usableVersion`` is null when kwire cannot use
    the API."""
    keys = []
    for a in sorted(response.api_keys, key=lambda a: a.api_key):
        usable, _ = _usable(a.api_key, a.min_version, a.max_version)
        keys.append(
            {
                "apiKey": a.api_key,
                "name": _name(a.api_key),
                "minVersion": a.min_version,
                "maxVersion": a.max_version,
                "usableVersion": usable,
            }
        )
    return {
        "node": address,
        "apiVersionsVersion": version,
        "errorCode": response.error_code,
        "apiKeys": keys,
        "supportedFeatures": [
            {"name": f.name, "minVersion": f.min_version, "maxVersion": f.max_version}
            for f in response.supported_features
        ],
        "finalizedFeaturesEpoch": response.finalized_features_epoch,
        "finalizedFeatures": [
            {
                "name": f.name,
                "minVersionLevel": f.min_version_level,
                "maxVersionLevel": f.max_version_level,
            }
            for f in response.finalized_features
        ],
    }


def format_text(view: dict[str, Any]) -> str:
    lines = [f"{view['node']} -> ("]
    for k in view["apiKeys"]:
        lo, hi = k["minVersion"], k["maxVersion"]
        versions = str(lo) if lo == hi else f"{lo} to {hi}"
        _, usable = _usable(k["apiKey"], lo, hi)
        lines.append(f"\t{k['name']}({k['apiKey']}): {versions} [{usable}],")
    lines.append(")")
    if view["apiVersionsVersion"] >= 3:
        lines.append("Supported features:")
        for f in view["supportedFeatures"]:
            lines.append(f"\t{f['name']}: {f['minVersion']} to {f['maxVersion']}")
        lines.append(f"Finalized features (epoch {view['finalizedFeaturesEpoch']}):")
        for f in view["finalizedFeatures"]:
            lines.append(f"\t{f['name']}: {f['minVersionLevel']} to {f['maxVersionLevel']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import trio

    from server.net.client import KafkaConnectionError
    from tools.client_config import load_client_security

    address = args.bootstrap_controller or args.bootstrap_server
    try:
        security = load_client_security(args.command_config)
        view = trio.run(describe, address, args.client_id, args.timeout_ms, security)
    except (ValueError, OSError, KafkaConnectionError, ApiVersionsError, UnsupportedVersionError) as exc:
        print(f"kwire api-versions: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(view, indent=2) if args.json else format_text(view))
    return 0
