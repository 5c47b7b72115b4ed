"""Spark drivers tests/test_spark_ingest.py kills: a driver process attached to the run's own Spark JVM,
and a spark-submit driver with a JVM of its own.

``attached_driver(spark, *args)`` starts ``python tests/helpers/spark_drivers.py args``: a separate Python
process, SIGKILLed for real by ``PROFLAKE_KILL_AFTER_COMMITS``, that runs ``proflake.cli.main()`` on the
JVM of the ``spark`` fixture's session instead of starting one (a spark-submit JVM cost the test 8.4-8.9 s
of CPU; attached, 1.1 s). pyspark's ``launch_gateway`` attaches to a running JVM when ``PYSPARK_GATEWAY_PORT`` and
``PYSPARK_GATEWAY_SECRET`` are set; that JVM already runs a SparkContext and Spark allows one per JVM,
so the child wraps the running one (a ``JavaSparkContext`` over the default session's) in a Python
``SparkContext`` and a ``SparkSession`` (the JVM's default one): ``--executor spark`` then finds that
session active. What the child's Python context adds to the JVM is its accumulator (registered in the
shared context, fed only by the child's own tasks) and its py4j objects: neither reaches the parent's jobs.
Its tasks run in the Python daemon the parent's use (the same interpreter and environment: no new one).

Killed while its job runs, the child leaves the job running to its end (4 sleeping tasks: 5.7 s), each
task's end logging ``ERROR DAGScheduler: Failed to update accumulator ... Connection refused`` (its
accumulator's server died with it); the parent's accumulators and jobs work on. Killed after its 2nd
commit, its parse job has ended: ``wait_until_idle`` finds nothing running and the JVM logs nothing.

The child never stops the shared context: ``SparkContext.stop`` (which ``SparkSession.stop``, a failed
``SparkContext.__init__`` and ``with`` all call) raises in the child instead, and if the CLI returns (the
kill did not land) the child exits at once with ``NOT_KILLED`` and a message, running nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

NOT_KILLED = 70  # the attached driver's exit status when the CLI returned: its kill never landed


def attached_driver(spark, *args: str, env: dict[str, str]) -> subprocess.Popen:
    """``proflake args`` in a new Python process on ``spark``'s JVM (stdout dropped, stderr piped)."""
    parameters = spark.sparkContext._gateway.gateway_parameters
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYSPARK_GATEWAY_PORT": str(parameters.port), "PYSPARK_GATEWAY_SECRET": parameters.auth_token, **env},
    )


def spark_submit(script: Path, *args: str, env: dict[str, str]) -> subprocess.Popen:
    """``spark-submit --master local[2] script args``: the driver as a cluster would run it, a JVM of its own."""
    from helpers.sparkenv import JVM_OPTIONS

    submit = Path(sys.executable).parent / "spark-submit"
    return subprocess.Popen(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
         "--driver-memory", "1g", "--driver-java-options", JVM_OPTIONS, str(script), *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
             "PYSPARK_DRIVER_PYTHON": sys.executable, **env},
    )


def wait_until_idle(spark, timeout_s: float = 120) -> None:
    """Until ``spark`` runs no job: a driver SIGKILLed mid-job leaves its tasks running in the shared JVM,
    and the next run's answers must not depend on when they end."""
    deadline = time.monotonic() + timeout_s
    while active := list(spark.sparkContext.statusTracker().getActiveJobsIds()):
        if time.monotonic() > deadline:
            raise AssertionError(f"Spark jobs {active} still running {timeout_s:.0f} s after their driver was killed")
        time.sleep(0.1)


def _refuse_to_stop(context: object) -> None:
    raise AssertionError("an attached driver must never stop the SparkContext it shares with the test run's JVM")


def _attach() -> None:
    """A Python SparkContext and SparkSession over the JVM at PYSPARK_GATEWAY_PORT, whose context is running."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    SparkContext.stop = _refuse_to_stop  # before anything could call it (a failed __init__ calls it)
    assert "PYSPARK_GATEWAY_PORT" in os.environ, "an attached driver needs the run's JVM's PYSPARK_GATEWAY_PORT and _SECRET"
    gateway = launch_gateway()
    assert gateway.proc is None, "launch_gateway started a JVM instead of attaching"
    # The running context, through the JVM's default session (SparkContext.getActive is private[spark]).
    default = getattr(gateway.jvm, "org.apache.spark.sql.classic.SparkSession").getDefaultSession()
    assert default.isDefined() and not default.get().sparkContext().isStopped(), "the JVM at PYSPARK_GATEWAY_PORT runs no SparkSession"
    jsc = gateway.jvm.org.apache.spark.api.java.JavaSparkContext(default.get().sparkContext())
    # The context's own settings (a copy: the context applies its defaults to it, not to the running one).
    context = SparkContext(gateway=gateway, jsc=jsc, conf=SparkConf(_jconf=jsc.getConf()))
    session = SparkSession(context)  # the JVM's default session, made active in this process
    assert SparkSession.getActiveSession() is session


if __name__ == "__main__":
    _attach()
    from proflake.cli import main

    try:
        main()
    finally:
        print(f"the attached driver's CLI returned: PROFLAKE_KILL_AFTER_COMMITS={os.environ.get('PROFLAKE_KILL_AFTER_COMMITS')} "
              "never killed it", file=sys.stderr, flush=True)
        os._exit(NOT_KILLED)  # nothing else runs: no atexit hook, no finalizer, nothing that could stop the context
