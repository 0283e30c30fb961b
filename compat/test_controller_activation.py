"""The first active controller of an empty log writes what a stock controller writes.

For every pinned release: a directory formatted by stock ``kafka-storage format --standalone``
(3.9.2 keeps the bootstrap records in ``bootstrap.checkpoint``, 4.4.0 in the 0-0 checkpoint) is
copied; a stock controller runs on the original and a kwire node (``kwire server-start``) on
the copy, each until its log holds the bootstrap records. Then:

* the data records each wrote on activation (``ActivationRecordsGenerator``: the metadata
  transaction, every FeatureLevelRecord, 3.9's ZkMigrationStateRecord, 4.4's cluster
  ``min.insync.replicas``) are the same records, field for field, in the same order;
* stock ``kafka-dump-log --cluster-metadata-decoder`` reads kwire's segment and prints the
  metadata.version FeatureLevelRecord;
* ApiVersions of the kwire node reports the finalized metadata.version.

Cost: one stock controller JVM (~10 s) and one kwire process per release.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import trio

from compat.harness import (
    CLUSTER_ID,
    PARTITION,
    KafkaRelease,
    controller_properties,
    format_kwire,
    free_port,
    log_batches,
    run_stock_controller,
    start_kwire,
    stop_processes,
)
from compat.kafka import version_tuple
from messages.generated.end_transaction_record import EndTransactionRecord
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.register_controller_record import RegisterControllerRecord
from messages.metadata import decode_record
from messages.runtime import Message
from storage.records import RecordBatch
from tools.api_versions import describe

pytestmark = pytest.mark.compat

KWIRE_START_TIMEOUT_S = 60.0


def _data_records(batches: list[RecordBatch]) -> list[tuple[Message, int]]:
    out: list[tuple[Message, int]] = []
    for batch in batches:
        if batch.is_control:
            continue
        for value in batch.iter_values():
            assert value is not None
            out.append(decode_record(value))
    return out


def _activation(batches: list[RecordBatch]) -> list[tuple[Message, int]]:
    """The data records up to the first EndTransactionRecord, or up to the metadata.version
    FeatureLevelRecord's batch when there is no transaction; None-like (empty) until then.
    RegisterControllerRecords (KIP-919, written through ControllerRegistration) and NoOps are
    not activation records and are left out."""
    records = _data_records(batches)
    for i, (message, _) in enumerate(records):
        if isinstance(message, EndTransactionRecord):
            return records[: i + 1]
    if any(isinstance(m, FeatureLevelRecord) and m.name == "metadata.version" for m, _ in records):
        if not any(type(m).__name__ == "BeginTransactionRecord" for m, _ in records):
            return [(m, v) for m, v in records if isinstance(m, FeatureLevelRecord)]
    return []


def _finalized(port: int) -> bool:
    """Whether the node's ApiVersions finalizes metadata.version (False while it does not
    answer yet)."""
    try:
        view = trio.run(describe, f"localhost:{port}", "activation-probe", 5000)
    except OSError:
        return False
    return any(f["name"] == "metadata.version" for f in view["finalizedFeatures"])


def _run_kwire(props: Path, part: Path, logs: Path, port: int) -> None:
    proc = start_kwire(props, logs / "kwire.log")
    try:
        deadline = time.monotonic() + KWIRE_START_TIMEOUT_S
        while not (_activation(log_batches(part) if part.exists() else []) and _finalized(port)):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"kwire wrote no activation records, or ApiVersions lacks metadata.version "
                    f"(exit {proc.poll()}):\n" + (logs / "kwire.log").read_text(errors="replace")[-3000:]
                )
            time.sleep(0.2)  # poll interval
    finally:
        stop_processes([proc], timeout_s=30)
    assert proc.returncode == 0, (logs / "kwire.log").read_text(errors="replace")[-3000:]


def test_kwire_activates_an_empty_log_as_stock_does(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    port = free_port()
    stock_data, kwire_data = tmp_path / "stock", tmp_path / "kwire"
    stock_props = controller_properties(tmp_path / "stock.properties", stock_data, port)
    kwire_props = controller_properties(tmp_path / "kwire.properties", kwire_data, port)
    each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", stock_props, "--standalone"])
    shutil.copytree(stock_data, kwire_data)
    logs = tmp_path / "logs"
    run_stock_controller(each_kafka, stock_props, stock_data / PARTITION, logs, lambda b: bool(_activation(b)))
    stock = _activation(log_batches(stock_data / PARTITION))

    _run_kwire(kwire_props, kwire_data / PARTITION, logs, port)
    ours = _activation(log_batches(kwire_data / PARTITION))
    assert ours == stock
    levels = [m.feature_level for m, _ in ours if isinstance(m, FeatureLevelRecord) and m.name == "metadata.version"]
    assert levels and levels[0] >= (33 if each_kafka.at_least(4, 4) else 21)
    assert not any(isinstance(m, RegisterControllerRecord) for m, _ in ours)

    segment = kwire_data / PARTITION / "00000000000000000000.log"
    out = each_kafka.run_tool("dump-log", ["--cluster-metadata-decoder", "--files", segment]).stdout
    assert f'"name":"metadata.version","featureLevel":{levels[0]}' in out
    assert "isvalid: false" not in out


def test_stock_metadata_shell_reads_kwires_metadata_version(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """Stock ``kafka-metadata-shell --snapshot <kwire's segment>`` loads the image and shows the
    metadata.version kwire wrote on activation. For the 4.4 line the shell is 4.3.1's (no
    kafka-shell 4.4.0 on Maven Central), which knows metadata.version up to 4.3-IV0: the
    directory is formatted at that release version there, at 3.9-IV0 for 3.9.2."""
    release = "4.3-IV0" if version_tuple(each_kafka.tool_release("metadata-shell")) >= (4, 3) else "3.9-IV0"
    port = free_port()
    data = tmp_path / "kwire"
    props = controller_properties(tmp_path / "kwire.properties", data, port)
    format_kwire(props, "--standalone", "--release-version", release)
    logs = tmp_path / "logs"
    logs.mkdir()
    _run_kwire(props, data / PARTITION, logs, port)
    segment = data / PARTITION / "00000000000000000000.log"
    shown = each_kafka.metadata_shell(segment, "cat", "/image/features/metadataVersion")
    # 4.x keeps the level Optional in its image and prints it so
    assert shown.stdout.strip() in (release, f"Optional[{release}]"), shown.stdout + shown.stderr[-2000:]
    assert "Unhandled fault" not in shown.stderr and "Exception" not in shown.stderr, shown.stderr[-2000:]
