"""The settings registry (streamfold/settings.py): typed values read from the environment in one
module, a bad value a coded BAD_SETTING, docs/tuning.md generated from it. No Spark needed."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import streamfold
from streamfold.cli import main
from streamfold.errors import UsageError
from streamfold.settings import KINDS, SETTINGS, TEST_VARIABLES, Settings, env_name, reference_markdown, setting

ROOT = Path(__file__).parent.parent.parent
PACKAGE = ROOT / "streamfold"
VARIABLE = re.compile(r"STREAMFOLD_[A-Z0-9_]+")
# Modules that still read a variable themselves, until the settings reach them: none.
PENDING: set[str] = set()


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


def test_docs_tuning_md_is_the_registrys_reference(capsys):
    assert (ROOT / "docs" / "tuning.md").read_text() == reference_markdown(), \
        "regenerate it: streamfold settings --markdown > docs/tuning.md"
    assert main(["settings", "--markdown"]) == 0 and capsys.readouterr().out == reference_markdown()
    text = reference_markdown()
    assert all(f"`{s.env}`" in text for s in SETTINGS) and all(f"`{v}`" in text for v, _, _ in TEST_VARIABLES)


def test_streamfold_settings_prints_the_values_in_effect(capsys, monkeypatch):
    monkeypatch.setenv(env_name("prepared"), "0")
    monkeypatch.setenv(env_name("driver_memory"), "6g")
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"STREAMFOLD_PREPARED +0 +ab +\(environment\)", out)
    assert re.search(r"STREAMFOLD_DRIVER_MEMORY +6g", out)
    monkeypatch.setenv(env_name("watch"), "maybe")
    assert main(["settings"]) == 2 and "[BAD_SETTING]" in capsys.readouterr().err


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants in ``tree`` (prose, which may name a variable)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_only_the_registry_names_a_streamfold_variable():
    """No string in the package's code outside settings.py names a STREAMFOLD_ variable: code that
    needs a setting is given it, and a hint that names one asks ``env_name`` (docstrings may)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where == "settings.py":
            continue
        tree = ast.parse(path.read_text())
        prose = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
                names = [n for n in VARIABLE.findall(node.value) if n != "STREAMFOLD_ERROR"]  # (an error code)
                if names:
                    found.setdefault(where, []).append(f"line {node.lineno}: {', '.join(names)}")
    assert set(found) <= PENDING, {w: lines for w, lines in found.items() if w not in PENDING}


def test_nothing_reads_a_setting_at_import():
    """Importing every module of the package reads no STREAMFOLD_ variable (the engine's pending
    switch aside), so a bad value cannot break an import and a test can set one before a run."""
    script = f"""
import importlib, os, pkgutil, sys
read = set()
class Recorder(type(os.environ)):
    def __getitem__(self, key):
        if str(key).startswith("STREAMFOLD_"):
            frame = sys._getframe(1)
            while frame is not None and "streamfold" + os.sep not in frame.f_code.co_filename:
                frame = frame.f_back
            read.add((key, frame.f_code.co_filename if frame is not None else "?"))
        return super().__getitem__(key)
recorder = object.__new__(Recorder)
recorder.__dict__.update(os.environ.__dict__)
os.environ = recorder
import streamfold
for m in pkgutil.walk_packages(streamfold.__path__, "streamfold."):
    if m.name.endswith("__main__"):
        continue
    importlib.import_module(m.name)
print(sorted(name for name, where in read if not where.endswith({tuple(PENDING)!r})))
"""
    env = {**os.environ, **{s.env: "not a value" for s in SETTINGS}}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_streamfold_start_and_the_control_api_take_the_same_options():
    from streamfold.control import api

    public, control = inspect.signature(streamfold.start), inspect.signature(api.start)
    assert list(public.parameters) == list(control.parameters)
    assert {n: p.default for n, p in public.parameters.items()} == {n: p.default for n, p in control.parameters.items()}
    assert not any(p.kind is p.VAR_KEYWORD for p in public.parameters.values())
