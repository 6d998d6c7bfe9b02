"""The endpoint spec shared by sources and sinks: kinds, formats, and no password ever."""

import pytest

from streamfold.connectors import Endpoint, parse_endpoint
from streamfold.errors import UsageError


@pytest.mark.parametrize("text, expected", [
    ("data/orders", Endpoint("files", "data/orders")),
    ("data/orders:csv", Endpoint("files", "data/orders", "csv")),
    ("/abs/t:delta", Endpoint("delta", "/abs/t")),
    ("file:///abs/t:DELTA", Endpoint("delta", "/abs/t")),
    ("postgres://me@127.0.0.1:5433/db?table=answer",
     Endpoint("postgres", "postgres://me@127.0.0.1:5433/db", None, (("table", "answer"),))),
    ("postgresql://me@h/db", Endpoint("postgres", "postgresql://me@h/db")),
])
def test_parses_each_kind(text, expected):
    assert parse_endpoint(text) == expected


def test_a_password_in_a_url_is_refused_and_not_repeated():
    with pytest.raises(UsageError) as err:
        parse_endpoint("postgres://me:hunter2@h:5432/db?table=t", role="sink")
    assert err.value.code == "SECRET_ON_COMMAND_LINE"
    assert "hunter2" not in str(err.value) and "hunter2" not in repr(err.value.params)
    assert "PGPASSWORD" in (err.value.hint or "")


def test_unknown_scheme_and_empty_path_are_usage_errors():
    for text in ("kafka://broker/topic", ":delta"):
        with pytest.raises(UsageError) as err:
            parse_endpoint(text)
        assert err.value.code == "BAD_ENDPOINT"


def test_shown_names_the_endpoint_without_secrets():
    assert parse_endpoint("t:delta").shown() == "t:delta"
    assert parse_endpoint("postgres://me@h/db?table=x").option("table") == "x"
