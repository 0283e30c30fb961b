"""Keeping Python's cyclic garbage collector off a large metadata image.

An image of 10^6 partitions holds about three million objects the cyclic collector tracks: a
``PartitionRegistration`` is a named tuple, and CPython stops tracking exact tuples only. A
full collection walks every tracked object (about 1.5 s at 10^6 partitions on an idle core,
longer on a busy one) and runs on the event loop, where a pause longer than
``controller.quorum.fetch.timeout.ms`` (2 s) makes followers start an election and the leader
resign. The JVM's concurrent collector has no such pause; this module is kwire's answer.

Once the image has aged, that is after each slice of a snapshot being loaded, after a snapshot
was taken, and each time the log has grown by :data:`AGE_AFTER_RECORDS` records, :func:`age_heap`
moves everything the collector tracks into its permanent generation (``gc.freeze``): later full
collections walk only the objects made after it. (Loading 10^6 partitions without it runs 13
full collections, 1.4 s of its 10 s; aged after every 20,000 records, the load takes 9 s.) Aged
only at snapshots, the objects of a 30 s snapshot interval that created 10^6 partitions were
walked by each full collection of the active controller, and its loop stopped for seconds.
Reference counting still frees frozen objects, and an image is acyclic, so a replaced image is
freed as before; what freezing gives up is collecting reference cycles among frozen objects.
The young generations are collected first, so cycles already garbage then are not frozen.

The node also keeps large buffers' memory for reuse (:func:`tune_allocator`). glibc's malloc
serves a request above its mmap threshold with fresh pages and unmaps them when freed, and
trims free memory above its trim threshold back to the system; each large buffer of the commit
path -- a Fetch response of up to 8 MiB read from a segment, received, framed and decoded, the
batches read back for the host -- then costs a page fault per 4 KiB on first touch. On the
bench machine's VM three 6 MiB copies took 13 to 16 ms that way and 1.4 to 1.9 ms in memory the
process kept. The JVM's answer is its heap, reserved once (Kafka's scripts set ``-Xms`` equal to
``-Xmx``).
"""

from __future__ import annotations

import ctypes
import gc
import os

__all__ = ["AGE_AFTER_RECORDS", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "age_heap", "tune_allocator"]

AGE_AFTER_RECORDS = 100_000
"""Log growth, in records, after which the node ages its heap: each record replayed leaves a few
tracked objects in the image (a partition is a named tuple of tuples), so a full collection
then walks at most a few hundred thousand young objects, tens of milliseconds."""


def age_heap() -> None:
    """Collect the young generations, then freeze every object the collector tracks."""
    gc.collect(1)
    gc.freeze()


MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Buffers below this size come from the heap, whose pages are reused (glibc's default starts
at 128 KiB): four times the largest Fetch response (``MAX_FETCH_SIZE_BYTES``, 8 MiB)."""
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
"""Free memory at the top of the heap kept for reuse rather than given back (glibc's default
is twice the mmap threshold, which glibc raises no higher than 64 MiB): at most this much more
resident memory than the image and the buffers in use. In ``python -m tools.bench scale`` the
largest controller's RSS went from 61-65 to 68.5 MiB at 10^4 partitions and from 93-113 to
136 MiB at 10^5 (Kafka 4.4.0's: 262 and 678 MiB in the same run)."""
_M_TRIM_THRESHOLD = -1  # malloc.h
_M_MMAP_THRESHOLD = -3
ALLOCATOR_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
"""glibc's environment tunables: an operator who sets one (or a ``glibc.malloc.`` tunable in
``GLIBC_TUNABLES``) chooses the allocator's behaviour."""


def tune_allocator() -> bool:
    """Set glibc's mmap threshold to :data:`MMAP_THRESHOLD_BYTES` and its trim threshold to
    :data:`TRIM_THRESHOLD_BYTES` for the whole process (``mallopt``). Returns True when both
    took; False, changing nothing, where the C library has no ``mallopt`` (musl, macOS) or the
    operator set the allocator's tunables (:data:`ALLOCATOR_ENV`)."""
    if any(name in os.environ for name in ALLOCATOR_ENV) or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
