"""``streamfold`` command line: a thin layer over the library.

Exit codes: 0 success, 1 a batch failed while running, 2 a mistake in the query, the options
or the inputs (shown with its code and a hint), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .errors import StreamfoldError, UsageError, interrupted
from .plan.matrix import EQUI_PARTITIONINGS, MatrixPolicy
from .runtime.config import ON_BAD_FILE
from .runtime.strategy import MODES
from .settings import Settings, env_name

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_EQUI = MatrixPolicy().equi
EQUI_HELP = ("how an equi-join of two streams is partitioned: hashed on its key (hash), over a join matrix "
             "(matrix), heavy keys over the matrix and the others hashed (hybrid), or hashed until the key "
             f"frequencies show a heavy key, then the hybrid (auto); default {DEFAULT_EQUI} (docs/sql.md)")
VERBOSE_HELP = ("on a failed batch, print its whole chain of causes (Python and Java) and the innermost Java "
                f"stack (also: {env_name('verbose')}=1)")
DRIVER_MEMORY_HELP = (f"the heap of the Spark JVM the run starts, such as 8g (default "
                      f"{Settings().driver_memory}; also: {env_name('driver_memory')}; docs/tuning.md)")


def _query_text(arg: str) -> str:
    """QUERY is a path to a .sql file or the SQL text itself."""
    if os.path.isfile(arg):
        with open(arg, encoding="utf-8") as fh:
            return fh.read()
    if arg.strip().lower().endswith(".sql") and " " not in arg.strip():
        raise UsageError(f"query file {arg} does not exist", code="QUERY_NOT_FOUND", params={"path": arg},
                         hint="give the path of a .sql file, or the query's text")
    return arg


def _parse_inputs(values: list[str] | None, static: bool) -> tuple[dict[str, str], dict[str, str]]:
    from .runtime.sources import InputSpec

    paths: dict[str, str] = {}
    formats: dict[str, str] = {}
    for text in values or []:
        spec = InputSpec.parse(text, static)
        if spec.name in paths:
            raise UsageError(f"input {spec.name} is given twice", code="DUPLICATE_SOURCE", params={"source": spec.name})
        paths[spec.name] = spec.path
        formats[spec.name] = spec.format
    return paths, formats


def _parse_schemas(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in values or []:
        if "=" not in text:
            raise UsageError(f"cannot read --schema {text!r}", code="BAD_SCHEMA", params={"definition": text},
                             hint='write it as NAME="col TYPE, col TYPE"')
        name, cols = text.split("=", 1)
        out[name.strip()] = cols.strip().strip('"')
    return out


def _add_inputs(p: argparse.ArgumentParser, tables: bool = True, optional_query: bool = False) -> None:
    p.add_argument("query", metavar="QUERY", nargs="?" if optional_query else None,
                   help="path to a .sql file, or the SQL text")
    p.add_argument("--source", action="append", metavar="NAME=PATH[:FORMAT]",
                   help="a stream source: a directory new files arrive in (format parquet, csv or json), or "
                        "PATH:delta, a Delta Lake table whose new versions are the batches (docs/sources.md)")
    if tables:
        p.add_argument("--table", action="append", metavar="NAME=PATH[:FORMAT]",
                       help="a static input (a file or directory) that never changes")
    p.add_argument("--schema", action="append", metavar='NAME="col TYPE, ..."',
                   help="the columns of an input, instead of inferring them from its first file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamfold",
        description="Write a batch SQL query once; get an exact, continuously maintained answer on Spark.",
    )
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="maintain a query's answer as new files arrive",
                         description="Maintain QUERY's answer over its sources; see README for the output layout.")
    _add_inputs(run)
    run.add_argument("--output", required=True, metavar="DIR", help="where snapshots/, changes/, commits/ go")
    run.add_argument("--checkpoint", metavar="DIR", help="state and progress (default DIR/_checkpoint)")
    run.add_argument("--trigger", type=float, default=1.0, metavar="SECONDS", help="poll interval (default 1)")
    run.add_argument("--until-idle", type=float, metavar="SECONDS",
                     help="exit 0 once no new file has appeared for this long and all is committed")
    run.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    run.add_argument("--partitions", type=int, metavar="N", help="state partitions (default one per Spark core, at "
                     f"least 2; {env_name('partitions')}=N sets it)")
    run.add_argument("--driver-memory", metavar="SIZE", help=DRIVER_MEMORY_HELP)
    run.add_argument("--on-bad-file", choices=ON_BAD_FILE, default="stop",
                     help="a file that does not parse: stop the run (default), or move it to DIR/quarantine/ and go on")
    run.add_argument("--keep-snapshots", type=int, metavar="N", help="keep only the last N snapshots")
    run.add_argument("--compact-every", type=int, default=20, metavar="N",
                     help="write a full copy of the state every N batches (default 20)")
    run.add_argument("--strategy", choices=MODES, default="incremental",
                     help="per batch: maintain the states (incremental, default), recompute the answer from every "
                          "file, or choose by a cost model calibrated from measured batches (auto; docs/strategy.md)")
    run.add_argument("--equi-joins", choices=EQUI_PARTITIONINGS, default=DEFAULT_EQUI, help=EQUI_HELP)
    run.add_argument("--sink", action="append", default=[], metavar="ENDPOINT",
                     help="also deliver each committed batch, exactly once, to postgres://USER@HOST:PORT/DB?table=NAME[&changes=NAME2] "
                          "(password from PGPASSWORD or ~/.pgpass) or PATH:delta; repeatable (docs/sinks.md)")
    run.add_argument("--quiet", action="store_true", help="no per-batch lines and no progress line")
    run.add_argument("--profile", action="store_true",
                     help="print each batch's waterfall (phases, Spark jobs and stages, py4j calls) and write "
                          "it to DIR/_profile/<batch>.json")
    run.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    run.add_argument("--control-host", default="127.0.0.1", metavar="HOST",
                     help="the address the control endpoint listens on (default 127.0.0.1: this machine only)")
    run.add_argument("--control-port", type=int, default=0, metavar="PORT",
                     help="the control endpoint's port (default: a free one); see streamfold control")

    ex = sub.add_parser("explain", help="show the incremental plan (states, h, ⊗, a)",
                        description="Compile QUERY and print its incremental plan. Needs no Spark for Parquet "
                                    "sources or when --schema gives the columns.")
    _add_inputs(ex, optional_query=True)
    ex.add_argument("--format", choices=("text", "json"), default="text")
    ex.add_argument("--equi-joins", choices=EQUI_PARTITIONINGS, default=DEFAULT_EQUI, help=EQUI_HELP)
    ex.add_argument("--analyze", metavar="OUTPUT",
                    help="the plan of the run writing to OUTPUT (no QUERY needed), with its last batch's "
                         "statistics: rows per source, and per state its rows and the keys the batch touched")
    ex.add_argument("--checkpoint", metavar="DIR", help="with --analyze: the run's checkpoint (default OUTPUT/_checkpoint)")

    demo = sub.add_parser("demo", help="the seed's groupBy and join-groupBy, incremental vs recompute")
    demo.add_argument("--dir", default="demo-out", help="working directory (default demo-out)")
    demo.add_argument("--batches", type=int, default=10, help="batches per query, history included (default 10)")
    demo.add_argument("--scale", type=float, default=1.0,
                      help="data size relative to the seed's (1M-row groupBy history, 40K increments)")
    demo.add_argument("--master", metavar="URL", help="Spark master (default local[*])")

    studio = sub.add_parser("studio", help="a local web page to write, run and watch queries together",
                            description="Serve the studio on 127.0.0.1 (a random token in the URL it prints). "
                                        "Sources are the workspace's directories; queries and their outputs "
                                        "are kept in WORKSPACE/.studio/.")
    studio.add_argument("--workspace", default=".", metavar="DIR", help="the workspace directory (default .)")
    studio.add_argument("--port", type=int, default=8765, metavar="N", help="port (default 8765; 0 picks a free one)")
    studio.add_argument("--host", default="127.0.0.1", metavar="H",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    studio.add_argument("--master", metavar="URL", help="Spark master for runs (default local[*])")
    studio.add_argument("--sink", action="append", default=[], metavar="ENDPOINT",
                        help="every run also delivers each committed batch to postgres://USER@HOST:PORT/DB?table=NAME "
                             "or PATH:delta (PATH inside the workspace); the control panel shows what each holds "
                             "(docs/sinks.md)")

    settings = sub.add_parser("settings", help="the settings in effect (docs/tuning.md)",
                              description="Print every setting's value, from the environment or its default.")
    settings.add_argument("--markdown", action="store_true",
                          help="print the settings' reference instead (docs/tuning.md is this output)")

    from .bench.cli import add_parser as add_bench
    from .control.cli import add_parser as add_control
    from .linalg.cli import add_parser as add_linalg

    add_control(sub)
    add_bench(sub)
    add_linalg(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["bench", "linalg"]:  # its own options (streamfold/bench/linalg.py)
        from .bench.linalg import main as bench_linalg

        return _guarded(lambda: bench_linalg(words[2:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    return _guarded(lambda: _dispatch(args, argv), verbose=lambda: _verbose(args))


def _verbose(args: argparse.Namespace) -> bool:
    try:
        return _settings(args).verbose
    except UsageError:  # (reported already, where the run read them)
        return bool(getattr(args, "verbose", False))


def _settings(args: argparse.Namespace) -> Settings:
    """The environment's settings, with those the command line gives."""
    settings = Settings.from_environ()
    if getattr(args, "verbose", False):
        settings = settings.replace(verbose=True)
    if getattr(args, "driver_memory", None) is not None:
        settings = settings.replace(driver_memory=args.driver_memory)
    return settings


def _dispatch(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    if args.command == "settings":
        from .settings import describe, reference_markdown

        sys.stdout.write(reference_markdown() if args.markdown else describe(_settings(args)))
        return EXIT_OK
    if args.command == "explain":
        return _explain(args)
    if args.command == "run":
        return _run(args)
    if args.command == "demo":
        from .demo import run_demo

        return run_demo(args.dir, batches=args.batches, scale=args.scale, master=args.master)
    if args.command == "control":
        from .control.cli import main as control

        return control(args, _query_text)
    if args.command == "studio":
        from .studio import serve

        serve(args.workspace, port=args.port, host=args.host, master=args.master, sinks=args.sink)
        return EXIT_OK
    if args.command == "bench":
        from .bench.cli import main as bench

        return bench(args, list(argv) if argv is not None else None)
    if args.command == "linalg":
        from .linalg.cli import main as linalg

        return linalg(args)
    return EXIT_USAGE


def _guarded(run: Callable[[], int], verbose: Callable[[], bool] = lambda: False) -> int:
    """Run a command; a coded error is printed and becomes its exit code (a failed batch's
    whole chain of causes too when ``verbose()``: the setting, or the flag)."""
    try:
        code = run()
    except BaseException as e:
        if not interrupted(e) and not isinstance(e, StreamfoldError):
            raise
        if interrupted(e):
            print("\ninterrupted", file=sys.stderr)
            code = EXIT_INTERRUPTED
        else:
            code = _coded(e, verbose)  # type: ignore[arg-type]
    if _STOP_HUNG.is_set():  # a JVM thread that never answers would keep the process alive
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _coded(e: StreamfoldError, verbose: Callable[[], bool]) -> int:
    """Print a coded error; its exit code."""
    from .errors import BatchError

    print(f"error: {e}", file=sys.stderr)
    code = EXIT_USAGE
    if isinstance(e, BatchError):
        if e.causes and verbose():
            print(e.chain(), file=sys.stderr)
        code = EXIT_FAILED
    return code


def _explain(args: argparse.Namespace) -> int:
    from .plan import explain_json, explain_text
    from .plan.compilation import Compilation
    from .runtime.sources import InputSpec, infer_schema
    from .sql import Catalog

    if args.analyze:
        from .runtime.analyze import analyze

        analyzed = analyze(args.analyze, args.checkpoint)
        sys.stdout.write(analyzed.json(explain_json(analyzed.plan)) + "\n" if args.format == "json"
                         else analyzed.text(explain_text(analyzed.plan)))
        return EXIT_OK
    if args.query is None:
        raise UsageError("explain needs QUERY (or --analyze OUTPUT)", code="MISSING_QUERY", params={},
                         hint="give the query's text or .sql file")
    compilation = Compilation(_query_text(args.query), policy=MatrixPolicy(equi=args.equi_joins),
                              push_down_groups=_settings(args).push_down_groups)
    sources, formats = _parse_inputs(args.source, False)
    tables, table_formats = _parse_inputs(args.table, True)
    schemas = _parse_schemas(args.schema)
    specs = [InputSpec(n, p, formats[n], False, schemas.get(n)) for n, p in sources.items()]
    specs += [InputSpec(n, p, table_formats[n], True, schemas.get(n)) for n, p in tables.items()]
    for name in schemas:
        if name not in sources and name not in tables:
            specs.append(InputSpec(name, "", "parquet", False, schemas[name]))
    spark = None
    if any(s.format not in ("parquet", "delta") and not s.schema for s in specs):
        from .runtime.session import get_spark

        compilation.parsed  # noqa: B018 - a syntax error is reported before a JVM starts for it
        spark = get_spark(settings=_settings(args))
    plan = compilation.against(Catalog([infer_schema(s, spark) for s in specs])).plan
    sys.stdout.write(explain_json(plan) if args.format == "json" else explain_text(plan))
    return EXIT_OK


class _Status:
    """A run's progress on stderr (runtime/progress.py: the batch's step, Spark's stages and tasks,
    rows read): a line redrawn in place on a terminal, a plain line every ``PLAIN_EVERY`` seconds
    otherwise; only once a phase lasts a second; nothing with ``--quiet``."""

    PLAIN_EVERY = 5.0
    SHOWN = ("starting", "planning", "batch")

    def __init__(self, quiet: bool) -> None:
        from .runtime.progress import ProgressPoller

        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.shown = False
        self.plain_at = 0.0
        self._lock = threading.Lock()
        self.poller = ProgressPoller(self._show).start()

    def _show(self, p: Any) -> None:
        if self.quiet:
            return
        if p.phase not in self.SHOWN:
            self.clear()
            return
        if p.elapsed_s < 1:
            return
        line = f"… {p.text()} ({p.elapsed_s:.0f} s)"
        with self._lock:
            if self.tty:
                sys.stderr.write(f"\r\033[K{line}")
                sys.stderr.flush()
                self.shown = True
            elif time.monotonic() - self.plain_at >= self.PLAIN_EVERY:
                print(line, file=sys.stderr, flush=True)
                self.plain_at = time.monotonic()

    def clear(self) -> None:
        with self._lock:
            if self.tty and self.shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
                self.shown = False

    def close(self) -> None:
        self.poller.close()
        self.clear()


def _run(args: argparse.Namespace) -> int:
    from .control.api import check_endpoint, launch
    from .control.pause import GRACE_S
    from .plan.compilation import Compilation
    from .runtime.config import QueryConfig, input_specs

    compilation = Compilation(_query_text(args.query))
    sources, formats = _parse_inputs(args.source, False)
    tables, table_formats = _parse_inputs(args.table, True)
    if not sources:
        raise UsageError("give at least one --source", code="NO_SOURCE", hint="--source NAME=DIR")
    # What is found without Spark is reported before a JVM starts for it: the options, the
    # settings, a query that does not parse, an input path that is not there.
    streams, statics = input_specs(sources, tables, {**formats, **table_formats}, _parse_schemas(args.schema))
    config = QueryConfig(
        sql=compilation.text, sources=streams, output=args.output, tables=statics, checkpoint=args.checkpoint,
        trigger=args.trigger, until_idle=args.until_idle, partitions=args.partitions, on_bad_file=args.on_bad_file,
        compact_every=args.compact_every, keep_snapshots=args.keep_snapshots, profile=args.profile,
        matrix_equi=args.equi_joins, strategy=args.strategy, settings=_settings(args), sinks=tuple(args.sink))
    check_endpoint(args.control_port, GRACE_S)
    compilation.parsed  # noqa: B018
    _check_paths({n: p for n, p in sources.items() if formats[n] != "delta"}, tables)  # a table: when opened
    status = _Status(args.quiet)
    from .runtime.session import cancel_jobs, get_spark, plain_interrupts

    try:  # Spark's own console bar is off: the progress line says more (the step, rows read)
        spark = get_spark(args.master, settings=config.settings)
        plain_interrupts()
        status.poller.attach(spark.sparkContext)
        query = launch(config, compilation, spark=spark, master=args.master, background=False,
                       progress=status.poller.step, endpoint=True, control_host=args.control_host,
                       control_port=args.control_port, pause_grace=GRACE_S)
    except BaseException:
        status.close()
        raise
    query.on_inputs = status.poller.inputs

    def report(result: object) -> None:
        status.poller.batch_done(result.batch)  # type: ignore[attr-defined]
        status.clear()
        if not args.quiet:
            print(result.line(), flush=True)  # type: ignore[attr-defined]
            every = config.settings.state_report_every
            if every and (result.batch + 1) % every == 0 and result.state_rows:  # type: ignore[attr-defined]
                print(result.states_line(), flush=True)  # type: ignore[attr-defined]
        waterfall = result.waterfall()  # type: ignore[attr-defined]
        if waterfall is not None:
            _write_profile(args.output, waterfall)
            if not args.quiet:
                print("\n".join(waterfall.lines()), flush=True)

    query.on_batch = report
    if query.last_batch >= 0:
        print(f"resuming after batch {query.last_batch:06d}", file=sys.stderr)
    if query.status()["state"] in ("paused", "pausing"):
        print("paused (as it was when it stopped): streamfold control OUTPUT resume", file=sys.stderr)
    if not args.quiet:
        print(f"control: streamfold control {args.output} status  (endpoint {query.control_url})",
              file=sys.stderr)
    try:
        query.run(args.trigger, args.until_idle)
    except BaseException as e:
        status.close()
        if interrupted(e):
            cancel_jobs(spark)
            last = query.last_batch
            print(f"\ncommitted through batch {last:06d}: the same command resumes after it" if last >= 0 else
                  "\nno batch committed yet: the same command starts again", file=sys.stderr)
        # the run's own error is the one to show: a stop after a JVM that died (py4j finding it
        # gone while releasing the states) must not replace it with a traceback
        stop_within(query.stop, STOP_SECONDS, raising=False)
        raise
    status.close()
    stop_within(query.stop, STOP_SECONDS)
    return EXIT_OK


# How long a run's stop may take before the process ends without it (issue 59: a JVM that ran
# out of memory may leave a thread that never answers, and the process hung after its error).
STOP_SECONDS = 120.0
_STOP_HUNG = threading.Event()


def stop_within(stop: Callable[[], None], seconds: float, raising: bool = True) -> bool:
    """Call ``stop`` and wait for it at most ``seconds``; past them, report it and mark the process
    to end at once after its error is printed (:func:`_guarded`). Whether it stopped in time.
    The stop's error is raised here, or with ``raising`` False (a stop after the run failed) logged."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            stop()
        except BaseException as e:  # noqa: BLE001 - raised again below, in the caller's thread
            errors.append(e)

    thread = threading.Thread(target=call, name="streamfold-stop", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        print(f"warning: Spark did not stop within {seconds:.0f} s; the process ends without it", file=sys.stderr)
        _STOP_HUNG.set()
        return False
    if errors and raising:
        raise errors[0]
    if errors:
        logging.getLogger("streamfold").debug("stopping after the run's error failed too", exc_info=errors[0])
    return True


def _check_paths(sources: dict[str, str], tables: dict[str, str]) -> None:
    """An input path that is not there, reported before Spark starts."""
    from .runtime.sources import list_inputs, table_paths

    for path in sources.values():
        list_inputs(path)
    for name, path in tables.items():
        if not os.path.exists(path):
            raise UsageError(f"table {name}: {path} does not exist", code="TABLE_NOT_FOUND",
                             params={"table": name, "path": path}, hint="check the --table path")
        table_paths(path)


def _write_profile(output: str, waterfall: Any) -> None:
    """A batch's waterfall as ``OUTPUT/_profile/<batch>.json`` (read by tools; not part of the answer)."""
    import json

    directory = os.path.join(output, "_profile")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{waterfall.batch:06d}.json"), "w", encoding="utf-8") as fh:
        json.dump(waterfall.to_json(), fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
