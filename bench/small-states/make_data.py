"""The data of the small-states bench (issue 58): one table ``t(id, grp, val, _weight)`` of 15
rows as the history, then increments of one new row each, every second one also deleting a row
that is there (``_weight`` −1), as Parquet files named in arrival order.

    .venv/bin/python bench/small-states/make_data.py DIR [INCREMENTS]
    .venv/bin/python -m streamfold bench custom --query bench/small-states/in-or-4deep.sql \\
        --source t=DIR --increments INCREMENTS --systems streamfold-cli,streamfold-auto,recompute
"""

import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([("id", pa.int32()), ("grp", pa.string()), ("val", pa.int32()), ("_weight", pa.int64())])


def write(directory: str, name: str, rows: list[tuple]) -> None:
    cols = list(zip(*rows))
    pq.write_table(pa.Table.from_arrays([pa.array(c, t.type) for c, t in zip(cols, SCHEMA)], schema=SCHEMA),
                   os.path.join(directory, name))


def main(directory: str, increments: int = 9) -> None:
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(7)
    live = [(i, rng.choice("abc"), rng.randint(0, 100)) for i in range(15)]
    write(directory, "b000.parquet", [(*r, 1) for r in live])
    for i in range(1, increments + 1):
        new = (100 + i, rng.choice("abc"), rng.randint(0, 100))
        batch = [(*new, 1)]
        if i % 2 == 0:
            batch.append((*live.pop(rng.randrange(len(live))), -1))
        live.append(new)
        write(directory, f"b{i:03d}.parquet", batch)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 9)
