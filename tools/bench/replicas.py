"""Replicas section: ``kwire audit`` of brokers' log directories at 1, 10 and 50 GiB, in one
process, on Spark ``local[2]`` and on a standalone Spark cluster of one and of two workers, in
the same run; the disk's own sequential read rate beside them as the limit.

Data (generated, not produced): three broker log directories (``broker-101..103``) holding the
same 1,000 partitions -- ``events-0`` .. ``events-998`` and ``big-0``, which alone holds a tenth
of the bytes, so that one partition is larger than a task's share -- as stock brokers leave
them: segments of at most 1 GiB (``log.segment.bytes``) with an offset index entry every
4 KiB of batches (``log.index.interval.bytes``), ``leader-epoch-checkpoint``,
``partition.metadata``, the four offset checkpoints (high watermark = log end), and a metadata
log in broker 101's ``__cluster_metadata-0`` with the topics and the PartitionRecord and
PartitionChangeRecords of three leader epochs per partition. The batches are 48 templates of
stock producer batches -- every codec (none, gzip, snappy, lz4, zstd), 5-80 records of
50-500 bytes (about Kafka's default 16 KiB ``batch.size``), a sixth of them transactional, each followed by its COMMIT marker -- laid out
with their base offset and partition leader epoch rewritten (neither is under the CRC), as a
leader assigns them; every copy holds the same bytes, as followers copy them.

Measured per size, each run with a cold page cache (``/proc/sys/vm/drop_caches``, when root):

* reference: the one-process audit (``python -m tools.audit DIRS --metadata ...``, a
  subprocess), its wall time and peak RSS (``ru_maxrss``);
* kwire: the same command with ``--master local[2]``, then ``--master spark://...`` on a
  standalone master with one worker of one core, then two workers of one core each (the
  pyspark install's own ``Master`` and ``Worker`` classes) -- the audit's own elapsed time,
  Spark's start-up excluded (reported beside it);
* up to 1 GiB, the one-process and ``local[2]`` audits again with ``--deep`` (every batch's
  records decompressed and decoded), the latter against the former;
* the disk: ``dd`` of the largest segment to ``/dev/null`` in 8 MiB blocks, and ``cat`` of every
  segment, eight files at a time, both cold.

Every run must find the cluster clean and count every batch written, or the section stops.
Rows are MB/s of segment bytes (ratio = Spark / one process; a deep run against the one-process
run, a deep Spark run against the deep one-process run). The data lives under
``KWIRE_BENCH_DIR`` (default ``./build``) and is removed at the end; 50 GiB needs that much
free disk (``--replica-sizes`` picks the sizes).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from tools.bench.core import Result, SectionError

SECTION = "replicas"
SIZES = (1 << 30, 10 << 30, 50 << 30)
QUICK_SIZES = (8 << 20,)
BROKERS = (101, 102, 103)
PARTITIONS = 1000
BIG_SHARE = 0.1
SEGMENT_BYTES = 1 << 30
INDEX_INTERVAL_BYTES = 4096
EPOCHS = 3
DEEP_MAX_BYTES = 1 << 30
"""Sizes up to this one are audited with ``--deep`` too (every record decoded: about 15 MB/s
per core, so 50 GiB would take an hour)."""
TEMPLATES = 48
CLUSTER_ID = "kwireBenchReplicas0000"
T0_MS = 1_700_000_000_000
_INDEX_ENTRY = struct.Struct(">ii")


def parse_sizes(text: str | None) -> tuple[int, ...]:
    """``"1G,10G,512M"`` as bytes (G and M are powers of two); () for None."""
    if not text:
        return ()
    units = {"G": 1 << 30, "M": 1 << 20, "K": 1 << 10}
    return tuple(int(float(item[:-1]) * units[item[-1].upper()]) if item[-1].upper() in units else int(item)
                 for item in (part.strip() for part in text.split(",")) if item)


def _bench_dir() -> Path:
    base = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="kwire-bench-replicas-", dir=base))


# ---------------------------------------------------------------------------------------------
# data


def templates(rng: random.Random) -> list[tuple[bytes, int]]:
    """``(batch bytes at base offset 0, offsets it spans)``: producer batches of every codec;
    a transactional one is one template with its COMMIT marker batch after it."""
    from storage.batch_builder import build_batch, set_base_offset
    from storage.compression import CompressionType
    from storage.control import ControlRecordType, EndTransactionMarker
    from storage.record_codec import SimpleRecord

    codecs = list(CompressionType)
    out = []
    for i in range(TEMPLATES):
        count = rng.randint(5, 80)
        records = [SimpleRecord(rng.randbytes(rng.randint(25, 250)) * 2, key=b"key-%d" % rng.randrange(1000),
                                timestamp=T0_MS + i * 1000 + n) for n in range(count)]
        transactional = i % 6 == 5
        batch = build_batch(records, compression=codecs[i % len(codecs)], is_transactional=transactional,
                            producer_id=1000 + i if transactional else -1, producer_epoch=0 if transactional else -1,
                            base_sequence=0 if transactional else -1)
        if transactional:
            marker = bytearray(build_batch(
                [SimpleRecord(EndTransactionMarker(ControlRecordType.COMMIT, 0).value_bytes(),
                              key=ControlRecordType.COMMIT.key_bytes(), timestamp=T0_MS + i * 1000 + count)],
                is_control=True, is_transactional=True, producer_id=1000 + i, producer_epoch=0))
            set_base_offset(marker, count)
            out.append((batch + bytes(marker), count + 1))
        else:
            out.append((batch, count))
    return out


def _metadata_log(root: Path, names: list[tuple[str, int]], ids: dict[str, Any]) -> None:
    """Broker 101's ``__cluster_metadata-0``: each topic, each partition's PartitionRecord
    (epoch 0) and a PartitionChangeRecord per later epoch."""
    from messages.generated.partition_change_record import PartitionChangeRecord
    from messages.generated.partition_record import PartitionRecord
    from messages.generated.topic_record import TopicRecord
    from messages.metadata import encode_record
    from storage.batch_builder import build_batch
    from storage.record_codec import SimpleRecord

    values = [encode_record(TopicRecord(name=t, topic_id=ids[t]), 0) for t in ids]
    for topic, partition in names:
        values.append(encode_record(PartitionRecord(
            partition_id=partition, topic_id=ids[topic], replicas=list(BROKERS), isr=list(BROKERS), leader=BROKERS[0],
            leader_epoch=0, partition_epoch=0, directories=[]), 0))
        for epoch in range(1, EPOCHS):
            values.append(encode_record(PartitionChangeRecord(
                partition_id=partition, topic_id=ids[topic], leader=BROKERS[epoch % len(BROKERS)]), 0))
    pdir = root / "broker-101" / "__cluster_metadata-0"
    pdir.mkdir()
    with open(pdir / f"{0:020d}.log", "wb") as f:
        for start in range(0, len(values), 100):
            chunk = values[start:start + 100]
            f.write(build_batch([SimpleRecord(v, timestamp=T0_MS) for v in chunk], base_offset=start,
                                partition_leader_epoch=1))


class _Copies:
    """Every broker's copy of one partition, written with the same bytes: segments rolled at
    :data:`SEGMENT_BYTES`, an offset index entry every :data:`INDEX_INTERVAL_BYTES`."""

    def __init__(self, paths: list[Path], partition_metadata: bytes) -> None:
        self.paths = paths
        for path in paths:
            path.mkdir()
            (path / "partition.metadata").write_bytes(partition_metadata)
        self.size = 0
        self.segment_base = self.segment_size = 0
        self.index = bytearray()
        self.since_entry = INDEX_INTERVAL_BYTES
        self.files = [open(p / f"{0:020d}.log", "wb") for p in paths]  # noqa: SIM115 - closed in roll/close

    def write(self, chunk: bytes | bytearray, batches: list[tuple[int, int]]) -> None:
        """Append ``chunk``; ``batches`` are its batches' ``(last offset, position in chunk)``."""
        last_position = 0
        for last_offset, position in batches:
            self.since_entry += position - last_position
            last_position = position
            if self.since_entry >= INDEX_INTERVAL_BYTES:
                self.index += _INDEX_ENTRY.pack(last_offset - self.segment_base, self.segment_size + position)
                self.since_entry = 0
        self.since_entry += len(chunk) - last_position
        for f in self.files:
            f.write(chunk)
        self.segment_size += len(chunk)
        self.size += len(chunk)

    def _finish_segment(self) -> None:
        for f in self.files:
            f.close()
        for path in self.paths:
            (path / f"{self.segment_base:020d}.index").write_bytes(bytes(self.index))

    def roll(self, base_offset: int) -> None:
        self._finish_segment()
        self.segment_base, self.segment_size, self.index = base_offset, 0, bytearray()
        self.since_entry = INDEX_INTERVAL_BYTES
        self.files = [open(p / f"{base_offset:020d}.log", "wb") for p in self.paths]  # noqa: SIM115

    def close(self, epoch_checkpoint: bytes) -> None:
        self._finish_segment()
        for path in self.paths:
            (path / "leader-epoch-checkpoint").write_bytes(epoch_checkpoint)


def generate(root: Path, total_bytes: int, seed: int = 11, partitions: int = PARTITIONS) -> dict[str, Any]:
    """Write about ``total_bytes`` of segments (each copy counted) under ``root``; returns
    ``{"dirs", "metadata", "bytes", "batches", "largest_segment"}``."""
    from kwire.uuid import Uuid
    from storage.batch_builder import set_base_offset, set_partition_leader_epoch
    from storage.batch_scan import next_batch_size
    from storage.leader_epoch import EpochEntry, encode_checkpoint
    from storage.meta_properties import MetaProperties, write_meta_properties
    from storage.offset_checkpoint import (
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        encode_offset_checkpoint,
    )
    from storage.partition_metadata import encode_partition_metadata

    rng = random.Random(seed)
    batches = templates(rng)
    framed = []  # per template: its batches' (position, last offset delta)
    for data, _count in batches:
        pos, inner = 0, []
        while pos < len(data):
            size = next_batch_size(data, pos)
            assert size is not None
            inner.append((pos, struct.unpack_from(">i", data, pos + 23)[0]))
            pos += size
        framed.append(inner)
    ids = {"events": Uuid(rng.randbytes(16)), "big": Uuid(rng.randbytes(16))}
    names = [("events", p) for p in range(partitions - 1)] + [("big", 0)]
    per_copy = total_bytes // len(BROKERS)
    small = int(per_copy * (1 - BIG_SHARE)) // (partitions - 1)
    dirs = [root / f"broker-{b}" for b in BROKERS]
    for b, d in zip(BROKERS, dirs, strict=True):
        d.mkdir(parents=True)
        write_meta_properties(d, MetaProperties(1, CLUSTER_ID, b, Uuid(rng.randbytes(16))), fsync=False)
    log_ends: dict[tuple[str, int], int] = {}
    written = count = largest = 0
    for topic, partition in names:
        target = per_copy - small * (partitions - 1) if topic == "big" else small
        copies = _Copies([d / f"{topic}-{partition}" for d in dirs], encode_partition_metadata(ids[topic]))
        offset = 0
        epochs: list[EpochEntry] = []
        while copies.size < target:
            epoch = min(EPOCHS - 1, copies.size * EPOCHS // max(target, 1))
            if not epochs or epochs[-1].epoch != epoch:
                epochs.append(EpochEntry(epoch, offset))
            chunk, index = bytearray(), []
            while len(chunk) < min(8 << 20, target // EPOCHS + 1) and copies.size + len(chunk) < target:
                which = rng.randrange(len(batches))
                data, _count = batches[which]
                if copies.segment_size + len(chunk) + len(data) > SEGMENT_BYTES:
                    break
                start = len(chunk)
                chunk += data
                for pos, delta in framed[which]:
                    view = memoryview(chunk)[start + pos:]
                    set_base_offset(view, offset)
                    set_partition_leader_epoch(view, epoch)
                    view.release()
                    index.append((offset + delta, start + pos))
                    offset += delta + 1
                    count += 1
            if not chunk:  # the segment is full
                largest = max(largest, copies.segment_size)
                copies.roll(offset)
                continue
            copies.write(chunk, index)
        largest = max(largest, copies.segment_size)
        copies.close(encode_checkpoint(epochs))
        log_ends[(topic, partition)] = offset
        written += copies.size * len(dirs)
    for d in dirs:
        (d / REPLICATION_OFFSET_CHECKPOINT).write_bytes(encode_offset_checkpoint(log_ends))
        (d / RECOVERY_POINT_OFFSET_CHECKPOINT).write_bytes(encode_offset_checkpoint(log_ends))
    _metadata_log(root, names, ids)
    return {"dirs": [str(d) for d in dirs], "metadata": str(dirs[0] / "__cluster_metadata-0"), "bytes": written,
            "batches": count * len(dirs), "largest_segment": largest}


# ---------------------------------------------------------------------------------------------
# runs


def _drop_caches() -> bool:
    """Write back and drop the page cache (root only); whether it was dropped."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


_RSS_WRAPPER = (
    "import json, resource, sys\n"
    "from tools.audit.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "print(json.dumps({'status': status, 'max_rss_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}),"
    " file=sys.stderr)\n"
)


def audit_once(data: dict[str, Any], master: str | None, deep: bool = False) -> dict[str, Any]:
    """One ``kwire audit`` of the data in a subprocess (``deep``: ``--deep``): its JSON summary,
    wall time and (one process) peak RSS. Raises SectionError unless it found the cluster clean
    and read every batch."""
    args = [*data["dirs"], "--metadata", data["metadata"], "--json", "--quiet"]
    if master is not None:
        args += ["--master", master]
    if deep:
        args.append("--deep")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _RSS_WRAPPER, *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(),
                                                                                         os.environ.get("PYTHONPATH")]))})
    wall = time.perf_counter() - started
    tail = done.stderr.strip().splitlines()
    try:
        summary = json.loads(done.stdout)["replicas"]
        rss = json.loads(tail[-1])["max_rss_kib"]
    except (ValueError, KeyError, IndexError) as exc:
        raise SectionError(f"the audit ({master or 'one process'}) failed: {done.stderr[-2000:]}") from exc
    if done.returncode != 0 or not summary["ok"] or summary["batches"] != data["batches"]:
        raise SectionError(f"the audit ({master or 'one process'}) found {summary['violation_counts']}, "
                           f"{summary['batches']} of {data['batches']} batches: {done.stderr[-2000:]}")
    return {"elapsed_s": summary["elapsed_s"], "wall_s": wall, "max_rss_kib": rss, "bytes": summary["bytes_read"]}


class Standalone:
    """A standalone Spark master and ``workers`` workers of one core each on loopback, from
    the pyspark install (``bin/spark-class``), their output under ``root``."""

    def __init__(self, root: Path, workers: int, memory: str = "2g") -> None:
        import pyspark

        from tools.local_cluster import free_ports

        self.root, self.workers, self.memory = root, workers, memory
        self.spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
        self.port, self.ui = free_ports(2)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                    "SPARK_LOG_DIR": str(root), "SPARK_WORKER_DIR": str(root / "work")}

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        out = open(self.root / f"{name}.out", "ab")  # noqa: SIM115 - the process holds it
        self.procs.append(subprocess.Popen([self.spark_class, *args], stdout=out, stderr=subprocess.STDOUT,
                                           env=self.env, start_new_session=True))
        out.close()

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as answer:
                return int(json.load(answer).get("aliveworkers", 0))
        except (OSError, ValueError):
            return -1

    def __enter__(self) -> Standalone:
        self.root.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                    str(self.port), "--webui-port", str(self.ui))
        for i in range(self.workers):
            self._start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--cores", "1", "--memory",
                        self.memory, "--webui-port", "0", self.master)
        deadline = time.monotonic() + 120
        while self.alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.__exit__()
                raise SectionError(f"the standalone cluster did not start: see {self.root}")
            time.sleep(0.5)  # poll interval
        return self

    def __exit__(self, *exc: object) -> None:
        from tools.local_cluster import stop_processes

        stop_processes(self.procs, timeout_s=20)


def _cat_all(root: Path) -> float:
    """Seconds ``cat`` takes to read every segment under ``root`` to /dev/null, eight files at a
    time (the files' own read rate, which many small segments keep below ``dd``'s)."""
    started = time.perf_counter()
    subprocess.run(["bash", "-c", f"find {root} -name '*.log' -print0 | xargs -0 -P 8 -n 64 cat > /dev/null"],
                   check=True)
    return time.perf_counter() - started


def _dd(path: str) -> float:
    """Seconds ``dd`` takes to read ``path`` to /dev/null in 8 MiB blocks."""
    started = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=8M"], check=True, capture_output=True)
    return time.perf_counter() - started


def run(args: Any) -> list[Result]:
    quick = bool(getattr(args, "quick", False))
    sizes = parse_sizes(getattr(args, "replica_sizes", None)) or (QUICK_SIZES if quick else SIZES)
    partitions = 30 if quick else PARTITIONS
    root = _bench_dir()
    results = []
    try:
        for total in sizes:
            data_root = root / f"{total >> 20}MiB"
            t0 = time.perf_counter()
            data = generate(data_root, total, partitions=partitions)
            gen_s = time.perf_counter() - t0
            mib = data["bytes"] / 2**20
            print(f"[replicas] wrote {mib:,.0f} MiB, {data['batches']} batches, {partitions} partitions x "
                  f"{len(BROKERS)} brokers in {gen_s:.1f} s", flush=True)
            largest = max((os.path.join(dp, f) for dp, _, fs in os.walk(data_root) for f in fs if f.endswith(".log")),
                          key=os.path.getsize)
            cold = _drop_caches()
            dd_s = _dd(largest)
            dd_rate = os.path.getsize(largest) / dd_s / 1e6
            _drop_caches()
            cat_rate = data["bytes"] / _cat_all(data_root) / 1e6
            print(f"[replicas] {mib:,.0f} MiB disk: dd of the largest segment {dd_rate:,.0f} MB/s, cat of every "
                  f"segment {cat_rate:,.0f} MB/s", flush=True)
            runs: dict[str, dict[str, Any]] = {}
            _drop_caches()
            runs["one process"] = audit_once(data, None)
            _drop_caches()
            runs["local[2]"] = audit_once(data, "local[2]")
            for workers in (1,) if quick else (1, 2):
                with Standalone(root / f"standalone-{workers}", workers) as cluster:
                    _drop_caches()
                    runs[f"standalone x{workers}"] = audit_once(data, cluster.master)
            if total <= DEEP_MAX_BYTES:
                for name, master in (("one process, deep", None), ("local[2], deep", "local[2]")):
                    _drop_caches()
                    runs[name] = audit_once(data, master, deep=True)
            for name, r in runs.items():
                print(f"[replicas] {mib:,.0f} MiB {name}: {r['elapsed_s']:.1f} s "
                      f"({data['bytes'] / r['elapsed_s'] / 1e6:,.0f} MB/s), wall {r['wall_s']:.1f} s, "
                      f"peak RSS {r['max_rss_kib'] / 1024:,.0f} MiB", flush=True)
            for name, r in runs.items():
                if name == "one process":
                    continue
                base = "one process, deep" if name == "local[2], deep" else "one process"
                results.append(Result(
                    section=SECTION, what=f"replica audit of {mib:,.0f} MiB, {name}", unit="MB/s",
                    kwire=data["bytes"] / r["elapsed_s"] / 1e6, reference=data["bytes"] / runs[base]["elapsed_s"] / 1e6,
                    reference_name=f"the same audit in {base}",
                    conditions=(f"{partitions} partitions x {len(BROKERS)} brokers, {data['batches']} batches, "
                                f"tasks of the default size (four per core, 64 MiB-1 GiB), page cache "
                                f"{'dropped before each run' if cold else 'warm (not root)'}; disk: dd of the "
                                f"largest segment {dd_rate:,.0f} MB/s, cat of every segment (8 at a time) "
                                f"{cat_rate:,.0f} MB/s; Spark start-up excluded"),
                    extra={"bytes": data["bytes"], "batches": data["batches"], "generate_s": gen_s,
                           "dd_mb_s": dd_rate, "cat_mb_s": cat_rate, "runs": runs},
                ))
            shutil.rmtree(data_root, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results
