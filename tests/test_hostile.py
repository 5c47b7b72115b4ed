"""Hostile and broken input: every bad file gets a clear error and a quarantine row; nothing else is lost."""

from __future__ import annotations

import json
import marshal
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.profiles import FORMAT_SAMPLES, LEGACY, JobBuilder, assert_same_pstats, pstats_of, write_cprofile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proflake import Profiles, ingest
from proflake.errors import LayoutError, ParseError
from proflake.layout import parse_stats_path
from proflake.readers.cprofile import read_cprofile
from proflake.readers.pyinstrument import read_pyinstrument
from proflake.schema import arrow_schema

GOOD = "train-{step}-stepstart-{start}_train-{step}-stepend-{end}"


def _stats_dir(root: Path, node: str, name: str, profiler: str = "cprofile") -> Path:
    path = root / "framework" / "pytorch" / profiler / node / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_mixed_batch(root: Path, outside: Path) -> tuple[list[Path], dict[str, str]]:
    """Good files plus one bad file of every kind; returns the good paths and bad uri -> expected kind."""
    job = JobBuilder(root)
    good = [job.cprofile("algo-1", GOOD.format(step=s, start=1000 * s + 1000, end=1000 * s + 1900), "abc"[s % 3]) for s in range(6)]
    good.append(job.pyinstrument("algo-1", GOOD.format(step=9, start=20_000, end=20_900)))
    good.append(job.pyinstrument("algo-1", "prestepzero-*-start-100_train-0-stepstart-900"))  # null root: empty, fine
    (good[-1]).write_text('{"root_frame": null}')
    bad: dict[str, str] = {}

    def put(name: str, payload: bytes, kind: str, profiler: str = "cprofile", node: str = "algo-2") -> None:
        file_name = "python_stats" if profiler == "cprofile" else "python_stats.json"
        path = _stats_dir(root, node, name, profiler) / file_name
        path.write_bytes(payload)
        bad[str(path)] = kind

    valid = marshal.dumps({("f.py", 1, "f"): (1, 1, 0.5, 0.5, {})})
    put("trian-1-stepstart-1_train-1-stepend-2", valid, "layout")  # unknown mode
    put("train-1-middle-3_train-1-stepend-4", valid, "layout")  # unknown phase
    put("train-1-stepstart-9_train-1-stepend-5", valid, "layout")  # ends before it starts
    put("train-1-stepstart_train-1-stepend-7", valid, "layout")  # almost the layout
    put(GOOD.format(step=1, start=30_000, end=30_100), b"", "cprofile")  # zero bytes
    put(GOOD.format(step=2, start=30_200, end=30_300), valid[: len(valid) // 2], "cprofile")  # truncated
    put(GOOD.format(step=3, start=30_400, end=30_500), b"not a marshal dump at all " * 10, "cprofile")  # garbage
    put(GOOD.format(step=4, start=30_600, end=30_700), marshal.dumps(compile("1", "x", "eval")), "cprofile")  # code
    put(GOOD.format(step=5, start=30_800, end=30_900), marshal.dumps([1, 2]), "cprofile")  # wrong type
    put(GOOD.format(step=6, start=31_000, end=31_100), b"{not json", "pyinstrument", "pyinstrument")
    put(GOOD.format(step=7, start=31_200, end=31_300), b'{"root_frame": {"function": "f", "time": NaN}}', "pyinstrument", "pyinstrument")
    put(GOOD.format(step=8, start=31_400, end=31_500), b'{"root_frame": {"function": "f", "time": -2}}', "pyinstrument", "pyinstrument")
    put(GOOD.format(step=9, start=31_600, end=31_700), b"\xff\xfe\xfa not utf-8", "pyinstrument", "pyinstrument")
    put(GOOD.format(step=10, start=31_800, end=31_900), b'{"root_frame": {"function": 7, "time": 1}}', "pyinstrument", "pyinstrument")
    put(GOOD.format(step=11, start=32_000, end=32_100), b"{}", "pyinstrument", "pyinstrument")
    # The same interval twice: a directory naming a good file's node and times again ('2900.0' is 2900).
    # The first in path order is kept, later ones are quarantined.
    put(GOOD.format(step=1, start=2000, end="2900.0"), valid, "duplicate", node="algo-1")
    # Too large for the limit the test sets (2 MB).
    put(GOOD.format(step=12, start=32_200, end=32_300), b"\0" * (3 * 1024 * 1024), "too_large")
    # A link leading out of the source.
    outside.mkdir(parents=True, exist_ok=True)
    secret = outside / "python_stats"
    shutil.copy(good[0], secret)
    link_dir = _stats_dir(root, "algo-3", GOOD.format(step=13, start=32_400, end=32_500))
    (link_dir / "python_stats").symlink_to(secret)
    bad[str(link_dir / "python_stats")] = "symlink"
    return good, bad


def test_mixed_batch_quarantines_every_bad_file_and_keeps_every_good_one(tmp_path):
    source = tmp_path / "job"
    good, bad = build_mixed_batch(source, tmp_path / "outside")
    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-m", "proflake.cli", "ingest", str(source), "--store", str(store), "--max-file-mb", "2", "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3, done.stderr  # partial: some files quarantined
    summary = json.loads(done.stdout)
    assert summary["new_intervals"] == len(good)
    assert {f["uri"]: f["kind"] for f in summary["failed"]} == bad
    assert "Traceback" not in done.stderr
    for uri in bad:
        assert f"failed: {uri}" in done.stderr

    profiles = Profiles(str(store))
    quarantine = {r["source_uri"]: r for r in profiles.errors().to_pylist()}
    assert {uri: r["error_kind"] for uri, r in quarantine.items()} == bad
    assert all(r["attempts"] == 1 and "\n" not in r["message"] for r in quarantine.values())
    assert sorted(profiles.list_profile_stats()["source_uri"].to_pylist()) == sorted(map(str, good))
    cprofile_good = [p for p in good if p.name == "python_stats"]
    assert_same_pstats(profiles.by_time(0, 1).to_pstats().stats, pstats_of(cprofile_good))
    # The link's target outside the source was never read.
    assert not any("outside" in uri for uri in profiles.list_profile_stats()["source_uri"].to_pylist())

    # Next run: every quarantined file is tried again (attempts 2); a repaired one leaves the table.
    fixed = next(uri for uri, kind in bad.items() if kind == "cprofile")
    write_cprofile(Path(fixed).parent, "b")
    report = ingest(str(source), str(store), max_file_mb=2)
    assert report.new_intervals == 1
    quarantine = {r["source_uri"]: r for r in Profiles(str(store)).errors().to_pylist()}
    assert set(quarantine) == set(bad) - {fixed}
    assert all(r["attempts"] == 2 for r in quarantine.values())


def test_errors_command_lists_the_quarantine(tmp_path):
    from click.testing import CliRunner
    from proflake.cli import cli

    source = tmp_path / "job"
    good, bad = build_mixed_batch(source, tmp_path / "outside")
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(source), "--store", str(tmp_path / "s"), "--max-file-mb", "2"])
    assert result.exit_code == 3
    result = runner.invoke(cli, ["errors", "--store", str(tmp_path / "s"), "--format", "json", "--kind", "layout"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert {r["source_uri"] for r in rows} == {u for u, k in bad.items() if k == "layout"}
    assert all("unknown" in r["message"] or "before it starts" in r["message"] or "does not follow" in r["message"] for r in rows)


# -- property-based: every input parses into schema rows or raises the project's own error -----------
def _check_table(table, name: str) -> None:
    schema = arrow_schema(name)
    for field in table.schema:
        assert schema.field(field.name).type == field.type


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_cprofile_reader_on_arbitrary_bytes(data):
    try:
        parsed = read_cprofile(data)
    except ParseError:
        return
    _check_table(parsed.functions, "function_stats")
    _check_table(parsed.callers, "function_callers")


_keys = st.tuples(st.text(max_size=20), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20))
_numbers = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True))
_values = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    _numbers,
    _numbers,
    st.dictionaries(_keys, st.tuples(st.integers(0, 10**9), st.integers(0, 10**9), _numbers, _numbers), max_size=3),
)


@given(st.dictionaries(_keys, _values, max_size=8))
def test_cprofile_reader_on_pstats_shaped_data(stats):
    try:
        parsed = read_cprofile(marshal.dumps(stats))
    except ParseError:
        return
    assert parsed.functions.num_rows == len(stats)
    assert parsed.callers.num_rows == sum(len(v[4]) for v in stats.values())


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=6)),
    max_leaves=30,
)
_frame = st.deferred(
    lambda: st.fixed_dictionaries(
        {"function": st.one_of(st.text(max_size=8), st.just("[self]"), st.integers()), "time": _numbers},
        optional={
            "file_path": st.one_of(st.text(max_size=8), st.none(), st.integers()),
            "line_no": st.one_of(st.integers(), st.none(), st.text(max_size=3)),
            "is_application_code": st.one_of(st.booleans(), st.integers()),
            "await_time": _numbers,
            "class_name": st.one_of(st.text(max_size=5), st.none()),
            "children": st.one_of(st.lists(_frame, max_size=3), _json),
        },
    )
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_json, st.fixed_dictionaries({"root_frame": st.one_of(st.none(), _frame, _json)}, optional={"sample_count": _json, "start_time": _json})))
def test_pyinstrument_reader_on_arbitrary_documents(doc):
    try:
        data = json.dumps(doc).encode()
    except ValueError:
        return
    try:
        parsed = read_pyinstrument(data)
    except ParseError:
        return
    _check_table(parsed.frames, "pyinstrument_frames")
    assert all(t >= 0 for t in parsed.frames["self_time"].to_pylist())


_name_part = st.one_of(
    st.sampled_from(["train", "eval", "prestepzero", "posthookclose", "trian", "", "*", "1", "-1", "01", "stepstart", "end", "x"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.*", max_size=12),
)


@given(
    st.lists(st.text(max_size=8), max_size=3),
    st.lists(_name_part, min_size=1, max_size=8),
    st.sampled_from(["cprofile", "pyinstrument", "cProfile", "other"]),
    st.sampled_from(["python_stats", "python_stats.json", "python_stats.html", "x"]),
    st.booleans(),
)
def test_directory_names_parse_or_raise_layout_error(base, pieces, profiler, file_name, legacy):
    dir_name = "_".join(["-".join(pieces[: len(pieces) // 2]), "-".join(pieces[len(pieces) // 2 :])])
    parts = [*base, "framework", "tf", profiler] + ([] if legacy else ["node-1"]) + [dir_name, file_name]
    try:
        result = parse_stats_path(parts)
    except LayoutError:
        return
    if result is not None:
        assert result.end_time_us >= result.start_time_us
        assert result.start_step >= -1 or result.layout == "smdebug"
        assert result.profiler in ("cprofile", "pyinstrument")


# -- fuzzing real files through the whole pipeline --------------------------------------------------
def _mutate(data: bytes, rng: random.Random, donors: list[bytes]) -> bytes:
    kind = rng.randrange(4)
    buf = bytearray(data)
    if kind == 0 and buf:  # bit flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        buf = buf[: rng.randrange(len(buf) + 1)]
    elif kind == 2:  # splice with another file
        other = rng.choice(donors)
        cut = rng.randrange(len(buf) + 1)
        buf = buf[:cut] + other[rng.randrange(len(other) + 1) :]
    else:  # overwrite a run with random bytes
        if buf:
            i = rng.randrange(len(buf))
            buf[i : i + 16] = bytes(rng.randrange(256) for _ in range(16))
    return bytes(buf)


def run_fuzz(tmp_path: Path, inputs: int, seed: int) -> dict:
    rng = random.Random(seed)
    cprofile_seeds = [p.read_bytes() for p in sorted(LEGACY.rglob("python_stats"))] + [
        p.read_bytes() for p in sorted(FORMAT_SAMPLES.glob("*.pstats"))
    ]
    json_seeds = [p.read_bytes() for p in sorted(FORMAT_SAMPLES.glob("pyinstrument-*.json"))]
    source = tmp_path / "fuzz"
    good: list[Path] = []
    mutated: dict[str, bytes] = {}
    for i in range(inputs):
        is_json = i % 3 == 0
        seeds = json_seeds if is_json else cprofile_seeds
        profiler = "pyinstrument" if is_json else "cprofile"
        name = GOOD.format(step=i, start=1_000_000 + i * 10, end=1_000_000 + i * 10 + 5)
        path = _stats_dir(source, f"node-{i % 7}", name, profiler) / ("python_stats.json" if is_json else "python_stats")
        if i % 10 == 0:  # an untouched real file among the mutants: it must come through intact
            path.write_bytes(rng.choice(seeds))
            good.append(path)
        else:
            data = _mutate(rng.choice(seeds), rng, seeds)
            path.write_bytes(data)
            mutated[str(path)] = data
    report = ingest(str(source), str(tmp_path / "store"), parse_timeout_s=30)
    kinds: dict[str, int] = {}
    for failure in report.failed:
        kinds[failure.kind] = kinds.get(failure.kind, 0) + 1
    profiles = Profiles(str(tmp_path / "store"))
    present = set(profiles.list_profile_stats()["source_uri"].to_pylist())
    quarantined = {f.uri for f in report.failed}
    lost_good = [p for p in good if str(p) not in present]
    # Every input is accounted for: ingested or quarantined, never both, never neither.
    unaccounted = [u for u in mutated if (u in present) == (u in quarantined)]
    # Mutants that got in must hold exactly what the reader makes of their bytes.
    wrong_rows = 0
    counts = dict(
        profiles.sql("SELECT source_uri, function_count FROM intervals").to_pylist() and
        [(r["source_uri"], r["function_count"]) for r in profiles.sql("SELECT source_uri, function_count FROM intervals").to_pylist()]
    )
    for uri, data in mutated.items():
        if uri in present:
            expected = (read_cprofile(data).functions if uri.endswith("python_stats") else read_pyinstrument(data).frames).num_rows
            wrong_rows += counts[uri] != expected
    return {
        "inputs": inputs,
        "good_files": len(good),
        "ingested": len(present),
        "quarantined": len(quarantined),
        "crashes": kinds.get("crash", 0) + kinds.get("internal", 0),
        "hangs": kinds.get("timeout", 0),
        "good_lost": len(lost_good),
        "unaccounted": len(unaccounted),
        "wrong_rows": wrong_rows,
        "kinds": kinds,
    }


def test_fuzz_short_tier(tmp_path):
    figures = run_fuzz(tmp_path, inputs=400, seed=1)
    print(f"fuzz (short tier): {figures}")
    assert figures["crashes"] == 0 and figures["hangs"] == 0
    assert figures["good_lost"] == 0 and figures["unaccounted"] == 0 and figures["wrong_rows"] == 0
    assert figures["quarantined"] > 100


@pytest.mark.slow
def test_fuzz_ten_thousand_inputs(tmp_path):
    figures = run_fuzz(tmp_path, inputs=10_000, seed=2)
    print(f"fuzz (slow tier): {figures}")
    assert figures["crashes"] == 0 and figures["hangs"] == 0
    assert figures["good_lost"] == 0 and figures["unaccounted"] == 0 and figures["wrong_rows"] == 0


@pytest.mark.parametrize(
    "reader, payload",
    [
        (read_pyinstrument, b'{"root_frame": {"function": "\\ud800", "time": 1}}'),
        (read_pyinstrument, b'{"root_frame": null, "program": "\\udfff"}'),
        (read_pyinstrument, b'{"root_frame": {"function": "f", "time": 1, "line_no": 99999999999999999999}}'),
        (read_cprofile, marshal.dumps({("\ud800", 1, "f"): (1, 1, 0.1, 0.1, {})})),
        (read_cprofile, marshal.dumps({("f", 1, "g"): (2**70, 1, 0.1, 0.1, {})})),
        (read_cprofile, marshal.dumps({("f", 1, "g"): (-1, 1, 0.1, 0.1, {})})),
    ],
)
def test_values_arrow_cannot_hold_are_parse_errors(reader, payload):
    """Found by the property tests: lone surrogates and out-of-range integers must not escape as
    Arrow or Unicode errors."""
    with pytest.raises(ParseError):
        reader(payload)


def test_huge_integer_times_become_floats():
    parsed = read_cprofile(marshal.dumps({("f", 1, "g"): (1, 1, 2**60 + 1, 3, {("a", 2, "b"): (1, 1, 2**55 + 1, 1)})}))
    assert parsed.functions["tottime"].to_pylist() == [float(2**60)]
    assert parsed.callers["tottime"].to_pylist() == [float(2**55)]


@pytest.mark.slow
def test_properties_hold_on_the_long_profile():
    """The slow tier's pass over every property of the readers and the layout: Hypothesis's long profile
    (2,000 fresh inputs per property, tests/conftest.py) instead of the default tier's bounded 100."""
    properties = [
        "tests/test_hostile.py::test_cprofile_reader_on_arbitrary_bytes",
        "tests/test_hostile.py::test_cprofile_reader_on_pstats_shaped_data",
        "tests/test_hostile.py::test_pyinstrument_reader_on_arbitrary_documents",
        "tests/test_hostile.py::test_directory_names_parse_or_raise_layout_error",
        "tests/test_hostile.py::test_what_the_walk_lets_through_marshal_loads_survives",
        "tests/test_readers.py::test_cprofile_fast_path_agrees_with_the_careful_path",
        "tests/test_readers.py::test_compiled_decoder_agrees_on_shared_keys_and_big_numbers",
    ]
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *properties],
                          cwd=root, env={**os.environ, "HYPOTHESIS_PROFILE": "long"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:]
    assert f"{len(properties)} passed" in done.stdout


# -- the direct reader API on bytes marshal.loads would crash on ----------------------------------------
# Each crashed CPython 3.11's marshal.loads before the walk refused it; run in a child so a regression is
# a failed assertion, not a dead test worker.
_CRASHERS = {
    # a flagged None takes no reference slot in marshal, so "r 1" is the inner tuple itself: the walk once
    # numbered the None as slot 1 and let it through (13 bytes; the red team's was 26)
    "self-referring tuple behind a flagged None": b"{\xa9\x02\xce\xa9\x01r\x01\x00\x00\x00N0",
    # marshal ends a dict at a NULL in a value's place and reads on: the walk once gave up there
    "self-referring tuple after a dict cut at its value": b")\x02{N0{\xa9\x01r\x00\x00\x00\x00N0",
    "code object": marshal.dumps(compile("x = 1", "f.py", "exec")),
}

_READ_ALL = """
import sys
from proflake.errors import ParseError
from proflake.readers import cprofile_fast
from proflake.readers.cprofile import read_cprofile
cases = {cases!r}
for compiled in (True, False):
    if not compiled:
        cprofile_fast._compiled = None  # the reader as installed without a C compiler
    for name, data in cases.items():
        try:
            read_cprofile(data)
            print(compiled, name, "accepted", flush=True)
        except ParseError as e:
            print(compiled, name, str(e), flush=True)
"""


def test_the_reader_refuses_what_would_crash_marshal_loads_with_or_without_the_compiled_decoder():
    done = subprocess.run([sys.executable, "-c", _READ_ALL.format(cases=_CRASHERS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the reader crashed (exit {done.returncode}) after:\n{done.stdout}"
    lines = done.stdout.splitlines()
    assert len(lines) == 2 * len(_CRASHERS)
    for line in lines:
        assert "not a cProfile stats dump: marshal data " in line and (
            "refers to a tuple from inside itself" in line or "holds a code object" in line), line


_REF = [b"r" + n.to_bytes(4, "little") for n in range(4)]
_TOKENS = [
    *_REF, b"\xa9\x01", b"\xa9\x02", b")\x01", b")\x02", b"\xa8\x01\x00\x00\x00", b"\xdb\x01\x00\x00\x00",
    b"\xbc\x01\x00\x00\x00", b"{", b"\xfb", b"0", b"N", b"\xce", b"\xd4", b"\xd3", b"\xae", b"\xe9\x01\x00\x00\x00",
    b"\xfa\x01f", b"z\x01g", b"\xe7" + bytes(8), b"c", b"\x00", b"\xff",
]


@st.composite
def _marshal_like(draw):
    """Streams built from marshal tokens (flagged tuples, lists, sets, dicts, references to the first
    slots, singletons flagged or not, NULLs, scalars): the shapes in which a cycle or a misnumbered slot
    hides, far likelier than in random bytes; most start as a dict key, which marshal.loads hashes."""
    body = b"".join(draw(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=12)))
    return b"{" + body + b"N0" if draw(st.integers(0, 3)) else body


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_marshal_like(), st.binary(max_size=64)))
def test_the_python_walk_agrees_with_the_compiled_one(data):
    from proflake.readers import _pstats_columns, marshal_guard

    def outcome(check):
        try:
            check(data)
        except ValueError as e:
            return str(e)
        return None

    assert outcome(marshal_guard.check) == outcome(_pstats_columns.check)


@settings(suppress_health_check=[HealthCheck.too_slow])  # the profile's examples: 100 bounded, 2,000 long
@given(_marshal_like())
def test_what_the_walk_lets_through_marshal_loads_survives(data):
    from proflake.readers import marshal_guard

    try:
        marshal_guard.check(data)
    except ValueError:
        return
    pid = os.fork()
    if pid == 0:  # the child reads it as the careful path would, hashing every key; a crash is a signal
        try:
            value = marshal.loads(data)
            hash(repr(value)[:0])
        except BaseException:
            pass
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"marshal.loads died by signal {os.WTERMSIG(status)} on {data.hex()}"
