"""One local Spark for the whole test run (the ``spark`` fixture in tests/conftest.py).

Spark needs a Java runtime: where ``java`` is missing and apt-get is at hand (CI runs as root on Debian),
the set-up installs ``openjdk-17-jre-headless`` once; elsewhere the Spark tests fail saying what to
install. ``local[2]`` matches the two cores CI has; ``SPARK_LOCAL_IP=127.0.0.1`` keeps Spark off the
network (no host-name lookup, no listening on other interfaces).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

JAVA_PACKAGE = "openjdk-17-jre-headless"


def ensure_java() -> str:
    """The path of ``java``, installing Java 17 with apt-get when it is missing and we may."""
    java = shutil.which("java")
    if java:
        return java
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise RuntimeError(f"Spark tests need Java 17: install {JAVA_PACKAGE} (or any JDK 17+) and re-run")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([apt, "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
    # The package's post-install step wants man page folders that slim images delete.
    os.makedirs("/usr/share/man/man1", exist_ok=True)
    subprocess.run(
        [apt, "install", "-y", "-qq", "--no-install-recommends", JAVA_PACKAGE],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    java = shutil.which("java")
    if java is None:
        raise RuntimeError(f"installed {JAVA_PACKAGE} but 'java' is still not on PATH")
    return java


def start_session(tmp_dir: str):
    """A ``local[2]`` SparkSession for tests: small shuffles, no UI, its scratch under ``tmp_dir``."""
    ensure_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python tasks (the Spark ingest's) run in this interpreter, with tests/ importable as here (the
    # misbehaving parse functions of tests/helpers).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("proflake-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.local.dir", tmp_dir)
        .config("spark.sql.warehouse.dir", os.path.join(tmp_dir, "warehouse"))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", tests)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
