"""Durations written in SQL (``'1 hour 30 minutes'``, ``INTERVAL 10 SECONDS``) in microseconds:
units of fixed length only, weeks to microseconds (a month or a year has no fixed length)."""

from __future__ import annotations

import re

_MICROS = {
    "microsecond": 1, "us": 1, "millisecond": 1_000, "ms": 1_000, "second": 1_000_000, "sec": 1_000_000,
    "s": 1_000_000, "minute": 60_000_000, "min": 60_000_000, "m": 60_000_000, "hour": 3_600_000_000,
    "h": 3_600_000_000, "day": 86_400_000_000, "d": 86_400_000_000, "week": 604_800_000_000,
}
_PART = re.compile(r"\s*([+-]?\d+)\s*([A-Za-z]+)\s*")


def duration_micros(text: str) -> int | None:
    """``'1 hour 30 minutes'`` (``interval`` before it or not) in microseconds; None if it is not
    amounts of fixed-length units (a month, a year, or not a duration at all)."""
    text = re.sub(r"(?i)^\s*interval\s+", "", text.strip())
    total, pos = 0, 0
    while pos < len(text):
        m = _PART.match(text, pos)
        unit = m.group(2).lower() if m else ""
        unit = unit[:-1] if unit.endswith("s") and unit[:-1] in _MICROS else unit
        if m is None or unit not in _MICROS:
            return None
        total += int(m.group(1)) * _MICROS[unit]
        pos = m.end()
    return total if text else None
