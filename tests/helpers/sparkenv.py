"""One local Spark for the whole test run (the ``spark`` fixture in tests/conftest.py).

Spark needs a Java runtime: bin/setup-test installs ``openjdk-17-jre-headless`` where ``java`` is missing
(as root, with apt-get); without it the Spark tests fail saying what to run. ``local[2,2]``: the two cores CI has, two attempts per task; ``SPARK_LOCAL_IP=127.0.0.1`` keeps Spark off the
network (no host-name lookup, no listening on other interfaces).
"""

from __future__ import annotations

import os
import shutil
import sys

# A test JVM lives seconds to minutes: the client compiler only (C2 compiles code the JVM does not live to
# use) and the serial collector took tests/test_spark.py from 92 s to 62 s of CPU (system-wide), same answers.
# Spark's own jars are not verified again as they load (bytecode verification is for untrusted code): test_spark.py with
# test_time_zones.py 53.0 -> 46.1, 66.4 -> 59.7 and 53.0 -> 52.4 s of CPU in three alternated pairs.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"


def ensure_java() -> str:
    """The path of ``java``; bin/setup-test installs Java 17 where it is missing, never a test."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("Spark tests need Java 17: run bin/setup-test (bin/test does), or install openjdk-17-jre-headless")
    return java


def start_session(tmp_dir: str):
    """A ``local[2,2]`` SparkSession for tests (two cores, two attempts per task): small shuffles, no UI,
    its scratch under ``tmp_dir``."""
    ensure_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python tasks (the Spark ingest's) run in this interpreter, with tests/ importable as here (the
    # misbehaving parse functions of tests/helpers).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from pyspark.sql import SparkSession

    session = (
        # Two attempts per task, as a cluster's spark.task.maxFailures gives (local mode reads it from the
        # master only): test_spark_ingest.py's retried task runs here instead of in a spark-submit JVM of
        # its own (~10 s of CPU). A test whose task fails for good fails on the second attempt.
        SparkSession.builder.master("local[2,2]")
        .appName("proflake-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # One shuffle partition: the test tables are a few hundred rows, and each partition is a task
        # (test_spark.py and test_time_zones.py: 42 -> 36 s of the JVM's CPU, same answers).
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.local.dir", tmp_dir)
        .config("spark.sql.warehouse.dir", os.path.join(tmp_dir, "warehouse"))
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.sql.session.timeZone", "UTC")
        # Interpreted plans: the test tables are a few hundred rows, where generating and compiling Java
        # for each query costs more than it saves (tests/test_spark.py: 100 s -> 75 s of CPU, same answers).
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", tests)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def stop_session(session) -> None:
    """Stop ``session`` and its JVM, and wait for the JVM to exit: so the run's CPU time (``/usr/bin/time``,
    which counts only the processes it waits for) includes the JVM's."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM exits when its parent's end of stdin closes
        try:
            proc.wait(timeout=60)
        except Exception:
            proc.kill()
            proc.wait()
