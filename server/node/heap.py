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
"""

from __future__ import annotations

import gc

__all__ = ["AGE_AFTER_RECORDS", "age_heap"]

AGE_AFTER_RECORDS = 100_000
"""Log growth, in records, after which the node ages its heap: each record replayed leaves a few
tracked objects in the image (a partition is a named tuple of tuples), so a full collection
then walks at most a few hundred thousand young objects, tens of milliseconds."""


def age_heap() -> None:
    """Collect the young generations, then freeze every object the collector tracks."""
    gc.collect(1)
    gc.freeze()
