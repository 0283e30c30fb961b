"""Size-prefixed frames, the unit of Kafka's protocol on a socket.

Layout::

    +----------------+------------------------------------+
    | size: int32 BE | size bytes: header + body           |
    +----------------+------------------------------------+

:class:`FrameDecoder` is sans-IO: feed it bytes as they arrive, take complete frames out. A size
that is negative or above ``max_frame_bytes`` (Kafka's ``socket.request.max.bytes``, default
104857600) raises :class:`FrameError` as soon as the 4 size bytes are seen, before anything is
allocated for the body (Kafka's ``NetworkReceive`` / ``InvalidReceiveException``).
"""

from __future__ import annotations

from kwire.wire import INT32

DEFAULT_MAX_FRAME_BYTES = 104_857_600
"""Kafka's ``socket.request.max.bytes`` default (100 MiB)."""


class FrameError(ValueError):
    """A frame size that no well-behaved peer sends: the connection must be closed."""


class FrameDecoder:
    """Splits a byte stream into frames.

    ``feed(data)`` buffers bytes; ``next_frame()`` returns the next complete frame body (without
    its size prefix) or None when more bytes are needed. ``buffered_bytes`` is what is held.
    """

    __slots__ = ("_buf", "_max", "_need")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes
        self._need = -1  # size of the frame being read, -1 while the prefix is incomplete

    @property
    def buffered_bytes(self) -> int:
        """Bytes fed but not yet returned as frames, size prefixes included."""
        return len(self._buf)

    @property
    def missing_bytes(self) -> int:
        """Bytes the frame being read still lacks; 0 while its size prefix is incomplete."""
        return 0 if self._need < 0 else 4 + self._need - len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the socket (any split, empty allowed); ``data`` is copied.

        Raises :class:`FrameError` as soon as the size prefix of the frame being read is
        complete and is negative or larger than ``max_frame_bytes``; the decoder then keeps
        raising and must be dropped with its connection.
        """
        self._buf += data
        if self._need < 0:
            self._check_size()

    def _check_size(self) -> None:
        if len(self._buf) >= 4:
            size = INT32.unpack_from(self._buf, 0)[0]
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self._max:
                raise FrameError(
                    f"frame of {size} bytes is larger than the maximum of {self._max} bytes"
                )
            self._need = size

    def next_frame(self) -> bytes | None:
        """The next complete frame (header + body, without the 4 size bytes), or None.

        None means more bytes are needed. Call it until None after each :meth:`feed`: one feed
        may complete several frames. Raises :class:`FrameError` when the size prefix of the
        following frame, already buffered, is out of range (the completed frame is then not
        returned).
        """
        if self._need < 0:
            return None
        end = 4 + self._need
        if len(self._buf) < end:
            return None
        # one copy: slicing the bytearray itself would copy the frame twice
        with memoryview(self._buf) as view:
            frame = bytes(view[4:end])
        del self._buf[:end]
        self._need = -1
        self._check_size()
        return frame


def frame(payload: bytes | bytearray) -> bytes:
    """``payload`` with its int32 size prefix."""
    return INT32.pack(len(payload)) + bytes(payload)
