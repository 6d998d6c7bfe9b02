"""The systems a workload is run through; one module each, all behind :class:`System`.

A system is driven the same way by the runner: ``start()`` once the history's files are in its
source directories, then per increment — after the increment's files have appeared —
``process()``, which returns once the updated exact answer is committed, and at the end
``answer()``, the committed answer as rows (checked against DuckDB).
"""

from __future__ import annotations

from ...errors import UsageError
from .base import Context, Rejected, System

NAMES = ("streamfold", "streamfold-auto", "streamfold-cli", "recompute", "spark-streaming")
# streamfold with the workload's iteration in each mode (``--mode``): exact is ``streamfold`` itself
MODE_SYSTEMS = {"exact": "streamfold", "differential": "streamfold-differential", "diffusion": "streamfold-diffusion"}


def system_class(name: str) -> type[System]:
    """The class of system ``name`` (imported lazily: each pulls in PySpark)."""
    if name in MODE_SYSTEMS.values():
        from .incremental import DifferentialSystem, DiffusionSystem, StreamfoldSystem

        return {c.name: c for c in (StreamfoldSystem, DifferentialSystem, DiffusionSystem)}[name]
    if name == "streamfold-auto":
        from .incremental import AutoSystem

        return AutoSystem
    if name == "streamfold-cli":
        from .cli import CliSystem

        return CliSystem
    if name == "recompute":
        from .recompute import RecomputeSystem

        return RecomputeSystem
    if name == "spark-streaming":
        from .streaming import StreamingSystem

        return StreamingSystem
    raise UsageError(f"unknown system {name!r}", code="UNKNOWN_SYSTEM", params={"system": name},
                     hint=f"use a comma-separated list of {', '.join(NAMES)}")


__all__ = ["MODE_SYSTEMS", "NAMES", "Context", "Rejected", "System", "system_class"]
