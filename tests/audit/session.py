"""The one local Spark session of a test run, shared by the audit tests (tests/audit) and the
compat audit tests (compat/test_audit_stock_quorum.py), so Spark's start-up (about 10 s, more on
a loaded machine) is paid once per pytest process.

:func:`shared_spark` starts it on first use (``local[2]``, no UI, 2 shuffle partitions, 1 GiB
driver) and returns the same session afterwards; :func:`stop_shared_spark` stops it (the
session-scoped ``spark`` fixture of tests/audit/conftest.py does so at the end of the run).
Without pyspark the calling test is skipped, or fails under ``CI=true``: CI must run it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

_session: Any = None


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        reason = f"pyspark is not installed ({exc}); pip install -e '.[audit]'"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"audit tests must run in CI, but {reason}", pytrace=False)
        pytest.skip(reason)


def shared_spark() -> Any:
    """The run's SparkSession (started on first call)."""
    global _session
    if _session is not None:
        return _session
    _require_pyspark()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kwire-audit-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    _session = session
    return session


def stop_shared_spark() -> None:
    """Stop the run's session if one was started."""
    global _session
    if _session is not None:
        _session.stop()
        _session = None
