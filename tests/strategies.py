"""Hypothesis strategies: rows with NULLs from small domains (so groups and joins collide),
split into batches, and deletions of rows that are there (seed 003 §11: ΔS' ⊆ S)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
import random
from collections import Counter
from collections.abc import Callable

from hypothesis import strategies as st

from .streams import Source

# Event times a few minutes apart, so rows share 5- and 10-minute windows: on and off window
# boundaries, one before 1970 (a negative epoch, where Spark's window arithmetic takes a pmod)
_T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
TIMESTAMPS = [_T0 + dt.timedelta(seconds=s) for s in (-420, 0, 1, 180, 299, 300, 540, 600, 721, 1020, 1799)] + [
    dt.datetime(1969, 12, 31, 23, 58, 30, tzinfo=dt.timezone.utc)]

# Dyadic doubles: their sums are exact in binary, so answers do not depend on summation order.
VALUES = {
    "INT": st.one_of(st.none(), st.integers(0, 4)),
    "BIGINT": st.one_of(st.none(), st.integers(-3, 3)),
    "DOUBLE": st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0, 3.0, 0.0, 10.75])),
    "STRING": st.one_of(st.none(), st.sampled_from(["a", "b", "c", "ab", ""])),
    "DATE": st.one_of(st.none(), st.sampled_from([dt.date(2020, 1, 1), dt.date(2020, 2, 29), dt.date(2021, 12, 31)])),
    "BOOLEAN": st.one_of(st.none(), st.booleans()),
    "TIMESTAMP": st.one_of(st.none(), st.sampled_from(TIMESTAMPS)),
}


def value(sql_type: str) -> st.SearchStrategy:
    """Values of a column type; arrays are tuples and structs tuples of fields (hashable, so a
    row can be deleted by value), both possibly NULL, arrays possibly empty or with NULLs."""
    from streamfold.ir.types import parse_type

    def of(t) -> st.SearchStrategy:
        if t.name == "ARRAY":
            return st.one_of(st.none(), st.lists(of(t.element), max_size=3).map(tuple))
        if t.name == "STRUCT":
            return st.one_of(st.none(), st.tuples(*[of(ft) for _, ft in t.params]))
        return VALUES[t.sql()]

    return VALUES[sql_type] if sql_type in VALUES else of(parse_type(sql_type))


def rows(source: Source, max_size: int = 8, min_size: int = 0) -> st.SearchStrategy[list[tuple]]:
    return st.lists(st.tuples(*[value(t) for _, t in source.columns]), min_size=min_size, max_size=max_size)


@st.composite
def stream(draw: st.DrawFn, sources: list[Source], max_batches: int = 3, max_rows: int = 8,
           min_batches: int = 1, min_rows: int = 0) -> list[dict[str, list[tuple]]]:
    """Batches of rows per stream source; weighted sources also delete rows inserted before.
    ``min_rows`` rows at least for each source in each batch (so none of them is trivial)."""
    n = draw(st.integers(min_batches, max_batches))
    return _batches(
        n, sources, lambda s, size: draw(rows(s, max_size=size, min_size=min_rows)),
        lambda: draw(st.sampled_from([1, 1, 1, 2])),
        lambda live: draw(st.lists(st.sampled_from(live), unique=True, max_size=max(1, len(live) // 2))), max_rows)


def _batches(n: int, sources: list[Source], inserted: Callable[[Source, int], list[tuple]],
             weight: Callable[[], int], doomed: Callable[[list[tuple]], list[tuple]],
             max_rows: int) -> list[dict[str, list[tuple]]]:
    """``n`` batches: per stream source the rows ``inserted`` gives (at most ``max_rows`` in batch
    0, about half as many later); a weighted source's rows get a ``weight`` and it deletes the
    ``doomed`` of the rows present before."""
    present: dict[str, Counter] = {s.name: Counter() for s in sources}
    batches = []
    for i in range(n):
        batch: dict[str, list[tuple]] = {}
        for s in sources:
            if s.static:
                continue
            new = inserted(s, max_rows if i == 0 else max_rows // 2 + 1)
            if not s.weighted:
                batch[s.name] = new
                continue
            out = [r + (weight(),) for r in new]
            live = sorted((r for r, c in present[s.name].items() if c > 0), key=repr)
            if live:
                out.extend(r + (-1,) for r in doomed(live))
            for r in out:
                present[s.name][r[:-1]] += r[-1]
            batch[s.name] = out
        batches.append(batch)
    return batches


def table_rows(source: Source) -> st.SearchStrategy[list[tuple]]:
    return rows(source, max_size=6)


# The same domains, for data drawn from a seeded ``random.Random``: Hypothesis's first example is
# its simplest (a row of zeros per batch), so a test that runs one example per case draws it here.
DOMAINS = {
    "INT": [None, 0, 1, 2, 3, 4],
    "BIGINT": [None, -3, -2, -1, 0, 1, 2, 3],
    "DOUBLE": [None, 0.5, 1.25, -2.0, 3.0, 0.0, 10.75],
    "STRING": [None, "a", "b", "c", "ab", ""],
    "DATE": [None, dt.date(2020, 1, 1), dt.date(2020, 2, 29), dt.date(2021, 12, 31)],
    "BOOLEAN": [None, True, False],
    "TIMESTAMP": [None, *TIMESTAMPS],
    "DECIMAL(12,2)": [None, Decimal("0.00"), Decimal("0.10"), Decimal("-3.25"), Decimal("9999999999.99"),
                      Decimal("1.01")],
    # the widest sums Spark keeps whole: sum(DECIMAL(28,6)) is DECIMAL(38,6)
    "DECIMAL(28,6)": [None, Decimal("0.000001"), Decimal("-1.5"), Decimal("9999999999999999999999.999999"),
                      Decimal("7.123456")],
}


def random_rows(rng: random.Random, source: Source, max_size: int = 8, min_size: int = 0) -> list[tuple]:
    """Rows of ``source`` (scalar columns) from the domains of :data:`VALUES`."""
    return [tuple(rng.choice(DOMAINS[t]) for _, t in source.columns)
            for _ in range(rng.randint(min_size, max_size))]


def random_stream(rng: random.Random, sources: list[Source], batches: int, max_rows: int = 8,
                  min_rows: int = 0) -> list[dict[str, list[tuple]]]:
    """What :func:`stream` draws, from ``rng``: ``batches`` batches of rows per stream source,
    weighted sources deleting up to half the rows inserted before."""
    return _batches(batches, sources, lambda s, size: random_rows(rng, s, size, min_rows),
                    lambda: rng.choice([1, 1, 1, 2]),
                    lambda live: rng.sample(live, rng.randint(0, max(1, len(live) // 2))), max_rows)
