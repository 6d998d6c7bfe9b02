"""The settings registry (streamfold/settings.py): typed values read from the environment in one
module, a bad value a coded BAD_SETTING, docs/tuning.md generated from it. No Spark needed."""

from __future__ import annotations

import pytest

from streamfold.errors import UsageError
from streamfold.settings import KINDS, SETTINGS, Settings, env_name, setting


def test_every_setting_is_named_typed_documented_and_has_a_variable_of_its_own():
    assert [s.name for s in SETTINGS] == [f for f in Settings.__dataclass_fields__]
    assert len({s.env for s in SETTINGS}) == len(SETTINGS)
    for s in SETTINGS:
        assert s.env.startswith("STREAMFOLD_") and s.kind in KINDS and s.doc.strip()
        assert (s.kind == "option") == bool(s.flag or s.keyword)
        if s.default is not None and s.type.show(s.default):  # the default reads back as itself
            assert s.read(s.type.show(s.default)) == s.default
    assert Settings.from_environ({}) == Settings()
    assert env_name("driver_memory") == "STREAMFOLD_DRIVER_MEMORY"


@pytest.mark.parametrize("name,text,value", [
    ("driver_memory", "8g", "8g"), ("driver_memory", " 512m ", "512m"),
    ("partitions", "3", 3), ("verbose", "1", True), ("verbose", "yes", True), ("verbose", "0", False),
    ("java_options", "-Dx=1 -Dy=2", "-Dx=1 -Dy=2"), ("codegen_cache", "100", 100), ("page_size", "64m", "64m"),
    ("spark_log_level", "warn", "WARN"), ("cache_dir", "/tmp/c", "/tmp/c"), ("watch", "off", False),
    ("prepared", "0", False), ("index", "false", False), ("one_partition", "0", False), ("direct_views", "1", True),
    ("runs_min_rows", "0", 0), ("runs_fold", "0.5", 0.5), ("runs_fold", "0", 0.0),
])
def test_a_variable_gives_its_setting_a_typed_value(name, text, value):
    settings = Settings.from_environ({env_name(name): text})
    assert getattr(settings, name) == value and type(getattr(settings, name)) is type(value)
    assert Settings.from_environ({env_name(name): ""}) == Settings()  # empty: unset


@pytest.mark.parametrize("name,text", [
    ("driver_memory", "lots"), ("driver_memory", "0g"), ("driver_memory", "8"), ("partitions", "0"), ("partitions", "two"),
    ("partitions", "-1"), ("verbose", "maybe"), ("codegen_cache", "1.5"), ("page_size", "4 MB"),
    ("spark_log_level", "LOUD"), ("watch", "2"), ("runs_min_rows", "-5"), ("runs_fold", "-0.1"),
    ("runs_fold", "nan"), ("runs_fold", "inf"),
])
def test_a_bad_value_is_a_coded_usage_error_that_says_what_the_setting_takes(name, text):
    with pytest.raises(UsageError) as e:
        Settings.from_environ({env_name(name): text})
    assert e.value.code == "BAD_SETTING" and e.value.params == {"setting": name, "value": text}
    assert e.value.hint.startswith(f"{env_name(name)} takes {setting(name).type.accepted}")


def test_a_value_given_from_python_is_checked_too():
    assert Settings(driver_memory="8g").replace(partitions=4).partitions == 4
    for given in ({"partitions": 0}, {"driver_memory": "lots"}, {"prepared": "0"}, {"runs_fold": -1.0}):
        with pytest.raises(UsageError) as e:
            Settings(**given)
        assert e.value.code == "BAD_SETTING" and e.value.params["setting"] == next(iter(given))
