"""Property tests of the file primitives under the log (``FileRecords`` slices, Kafka's
``Utils.atomicMoveWithFallback`` writes).

* A file region reads exactly its slice of the file, also after the file was unlinked or grew;
  once the file is cut below the region's end, or the region closed, it refuses with
  KafkaStorageError instead of sending short data.
* A sequence of atomic writes leaves exactly the last data and no temporary file, whatever the
  sizes, and a write that fails part-way leaves the previous content whole.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage.fileio
from storage.errors import KafkaStorageError
from storage.fileio import FileRegion, atomic_write
from tests.properties import examples
from tests.storage.test_snapshot_properties import partition_dir


@settings(deadline=None, max_examples=examples(60))
@given(content=st.binary(min_size=1, max_size=2000), data=st.data())
def test_a_region_reads_its_slice_until_the_file_is_cut_under_it(content: bytes, data: st.DataObject) -> None:
    position = data.draw(st.integers(0, len(content)), label="position")
    length = data.draw(st.integers(0, len(content) - position), label="length")
    with partition_dir() as root:
        path = root / "00000000000000000000.log"
        path.write_bytes(content)
        fd = os.open(path, os.O_RDWR)
        try:
            region = FileRegion(fd, position, length, path)
        finally:
            os.close(fd)  # the region holds a descriptor of its own
        assert len(region) == length and bytes(region) == content[position:position + length]
        with open(path, "ab") as f:  # appends after the region change nothing
            f.write(b"more")
        assert bytes(region) == content[position:position + length]
        cut = data.draw(st.integers(0, len(content)), label="cut")
        os.truncate(path, cut)
        if cut >= position + length:
            region.check_intact()
            assert bytes(region) == content[position:position + length]
        else:
            with pytest.raises(KafkaStorageError):
                bytes(region)
        path.unlink()  # an unlinked file is still read through the region's descriptor
        if cut >= position + length:
            assert bytes(region) == content[position:position + length]
        region.close()
        region.close()
        with pytest.raises(KafkaStorageError, match="closed"):
            region.check_intact()


@settings(deadline=None, max_examples=examples(40))
@given(writes=st.lists(st.binary(max_size=3000), min_size=1, max_size=6), fail_at=st.none() | st.integers(0, 5))
def test_atomic_writes_leave_the_last_complete_data_and_no_temporary_file(writes: list[bytes], fail_at: int | None) -> None:
    with partition_dir() as root:
        path = root / "quorum-state"
        last: bytes | None = None
        for i, payload in enumerate(writes):
            if i == fail_at:
                # a write that fails (its fsync raises) must leave the previous file whole
                saved = storage.fileio._fsync

                def failing(fd: int) -> None:
                    raise OSError(5, "Input/output error")

                storage.fileio._fsync = failing
                try:
                    with pytest.raises(KafkaStorageError):
                        atomic_write(path, payload)
                finally:
                    storage.fileio._fsync = saved
            else:
                atomic_write(path, payload)
                last = payload
            assert (path.read_bytes() if path.exists() else None) == last
            assert sorted(p.name for p in root.iterdir()) == ([] if last is None else ["quorum-state"])
