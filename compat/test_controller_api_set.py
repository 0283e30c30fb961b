"""kwire's ApiVersions table on a controller listener against the APIs Kafka's newest pinned
release serves there: every request spec in its kafka-clients jar whose ``listeners`` name
``controller`` (42 in 4.4.0).

Every API kwire advertises must be one of them, at the same versions, and every one of them
must be served: :data:`NOT_YET_SERVED` (empty) would name an exception, so a new controller API
in a future release fails this test until it is served or listed.
"""

from __future__ import annotations

import pytest

from compat.harness import newest_pinned_release
from compat.jarspecs import jar_specs
from compat.kafka import require_kafka
from server.node.apis import api_versions

pytestmark = pytest.mark.compat

NOT_YET_SERVED: dict[int, str] = {}
API_VERSIONS = 18
"""ApiVersions, which the listener answers itself (``server.net``), outside the table."""


def _range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def test_the_controller_listener_serves_kafkas_controller_apis() -> None:
    release = newest_pinned_release().version
    require_kafka(release)
    controller_apis = {
        spec.data["apiKey"]: (spec.name, _range(spec.data["validVersions"]))
        for spec in jar_specs(release).values()
        if spec.data.get("type") == "request" and "controller" in spec.data.get("listeners", [])
    }
    assert len(controller_apis) >= 42, sorted(controller_apis)
    served = api_versions()
    served[API_VERSIONS] = controller_apis[API_VERSIONS][1]
    assert set(served) <= set(controller_apis), sorted(set(served) - set(controller_apis))
    wrong = {key: (served[key], controller_apis[key]) for key in served if served[key] != controller_apis[key][1]}
    assert not wrong, wrong
    missing = {key: controller_apis[key][0].removesuffix("Request") for key in set(controller_apis) - set(served)}
    assert missing == NOT_YET_SERVED
