"""Loading a program file: ``PROGRAM.py`` defines ``program`` — a :class:`Program`, or a
function returning one whose keyword arguments ``--param NAME=VALUE`` sets (sizes, steps).

The file is the user's own Python, run as it is (as ``python PROGRAM.py`` would); only what
it defines is checked.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Mapping

from ..errors import LinalgError, StreamfoldError, UsageError
from .api import Program


def parse_params(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in values or []:
        name, sep, value = text.partition("=")
        if not sep or not name.strip().isidentifier():
            raise UsageError(f"cannot read --param {text!r}", code="BAD_PARAM", params={"param": text},
                             hint="write it as NAME=VALUE, e.g. --param n=4000")
        out[name.strip()] = value.strip()
    return out


def _value(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def load_program(path: str, params: Mapping[str, str] | None = None) -> Program:
    params = dict(params or {})
    if not os.path.isfile(path):
        raise UsageError(f"program file {path} does not exist", code="PROGRAM_NOT_FOUND", params={"path": path},
                         hint="give the path to a .py file that defines `program`")
    name = "_streamfold_program_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path} as Python", code="PROGRAM_NOT_FOUND", params={"path": path})
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        made = getattr(module, "program", None)
        if made is None:
            raise LinalgError(f"{path} defines no `program`", code="NO_PROGRAM", params={"path": path},
                              hint="end the file with program = program({...}) or def program(n=...): ...")
        if isinstance(made, Program):
            if params:
                raise UsageError(f"{path} defines a fixed program; it takes no --param", code="BAD_PARAM",
                                 params={"params": sorted(params)},
                                 hint="define `def program(name=default, ...)` to take parameters")
            return made
        if not callable(made):
            raise LinalgError(f"`program` in {path} is a {type(made).__name__}", code="NO_PROGRAM",
                              params={"path": path}, hint="it must be a Program or a function returning one")
        accepted = inspect.signature(made).parameters
        unknown = [p for p in params if p not in accepted]
        if unknown:
            raise UsageError(f"{path}: program() has no parameter {unknown[0]}", code="BAD_PARAM",
                             params={"param": unknown[0], "accepted": list(accepted)},
                             hint=f"its parameters: {', '.join(accepted) or 'none'}")
        out = made(**{k: _value(v) for k, v in params.items()})
        if not isinstance(out, Program):
            raise LinalgError(f"program() in {path} returned a {type(out).__name__}, not a Program",
                              code="NO_PROGRAM", params={"path": path},
                              hint="return streamfold.linalg.program({...})")
        return out
    except StreamfoldError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code failed: say where
        raise LinalgError(f"{path} failed: {type(e).__name__}: {e}", code="PROGRAM_FAILED",
                          params={"path": path, "error": str(e)}) from e
    finally:
        sys.modules.pop(name, None)
