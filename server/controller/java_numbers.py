"""Numbers read from text as the JDK reads them, where Kafka's controller reads a config value
with the JDK's own parsers rather than Python's: ``String.trim``, ``Integer.parseInt`` /
``Short.parseShort`` / ``Long.parseLong`` (radix 10) and ``Double.parseDouble``. No I/O.

Python's ``str.strip``, ``int`` and ``float`` differ from these at the edges: ``int`` and
``float`` accept ``_`` between digits, whitespace around the number and (``float`` always,
``int`` also outside the Basic Multilingual Plane) digits of other scripts, ``float`` reads
"inf" and "nan" in any case but no hexadecimal; ``strip`` removes Unicode spaces such as
U+00A0 but keeps the control characters below U+0020.
"""

from __future__ import annotations

import math
import re
import unicodedata

__all__ = ["java_parse_double", "java_parse_integer", "java_trim"]

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


_DECIMAL_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?)"
)
"""What ``FloatingDecimal.readJavaFormatString`` reads as a decimal: NaN and Infinity exactly
(a sign allowed, no suffix), or ASCII digits with at most one point, at least one digit, an
optional exponent with at least one digit, and one optional f/F/d/D suffix."""

_HEX_DOUBLE = re.compile(
    r"(?P<sign>[+-])?0[xX](?P<significand>[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)"
    r"[pP](?P<exponent>[+-]?[0-9]+)[fFdD]?"
)
"""``FloatingDecimal.parseHexString``'s pattern: a hexadecimal significand, a binary exponent
(required) and an optional suffix."""


def java_parse_double(text: str) -> float:
    """``Double.parseDouble``: ``text`` trimmed as ``String.trim`` does, then NaN, Infinity, a
    decimal (ASCII digits only) or a hexadecimal floating-point literal (``0x1.8p1``), with an
    optional sign and f/F/d/D suffix, rounded to the nearest double (overflow gives an
    infinity, underflow a zero, each with the text's sign). Raises ValueError otherwise."""
    trimmed = java_trim(text)
    hexadecimal = _HEX_DOUBLE.fullmatch(trimmed)
    if hexadecimal is not None:
        negative = hexadecimal["sign"] == "-"
        try:
            value = float.fromhex(f"0x{hexadecimal['significand']}p{hexadecimal['exponent']}")
        except OverflowError:
            value = math.inf
        return -value if negative else value
    decimal = _DECIMAL_DOUBLE.fullmatch(trimmed)
    if decimal is None:
        raise ValueError(f"not a double: {text!r}")
    if decimal["number"] is None:
        return float(trimmed)  # NaN or Infinity, with its sign
    return float(trimmed[: decimal.end("number")])
