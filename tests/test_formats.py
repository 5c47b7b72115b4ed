"""Profiles of every input format (docs/formats.md), recorded by the real profilers (tests/helpers/recorded.py):
detected by content, read with the files' own totals, ingested from a training loop's per-step folders, and
answered by fetch, list, report, diff, export and trend like smdebug's files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.recorded import collapsed_lines, copy_as, recorded, speedscope_totals
from proflake import Profiles
from proflake.errors import ExitCode
from proflake.formats import FORMATS, is_caller_graph
from proflake.formats.sniff import detect
from proflake.readers.parse import parse_stats

PATTERN = "{node}/step-{step}.*"
# job -> (the recorded file, its name in the per-step folders, options)
JOBS = {
    "spy": ("speedscope", "step-{step}.speedscope.json", []),
    "raw": ("pyspy_raw", "step-{step}.txt", []),
    "austin": ("austin", "step-{step}.austin", []),
    "pyi": ("pyisession", "step-{step}.pyisession", []),
    "counts": ("pyspy_raw", "step-{step}.folded", ["--format", "collapsed"]),
}
NODES, STEPS = ("rank-0", "rank-1"), (1, 2, 3)


def _parsed(path: Path, fmt: str):
    return parse_stats(fmt, path.read_bytes())


def _tree(parsed) -> dict[str, list]:
    return parsed.facts["pyinstrument_frames"].to_pydict()


def _roots_time(parsed) -> float:
    tree = _tree(parsed)
    return sum(t for t, parent in zip(tree["time"], tree["parent_id"]) if parent is None)


# -- the readers, on the recorded files ---------------------------------------------------------------
@pytest.mark.parametrize(("attr", "expected"), [
    ("speedscope", "speedscope"), ("pyspy_raw", "pyspy-raw"), ("austin", "austin"),
    ("pyisession", "pyinstrument-session"), ("pyinstrument_json", "pyinstrument"),
])
def test_each_recorded_file_is_detected_by_its_contents(attr, expected):
    head = getattr(recorded(), attr).read_bytes()[:65536]
    assert detect(head) is FORMATS[expected]


def test_other_contents_are_detected_or_refused():
    from helpers.profiles import FORMAT_SAMPLES

    assert detect((FORMAT_SAMPLES / "cprofile-py3.13.pstats").read_bytes()[:65536]) is FORMATS["cprofile"]
    assert detect(b"main;train;forward 12\nmain;train 3\n") is FORMATS["collapsed"]
    assert detect(b"P42;T0:42;/a/train.py:train:12;/a/train.py:forward:3 1000\n") is FORMATS["austin"]
    assert detect(b'{"profiles": [], "shared": {"frames": []}}') is FORMATS["speedscope"]
    for other in (b"not a profile", b"12\n13\n", b'{"name": "config"}', b'{"profiles": ["dev"]}', b"", b"\x00\x01binary"):
        assert detect(other) is None, other


def test_py_spy_speedscope_totals_are_the_file_s_own():
    path = recorded().speedscope
    parsed = _parsed(path, "speedscope")
    weights, span = speedscope_totals(path)
    assert parsed.summary["profiled_seconds"] == pytest.approx(weights)
    # py-spy's samples (10 ms each) never add up to more than its profile's span; how close they come
    # depends on whether py-spy kept up with its child on a busy machine, which is not what is tested.
    assert 0 < parsed.summary["profiled_seconds"] <= span + 0.011
    assert parsed.summary["session_duration_s"] == pytest.approx(span)
    doc = json.loads(path.read_text())
    framed = sum(w for p in doc["profiles"] for s, w in zip(p["samples"], p["weights"]) if s)
    assert _roots_time(parsed) == pytest.approx(framed)  # samples with no frame are in no frame
    assert (parsed.summary["time_unit"], parsed.summary["session_sample_count"]) == (
        "seconds", sum(len(p["samples"]) for p in doc["profiles"]))


def test_py_spy_raw_counts_samples_at_its_default_rate_or_the_one_given():
    path = recorded().pyspy_raw
    samples = sum(w for _, w in collapsed_lines(path))
    parsed = _parsed(path, "pyspy-raw")
    assert parsed.summary["profiled_seconds"] == pytest.approx(samples / 100)
    assert (parsed.summary["time_unit"], parsed.summary["sample_rate_hz"]) == ("seconds", 100.0)
    assert _parsed(path, "pyspy-raw@250.0").summary["profiled_seconds"] == pytest.approx(samples / 250)
    counted = _parsed(path, "collapsed")
    assert (counted.summary["profiled_seconds"], counted.summary["time_unit"]) == (samples, "samples")
    framed = sum(w for stack, w in collapsed_lines(path) if stack)
    assert _roots_time(counted) == framed
    # Self time is on the leaves: every frame's time is its self time plus its children's.
    tree = _tree(counted)
    children: dict[int, float] = {}
    for parent, time in zip(tree["parent_id"], tree["time"]):
        if parent is not None:
            children[parent] = children.get(parent, 0.0) + time
    for frame_id, time, own in zip(tree["frame_id"], tree["time"], tree["self_time"]):
        assert time == pytest.approx(own + children.get(frame_id, 0.0))


def test_austin_microseconds_become_seconds():
    path = recorded().austin
    parsed = _parsed(path, "austin")
    micros = sum(w for _, w in collapsed_lines(path))
    assert parsed.summary["profiled_seconds"] == pytest.approx(micros / 1e6)
    assert parsed.summary["sample_rate_hz"] == pytest.approx(1000.0)  # -i 1ms, from its header
    assert parsed.summary["session_sample_count"] == len(collapsed_lines(path))
    names = set(_tree(parsed)["function_name"])
    assert {"train", "forward", "backward"} <= names and not any(n.startswith(("P", "T")) and n[1:2].isdigit() for n in names)


def test_a_pyinstrument_session_is_the_tree_its_json_renderer_writes():
    rec = recorded()
    session = _parsed(rec.pyisession, "pyinstrument-session")
    rendered = _parsed(rec.pyinstrument_json, "pyinstrument")
    records = json.loads(rec.pyisession.read_text())["frame_records"]
    assert session.summary["profiled_seconds"] == pytest.approx(sum(t for _, t in records))
    assert session.summary["profiled_seconds"] == pytest.approx(rendered.summary["profiled_seconds"], abs=1e-5)
    # Own time per function, against pyinstrument's own tree of the session (before its renderer's processors,
    # which drop nodes under a threshold into their parents: the rendered JSON's own times differ by a sample).
    from pyinstrument.session import Session

    expected: dict[str, float] = {}
    pending = [Session.load(rec.pyisession).root_frame(trim_stem=False)]
    while pending:
        frame = pending.pop()
        real = [c for c in frame.children if c.identifier != "[self]"]
        expected[frame.function] = expected.get(frame.function, 0.0) + frame.time - sum(c.time for c in real)
        pending.extend(real)
    tree = _tree(session)
    for name in ("train", "forward", "backward", "<genexpr>"):
        own = sum(t for f, t in zip(tree["function_name"], tree["self_time"]) if f == name)
        assert own == pytest.approx(expected.get(name, 0.0), abs=1e-9), name
    assert session.summary["session_start_time"] == pytest.approx(rendered.summary["session_start_time"], abs=1e-5)


def test_speedscope_units_and_evented_profiles(tmp_path):
    frames = [{"name": "main", "file": "t.py", "line": 1}, {"name": "step", "file": "t.py", "line": 5}]
    evented = {"$schema": "https://www.speedscope.app/file-format-schema.json", "shared": {"frames": frames},
               "profiles": [{"type": "evented", "name": "t", "unit": "milliseconds", "startValue": 10, "endValue": 50,
                             "events": [{"type": "O", "frame": 0, "at": 10}, {"type": "O", "frame": 1, "at": 15},
                                        {"type": "C", "frame": 1, "at": 45}, {"type": "C", "frame": 0, "at": 50}]}]}
    parsed = parse_stats("speedscope", json.dumps(evented).encode())
    assert parsed.summary["profiled_seconds"] == pytest.approx(0.040) == parsed.summary["session_duration_s"]
    tree = _tree(parsed)
    assert list(zip(tree["function_name"], tree["time"], tree["self_time"])) == [
        ("main", pytest.approx(0.040), pytest.approx(0.010)), ("step", pytest.approx(0.030), pytest.approx(0.030))]
    sampled = {"shared": {"frames": frames}, "profiles": [
        {"type": "sampled", "unit": "none", "startValue": 0, "endValue": 3, "samples": [[0, 1], [0, 1], [0]], "weights": [1, 1, 1]}]}
    data = json.dumps(sampled).encode()
    assert parse_stats("speedscope", data).summary["time_unit"] == "samples"
    assert parse_stats("speedscope@10.0", data).summary["profiled_seconds"] == pytest.approx(0.3)


@pytest.mark.parametrize(("fmt", "data", "says"), [
    ("speedscope", b'{"profiles": [', "malformed JSON"),
    ("speedscope", b'{"shared": {"frames": []}, "profiles": [{"type": "sampled", "unit": "bytes", "samples": [], "weights": []}]}', "unit is 'bytes'"),
    ("austin", b"# austin: 3.7.0\n# mode: memory\nP1;T0:1;a.py:f:1 4096\n", "memory mode"),
    ("collapsed", b"a;b;c twelve\n", "line 1 does not end in a non-negative count"),
    ("pyinstrument-session", b'{"frame_records": [[["f\\u0000a.py\\u00001"], -1]]}', "time is -1"),
    ("unknown", b"hello", "none of the formats proflake reads"),
])
def test_malformed_files_are_refused_in_one_sentence(fmt, data, says):
    from proflake.errors import ParseError

    with pytest.raises(ParseError) as raised:
        parse_stats(fmt, data)
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_a_frame_name_that_is_not_utf8_keeps_its_file():
    """austin reads frame names from its child's memory and can catch one being written: that frame reads
    with U+FFFD for its bad bytes, and every other frame and every sample's time are kept."""
    good = b"P1;T0:1;/a/train.py:train:12;/a/train.py:forward:3 1000\n"
    garbled = b"P1;T0:1;/a/train.py:train:12;p\r\xb9k\x8e\x7f:<module>:3 500\n"
    parsed = parse_stats("austin", b"# austin: 3.7.0\n# mode: wall\n# interval: 1000\n" + good + garbled)
    assert parsed.summary["profiled_seconds"] == pytest.approx(0.0015) and parsed.summary["session_sample_count"] == 2
    frames = {(f["filename"], f["function_name"]): f for f in parsed.facts["pyinstrument_frames"].to_pylist()}
    assert frames[("/a/train.py", "train")]["time"] == pytest.approx(0.0015)
    assert frames[("/a/train.py", "forward")]["self_time"] == pytest.approx(0.001)
    # The "\r" stays inside the name: lines end at "\n" only.
    assert frames[("p\r\ufffdk\ufffd\x7f", "<module>")]["self_time"] == pytest.approx(0.0005)


# -- ingested from a training loop's folders, and answered ----------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    rec = recorded()
    root = tmp_path_factory.mktemp("formats")
    store = str(root / "store")
    for job, (attr, name, options) in JOBS.items():
        folder = root / job
        for n, node in enumerate(NODES):
            for step in STEPS:
                target = copy_as(getattr(rec, attr), folder / node / name.format(step=step), mtime=1_800_000_000 + 10 * step + n)
                if attr == "pyisession":  # a session carries its own start time: each step's is its own
                    doc = json.loads(target.read_text())
                    target.write_text(json.dumps({**doc, "start_time": 1_800_000_000 + 10 * step + n}))
        done = run_cli(["ingest", str(folder), "--job", job, "--pattern", PATTERN, "--store", store, *options])
        assert done.returncode == 0, done.stderr
        assert f"ingested {len(NODES) * len(STEPS)} new interval(s)" in done.stderr
    return store


def _file_total(job: str) -> float:
    """What one of the job's files accounts for, by the file's own numbers."""
    rec = recorded()
    if job == "spy":
        return speedscope_totals(rec.speedscope)[0]
    if job == "raw":
        return sum(w for _, w in collapsed_lines(rec.pyspy_raw)) / 100
    if job == "counts":
        return sum(w for _, w in collapsed_lines(rec.pyspy_raw))
    if job == "austin":
        return sum(w for _, w in collapsed_lines(rec.austin)) / 1e6
    return sum(t for _, t in json.loads(rec.pyisession.read_text())["frame_records"])


def test_the_pattern_maps_folders_to_nodes_and_file_names_to_steps(store):
    rows = Profiles(store).list_profile_stats(job="spy").to_pylist()
    assert sorted((r["node_id"], r["start_step"], r["end_step"]) for r in rows) == [
        (node, step, step) for node in NODES for step in STEPS]
    assert {(r["profiler"], r["layout"], r["framework"]) for r in rows} == {("pyinstrument", "plain", "plain")}
    assert Profiles(store).nodes(job="raw", profiler="pyinstrument") == list(NODES)
    # speedscope's span, ending at the file's modification time
    _, span = speedscope_totals(recorded().speedscope)
    first = min(rows, key=lambda r: (r["node_id"], r["start_step"]))
    assert first["end_time_us"] == pytest.approx((1_800_000_000 + 10) * 1e6)
    assert first["end_time_us"] - first["start_time_us"] == pytest.approx(span * 1e6)


@pytest.mark.parametrize("job", list(JOBS))
def test_fetch_by_step_totals_are_the_files_totals(store, job):
    profiles = Profiles(store)
    result = profiles.by_step(2, 3, job=job, profiler="pyinstrument")
    assert result.intervals.num_rows == 4
    total = sum(result.table["self_time"].to_pylist())
    frameless = 0.0
    if job == "spy":
        doc = json.loads(recorded().speedscope.read_text())
        frameless = sum(w for p in doc["profiles"] for s, w in zip(p["samples"], p["weights"]) if not s)
    elif job in ("raw", "counts", "austin"):
        path = recorded().austin if job == "austin" else recorded().pyspy_raw
        scale = {"raw": 0.01, "counts": 1.0, "austin": 1e-6}[job]
        frameless = sum(w for stack, w in collapsed_lines(path) if not stack.replace("P", "").strip(";0123456789T:")) * scale
    assert total == pytest.approx(4 * (_file_total(job) - frameless))
    intervals = result.intervals.to_pylist()
    assert sum(r["profiled_seconds"] for r in intervals) == pytest.approx(4 * _file_total(job))
    per_node = profiles.by_step(1, 3, job=job, node="rank-1", profiler="pyinstrument")
    assert per_node.intervals.num_rows == 3


def test_roll_ups_and_the_call_tree_answer(store):
    profiles = Profiles(store)
    result = profiles.by_step(1, 3, job="pyi", profiler="pyinstrument")
    names = set(result.table["function_name"].to_pylist())
    assert {"train", "forward", "backward"} <= names
    tree = result.call_tree()
    roots = [t for t, parent in zip(tree["time"].to_pylist(), tree["parent_path_id"].to_pylist()) if parent is None]
    assert sum(roots) == pytest.approx(6 * _file_total("pyi"))  # six sessions' trees merged by call path
    by_phase = profiles.by_job_phase(job="raw", profiler="pyinstrument")
    assert by_phase.table["job_phase"].unique().to_pylist() == ["training_loop"]
    assert sum(by_phase.table["self_time"].to_pylist()) == pytest.approx(sum(result_raw_self(profiles)))


def result_raw_self(profiles: Profiles) -> list[float]:
    return profiles.by_step(1, 3, job="raw", profiler="pyinstrument").table["self_time"].to_pylist()


def test_report_diff_export_and_trend_answer(store, tmp_path):
    report = tmp_path / "report.html"
    done = run_cli(["report", "by-step", "1", "3", "--job", "spy", "--profiler", "pyinstrument", "--store", store, "-o", str(report)])
    assert done.returncode == 0, done.stderr
    assert "forward" in report.read_text()
    assert '"formats":["speedscope"]' in report.read_text() and '"time_unit":"seconds"' in report.read_text()
    diff = run_cli(["diff", "raw", "spy", "--profiler", "pyinstrument", "--store", store, "--format", "json"])
    assert diff.returncode == 0, diff.stderr
    assert json.loads(diff.stdout)["functions"]
    out = tmp_path / "export.speedscope.json"
    exported = run_cli(["export", "by-step", "1", "3", "--job", "austin", "--profiler", "pyinstrument", "--store", store,
                        "--format", "speedscope", "-o", str(out)])
    assert exported.returncode == 0, exported.stderr
    weights, _ = speedscope_totals(out)
    assert weights > 0
    collapsed = tmp_path / "export.collapsed"
    exported = run_cli(["export", "by-step", "1", "3", "--job", "counts", "--profiler", "pyinstrument", "--store", store,
                        "--format", "collapsed", "-o", str(collapsed)])
    assert exported.returncode == 0, exported.stderr
    framed = sum(w for stack, w in collapsed_lines(recorded().pyspy_raw) if stack)
    # Sample counts stay counts (time_unit 'samples'); times in seconds become microseconds.
    assert sum(w for _, w in collapsed_lines(collapsed)) == 6 * framed
    trend = run_cli(["trend", "--store", store, "--profiler", "pyinstrument", "--format", "json"])
    assert trend.returncode == 0, trend.stderr
    counts = run_cli(["fetch", "by-step", "1", "3", "--job", "counts", "--profiler", "pyinstrument", "--store", store])
    assert counts.returncode == 0 and "times are sample counts" in counts.stderr, counts.stderr
    mixed = run_cli(["fetch", "by-step", "1", "3", "--all-jobs", "--profiler", "pyinstrument", "--store", store])
    assert mixed.returncode == 0 and "mixes seconds and sample counts" in mixed.stderr, mixed.stderr


def test_the_cli_says_each_file_s_format_and_unit(tmp_path):
    rec = recorded()
    folder = tmp_path / "run"
    (folder / "a.folded").parent.mkdir(parents=True)
    (folder / "a.folded").write_text("main;train;forward 30\nmain;train;backward 60\nmain 10\n")
    copy_as(rec.speedscope, folder / "b.speedscope.json")
    (folder / "notes.txt").write_text("not a profile\n")
    store = str(tmp_path / "store")
    done = run_cli(["ingest", str(folder), "--job", "j", "--node", "n", "--store", store])
    assert done.returncode == 0, done.stderr
    assert f"{folder / 'a.folded'}: collapsed, node n, train step 0, times from its modification time; time in sample counts" in done.stderr
    assert f"{folder / 'b.speedscope.json'}: speedscope, node n, train step 1, times from its speedscope profile span" in done.stderr
    assert f"skipped (no format proflake reads): {folder / 'notes.txt'}" in done.stderr
    counted = next(r for r in Profiles(store).list_profile_stats(job="j").to_pylist() if r["start_step"] == 0)
    assert counted["profiled_seconds"] == 100
    raw = copy_as(rec.pyspy_raw, tmp_path / "spy" / "out.txt")  # py-spy's own frames: its 100 Hz unless told
    spy = run_cli(["ingest", str(raw), "--job", "s", "--node", "n", "--store", store])
    assert spy.returncode == 0 and "pyspy-raw, node n, train step 0" in spy.stderr and "samples at 100 Hz (pyspy-raw's default" in spy.stderr
    again = copy_as(folder / "a.folded", tmp_path / "rated" / "a.folded")
    rated = run_cli(["ingest", str(again), "--job", "k", "--node", "n", "--sample-rate", "50", "--store", store])
    assert rated.returncode == 0 and "time in seconds: samples at 50 Hz (--sample-rate)" in rated.stderr
    (row,) = Profiles(store).list_profile_stats(job="k").to_pylist()
    assert row["profiled_seconds"] == pytest.approx(100 / 50)


def test_an_unknown_or_malformed_file_is_quarantined_and_the_batch_goes_on(tmp_path):
    rec = recorded()
    folder = tmp_path / "run"
    copy_as(rec.speedscope, folder / "good.speedscope.json")
    (folder / "cut.speedscope.json").write_bytes(rec.speedscope.read_bytes()[:200])
    store = str(tmp_path / "store")
    done = run_cli(["ingest", str(folder), "--job", "j", "--node", "n", "--store", store])
    assert done.returncode == ExitCode.PARTIAL and "Traceback" not in done.stderr, done.stderr
    (error,) = Profiles(store).errors().to_pylist()
    assert error["source_uri"] == str(folder / "cut.speedscope.json") and "not a speedscope file: malformed JSON" in error["message"]
    assert Profiles(store).list_profile_stats(job="j").num_rows == 1
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x00\x01 no profile")
    done = run_cli(["ingest", str(odd), "--job", "k", "--node", "n", "--store", store])
    assert done.returncode == ExitCode.PARTIAL, done.stderr
    errors = {e["source_uri"]: e for e in Profiles(store).errors().to_pylist()}
    assert errors[str(odd)]["error_kind"] == "unknown_format"
    assert "none of the formats proflake reads" in errors[str(odd)]["message"]
    forced = run_cli(["ingest", str(odd), "--job", "k", "--node", "n", "--format", "spedscope", "--store", store])
    assert forced.returncode == ExitCode.USAGE and "unknown format 'spedscope'; expected one of: cprofile" in forced.stderr


def test_only_the_registry_names_the_table_families():
    """The registry's shapes decide where rows land; a profiler name is never compared by hand."""
    assert is_caller_graph("cprofile") and not is_caller_graph("pyinstrument")
    assert {f.profiler for f in FORMATS.values()} == {"cprofile", "pyinstrument"}
    package = Path(__file__).resolve().parent.parent / "etl" / "proflake"
    smdebug_names = {"layout.py", "capture/capture.py"}  # smdebug's own folder names, not table families
    compared = [
        f"{path.relative_to(package)}:{n}" for path in package.rglob("*.py") if str(path.relative_to(package)) not in smdebug_names
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ('== "cprofile"' in line or '!= "cprofile"' in line or '== "pyinstrument"' in line or '!= "pyinstrument"' in line)
    ]
    assert not compared, compared


def test_times_from_a_session_file(tmp_path):
    rec = recorded()
    store = str(tmp_path / "store")
    path = copy_as(rec.pyisession, tmp_path / "s.pyisession")
    done = run_cli(["ingest", str(path), "--job", "j", "--node", "n", "--store", store])
    assert done.returncode == 0 and "times from its pyinstrument session" in done.stderr, done.stderr
    doc = json.loads(path.read_text())
    (row,) = Profiles(store).list_profile_stats().to_pylist()
    assert row["start_time_us"] == pytest.approx(doc["start_time"] * 1e6, abs=1)
    assert row["end_time_us"] == pytest.approx((doc["start_time"] + doc["duration"]) * 1e6, abs=1)
    assert os.path.exists(path)


def test_each_interval_says_its_format_unit_and_rate(store):
    """intervals.source_format, time_unit and sample_rate_hz: what the reader found in the file."""
    expected = {
        "spy": ("speedscope", "seconds", None), "raw": ("pyspy-raw", "seconds", 100.0),
        "austin": ("austin", "seconds", 1000.0), "pyi": ("pyinstrument-session", "seconds", None),
        "counts": ("collapsed", "samples", None),
    }
    for job, want in expected.items():
        rows = Profiles(store).list_profile_stats(job=job).to_pylist()
        assert {(r["source_format"], r["time_unit"], r["sample_rate_hz"] and round(r["sample_rate_hz"])) for r in rows} == {want}, job


def test_plain_files_in_a_store_written_before_the_plain_layout_read_as_written(tmp_path):
    """tests/data/stores/plain-v1 (tests/helpers/old_plain_store.py): plain files that c1d8011 filed under
    made-up smdebug paths keep their rows and answers; files ingested since land beside them."""
    import shutil

    from helpers.profiles import DATA, FORMAT_SAMPLES, assert_same_pstats, pstats_of

    store = str(tmp_path / "store")
    shutil.copytree(DATA / "stores" / "plain-v1", store)

    def rows() -> dict[str, dict]:
        return {r["source_uri"]: r for p in ("cprofile", "pyinstrument") for r in Profiles(store).list_profile_stats(profiler=p).to_pylist()}

    before = rows()
    assert {uri: (r["layout"], r["framework"], r["node_id"], r["start_step"]) for uri, r in before.items()} == {
        "/tmp/proflake-plain-v1-source/run.prof": ("smdebug", "plain", "n", 0),
        "/tmp/proflake-plain-v1-source/run.json": ("smdebug", "plain", "n", 0),
    }
    assert before["/tmp/proflake-plain-v1-source/run.prof"]["start_time_us"] == 1_700_000_000_250_000.0
    assert_same_pstats(Profiles(store).by_step(0, profiler="cprofile").to_pstats().stats,
                       pstats_of([FORMAT_SAMPLES / "cprofile-py3.13.pstats"]))
    session = json.loads((FORMAT_SAMPLES / "pyinstrument-5.1.3.json").read_text())
    old_total = sum(Profiles(store).by_step(0, profiler="pyinstrument").table["self_time"].to_pylist())
    assert old_total == pytest.approx(session["root_frame"]["time"])
    new = copy_as(recorded().speedscope, tmp_path / "later" / "step-1.speedscope.json")
    done = run_cli(["ingest", str(new), "--job", "laptop", "--node", "n", "--store", store])
    assert done.returncode == 0, done.stderr
    after = rows()
    assert after[str(new)]["layout"] == "plain" and after[str(new)]["start_step"] == 1
    for uri, row in before.items():
        assert {k: v for k, v in after[uri].items() if k in row} == row
    assert sum(Profiles(store).by_step(0, profiler="pyinstrument").table["self_time"].to_pylist()) == pytest.approx(old_total)
