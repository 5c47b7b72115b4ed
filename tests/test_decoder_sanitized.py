"""The compiled cProfile decoder reads untrusted bytes: in the slow tier it is built with AddressSanitizer
and UndefinedBehaviorSanitizer and fed damaged real dumps, in a child process the sanitizers watch."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers.profiles import FORMAT_SAMPLES, LEGACY

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "etl" / "proflake" / "readers" / "_pstats_columns.c"

CHILD = r"""
import importlib.util, sys
sys.path.insert(0, sys.argv[3])
from helpers.damage import damaged
spec = importlib.util.spec_from_file_location("_pstats_columns", sys.argv[1])
decoder = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decoder)
outcomes = {"columns": 0, "declined": 0, "refused": 0}
known = {}
for data in damaged([open(path, "rb").read() for path in sys.argv[4:]], int(sys.argv[2]), seed=1):
    try:
        result = decoder.decode(data, known)
    except ValueError:
        outcomes["refused"] += 1
        continue
    if result is None:
        outcomes["declined"] += 1
    else:
        outcomes["columns"] += 1
        keys = result[0]
        known.update((key, i) for i, key in enumerate(keys) if key not in known and len(known) < 5000)
print(outcomes)
"""


def _runtime(name: str) -> str | None:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


@pytest.mark.slow
def test_the_decoder_survives_damaged_dumps_under_sanitizers(tmp_path):
    asan, ubsan = _runtime("libasan.so"), _runtime("libubsan.so")
    if asan is None or ubsan is None:
        pytest.skip("gcc's AddressSanitizer and UndefinedBehaviorSanitizer runtimes are not installed")
    module = tmp_path / ("_pstats_columns" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        ["gcc", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}",
         str(SOURCE), "-o", str(module)],
        check=True,
    )
    dumps = [str(p) for p in sorted(LEGACY.rglob("python_stats")) + sorted(FORMAT_SAMPLES.glob("*.pstats"))]
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(module), "50000", str(Path(__file__).parent), *dumps],
        capture_output=True, text=True, timeout=1800,
        env={**os.environ, "LD_PRELOAD": f"{asan} {ubsan}", "ASAN_OPTIONS": "detect_leaks=0"},
    )
    assert child.returncode == 0, child.stderr[-4000:]
    print(f"sanitized decoder (slow tier): {child.stdout.strip()}")
    outcomes = ast.literal_eval(child.stdout.strip())
    assert outcomes["columns"] > 0 and outcomes["declined"] > 0
