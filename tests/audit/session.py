"""The one local Spark session of a test run, shared by the audit tests (tests/audit) and the
compat audit tests (compat/test_audit_stock_quorum.py), so Spark's start-up (about 10 s, more on
a loaded machine) is paid once per pytest process.

:func:`shared_spark` starts it on first use and returns the same session afterwards. It is
tuned for many small audits of kilobytes to a few megabytes on a small machine (:data:`CONFIG`):
``local[2]``, no UI, a 1 GiB driver, one shuffle partition, no adaptive execution, and no
generated code -- Spark's expressions are interpreted and its JVM compiles with C1 only
(``-XX:TieredStopAtLevel=1``, serial GC). Compiling generated classes and C2's optimisation of
Spark's own code are paid back only on large data; for the test audits they were most of the
CPU time (about half of a warm audit, more of the first one).

:func:`stop_shared_spark` stops it (the session-scoped ``spark`` fixture of
tests/audit/conftest.py does so at the end of the run).
Without pyspark the calling test is skipped, or fails under ``CI=true``: CI must run it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

_session: Any = None

CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""The shared session's Spark settings (see the module docstring)."""


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

    builder = SparkSession.builder.master("local[2]").appName("kwire-audit-tests")
    for key, value in CONFIG.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _session = session
    return session


def stop_shared_spark() -> None:
    """Stop the run's session if one was started."""
    global _session
    if _session is not None:
        _session.stop()
        _session = None
