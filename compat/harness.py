"""What the compat tests share: pinned releases to run, free ports, server.properties, kwire
and stock processes, mixed quorums, stock tools over logs, and waiting with deadlines.

Every compat test module takes these from here (and from the fixtures of
``compat/conftest.py``); no test module imports another.

* :class:`KafkaRelease`: one pinned release, to run its classes and tools
  (``kafka.run_tool("storage", [...])``, ``kafka.start("kafka.Kafka", [props])``).
* :func:`free_port`, :func:`controller_properties`: a loopback port and a controller's
  ``server.properties``.
* :func:`kwire_cli`, :func:`format_kwire`, :func:`start_kwire`, :func:`start_stock`: the
  ``kwire`` command line, and a kwire node or a stock controller started on a properties file.
* :class:`Quorum`: controllers of both kinds in one static or dynamic quorum, started, killed,
  restarted and asked who leads.
* :func:`run_stock_controller`: a stock controller run until its log holds what a test waits
  for; :func:`assert_dumps_match`: stock DumpLogSegments and ``kwire dump-log`` print the same.
* :func:`wait_until`, :func:`wait_listening`: poll a condition (a port that accepts
  connections) until it holds, failing at a deadline.
* :func:`log_batches`, :func:`batches_below`: the batches of a metadata partition directory.

The helpers live in four modules by job, all re-exported here (``__all__``) so that a test
imports them from one place: :mod:`compat.stock_release` (:class:`KafkaRelease`),
:mod:`compat.processes` (ports, properties, processes, waiting), :mod:`compat.metadata_log`
(logs and dump-log comparison) and :mod:`compat.mixed_quorum` (:class:`Quorum`).
"""

from __future__ import annotations

from compat.kafka import REPO_DIR, stop_processes
from compat.metadata_log import (
    PARTITION,
    assert_dumps_match,
    batches_below,
    log_batches,
    metadata_records,
    run_stock_controller,
    segment_files,
)
from compat.mixed_quorum import (
    ELECTION_BOUND_S,
    ELECTION_TIMEOUT_MS,
    FETCH_TIMEOUT_MS,
    START_TIMEOUT_S,
    Quorum,
)
from compat.processes import (
    CLUSTER_ID,
    DIR_ID,
    controller_properties,
    format_kwire,
    free_port,
    kwire_cli,
    start_kwire,
    start_stock,
    wait_listening,
    wait_until,
)
from compat.stock_release import KafkaRelease, newest_pinned_release

__all__ = [
    "CLUSTER_ID", "DIR_ID", "ELECTION_BOUND_S", "ELECTION_TIMEOUT_MS", "FETCH_TIMEOUT_MS", "PARTITION",
    "REPO_DIR", "START_TIMEOUT_S", "KafkaRelease", "Quorum", "assert_dumps_match", "batches_below",
    "controller_properties", "format_kwire", "free_port", "kwire_cli", "log_batches", "metadata_records",
    "newest_pinned_release", "run_stock_controller", "segment_files", "start_kwire", "start_stock",
    "stop_processes", "wait_listening", "wait_until",
]
