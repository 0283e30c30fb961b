from collections.abc import Iterator
from typing import Any

import pytest

from tests.audit.session import shared_spark, stop_shared_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every audit test (start-up is paid once); the compat audit
    tests use the same one (tests/audit/session.py)."""
    yield shared_spark()
    stop_shared_spark()
