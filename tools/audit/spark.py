"""The SparkSession the audit's jobs run in (used by ``kwire audit`` and the audit benchmark).

Importing this module does not import pyspark; :func:`spark_session` does.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["spark_session"]


def spark_session(master: str, app_name: str = "kwire-audit") -> Any:
    """A ``pyspark.sql.SparkSession`` on ``master`` (``local[*]``, ``spark://host:port``, ...)
    whose Python workers use this interpreter, so kwire is importable in them; the Spark UI and
    console progress bars are off and the log level is ERROR."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
