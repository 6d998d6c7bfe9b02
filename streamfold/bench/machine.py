"""What the figures were measured on, whether the machine was quiet, and how much memory is in use.

Figures from a loaded machine are not comparable, so the run waits (up to a limit) for the
1-minute load average to drop before it measures, and records the load it saw. Memory is read
from ``/proc/<pid>/status``: ``VmRSS`` (resident now) and ``VmHWM`` (the peak so far), for the
Python driver and for the JVM — in local mode the JVM is Spark's driver and executor at once.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Any


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages ([] where /proc is not there)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return [float(v) for v in fh.read().split()[:3]]
    except OSError:
        return []


BUSY_LIMIT = 0.2  # the CPUs' busy share, over a short sample, below which the machine is quiet


def cpu_times() -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs since boot (None where /proc is not there)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields)  # idle + iowait


def cpu_busy(seconds: float = 2.0) -> float | None:
    """The share of CPU time spent busy over the next ``seconds`` (0–1), by everyone."""
    a = cpu_times()
    time.sleep(seconds)
    b = cpu_times()
    if a is None or b is None or b[1] <= a[1]:
        return None
    return round(1 - (b[0] - a[0]) / (b[1] - a[1]), 3)


def wait_for_quiet(limit: float, max_wait_s: float, say: Any = None) -> dict[str, Any]:
    """Wait until the machine is quiet (for at most ``max_wait_s``); what was seen.

    Quiet: the 1-minute load is at most ``limit``, or the CPUs are less than 20 % busy over two
    seconds. The load average alone cannot tell: it counts tasks waiting on I/O too, and on some
    virtual machines (this project's own) it stays near 2 while the CPUs are idle.
    """
    started = time.monotonic()
    first = load_average()

    def sample(load: list[float]) -> float | None:  # the CPUs are sampled only when the load is high
        return cpu_busy() if load and load[0] > limit else None

    def loaded() -> bool:
        return bool(load) and load[0] > limit and (busy is None or busy > BUSY_LIMIT)

    load = first
    busy = sample(load)
    while loaded() and time.monotonic() - started < max_wait_s:
        if say:
            say(f"1-minute load is {load[0]:.2f} (> {limit}) and the CPUs are "
                f"{'?' if busy is None else f'{busy:.0%}'} busy: someone else is busy; waiting")
        time.sleep(30)
        load = load_average()
        busy = sample(load)
    quiet = not loaded()
    if not quiet and say:
        say(f"still loaded after {max_wait_s:.0f} s (1-minute load {load[0]:.2f}); measuring anyway, and saying so")
    return {"before": first, "at_start": load, "cpu_busy_at_start": busy,
            "waited_s": round(time.monotonic() - started, 1), "limit": limit, "busy_limit": BUSY_LIMIT,
            "quiet": quiet}


def machine_info(spark: Any) -> dict[str, Any]:
    """Cores, memory, CPU, OS and the versions that matter for the figures."""
    import duckdb
    import pyspark

    total_kb = _meminfo_kb("MemTotal")
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "memory_gb": round(total_kb / 1024 / 1024, 1) if total_kb else None,
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "pyspark": pyspark.__version__,
        "duckdb": duckdb.__version__,
        "spark_master": spark.sparkContext.master,
        "spark_default_parallelism": spark.sparkContext.defaultParallelism,
        "spark_driver_memory": spark.conf.get("spark.driver.memory", None),
        "streamfold_code": _git_state(),
    }
    try:
        props = spark._jvm.java.lang.System
        info["java"] = f"{props.getProperty('java.vm.name')} {props.getProperty('java.version')}"
    except Exception:  # noqa: BLE001 - a remote or Connect session: no JVM to ask
        info["java"] = None
    return info


def jvm_pid(spark: Any) -> int | None:
    """The JVM's pid (local mode: Spark's driver and executor), asked through py4j."""
    try:
        return int(spark._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - fall back to the runtime bean's "pid@host"
        try:
            name = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getName()
            return int(str(name).split("@")[0])
        except Exception:  # noqa: BLE001 - no JVM reachable (Spark Connect)
            return None


def rss_mb(pid: int | None) -> dict[str, float | None]:
    """Resident memory now and its peak so far, in MB, of process ``pid``."""
    if pid is None:
        return {"rss_mb": None, "peak_rss_mb": None}
    status: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                status[key] = value.strip()
    except OSError:
        return {"rss_mb": None, "peak_rss_mb": None}

    def mb(key: str) -> float | None:
        v = status.get(key)
        return round(int(v.split()[0]) / 1024, 1) if v else None

    return {"rss_mb": mb("VmRSS"), "peak_rss_mb": mb("VmHWM")}


def jvm_heap_mb(spark: Any, collect: bool = False) -> float | None:
    """The JVM heap in use (MB), after a full GC when ``collect`` — the live data, not the heap's size.

    ``System.gc()`` is not a full GC in streamfold's JVM (``-XX:+ExplicitGCInvokesConcurrent``,
    runtime/session.py): it starts a concurrent cycle, after which old regions still hold garbage
    until later mixed collections. The full GC is asked of the JVM's diagnostic command
    ``GC.class_histogram`` (what ``jcmd <pid> GC.class_histogram`` runs: a histogram of the live
    objects, counted after a stop-the-world full collection), through its MBean; a JVM without it
    gives None rather than a figure that still counts garbage.
    """
    try:
        jvm = spark._jvm
        runtime = jvm.java.lang.Runtime.getRuntime()
        if collect and not _full_gc(spark):
            return None
        return round((runtime.totalMemory() - runtime.freeMemory()) / 1024 / 1024, 1)
    except Exception:  # noqa: BLE001 - no JVM reachable
        return None


def _full_gc(spark: Any) -> bool:
    """Whether a full collection ran."""
    jvm = spark._jvm
    try:
        gateway = spark.sparkContext._gateway
        server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
        # py4j looks methods up on the object's class, which here is not exported by its module:
        # call MBeanServerConnection.invoke through reflection on the public interface instead.
        cls = jvm.java.lang.Class
        names = ["javax.management.ObjectName", "java.lang.String", "[Ljava.lang.Object;", "[Ljava.lang.String;"]
        types = gateway.new_array(cls, len(names))
        for i, name in enumerate(names):
            types[i] = cls.forName(name)
        invoke = cls.forName("javax.management.MBeanServerConnection").getMethod("invoke", types)
        options = gateway.new_array(jvm.java.lang.Object, 1)
        options[0] = gateway.new_array(jvm.java.lang.String, 0)
        signature = gateway.new_array(jvm.java.lang.String, 1)
        signature[0] = "[Ljava.lang.String;"
        call = gateway.new_array(jvm.java.lang.Object, 4)
        call[0] = jvm.javax.management.ObjectName("com.sun.management:type=DiagnosticCommand")
        call[1], call[2], call[3] = "gcClassHistogram", options, signature
        invoke.invoke(server, call)
        return True
    except Exception:  # noqa: BLE001 - a JVM without the diagnostic MBean
        return False


def _meminfo_kb(key: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _git_state() -> dict[str, Any] | None:
    """The commit the measured code is at, and whether the work tree differed from it (figures of
    uncommitted code cannot be reproduced from a commit)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "streamfold"],
                               cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.rstrip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "modified_files": [line[3:] for line in dirty.splitlines()]}
