"""Numbers read from text as the JDK reads them, where Kafka's controller reads a config value
with the JDK's own parsers rather than Python's: ``String.trim`` and ``Integer.parseInt`` /
``Short.parseShort`` / ``Long.parseLong`` (radix 10). No I/O.

Python's ``str.strip`` and ``int`` differ from these at the edges: ``int`` accepts ``_``
between digits, whitespace around the number and digits outside the Basic Multilingual Plane;
``strip`` removes Unicode spaces such as U+00A0 but keeps the control characters below U+0020.
"""

from __future__ import annotations

import unicodedata

__all__ = ["java_parse_integer", "java_trim"]

_TRIMMED = "".join(chr(code) for code in range(0x21))
"""What ``String.trim`` removes from both ends: every character up to U+0020."""


def java_trim(text: str) -> str:
    """``String.trim``: ``text`` without the characters up to U+0020 (controls and the space)
    at either end."""
    return text.strip(_TRIMMED)


def java_parse_integer(text: str, bits: int = 32) -> int:
    """``Integer.parseInt`` (``bits`` 32), ``Short.parseShort`` (16) or ``Long.parseLong``
    (64) of ``text`` in radix 10: an optional leading '+' or '-', then one or more decimal
    digits of any script (``Character.digit``: each a UTF-16 unit, so only digits of the Basic
    Multilingual Plane), nothing else, not even spaces, and a value the type holds. Raises
    ValueError otherwise."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body:
        raise ValueError(f"not an integer: {text!r}")
    value = 0
    for char in body:
        digit = unicodedata.decimal(char, None) if ord(char) <= 0xFFFF else None
        if digit is None:
            raise ValueError(f"not an integer: {text!r}")
        value = value * 10 + digit
    if text[:1] == "-":
        value = -value
    bound = 1 << (bits - 1)
    if not -bound <= value < bound:
        raise ValueError(f"out of range for {bits} bits: {text!r}")
    return value
