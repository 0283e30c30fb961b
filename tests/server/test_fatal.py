"""A node process stops on a storage failure with one FATAL line (server/node/fatal.py): the
failure is found inside the nurseries' exception groups, and anything else propagates."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from server.node.fatal import FATAL, FATAL_EXIT_STATUS, run_or_halt, storage_failure
from server.raft.log import LogInvariantError
from storage.errors import KafkaStorageError

CONFIG = SimpleNamespace(node_id=3, metadata_log_dir="/var/kwire")


def _raise(exc: BaseException) -> None:
    raise exc


def test_the_failure_is_found_in_nested_groups_beside_cancellations() -> None:
    failure = KafkaStorageError("appending to /var/kwire/x.log: [Errno 28] No space left on device")
    group = BaseExceptionGroup("outer", [KeyboardInterrupt(), ExceptionGroup("inner", [ValueError("x"), failure])])
    assert storage_failure(group) is failure
    assert storage_failure(failure) is failure
    invariant = LogInvariantError("offsets went backwards")
    assert storage_failure(ExceptionGroup("g", [invariant])) is invariant
    assert storage_failure(ExceptionGroup("g", [ValueError("x")])) is None


def test_a_storage_failure_is_one_fatal_line_and_status_1(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("kwire.test.fatal")
    failure = KafkaStorageError("appending to /var/kwire/x.log: [Errno 28] No space left on device")
    with caplog.at_level(logging.INFO, logger=log.name):
        status = run_or_halt(lambda: _raise(ExceptionGroup("node", [failure])), CONFIG, log)
    assert status == FATAL_EXIT_STATUS == 1
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(
        FATAL, "Halting node 3: metadata log directory /var/kwire failed: appending to /var/kwire/x.log: "
               "[Errno 28] No space left on device")]
    assert caplog.records[0].exc_info is None  # no traceback


def test_other_errors_propagate_and_a_clean_run_is_status_0() -> None:
    log = logging.getLogger("kwire.test.fatal")
    with pytest.raises(ExceptionGroup):
        run_or_halt(lambda: _raise(ExceptionGroup("node", [ValueError("bug")])), CONFIG, log)
    assert run_or_halt(lambda: None, CONFIG, log) == 0
