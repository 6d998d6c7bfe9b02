"""One loader and one comparison for golden fixtures (query in, expected text out).

A fixture is ``NAME.sql``: header comments ``-- schema: S = a INT, …``, ``-- table: T = …``,
``-- error: CODE``, ``-- pass: NAME``, then the query. Its expected output is ``NAME.txt``.
Run ``pytest --update-golden`` to rewrite the expected files after a deliberate change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Fixture:
    path: Path
    sql: str
    schemas: dict[str, str] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


def load(path: Path) -> Fixture:
    fx = Fixture(path, "")
    body = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("--") and not body:
            text = stripped[2:].strip()
            key, sep, value = text.partition(":")
            if sep and key in ("schema", "table"):
                name, _, cols = value.partition("=")
                fx.schemas[name.strip()] = cols.strip()
                if key == "table":
                    fx.tables.append(name.strip())
            elif sep and key in ("error", "pass"):
                fx.headers[key] = value.strip()
            continue
        body.append(line)
    fx.sql = "\n".join(body).strip()
    return fx


def fixtures(kind: str) -> list[Path]:
    return sorted((FIXTURES / kind).glob("*.sql"))


def check(request: pytest.FixtureRequest, path: Path, actual: str) -> None:
    expected_path = path.with_suffix(".txt")
    if request.config.getoption("--update-golden"):
        expected_path.write_text(actual)
        return
    assert expected_path.exists(), f"{expected_path} is missing; run pytest --update-golden and review it"
    expected = expected_path.read_text()
    assert actual == expected, f"{path.name}: output differs from {expected_path.name} (pytest --update-golden)"
