"""What a failed Spark call was: the chain of causes behind an exception raised through py4j.

PySpark reports a failure in Spark's JVM as ``Py4JJavaError: An error occurred while calling
o1349.localCheckpoint`` (or as one of its own exception classes for Spark's coded errors), which
says where, not what. The Java throwable behind it — ``java_exception`` of a ``Py4JJavaError``,
the origin of a captured exception — and its ``getCause()`` chain say what:
``java.lang.OutOfMemoryError: Java heap space``.

:func:`causes` lists a failure's chain outermost first: the Python exceptions (``__cause__``,
else ``__context__``), and below the first one that came from the JVM, the Java throwables.
:func:`batch_failure` turns it into the ``BATCH_FAILED`` a user sees: the message names the
innermost cause, ``params`` carry its class and message, and when memory ran out the hint names
the setting to raise and how. Reading the JVM's objects can itself fail (the JVM may be gone):
then the Python text stands for them.
"""

from __future__ import annotations

from typing import Any

from ..errors import BatchError, Cause
from ..settings import Settings, env_name, resolve

# The exit codes of a JVM that ran out of memory: HotSpot's -XX:+ExitOnOutOfMemoryError, and
# Spark's own handler of an uncaught OutOfMemoryError (SparkExitCode.OOM)
OUT_OF_MEMORY_EXITS = (3, 52)
JVM_EXIT_WAIT_S = 5.0  # how long a lost connection waits for the JVM's exit before it is reported as it is
MAX_CAUSES = 20  # a chain longer than this is cut (cycles are guarded against separately)
STACK_FRAMES = 25  # frames kept of the innermost Java throwable's stack
OUT_OF_MEMORY = ("java.lang.OutOfMemoryError", "org.apache.spark.memory.SparkOutOfMemoryError")
# Spark's error classes for a value its ANSI rules cannot compute, and the spelling that gives NULL
# instead (the batch query fails on the same rows; the query must say what such a row is worth)
DATA_ERRORS = {
    "CAST_INVALID_INPUT": "TRY_CAST(x AS type)", "CAST_OVERFLOW": "TRY_CAST(x AS type)",
    "CAST_OVERFLOW_IN_TABLE_INSERT": "TRY_CAST(x AS type)", "CANNOT_PARSE_TIMESTAMP": "try_to_timestamp",
    "ARITHMETIC_OVERFLOW": "try_add/try_subtract/try_multiply, or a wider type (CAST to DECIMAL or BIGINT)",
    "NUMERIC_VALUE_OUT_OF_RANGE": "a wider DECIMAL, or TRY_CAST",
    "DATETIME_FIELD_OUT_OF_BOUNDS": "a guard (CASE WHEN …) around the date function",
}


def java_throwable(error: BaseException) -> Any | None:
    """The JVM throwable a Python exception stands for (a py4j ``JavaObject``), if any."""
    for attribute in ("java_exception", "_origin"):  # Py4JJavaError; pyspark's CapturedException
        value = getattr(error, attribute, None)
        if value is not None:
            return value
    return None


def causes(error: BaseException) -> list[Cause]:
    """``error``'s chain of causes, outermost first (see the module docstring)."""
    out: list[Cause] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(out) < MAX_CAUSES:
        seen.add(id(current))
        throwable = java_throwable(current)
        java = _java_chain(throwable) if throwable is not None else []
        # py4j's text repeats the Java chain with its stacks: its first line (the call) stands for it
        text = str(current).strip().splitlines()[0] if java and str(current).strip() else str(current)
        out.append(Cause("python", _python_name(current), text))
        if java:
            return out + java
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return out


def _java_chain(throwable: Any) -> list[Cause]:
    out: list[Cause] = []
    try:
        while throwable is not None and len(out) < MAX_CAUSES:
            message = throwable.getMessage()
            out.append(Cause("java", str(throwable.getClass().getName()), "" if message is None else str(message)))
            cause = throwable.getCause()  # null, not itself, at the end of the chain
            if cause is None:
                break
            throwable = cause
        if out and throwable is not None:
            frames = throwable.getStackTrace()
            trace = tuple(str(frames[i].toString()) for i in range(min(len(frames), STACK_FRAMES)))
            out[-1] = Cause(out[-1].language, out[-1].name, out[-1].message, trace)
    except Exception:  # noqa: BLE001 - the JVM cannot be asked (it may be gone): keep what was read
        pass
    return out


def _python_name(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def root(chain: list[Cause]) -> Cause | None:
    """The innermost cause: what went wrong, below the calls that reported it."""
    return chain[-1] if chain else None


def out_of_memory(chain: list[Cause]) -> bool:
    """Whether memory ran out somewhere in the chain (a cause, or a task failure's text naming one)."""
    return any(c.name in OUT_OF_MEMORY or any(name in c.message for name in OUT_OF_MEMORY) for c in chain)


def memory_hint(local: bool, driver: str) -> str:
    """How to give Spark more memory, for a driver that is also the executor (``local``) or not,
    whose heap is ``driver`` (the setting ``driver_memory``)."""
    raise_it = f"streamfold run --driver-memory 8g … (or {env_name('driver_memory')}=8g)"
    if local:
        return (f"Spark's JVM ran out of memory (its heap, spark.driver.memory, is {driver}). Raise it when "
                f"the JVM starts: {raise_it}, Settings(driver_memory=\"8g\") for streamfold.start, or "
                f".config(\"spark.driver.memory\", \"8g\") on the SparkSession you pass to streamfold.start; "
                f"the run resumes from its checkpoint")
    return (f"a Spark JVM ran out of memory: an executor (raise spark.executor.memory in the cluster's "
            f"configuration) or the driver (spark.driver.memory, here {driver}: {raise_it}); "
            f"the run resumes from its checkpoint")


def jvm_exit(wait: float = 0.0) -> int | None:
    """The exit code of the Spark JVM this process started, once it has exited (waiting up to
    ``wait`` seconds for it); None while it runs, or when no JVM was started here (a session
    reached another way)."""
    import subprocess

    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    if process is None:
        return None
    try:
        return process.wait(timeout=wait) if wait > 0 else process.poll()
    except subprocess.TimeoutExpired:
        return None


def lost_jvm(error: BaseException) -> int | None:
    """The exit code of Spark's JVM when ``error`` is how a call found it gone. A call can see
    the connection close before the process has ended: then the exit is waited for, briefly."""
    from py4j.protocol import Py4JNetworkError

    current: BaseException | None = error
    while current is not None:
        if isinstance(current, (Py4JNetworkError, ConnectionError)):
            return jvm_exit(wait=JVM_EXIT_WAIT_S)
        current = current.__cause__ or current.__context__
    return jvm_exit()


def jvm_gone(code: int) -> Cause:
    """What a batch whose JVM exited with ``code`` failed of (its causes can no longer be read)."""
    if code in OUT_OF_MEMORY_EXITS:
        return Cause("java", "java.lang.OutOfMemoryError", f"Spark's JVM ran out of memory and exited (code {code})")
    return Cause("java", "JVM exit", f"Spark's JVM exited (code {code}) while the batch ran")


def batch_failure(batch: int, step: str, doing: str, error: BaseException, local: bool = True,
                  settings: Settings | None = None) -> BatchError:
    """The ``BATCH_FAILED`` for ``error`` raised while ``doing`` step ``step`` of ``batch`` (its
    hint from the run's ``settings``: the driver memory to raise). When the JVM has exited, what
    it exited of is the innermost cause."""
    chain = causes(error)
    code = lost_jvm(error)
    if code is not None:
        chain = [c for c in chain if c.language == "python"] + [jvm_gone(code)]
    inner = root(chain)
    summary = inner.summary if inner is not None else type(error).__name__
    params: dict[str, Any] = {"batch": batch, "step": step,
                              "cause": inner.name if inner else type(error).__name__,
                              "cause_message": inner.summary.partition(": ")[2] if inner else ""}
    hint = None
    data_error = next((name for c in chain for name in DATA_ERRORS if c.message.startswith(f"[{name}]")), None)
    if out_of_memory(chain):
        params["out_of_memory"] = True
        hint = memory_hint(local, resolve(settings).driver_memory)
    elif data_error is not None:
        params["data_error"] = data_error
        hint = (f"a value in this batch's rows cannot be computed under Spark's ANSI rules ({data_error}); the "
                f"batch query fails on the same rows, and nothing of this batch was applied. Say in the query what "
                f"such a row is worth — {DATA_ERRORS[data_error]} gives NULL — and start it again, or correct "
                f"the file")
    else:
        hint = f"streamfold run --verbose (or {env_name('verbose')}=1) shows the whole chain of causes"
    return BatchError(f"batch {batch} failed {doing}: {summary}", code="BATCH_FAILED", params=params,
                      hint=hint, causes=chain)
