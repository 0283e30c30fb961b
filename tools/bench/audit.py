"""Audit section: rows per second of the ``kraftlog`` scan on Spark ``local[2]`` against the
single-process Python scan of the same files, in the same run (issue "kwire audit", ``make
bench``).

Data: 1 GiB of KRaft metadata-log segments (32 MiB with ``--quick``) in three node directories
(``node1..3/__cluster_metadata-0``, identical replicas as a settled quorum leaves them), written
by storage's :class:`storage.log.MetadataLog` (segments, offset and time indexes,
leader-epoch-checkpoint) with the default 1 GiB segment size. The history has 8 leader epochs,
each opened by a LeaderChange control batch (the first also KRaftVersion and Voters); its data
batches are a mix of what an active controller writes: single-record NoOp batches, ISR changes
(1-20 PartitionChangeRecords), topic creations (a TopicRecord, 8-200 PartitionRecords with
replicas, ISR and directory ids, a few ConfigRecords) and broker registrations. The batches are
built once per epoch as templates (48 per epoch, built by :func:`storage.control.build_data_batch`
from metadata records encoded by the generated codecs) and appended with their base offset
rewritten, as a leader assigns offsets -- so timestamps repeat within an epoch; the bytes are
otherwise what kwire and Kafka write.

Rows (``rows/s``; ratio = Spark / Python, > 1 means the Spark scan is faster):

* kwire: ``spark.read.format("kraftlog")`` over the three dirs on master ``local[2]``, segments
  cut into input partitions of at most ``splitBytes`` through their offset index, aggregated to
  count(*), sum(length(record_json)), sum(length(value)), max(offset) and the number of valid
  rows -- so every decoded column crosses from the Python workers into the JVM;
* reference: :func:`tools.audit.scan_rows_python` over the same files in this process -- the same
  per-row work (batch framing and CRC, record decoding, JSON of every record) without Spark.

Both sides must count the rows that were written, or the section stops (SectionError). Spark's
start-up and a first, untimed scan of 1 MiB of the same shape (which starts the Python workers)
are outside the timed runs (both reported in ``extra``). One run per side by default
(``--runs N`` for more, interleaved); the page cache is warm for both (the data was just
written). The data lives under ``KWIRE_BENCH_DIR`` (default ``./build``) and is removed at the end.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kwire.topics import METADATA_PARTITION_DIR
from tools.bench.core import Result, SectionError

SECTION = "audit"
FULL_BYTES = 1 << 30
QUICK_BYTES = 32 << 20
NODES = ("node1", "node2", "node3")
EPOCHS = 8
TEMPLATES_PER_EPOCH = 48
T0_MS = 1_700_000_000_000


def _bench_dir() -> Path:
    base = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="kwire-bench-audit-", dir=base))


# ---------------------------------------------------------------------------------------------
# data


def _uuid(rng: random.Random) -> Any:
    from kwire.uuid import Uuid

    return Uuid(rng.randbytes(16))


def _data_values(rng: random.Random, kind: str, serial: int) -> list[bytes]:
    """The framed metadata records of one data batch of ``kind``."""
    from messages.generated.config_record import ConfigRecord
    from messages.generated.no_op_record import NoOpRecord
    from messages.generated.partition_change_record import PartitionChangeRecord
    from messages.generated.partition_record import PartitionRecord
    from messages.generated.register_broker_record import (
        BrokerEndpoint,
        BrokerFeature,
        RegisterBrokerRecord,
    )
    from messages.generated.topic_record import TopicRecord
    from messages.metadata import encode_record

    brokers = list(range(1, 13))
    if kind == "noop":
        return [encode_record(NoOpRecord(), 0)]
    if kind == "isr":
        topic = _uuid(rng)
        out = []
        for p in range(rng.randint(1, 20)):
            isr = sorted(rng.sample(brokers, rng.randint(1, 3)))
            out.append(encode_record(PartitionChangeRecord(
                partition_id=p, topic_id=topic, isr=isr, leader=isr[0]), 0))
        return out
    if kind == "topic":
        topic = _uuid(rng)
        name = f"orders-{serial}-{rng.randrange(1 << 30):x}"
        out = [encode_record(TopicRecord(name=name, topic_id=topic), 0)]
        for p in range(rng.randint(8, 200)):
            replicas = rng.sample(brokers, 3)
            out.append(encode_record(PartitionRecord(
                partition_id=p, topic_id=topic, replicas=replicas, isr=list(replicas),
                leader=replicas[0], leader_epoch=0, partition_epoch=0,
                directories=[_uuid(rng) for _ in replicas]), 2))
        for key, value in (("cleanup.policy", "delete"), ("retention.ms", "604800000"),
                           ("min.insync.replicas", "2"))[: rng.randint(0, 3)]:
            out.append(encode_record(ConfigRecord(
                resource_type=2, resource_name=name, name=key, value=value), 0))
        return out
    broker = rng.choice(brokers)
    return [encode_record(RegisterBrokerRecord(
        broker_id=broker, incarnation_id=_uuid(rng), broker_epoch=serial,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host=f"broker-{broker}.example.internal",
                                   port=9092, security_protocol=0)],
        features=[BrokerFeature(name="metadata.version", min_supported_version=7,
                                max_supported_version=27)],
        rack=f"rack-{broker % 3}", fenced=True, log_dirs=[_uuid(rng)]), 3)]


def _templates(rng: random.Random, epoch: int, t_ms: int) -> list[tuple[bytes, int]]:
    """``(batch bytes at base offset 0, record count)`` for one epoch's data batches."""
    from storage.control import build_data_batch

    kinds = ["noop"] * 16 + ["isr"] * 16 + ["topic"] * 12 + ["broker"] * 4
    out = []
    for i, kind in enumerate(kinds[:TEMPLATES_PER_EPOCH]):
        values = _data_values(rng, kind, epoch * 1000 + i)
        batch = build_data_batch(values, base_offset=0, partition_leader_epoch=epoch,
                                 append_time_ms=t_ms + 7 * i)
        out.append((batch, len(values)))
    return out


def _control_batch(epoch: int, leader: int, base_offset: int, t_ms: int) -> tuple[bytes, int]:
    from messages.generated.kraft_version_record import KRaftVersionRecord
    from messages.generated.leader_change_message import LeaderChangeMessage
    from messages.generated.leader_change_message import Voter as LcVoter
    from messages.generated.voters_record import Endpoint, KRaftVersionFeature, VotersRecord
    from messages.generated.voters_record import Voter as VrVoter
    from storage.control import build_control_batch

    ids = [1, 2, 3]
    messages: list[Any] = [LeaderChangeMessage(
        leader_id=leader, voters=[LcVoter(voter_id=v) for v in ids],
        granting_voters=[LcVoter(voter_id=v) for v in sorted({leader, ids[leader % 3]})])]
    if epoch == 1:
        messages += [
            KRaftVersionRecord(kraft_version=1),
            VotersRecord(voters=[
                VrVoter(voter_id=v, voter_directory_id=_uuid(random.Random(v)),
                        endpoints=[Endpoint(name="CONTROLLER", host=f"controller-{v}", port=9093)],
                        kraft_version_feature=KRaftVersionFeature(0, 1))
                for v in ids]),
        ]
    batch = build_control_batch(messages, base_offset=base_offset, partition_leader_epoch=epoch,
                                append_time_ms=t_ms)
    return batch, len(messages)


def generate(root: Path, total_bytes: int, seed: int = 7) -> dict[str, Any]:
    """Write about ``total_bytes`` of segments, split evenly over the three node dirs under
    ``root``. Returns ``{"dirs": [...], "bytes": on-disk segment bytes, "rows": records of
    all nodes, "batches": batches per node}``."""
    from storage.batch_builder import set_base_offset
    from storage.log import MetadataLog

    rng = random.Random(seed)
    node_bytes = total_bytes // len(NODES)
    first = root / NODES[0]
    log = MetadataLog.open(first)
    offset = written = batches = 0
    try:
        for epoch in range(1, EPOCHS + 1):
            t_ms = T0_MS + epoch * 3_600_000
            control, count = _control_batch(epoch, (epoch - 1) % 3 + 1, offset, t_ms)
            log.append_as_leader(control, epoch)
            offset += count
            written += len(control)
            batches += 1
            templates = _templates(rng, epoch, t_ms + 1000)
            budget = node_bytes * epoch // EPOCHS
            while written < budget:
                chunk = bytearray()
                while written + len(chunk) < budget and len(chunk) < (64 << 10):
                    template, count = templates[rng.randrange(len(templates))]
                    start = len(chunk)
                    chunk += template
                    set_base_offset(memoryview(chunk)[start:], offset)
                    offset += count
                    batches += 1
                log.append_as_leader(chunk, epoch)
                written += len(chunk)
        log.flush()
    finally:
        log.close()
    dirs = [first]
    for name in NODES[1:]:
        shutil.copytree(first, root / name)
        dirs.append(root / name)
    on_disk = sum(p.stat().st_size for d in dirs for p in (d / METADATA_PARTITION_DIR).glob("*.log"))
    return {"dirs": [str(d) for d in dirs], "bytes": on_disk, "rows": offset * len(NODES),
            "batches": batches}


# ---------------------------------------------------------------------------------------------
# the two scans


def spark_scan(spark: Any, dirs: list[str], split_bytes: int) -> dict[str, Any]:
    """The ``kraftlog`` data source over ``dirs``, aggregated so that every decoded column is
    produced and carried into the JVM."""
    from pyspark.sql import functions as F

    from tools.audit.datasource import KRaftLogDataSource

    spark.dataSource.register(KRaftLogDataSource)
    df = (spark.read.format("kraftlog").option("paths", ",".join(dirs))
          .option("splitBytes", str(split_bytes)).load())
    row = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.length("record_json")).alias("json_chars"),
        F.sum(F.length("value")).alias("value_bytes"),
        F.max("offset").alias("max_offset"),
        F.sum(F.col("crc_valid").cast("long")).alias("valid_rows"),
    ).collect()[0]
    return row.asDict()


def run(args: Any) -> list[Result]:
    from tools.audit.scan import parse_node_dirs, plan_file_parts, scan_rows_python
    from tools.audit.spark import spark_session

    quick = bool(getattr(args, "quick", False))
    total = int(getattr(args, "audit_bytes", None) or (QUICK_BYTES if quick else FULL_BYTES))
    runs = int(getattr(args, "runs", None) or 1)
    root = _bench_dir()
    try:
        t0 = time.perf_counter()
        data = generate(root, total)
        gen_s = time.perf_counter() - t0
        split = max(1 << 20, min(64 << 20, data["bytes"] // len(NODES) // 4))
        parts = len(plan_file_parts(parse_node_dirs(data["dirs"]), split))
        print(f"[audit] wrote {data['bytes'] / 2**20:.1f} MiB, {data['rows']} rows in "
              f"{gen_s:.1f} s; {parts} input partitions", flush=True)

        from pyspark.sql import SparkSession

        own = SparkSession.getActiveSession() is None
        t0 = time.perf_counter()
        spark = spark_session("local[2]", app_name="kwire-bench-audit")
        start_s = time.perf_counter() - t0
        master = spark.sparkContext.master
        # Untimed: the first job of a session also starts the Python workers and compiles the
        # aggregation; a scan of a small data set of the same shape pays for that.
        t0 = time.perf_counter()
        warm = generate(root / "warm-up", min(total, 1 << 20))
        spark_scan(spark, warm["dirs"], 1 << 20)
        warm_s = time.perf_counter() - t0
        spark_s: list[float] = []
        python_s: list[float] = []
        try:
            for _ in range(runs):
                t0 = time.perf_counter()
                agg = spark_scan(spark, data["dirs"], split)
                spark_s.append(time.perf_counter() - t0)
                if agg["rows"] != data["rows"] or agg["valid_rows"] != data["rows"]:
                    raise SectionError(f"Spark counted {agg['rows']} rows "
                                       f"({agg['valid_rows']} valid), {data['rows']} were written")
                t0 = time.perf_counter()
                count = scan_rows_python(data["dirs"], split)
                python_s.append(time.perf_counter() - t0)
                if count != data["rows"]:
                    raise SectionError(f"the Python scan counted {count} rows, "
                                       f"{data['rows']} were written")
        finally:
            if own:
                spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rows = data["rows"]
    spark_rates = sorted(rows / s for s in spark_s)
    python_rates = sorted(rows / s for s in python_s)
    return [Result(
        section=SECTION,
        what=f"kraftlog scan of {data['bytes'] / 2**20:,.0f} MiB",
        unit="rows/s",
        kwire=spark_rates[len(spark_rates) // 2],
        kwire_best=spark_rates[-1],
        reference=python_rates[len(python_rates) // 2],
        reference_best=python_rates[-1],
        reference_name="scan_rows_python (1 process)",
        conditions=(f"Spark {master}, {parts} input partitions of <= {split >> 20} MiB, "
                    f"{rows} rows in {data['batches']} batches x {len(NODES)} nodes, "
                    f"{runs} run(s) per side, page cache warm, Spark start-up and warm-up excluded"),
        bytes_per_op=max(1, round(data["bytes"] / rows)),
        extra={"rows": rows, "bytes": data["bytes"], "spark_s": spark_s, "python_s": python_s,
               "spark_start_s": start_s, "warm_up_s": warm_s, "generate_s": gen_s, "split_bytes": split,
               "partitions": parts, "json_chars": agg["json_chars"],
               "value_bytes": agg["value_bytes"]},
    )]
