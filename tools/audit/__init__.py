"""``kwire audit``: an offline checker of a quorum's metadata logs and of brokers' replicas,
with PySpark.

* :mod:`tools.audit.scan` -- file discovery and per-file rows (also :func:`scan_rows_python`,
  the single-process baseline),
* :mod:`tools.audit.datasource` -- the ``kraftlog`` PySpark Python Data Source,
* :mod:`tools.audit.jobs` -- the metadata-log audit: :mod:`tools.audit.log_rows` (the rows as a
  Spark view, queries run as one action), :mod:`tools.audit.log_checks` (the invariant checks),
  :mod:`tools.audit.log_timeline` (the timeline),
* :mod:`tools.audit.broker_dirs`, :mod:`tools.audit.identity`, :mod:`tools.audit.history`,
  :mod:`tools.audit.replica_scan`, :mod:`tools.audit.replica_checks`, :mod:`tools.audit.replicas`,
  :mod:`tools.audit.replica_spark` -- the replica audit of brokers' log directories, in one
  process or on Spark,
* :mod:`tools.audit.batch_source` -- the ``kafkabatches`` data source: a row per batch of
  brokers' log directories,
* :mod:`tools.audit.report` -- the metadata-log audit's summary JSON, violation tables and plots;
  :mod:`tools.audit.replica_report`, :mod:`tools.audit.replica_plots` -- the replica audit's;
  :mod:`tools.audit.html_index` -- the report directory's ``index.html``,
* :mod:`tools.audit.spark` -- the SparkSession the jobs run in,
* :mod:`tools.audit.cli` -- ``add_parser(subparsers)`` and ``run(args) -> int``.

Importing this package does not import pyspark.
"""

from tools.audit.cli import add_parser, run
from tools.audit.scan import scan_rows_python

__all__ = ["add_parser", "run", "scan_rows_python"]
