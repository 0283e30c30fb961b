"""Numbers read from and written to text as the JDK does it, where Kafka's controller uses the
JDK's own conversions rather than Python's: ``String.trim``, ``Integer.parseInt`` /
``Short.parseShort`` / ``Long.parseLong`` (radix 10), ``Double.parseDouble`` and
``Double.toString``. No I/O.

Python's ``str.strip``, ``int`` and ``float`` differ from these at the edges: ``int`` and
``float`` accept ``_`` between digits, whitespace around the number and (``float`` always,
``int`` also outside the Basic Multilingual Plane) digits of other scripts, ``float`` reads
"inf" and "nan" in any case but no hexadecimal; ``strip`` removes Unicode spaces such as
U+00A0 but keeps the control characters below U+0020. ``repr`` of a float writes the shortest
digits that read back as the same double; ``Double.toString`` before JDK 19 does not always
(see :func:`java_double_string`).
"""

from __future__ import annotations

import math
import re
import struct
import unicodedata

__all__ = ["java_double_string", "java_parse_double", "java_parse_integer", "java_trim"]

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


def java_double_string(value: float) -> str:
    """``Double.toString`` as JDK 17 writes it (the JDK the pinned Kafka runs on;
    ``FloatingDecimal.toJavaFormatString``): NaN, Infinity, -Infinity, 0.0, -0.0; else the
    digits of :func:`_jdk17_decimal`, plain from 10^-3 up to 10^7 (``0.001``, ``1234.5``,
    ``100.0``), else as ``d.dddE±n``, always with a digit after the point.

    This is JDK 17's behaviour, not that of JDK 19 and later, which write the shortest decimal
    that reads back as the same double (as Python's ``repr`` does). JDK 17 stops its digit
    generation by a test that now and then writes another or a different last digit: the double
    nearest 1e23 is ``9.999999999999999E22`` (JDK 19+: ``1.0E23``) and 2.82879384806159e17 is
    ``2.82879384806159008E17``; Double.MIN_VALUE is ``4.9E-324`` on both."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return f"{sign}0.0"
    digits, exponent = _jdk17_decimal(abs(value))
    if 0 < exponent < 8:
        whole, fraction = digits[:exponent], digits[exponent:]
        return f"{sign}{whole}{'0' * (exponent - len(whole))}.{fraction or '0'}"
    if -3 < exponent <= 0:
        return f"{sign}0.{'0' * -exponent}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent - 1}"


def _wrap(value: int, bits: int) -> int:
    """``value`` as a Java ``int`` (``bits`` 32) or ``long`` (64) holds it: two's complement,
    overflow wrapping around."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _five_bits(power: int) -> int:
    """The binary digits ``FloatingDecimal`` reckons 5^``power`` to take: exactly, up to 5^26
    (5^0 counting as none), else 3 a power."""
    if power == 0:
        return 0
    return (5**power).bit_length() if power < 27 else power * 3


def _jdk17_decimal(value: float) -> tuple[str, int]:
    """JDK 17's decimal digits of a positive finite double and its decimal exponent ``e``, the
    value being about 0.d1d2d3... x 10^e (``FloatingDecimal.BinaryToASCIIBuffer.dtoa``).

    An integer from 2^-21 up to 2^62 (within its 53 bits) is written exactly, rounded half up to
    its 17 leading digits beyond 2^54; trailing zeros are dropped. Any other value: its digits
    are generated one at a time, from value = B / S x 10^k with M half the distance to its
    neighbours (a quarter below a power of two), until the remainder is within M of either
    end; the last digit then rounds up when the remainder is over half a digit (on a tie, when
    it is odd). E-form values (below 10^-3 or from 10^7) get at least two digits. The test is
    done in Java ``int`` arithmetic when every term fits about 32 bits, in ``long`` when about
    64, else on big integers, with its wrap-arounds and a ``>=`` (not ``>``) for the upper end
    in the last case."""
    bits = struct.unpack(">q", struct.pack(">d", value))[0]
    fraction = bits & ((1 << 52) - 1)
    binary_exponent = bits >> 52
    if binary_exponent == 0:  # subnormal: normalize
        shift = 53 - fraction.bit_length()
        fraction <<= shift
        binary_exponent = 1 - shift
        significant_bits = fraction.bit_length() - shift
    else:
        fraction |= 1 << 52
        significant_bits = 53
    binary_exponent -= 1023
    tail_zeros = (fraction & -fraction).bit_length() - 1
    fraction_bits = 53 - tail_zeros  # significant bits of the fraction, the leading one included
    tiny_bits = max(0, fraction_bits - binary_exponent - 1)  # binary digits after the point

    if -21 <= binary_exponent <= 62 and tiny_bits == 0:
        # an integer: its decimal digits, beyond 2^54 rounded to the digits that matter
        insignificant = 0
        if binary_exponent > significant_bits:
            power = binary_exponent - significant_bits - 1
            insignificant = len(str(1 << power)) - 1 if power > 1 else 0
        if binary_exponent >= 52:
            integer = fraction << (binary_exponent - 52)
        else:
            integer = fraction >> (52 - binary_exponent)
        if insignificant:
            integer, residue = divmod(integer, 10**insignificant)
            if residue >= 10**insignificant >> 1:
                integer += 1
        text = str(integer)
        return text.rstrip("0"), insignificant + len(text)

    estimate = (
        (struct.unpack(">d", struct.pack(">q", 0x3FF << 52 | fraction & ((1 << 52) - 1)))[0] - 1.5) * 0.289529654
        + 0.176091259
        + binary_exponent * 0.301029995663981
    )
    decimal_exponent = math.floor(estimate)
    b5 = max(0, -decimal_exponent)
    b2 = b5 + tiny_bits + binary_exponent
    s5 = max(0, decimal_exponent)
    s2 = s5 + tiny_bits
    m5 = b5
    m2 = b2 - significant_bits
    fraction >>= tail_zeros
    b2 -= fraction_bits - 1
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common
    if fraction_bits == 1:  # a power of two: the neighbour below is half as far
        m2 -= 1
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = fraction_bits + b2 + _five_bits(b5)
    ten_s_bits = s2 + 1 + _five_bits(s5 + 1)
    digits: list[int] = []

    if b_bits < 64 and ten_s_bits < 64:
        width = 32 if b_bits < 32 and ten_s_bits < 32 else 64
        b = _wrap((fraction * 5**b5) << b2, width)
        s = _wrap(5**s5 << s2, width)
        m = _wrap(5**m5 << m2, width)
        tens = _wrap(s * 10, width)
        digit, b = divmod(b, s)
        b = _wrap(10 * b, width)
        m = _wrap(m * 10, width)
        low = b < m
        high = _wrap(b + m, width) > tens
        if digit == 0 and not high:
            decimal_exponent -= 1  # the estimate was one too high
        else:
            digits.append(digit)
        if decimal_exponent < -3 or decimal_exponent >= 8:
            low = high = False
        while not low and not high:
            digit, b = divmod(b, s)
            b = _wrap(10 * b, width)
            m = _wrap(m * 10, width)
            if m > 0:
                low = b < m
                high = _wrap(b + m, width) > tens
            else:  # m wrapped around
                low = high = True
            digits.append(digit)
        low_difference = _wrap(_wrap(b << 1, width) - tens, width)
    else:
        b = (fraction * 5**b5) << b2
        s = 5**s5 << s2
        m = 10 * (5**m5 << m2)
        tens = 10 * s
        digit, b = divmod(b, s)
        b *= 10
        low = b < m
        high = b + m >= tens
        if digit == 0 and not high:
            decimal_exponent -= 1
        else:
            digits.append(digit)
        if decimal_exponent < -3 or decimal_exponent >= 8:
            low = high = False
        while not low and not high:
            digit, b = divmod(b, s)
            b *= 10
            m *= 10
            low = b < m
            high = b + m >= tens
            digits.append(digit)
        low_difference = (2 * b > tens) - (2 * b < tens) if high and low else 0

    exponent = decimal_exponent + 1
    if high and (not low or low_difference > 0 or (low_difference == 0 and digits[-1] % 2 == 1)):
        # round the last digit up, carrying through nines; the number of digits stays
        index = len(digits) - 1
        while digits[index] == 9 and index > 0:
            digits[index] = 0
            index -= 1
        if digits[index] == 9:
            digits[0] = 1
            exponent += 1
        else:
            digits[index] += 1
    return "".join(map(str, digits)), exponent
