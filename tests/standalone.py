"""A Spark standalone cluster on 127.0.0.1 for tests: a master and workers from the pyspark
distribution (``bin/spark-class``; the wheel ships no ``sbin/`` scripts), each in a process group
of its own so a test can kill a worker with its executors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(path: str, text: str, timeout: float, count: int = 1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path, errors="replace").read().count(text) >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} did not appear in {path}:\n" + open(path, errors="replace").read()[-3000:])


@dataclass
class Cluster:
    url: str
    master: subprocess.Popen
    tmp: Path
    spark_class: str
    env: dict[str, str]
    cores: int = 2
    memory: str = "1g"
    workers: list[subprocess.Popen] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)

    def add_worker(self) -> None:
        """Start one more worker and wait until the master has registered it."""
        i = len(self.workers)
        registered = open(self.logs[0], errors="replace").read().count("Registering worker")
        log = str(self.tmp / f"worker{i}.log")
        with open(log, "w") as out:
            self.workers.append(subprocess.Popen(
                [self.spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                 "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                 "--work-dir", str(self.tmp / f"work{i}")],
                stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True))
        self.logs.append(log)
        wait_for(self.logs[0], "Registering worker", 90, count=registered + 1)

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` and its executors (its process group): a lost machine."""
        try:
            os.killpg(self.workers[i].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.workers[i].wait(timeout=30)


    def restart_master(self, recover: bool = True) -> None:
        """SIGKILL the master and start it again on its port. With ``recover`` (the cluster
        started with ``recovery``) it reads back its workers and applications and asks them to
        re-register; without, it starts empty: the workers register anew and it has the executors
        of applications it does not know killed. Returns once it is the leader again."""
        try:
            os.killpg(self.master.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.master.wait(timeout=30)
        log = str(self.tmp / f"master{len(self.logs)}.log")
        env = self.env if recover else {k: v for k, v in self.env.items() if k != "SPARK_MASTER_OPTS"}
        self.master = _master(self.spark_class, self.url.rsplit(":", 1)[1], env, log)
        self.logs.insert(0, log)  # the current master's log comes first
        wait_for(log, "Recovery complete" if recover else "New state: ALIVE", 90)


def _master(spark_class: str, port: str, env: dict[str, str], log: str) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", port,
             "--webui-port", str(free_port())], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


@contextmanager
def standalone(tmp: Path, workers: int = 1, cores: int = 2, memory: str = "1g",
               recovery: bool = False) -> Iterator[Cluster]:
    """A master and ``workers`` workers; with ``recovery`` the master keeps its state in a directory
    (Spark's ``FILESYSTEM`` recovery mode), so a master started again takes its cluster back."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    port = free_port()
    env = {**os.environ, "SPARK_HOME": home}
    if recovery:  # a worker that does not answer the recovered master within 20 s is dropped (default 60 s);
        # the workers read the same timeout, since they send a heartbeat every quarter of it
        env["SPARK_MASTER_OPTS"] = (f"-Dspark.deploy.recoveryMode=FILESYSTEM -Dspark.deploy.recoveryDirectory="
                                    f"{tmp / 'recovery'} -Dspark.worker.timeout=20")
        env["SPARK_WORKER_OPTS"] = "-Dspark.worker.timeout=20"
    master_log = str(tmp / "master.log")
    master = _master(spark_class, str(port), env, master_log)
    cluster = Cluster(f"spark://127.0.0.1:{port}", master, tmp, spark_class, env, cores, memory, logs=[master_log])
    try:
        wait_for(master_log, "ALIVE", 90)
        for _ in range(workers):
            cluster.add_worker()
        yield cluster
    finally:
        for p in [cluster.master, *cluster.workers]:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in [cluster.master, *cluster.workers]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
