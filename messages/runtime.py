"""What every generated message class shares: version dispatch, error mapping and Kafka's JSON
form.

Generated modules (``messages/generated/*.py``) define slotted classes that inherit
:class:`Message` and fill in, per class:

* ``_WRITERS[version](obj, out: bytearray)`` and ``_READERS[version](buf, pos) -> (obj, pos)``:
  straight-line code for each version of the struct;
* ``_FIELDS``: a table of :class:`JsonField` used by the cold-path JSON conversion.

The JSON form is Kafka's ``JsonConverter`` format (the ``<Name>JsonConverter`` classes of the
Kafka jars): keys are the spec names with the first letter lower-cased; int64 values are numbers;
uuids are base64 text (``Uuid.toString``); bytes and records are standard base64; fields absent at
the version are left out; tagged fields are written only when they differ from their default.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from kwire.uuid import Uuid
from kwire.wire import DecodeError, EncodeError, ScatterBuffer

Buffer = bytes | bytearray | memoryview

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
"""Inclusive ``(low, high)`` bounds of each integer type of the specs."""


@dataclass(frozen=True, slots=True)
class JsonField:
    """One field of a struct, as the JSON converter needs it.

    ``kind`` is a primitive type name, ``"struct"`` or ``"array"``; for arrays ``element`` is the
    element's primitive type name or struct class. Version ranges are inclusive ``(lo, hi)``
    pairs, ``(1, 0)`` when empty.
    """

    attr: str
    json_name: str
    kind: str
    versions: tuple[int, int]
    nullable: tuple[int, int]
    tagged: tuple[int, int]
    default: Callable[[], Any]
    element: Any = None


FACTORY: Any = object()
"""The default argument of a generated ``__init__`` parameter whose default is a new list or
struct: left out, the attribute gets a fresh one (a dataclass's ``default_factory``)."""


class Message:
    """Base of every generated struct and message class."""

    __slots__ = ()

    SPEC_NAME: ClassVar[str] = ""
    API_KEY: ClassVar[int | None] = None
    LOWEST_VERSION: ClassVar[int] = 0
    HIGHEST_VERSION: ClassVar[int] = 0
    _WRITERS: ClassVar[dict[int, Callable[[Any, bytearray], None]]] = {}
    _READERS: ClassVar[dict[int, Callable[[Any, int], tuple[Any, int]]]] = {}
    _FIELDS: ClassVar[tuple[JsonField, ...]] = ()

    # -- binary ---------------------------------------------------------------------------

    def write(self, out: bytearray, version: int) -> None:
        """Append this message's encoding at ``version`` to ``out``.

        Raises EncodeError for a version the class does not have, a non-default value in a
        non-ignorable field the version lacks (Kafka's UnsupportedVersionException), a null in a
        non-nullable field, or a value out of its type's range.
        """
        writer = self._WRITERS.get(version)
        if writer is None:
            raise EncodeError(
                f"{type(self).__name__} has no version {version} "
                f"(valid {self.LOWEST_VERSION}-{self.HIGHEST_VERSION})"
            )
        try:
            writer(self, out)
        except EncodeError:
            raise
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise EncodeError(
                f"cannot encode {type(self).__name__} at version {version}: {exc}"
            ) from exc

    def encode(self, version: int) -> bytes:
        """This message's bytes at ``version`` (the body only, no header). See :meth:`write`.

        A large ``records`` value is copied once, into the result, not once into a growing
        buffer and again into ``bytes`` (``kwire.wire.ScatterBuffer``)."""
        out = ScatterBuffer()
        self.write(out, version)
        return out.to_bytes()

    @classmethod
    def read(cls, buf: Buffer, pos: int, version: int) -> tuple[Self, int]:
        """Decode one message from ``buf`` at ``pos``; returns ``(message, end position)``.

        Raises DecodeError for an unknown version or malformed bytes (truncation, impossible
        lengths, nulls in non-nullable fields, invalid UTF-8, tagged fields that overrun).
        """
        reader = cls._READERS.get(version)
        if reader is None:
            raise DecodeError(
                f"{cls.__name__} has no version {version} "
                f"(valid {cls.LOWEST_VERSION}-{cls.HIGHEST_VERSION})"
            )
        try:
            return reader(buf, pos)  # type: ignore[arg-type]
        except DecodeError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise DecodeError(f"malformed {cls.__name__} v{version}: {exc}") from exc

    @classmethod
    def decode(cls, buf: Buffer, version: int) -> Self:
        """Decode a message that fills ``buf`` exactly; trailing bytes are a DecodeError."""
        # read()'s body, inlined: this is the hot entry point and a frame costs as much as a
        # small struct does.
        reader = cls._READERS.get(version)
        if reader is None:
            raise DecodeError(
                f"{cls.__name__} has no version {version} "
                f"(valid {cls.LOWEST_VERSION}-{cls.HIGHEST_VERSION})"
            )
        try:
            message, end = reader(buf, 0)  # type: ignore[arg-type]
        except DecodeError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise DecodeError(f"malformed {cls.__name__} v{version}: {exc}") from exc
        if end != len(buf):
            raise DecodeError(
                f"{cls.__name__} v{version}: {len(buf) - end} trailing bytes after the message"
            )
        return message

    # -- Kafka's JSON form ----------------------------------------------------------------

    def to_json(self, version: int) -> dict[str, Any]:
        """This message as Kafka's JsonConverter writes it at ``version``."""
        return _struct_to_json(self, version)

    @classmethod
    def from_json(cls, data: dict[str, Any], version: int) -> Self:
        """Build a message from Kafka's JSON form at ``version``.

        Raises ValueError (and only ValueError) when a field present at that version (and not
        tagged) is missing, a value has the wrong JSON type, or an integer does not fit its
        field's type: whatever it accepts encodes at ``version``.
        """
        return _struct_from_json(cls, data, version)  # type: ignore[return-value]


def _in(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


def _value_to_json(kind: str, element: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if kind == "struct":
        return _struct_to_json(value, version)
    if kind == "array":
        if isinstance(element, str):
            return [_value_to_json(element, None, v, version) for v in value]
        return [_struct_to_json(v, version) for v in value]
    if kind == "uuid":
        return str(Uuid(value))
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "float64":
        return float(value)
    return value


def _struct_to_json(obj: Message, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in obj._FIELDS:
        if not _in(f.versions, version):
            continue
        value = getattr(obj, f.attr)
        if _in(f.tagged, version) and value == f.default():
            continue
        out[f.json_name] = _value_to_json(f.kind, f.element, value, version)
    return out


def _value_from_json(kind: str, element: Any, data: Any, version: int, where: str) -> Any:
    if data is None:
        return None
    if kind == "struct":
        return _struct_from_json(element, data, version)
    if kind == "array":
        if not isinstance(data, list):
            raise ValueError(f"{where}: expected a JSON array")
        if isinstance(element, str):
            return [_value_from_json(element, None, v, version, where) for v in data]
        return [_struct_from_json(element, v, version) for v in data]
    if kind == "uuid":
        if not isinstance(data, str):
            raise ValueError(f"{where}: expected a UUID string")
        return Uuid.from_string(data)
    if kind in ("bytes", "records"):
        if not isinstance(data, str):
            raise ValueError(f"{where}: expected a base64 string")
        return base64.b64decode(data)  # binascii.Error, a ValueError, for bad padding
    if kind == "string":
        if not isinstance(data, str):
            raise ValueError(f"{where}: expected a string")
        return data
    if kind == "bool":
        if not isinstance(data, bool):
            raise ValueError(f"{where}: expected a boolean")
        return data
    if kind == "float64":
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise ValueError(f"{where}: expected a number")
        return float(data)
    if isinstance(data, bool) or not isinstance(data, int):
        raise ValueError(f"{where}: expected an integer")
    low, high = INT_RANGES[kind]
    if not low <= data <= high:
        # Kafka's MessageUtil.jsonNodeTo* refuse a value the field's type cannot hold: so does
        # the reader here, rather than give a message its writer cannot encode
        raise ValueError(f"{where}: {data} does not fit in {kind}")
    return data


def _struct_from_json(cls: type[Message], data: Any, version: int) -> Message:
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected a JSON object")
    kwargs: dict[str, Any] = {}
    for f in cls._FIELDS:
        if not _in(f.versions, version):
            continue
        if f.json_name not in data:
            if _in(f.tagged, version):
                continue
            raise ValueError(
                f"{cls.__name__}: field {f.json_name!r} is mandatory in version {version}"
            )
        value = data[f.json_name]
        if value is None and not _in(f.nullable, version):
            raise ValueError(f"{cls.__name__}.{f.json_name} is not nullable in version {version}")
        kwargs[f.attr] = _value_from_json(
            f.kind, f.element, value, version, f"{cls.__name__}.{f.json_name}"
        )
    return cls(**kwargs)
