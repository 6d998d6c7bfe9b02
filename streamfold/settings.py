"""streamfold's settings: one registry, named, typed and documented, read from the environment here only.

Every setting is a field of :class:`Settings`, declared once with its type, default, environment
variable, kind and meaning; :data:`SETTINGS` is that registry and ``docs/tuning.md`` is generated
from it (:func:`reference_markdown`, ``streamfold settings --markdown``). A setting's *kind* says
who it is for:

* ``option`` — a user needs it: it is also a command-line flag or an API keyword
  (``--driver-memory``, ``--partitions``, ``--verbose``);
* ``tuning`` — environment only: the JVM's options, caches, the log level;
* ``ab`` — an A/B switch that turns a mechanism off to measure what it buys; the answers are the
  same either way.

Nothing is read at import. :meth:`Settings.from_environ` reads the environment once, where a run
starts — the command line, :func:`streamfold.start`, a Spark session streamfold builds — and the
typed values travel from there (``QueryConfig.settings``). A bad value is a coded usage error,
``BAD_SETTING``, whose hint says what the setting accepts. This module is the only one that names
``STREAMFOLD_…`` variables (``tests/compiler/test_settings.py`` checks it); prose elsewhere that
names one asks :func:`env_name` for it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError

KINDS = ("option", "tuning", "ab")


@dataclass(frozen=True)
class ValueType:
    """What values a setting takes: how the environment's text reads as one, and how a value
    given from Python is checked."""

    name: str  # what a value is, in the error's words: "a memory size"
    accepted: str  # what to write instead, for the hint
    read: Callable[[str], Any]  # text -> value; ValueError when it is none
    check: Callable[[Any], bool]  # whether a value given from Python is one
    show: Callable[[Any], str] = str  # a value as the environment spells it


def _flag(text: str) -> bool:
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


FLAG = ValueType("a switch", "1 or 0 (also true/false, yes/no, on/off)", _flag,
                 lambda v: isinstance(v, bool), lambda v: "1" if v else "0")


def count(least: int) -> ValueType:
    """A whole number of at least ``least``."""

    def read(text: str) -> int:
        if not re.fullmatch(r"\s*\d+\s*", text) or int(text) < least:
            raise ValueError(text)
        return int(text)

    return ValueType(f"a whole number of at least {least}", f"a whole number of at least {least}", read,
                     lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least)


def _fraction(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):  # (NaN too)
        raise ValueError(text)
    return value


FRACTION = ValueType("a number of at least 0", "a number of at least 0, such as 0.5",
                     _fraction, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf"))


_SIZE = re.compile(r"[1-9]\d*[kmgt]b?", re.IGNORECASE)  # as Spark reads sizes, with a unit


def _memory(text: str) -> str:
    if not _SIZE.fullmatch(text.strip()):
        raise ValueError(text)
    return text.strip()


MEMORY = ValueType("a memory size", "a whole number with a unit k, m, g or t, such as 512m or 8g", _memory,
                   lambda v: isinstance(v, str) and _SIZE.fullmatch(v) is not None)
TEXT = ValueType("text", "any text", lambda text: text, lambda v: isinstance(v, str))
LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


def _log_level(text: str) -> str:
    if text.strip().upper() not in LOG_LEVELS:
        raise ValueError(text)
    return text.strip().upper()


LOG_LEVEL = ValueType("a log level", "one of " + ", ".join(LOG_LEVELS), _log_level, lambda v: v in LOG_LEVELS)


@dataclass(frozen=True)
class Setting:
    """One entry of the registry."""

    name: str  # the field of Settings, and the API's keyword for an option
    type: ValueType
    default: Any
    doc: str
    env: str
    kind: str  # option | tuning | ab
    flag: str | None = None  # an option's command-line flag
    keyword: str | None = None  # an option's keyword of streamfold.start
    default_doc: str | None = None  # the default in words, where None stands for one

    def read(self, text: str) -> Any:
        """The value the environment's ``text`` gives the setting; ``BAD_SETTING`` if none."""
        try:
            return self.type.read(text)
        except ValueError:
            raise bad_setting(self, text, self.env) from None

    def check(self, value: Any) -> None:
        """Refuse a value given from Python that the setting does not take."""
        if not (value is None and self.default is None) and not self.type.check(value):
            raise bad_setting(self, value, self.name)

    @property
    def shown_default(self) -> str:
        return self.default_doc if self.default_doc is not None else self.type.show(self.default)


def bad_setting(setting: Setting, value: Any, spelled: str) -> UsageError:
    """The coded error for a value ``setting`` does not take, given as ``spelled`` (its variable,
    flag or keyword)."""
    return UsageError(f"{spelled}={value!r} is not {setting.type.name}", code="BAD_SETTING",
                      params={"setting": setting.name, "value": value},
                      hint=f"{spelled} takes {setting.type.accepted}; its default is {setting.shown_default}")


def _setting(default: Any, *, env: str, kind: str, type: ValueType, doc: str,  # noqa: A002
             flag: str | None = None, keyword: str | None = None, default_doc: str | None = None) -> Any:
    """A field of :class:`Settings`, its registry entry in the field's metadata."""
    assert kind in KINDS and (kind == "option") == bool(flag or keyword)
    return field(default=default, metadata={"setting": (env, kind, type, doc, flag, keyword, default_doc)})


@dataclass(frozen=True)
class Settings:
    """streamfold's settings, typed and checked: the registry's defaults, changed by keyword
    (``Settings(driver_memory="8g")``) or read from the environment (:meth:`from_environ`)."""

    # -- options --------------------------------------------------------------------------------
    driver_memory: str = _setting(
        "2g", env="STREAMFOLD_DRIVER_MEMORY", kind="option", type=MEMORY, flag="--driver-memory",
        doc="the driver JVM's heap (`spark.driver.memory`) of the Spark session streamfold starts; in local "
            "mode also the executor's. Raise it for large states (TPC-H SF 1 runs with `12g`).")
    partitions: int | None = _setting(
        None, env="STREAMFOLD_PARTITIONS", kind="option", type=count(1), flag="--partitions", keyword="partitions",
        default_doc="one per Spark core, at least 2",
        doc="hash partitions of each state when `--partitions` (`partitions=`) is not given; the bench's too.")
    verbose: bool = _setting(
        False, env="STREAMFOLD_VERBOSE", kind="option", type=FLAG, flag="--verbose",
        doc="a failed batch prints its whole chain of causes, Python and Java, with the innermost Java stack.")
    # -- tuning ---------------------------------------------------------------------------------
    java_options: str = _setting(
        "", env="STREAMFOLD_JAVA_OPTIONS", kind="tuning", type=TEXT, default_doc="none",
        doc="options added to the driver JVM: e.g. `-XX:FlightRecorderOptions:stackdepth=1024` to profile "
            "with JFR, or `-Dspark.streamfold.indexBytes=N`, the budget of the base indexes (default a "
            "quarter of the heap; a base too large for it is scanned).")
    jvm_archive: bool = _setting(
        True, env="STREAMFOLD_JVM_ARCHIVE", kind="tuning", type=FLAG,
        doc="the driver JVM maps the archive of Spark's classes `make setup` made "
            "(`python -m streamfold.bench.jvm_training`; runtime/jvm_archive.py): a JVM starts and runs its "
            "first jobs faster. Off (0): it loads every class from the jars.")
    codegen_cache: int = _setting(
        1000, env="STREAMFOLD_CODEGEN_CACHE", kind="tuning", type=count(1),
        doc="classes of generated code Spark keeps (`spark.sql.codegen.cache.maxEntries`; Spark's own "
            "default is 100, fewer than one TPC-H plan needs, so replayed batches would compile again).")
    page_size: str = _setting(
        "4m", env="STREAMFOLD_PAGE_SIZE", kind="tuning", type=MEMORY,
        doc="`spark.buffer.pageSize`: the memory page of a broadcast hash table on a long key (Spark's "
            "default, 64 MB for a 2 GB driver, is held by every broadcast state).")
    spark_log_level: str = _setting(
        "ERROR", env="STREAMFOLD_SPARK_LOG_LEVEL", kind="tuning", type=LOG_LEVEL,
        doc="Spark's log level.")
    cache_dir: str = _setting(
        "", env="STREAMFOLD_CACHE", kind="tuning", type=TEXT, default_doc="~/.cache/streamfold",
        doc="where `make setup` builds, and the session finds, the helper jar of the prepared plans "
            "(compiled with Spark's Janino; without it every batch is planned).")
    delta_change_feed: bool = _setting(
        False, env="STREAMFOLD_DELTA_CHANGE_FEED", kind="tuning", type=FLAG,
        doc="`1`: a Delta source reads a version's change data feed files where it wrote some, instead of "
            "netting the files it removed and added (fewer rows read). Off by default: delta-rs 1.6.6 writes a "
            "feed without the duplicate post-images of an UPDATE (two rows updated into equal rows give one), "
            "so the feed is exact only for tables without duplicate rows (docs/sources.md).")
    bind_address: str = _setting(
        "127.0.0.1", env="STREAMFOLD_BIND_ADDRESS", kind="tuning", type=TEXT,
        doc="the address the Spark driver streamfold starts with a local master listens on (its RPC and "
            "block manager; the UI is off). Loopback keeps them off the network: Spark's RPC has no "
            "authentication unless `spark.authenticate` is set. With a cluster master the driver must be "
            "reachable by the executors; see docs/cluster.md.")
    state_report_every: int = _setting(
        10, env="STREAMFOLD_STATE_REPORT_EVERY", kind="tuning", type=count(0),
        doc="`streamfold run` prints one line of the states' rows and bytes (Spark's storage figures, the "
            "largest state first) after every this many batches; `0` never. Every commit records both "
            "(`state_rows`, `state_bytes`: docs/running.md).")
    executor_wait: float = _setting(
        120.0, env="STREAMFOLD_EXECUTOR_WAIT", kind="tuning", type=FRACTION,
        doc="seconds a run on a cluster master waits for executors when the application has none (every "
            "worker lost, or the master without recovery) before it fails the batch with `NO_EXECUTORS` "
            "instead of waiting for ever.")
    join_order_margin: float = _setting(
        0.25, env="STREAMFOLD_JOIN_ORDER_MARGIN", kind="tuning", type=FRACTION,
        doc="a delta term's join order is re-planned only when another order's estimated cost (rows it "
            "builds per delta row, from the smoothed selectivities) is below the current one's by this "
            "fraction (docs/strategy.md, \"Join order\").")
    join_order_batches: int = _setting(
        2, env="STREAMFOLD_JOIN_ORDER_BATCHES", kind="tuning", type=count(1),
        doc="... and has been, for this many consecutive batches (the re-plan lags the data by as many).")
    join_order_smoothing: float = _setting(
        0.6, env="STREAMFOLD_JOIN_ORDER_SMOOTHING", kind="tuning", type=FRACTION,
        doc="the weight of the last batch's measured selectivity in its moving average (1: the last batch "
            "alone).")
    spark_trigger: float = _setting(
        0.1, env="STREAMFOLD_SPARK_TRIGGER", kind="tuning", type=FRACTION,
        doc="seconds between the looks of a streaming DataFrame source's Spark stream for new input (its "
            "processing-time trigger; 0: Spark's as fast as it can). A Spark source has no change "
            "notification, so half of this is added to its batches' latency on average; each look that "
            "finds nothing costs Spark a listing or an offsets request.")
    # -- A/B switches ---------------------------------------------------------------------------
    watch: bool = _setting(
        True, env="STREAMFOLD_WATCH", kind="ab", type=FLAG,
        doc="`0`: no inotify watch of the source directories; a run polls every `--trigger` seconds only.")
    prepared: bool = _setting(
        True, env="STREAMFOLD_PREPARED", kind="ab", type=FLAG,
        doc="`0`: no prepared plans; every batch is planned (analysed, optimized, code generated).")
    push_down_groups: bool = _setting(
        True, env="STREAMFOLD_PUSH_DOWN_GROUPS", kind="ab", type=FLAG,
        doc="`0`: a filter on GROUP BY keys stays above the GROUP BY (its state keeps every group) instead of "
            "running on the rows before it (seed 004's predicate push-down).")
    index: bool = _setting(
        True, env="STREAMFOLD_INDEX", kind="ab", type=FLAG,
        doc="`0`: joins that probe a state's base scan it instead of looking its keys up in an index kept "
            "between batches.")
    one_partition: bool = _setting(
        True, env="STREAMFOLD_ONE_PARTITION", kind="ab", type=FLAG,
        doc="`0`: a small batch over small states (250,000 rows in all) is not run in one partition; states "
            "stay hash-partitioned.")
    direct_views: bool = _setting(
        True, env="STREAMFOLD_DIRECT_VIEWS", kind="ab", type=FLAG,
        doc="`0`: temp views are registered through Spark's public API (a SQL execution each) instead of "
            "directly.")
    unqualified: bool = _setting(
        True, env="STREAMFOLD_UNQUALIFIED", kind="ab", type=FLAG,
        doc="`0`: column references keep their view's name through optimization, and a UNION ALL of "
            "branches that compute a column over a hash-partitioned state does not report the state's "
            "partitioning (the aggregate over it shuffles again).")
    defer: bool = _setting(
        True, env="STREAMFOLD_DEFER", kind="ab", type=FLAG,
        doc="`0`: the work after a commit (compaction, a recompute measured, Python's garbage collection, the "
            "prepared plans' second and third warm-up runs) runs at once even when the next batch's file is "
            "already waiting. A tail's fold never waits.")
    join_order: bool = _setting(
        True, env="STREAMFOLD_JOIN_ORDER", kind="ab", type=FLAG,
        doc="`0`: the delta terms of a join of three or more inputs keep their compile-time join order "
            "(no re-plan from the measured selectivities).")
    runs_min_rows: int = _setting(
        50_000, env="STREAMFOLD_RUNS_MIN_ROWS", kind="ab", type=count(0),
        doc="a state is kept as a base and a tail from this many rows (when each batch touches at most 30 % "
            "of its keys); a very large value keeps every state whole, `0` splits every candidate.")
    runs_fold: float | None = _setting(
        None, env="STREAMFOLD_RUNS_FOLD", kind="ab", type=FRACTION, default_doc="adaptive",
        doc="a fixed fold bound (the tail's rows over the base's) instead of √(2x) for batches touching x "
            "of the state, at least 0.15; `0` folds after every batch (the tests use it).")

    def __post_init__(self) -> None:
        for s in SETTINGS:
            s.check(getattr(self, s.name))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment (``os.environ`` unless given) sets, the registry's
        defaults for the others; an empty variable counts as unset."""
        env = os.environ if environ is None else environ
        given = {s.name: s.read(env[s.env]) for s in SETTINGS if env.get(s.env, "").strip()}
        return cls(**given)

    def replace(self, **changes: Any) -> Settings:
        """These settings with ``changes`` (checked like any others)."""
        return dataclasses.replace(self, **changes)

    @property
    def jar_cache(self) -> str:
        """The directory the JVM helpers' jar is cached in."""
        return os.path.expanduser(self.cache_dir or os.path.join("~", ".cache", "streamfold"))


def _registry() -> tuple[Setting, ...]:
    out = []
    for f in dataclasses.fields(Settings):
        env, kind, type_, doc, flag, keyword, default_doc = f.metadata["setting"]
        out.append(Setting(f.name, type_, f.default, doc, env, kind, flag, keyword, default_doc))
    return tuple(out)


SETTINGS: tuple[Setting, ...] = _registry()
_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The registry's entry for ``name``."""
    return _BY_NAME[name]


def env_name(name: str) -> str:
    """The environment variable of setting ``name`` (for prose that names it: hints, help)."""
    return _BY_NAME[name].env


def resolve(given: Settings | None) -> Settings:
    """``given``, or the environment's settings for a caller that was given none."""
    return given if given is not None else Settings.from_environ()


# Variables the tests and `make setup` read (never the package): documented beside the settings.
TEST_VARIABLES = (
    ("STREAMFOLD_EXAMPLES", "`2`", "Hypothesis examples per differential test (`tests/runtime/test_differential.py`)"),
    ("STREAMFOLD_SHRINK", "off", "`1`: Hypothesis shrinks a failing differential example"),
    ("STREAMFOLD_RUNS_ALL", "off", "`1`: `tests/runtime/test_runs.py` runs all 11 join shapes"),
    ("STREAMFOLD_STUDIO_SCREENSHOTS", "none",
     "`DIR`: the studio's browser tests write their screenshots there (those in studio.md: `docs/img`)"),
    ("STREAMFOLD_SKIP_BROWSER", "off",
     "`1`: `make setup` does not install Chromium; the browser tests are skipped and say why"),
)

_KIND_TITLES = {
    "option": ("Options", "Settings a user may need to change: each is also a command-line flag (and "
                          "`partitions` a keyword of `streamfold.start`), which wins over the variable."),
    "tuning": ("Tuning", "Environment only. The JVM settings apply to the Spark session streamfold starts, not to "
                         "one passed to `streamfold.start(spark=…)`: set the Spark configuration named here on that "
                         "session yourself when you build it."),
    "ab": ("A/B switches", "Each turns a mechanism off to measure what it buys; the answers are the same either way "
                           "([benchmarks.md](benchmarks.md#the-measurements-behind-the-defaults) has the measurement "
                           "behind each default)."),
}


def reference_markdown() -> str:
    """``docs/tuning.md``: every setting of the registry, by kind (a test checks the file is this)."""
    lines = [
        "# Tuning: streamfold's settings",
        "",
        "<!-- Generated from streamfold/settings.py by `streamfold settings --markdown > docs/tuning.md`; "
        "tests/compiler/test_settings.py checks it. -->",
        "",
        "Every setting has an environment variable, read when a run starts (`streamfold run`, "
        "`streamfold.start`, or a Spark session streamfold builds); a Python program can give them as "
        "`streamfold.start(settings=Settings(driver_memory=\"8g\"))` instead. A value a setting does not "
        "take stops the run with `BAD_SETTING` and what it accepts. An empty variable counts as unset. "
        "`streamfold settings` prints the values in effect.",
    ]
    for kind in KINDS:
        title, intro = _KIND_TITLES[kind]
        flagged = kind == "option"
        lines += ["", f"## {title}", "", intro, ""]
        lines.append("| variable | " + ("flag / keyword | " if flagged else "") + "default | meaning |")
        lines.append("|---|" + ("---|" if flagged else "") + "---|---|")
        for s in SETTINGS:
            if s.kind != kind:
                continue
            default = f"`{s.shown_default}`" if s.default_doc is None or "/" in s.default_doc else s.shown_default
            where = ", ".join(f"`{w}`" for w in (s.flag, s.keyword and f"{s.keyword}=") if w) + " | " if flagged else ""
            takes = f" Takes {s.type.accepted}." if s.type is not TEXT else ""
            lines.append(f"| `{s.env}` | {where}{default} | {s.doc}{takes} |")
    lines += ["", "## Read by the tests and `make setup` only", "", "| variable | default | meaning |", "|---|---|---|"]
    lines += [f"| `{env}` | {default} | {doc} |" for env, default, doc in TEST_VARIABLES]
    return "\n".join(lines) + "\n"


def describe(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The settings in effect, one a line, with where each value comes from."""
    env = os.environ if environ is None else environ
    width = max(len(s.env) for s in SETTINGS)
    lines = []
    for s in SETTINGS:
        value = getattr(settings, s.name)
        shown = s.shown_default if value == s.default else s.type.show(value)
        source = "environment" if env.get(s.env, "").strip() else "default"
        lines.append(f"{s.env:<{width}}  {shown:<30}  {s.kind:<6}  ({source})")
    return "\n".join(lines) + "\n"
