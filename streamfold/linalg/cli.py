"""``streamfold linalg``: ``run`` a matrix program over streams of updates, ``explain`` it.

``streamfold/cli.py`` only adds the subparser (:func:`add_parser`) and calls :func:`main`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import UsageError


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("linalg", help="incremental linear algebra: maintain a matrix program's results",
                       description="Lago's factored deltas (seed 001 Ch. 5): a matrix program in Python "
                                   "(streamfold.linalg) compiled to a trigger program; see docs/linalg.md.")
    cmds = p.add_subparsers(dest="linalg_command", metavar="ACTION")

    def program_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("program", metavar="PROGRAM.py", help="a Python file that defines `program`")
        q.add_argument("--param", action="append", metavar="NAME=VALUE",
                       help="an argument of program(...) in the file (sizes, steps); repeatable")

    run = cmds.add_parser("run", help="maintain the program's results as update files arrive",
                          description="Maintain PROGRAM's results over its inputs' update files; output layout "
                                      "and durability as `streamfold run` (docs/linalg.md).")
    program_args(run)
    run.add_argument("--source", action="append", metavar="NAME=DIR", required=True,
                     help="the directory an input's update files arrive in (.parquet/.csv entries i,j,v or rows i,row; "
                          ".npy whole matrices); one per input")
    run.add_argument("--output", required=True, metavar="DIR", help="where snapshots/, changes/, commits/ go")
    run.add_argument("--checkpoint", metavar="DIR", help="state and progress (default DIR/_checkpoint)")
    run.add_argument("--trigger", type=float, default=1.0, metavar="SECONDS", help="poll interval (default 1)")
    run.add_argument("--until-idle", type=float, metavar="SECONDS",
                     help="exit 0 once no new file has appeared for this long and all is committed")
    run.add_argument("--backend", choices=("auto", "numpy", "spark"), default="auto",
                     help="where matrices live (default auto: Spark when a matrix passes --local-limit entries)")
    run.add_argument("--local-limit", type=int, metavar="ENTRIES",
                     help="auto picks Spark when a matrix has more entries than this (default 50,000,000)")
    run.add_argument("--strategy", choices=("auto", "incremental", "reevaluate"), default="auto",
                     help="per batch: the cheaper of the two by the machine model (default), or always one")
    run.add_argument("--drift-tolerance", type=float, metavar="R",
                     help="re-anchor a view whose probed relative residual passes R (default 1e-9)")
    run.add_argument("--drift-every", type=int, metavar="N",
                     help="probe the views for drift every N batches (default 10; 0: never)")
    run.add_argument("--keep-snapshots", type=int, metavar="N", help="keep only the last N snapshots")
    run.add_argument("--compact-every", type=int, metavar="N",
                     help="write all views to the checkpoint every N batches (default: when the factors written "
                          "since the last time outweigh them)")
    run.add_argument("--master", metavar="URL", help="Spark master for --backend spark (default local[*])")
    run.add_argument("--quiet", action="store_true", help="no per-batch lines")

    ex = cmds.add_parser("explain", help="show the views, the trigger programs and their costs",
                         description="Compile PROGRAM and print each phase: statements, the search, the views "
                                     "(ANF), and per input the trigger program with its cost against "
                                     "re-evaluation. Needs no Spark.")
    program_args(ex)
    ex.add_argument("--rank", type=int, default=1, metavar="K", help="the rank of the change explained (default 1)")
    ex.add_argument("--changes", choices=("rows", "cols", "dense"), default="rows",
                    help="what a batch touches: whole rows (default), whole columns, or dense thin factors")
    ex.add_argument("--format", choices=("text", "json"), default="text")
    return p


def main(args: argparse.Namespace) -> int:
    from .program_file import parse_params

    if args.linalg_command is None:
        raise UsageError("streamfold linalg needs an action: run or explain", code="NO_ACTION",
                         hint="streamfold linalg explain PROGRAM.py")
    params = parse_params(args.param)
    if args.linalg_command == "explain":
        from .compiler import compile_program
        from .explain import STRUCTURES, explain_json, explain_text
        from .program_file import load_program

        if args.rank < 1:
            raise UsageError(f"--rank must be at least 1, not {args.rank}", code="BAD_SIZE", params={"rank": args.rank})
        compiled = compile_program(load_program(args.program, params))
        structure = STRUCTURES[args.changes]
        text = (explain_json(compiled, args.rank, structure) if args.format == "json"
                else explain_text(compiled, args.rank, structure))
        sys.stdout.write(text)
        return 0
    from .runner import LOCAL_LIMIT, LinalgConfig, main_run

    sources = {}
    for text in args.source:
        name, sep, path = text.partition("=")
        if not sep or not name.strip() or not path:
            raise UsageError(f"cannot read --source {text!r}", code="BAD_INPUT_SPEC", params={"spec": text},
                             hint="write it as NAME=DIR, NAME an input of the program")
        if name.strip() in sources:
            raise UsageError(f"input {name} is given twice", code="DUPLICATE_SOURCE", params={"source": name})
        sources[name.strip()] = path
    config = LinalgConfig(
        program=args.program, sources=sources, output=args.output, params=params, checkpoint=args.checkpoint,
        backend=args.backend, strategy=args.strategy, keep_snapshots=args.keep_snapshots,
        compact_every=args.compact_every, master=args.master,
        local_limit=args.local_limit if args.local_limit is not None else LOCAL_LIMIT,
        **({"drift_tolerance": args.drift_tolerance} if args.drift_tolerance is not None else {}),
        **({"drift_every": args.drift_every} if args.drift_every is not None else {}),
    )
    return main_run(config, args.trigger, args.until_idle, args.quiet)
