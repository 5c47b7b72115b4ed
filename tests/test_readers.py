"""Readers: bytes -> Arrow columns, checked against pstats and the JSON trees themselves."""

from __future__ import annotations

import json
import marshal
import pstats
import struct

import pytest
from helpers.damage import damaged
from helpers.profiles import FORMAT_SAMPLES, LEGACY
from hypothesis import given
from hypothesis import strategies as st
from proflake.errors import ParseError
from proflake.readers import cprofile as cprofile_reader
from proflake.readers import cprofile_fast as fast_reader
from proflake.readers.cprofile import read_cprofile
from proflake.readers.jsontree import loads_deep
from proflake.readers.pyinstrument import dumps_tree, read_pyinstrument
from proflake.schema import arrow_schema

CPROFILE_FILES = sorted(LEGACY.rglob("python_stats")) + sorted(FORMAT_SAMPLES.glob("*.pstats"))
PYINSTRUMENT_FILES = sorted(FORMAT_SAMPLES.glob("pyinstrument-*.json"))


@pytest.mark.parametrize("path", CPROFILE_FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_cprofile_rows_are_the_pstats_entries(path):
    data = read_cprofile(path.read_bytes())
    expected = pstats.Stats(str(path)).stats
    own_columns = [f for f in arrow_schema("function_stats") if f.name in data.functions.column_names]
    assert data.functions.num_rows == len(expected)
    assert len(own_columns) == data.functions.num_columns
    for row in data.functions.to_pylist():
        cc, nc, tt, ct, _ = expected[(row["filename"], row["lineno"], row["function_name"])]
        assert (row["primitive_calls"], row["total_calls"], row["tottime"], row["cumtime"]) == (cc, nc, tt, ct)
        assert row["function"] == pstats.func_std_string((row["filename"], row["lineno"], row["function_name"]))
    assert data.callers.num_rows == sum(len(v[4]) for v in expected.values())
    for edge in data.callers.to_pylist():
        callers = expected[(edge["filename"], edge["lineno"], edge["function_name"])][4]
        caller = (edge["caller_filename"], edge["caller_lineno"], edge["caller_function_name"])
        assert callers[caller] == (edge["total_calls"], edge["primitive_calls"], edge["tottime"], edge["cumtime"])


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"", "empty"),
        (b"garbage!", "marshal data is corrupt|top level"),
        (marshal.dumps([1, 2, 3]), "top level is list"),
        (marshal.dumps({("f", 1): (1, 1, 0.1, 0.1, {})}), "function key"),
        (marshal.dumps({("f", 1, "g"): (1, 1, 0.1, 0.1)}), "does not have 5 fields"),
        (marshal.dumps({("f", 1, "g"): (1, 1, "x", 0.1, {})}), "'x' is not a float or int"),
        (marshal.dumps({("f", 1, "g"): (1, 1, float("nan"), 0.1, {})}), "own times are not all finite"),
        (marshal.dumps({("f", 1, "g"): (1, 1, 0.1, 0.1, {("a", 1, "b"): 3})}), "caller edge"),
        (marshal.dumps(compile("1", "x", "eval")), "holds a code object"),
    ],
)
def test_cprofile_rejects_anything_but_a_pstats_dict(payload, message):
    with pytest.raises(ParseError, match=message) as info:
        read_cprofile(payload)
    assert info.value.kind == "cprofile"


# -- the fast path must agree with the careful one ---------------------------------------------------
def _careful(data: bytes):
    return cprofile_reader._careful_tables(cprofile_reader._load(data))


def _outcome(parse, data: bytes):
    try:
        parsed = parse(data)
    except ParseError as e:
        return ("error", e.kind, str(e))
    functions, callers = parsed.functions, parsed.callers
    return (functions.schema, functions.to_pylist(), callers.schema, callers.to_pylist(),
            parsed.profiled_seconds)


@pytest.mark.parametrize("path", CPROFILE_FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_cprofile_fast_path_takes_real_dumps_and_matches_the_careful_path(path):
    data = path.read_bytes()
    fast = fast_reader.fast_tables(marshal.loads(data))  # Unusual here would be a silent slowdown
    careful = _careful(data)
    assert fast.functions.schema == careful.functions.schema and fast.functions.equals(careful.functions)
    assert fast.callers.schema == careful.callers.schema and fast.callers.equals(careful.callers)
    assert fast.profiled_seconds == careful.profiled_seconds


_KNOWN = ("f", 1, "g")


@pytest.mark.parametrize(
    "stats, message",
    [
        # Known keys are found by equality, and 1.0, True and 1+0j equal 1.
        ({("f", 1.0, "g"): (1, 1, 0.1, 0.1, {})}, "line numbers 1.0 is not a int"),
        ({("f", True, "g"): (1, 1, 0.1, 0.1, {})}, "line numbers True is not a int"),
        ({("h", 2, "i"): (1, 1, 0.1, 0.1, {("f", 1 + 0j, "g"): (1, 1, 0.1, 0.1)})}, "caller line numbers"),
        # Values a conversion would quietly accept.
        ({_KNOWN: (True, 1, 0.1, 0.1, {})}, "primitive call counts True is not a int"),
        ({_KNOWN: (1, 1.0, 0.1, 0.1, {})}, "call counts 1.0 is not a int"),
        ({_KNOWN: (1, 1, 0.1, True, {})}, "cumulative times True is not a float or int"),
        ({_KNOWN: (1, 1, 0.1, 0.1, {_KNOWN: (1, 1, 0.1, False)})}, "caller cumulative times False"),
        ({_KNOWN: (1, 1, 0.1, 0.1, {_KNOWN: [1, 1, 0.1, 0.1]})}, "caller edge"),
        ({_KNOWN: [1, 1, 0.1, 0.1, {}]}, "does not have 5 fields"),
        ({_KNOWN: (1, 1, 0.1, 0.1, [])}, "callers list is not a dict"),
        ({_KNOWN: (1, 1, 0.1, 2.0**63, {})}, "cumulative times are out of range"),
        ({_KNOWN: (1, 1, 0.1, float("-inf"), {})}, "cumulative times are not all finite"),
        ({_KNOWN: (2**63, 1, 0.1, 0.1, {})}, "between 0 and 2\\*\\*63-1"),
        ({_KNOWN: (1, 1, 0.1, 0.1, {("\udc80", 1, "g"): (1, 1, 0.1, 0.1)})}, "not valid Unicode"),
    ],
)
def test_cprofile_rejects_what_the_fast_path_could_miss(stats, message):
    read_cprofile(marshal.dumps({_KNOWN: (1, 1, 0.1, 0.1, {_KNOWN: (1, 1, 0.1, 0.1)})}))  # now a known key
    data = marshal.dumps(stats)
    with pytest.raises(ParseError, match=message):
        read_cprofile(data)
    assert _outcome(read_cprofile, data) == _outcome(_careful, data)


def test_cprofile_keeps_the_rare_valid_shapes_the_fast_path_declines():
    builtin = ("~", 0, "<len>")
    int_times = {_KNOWN: (1, 1, 1, 2**60 + 1, {}), builtin: (2, 2, 0.5, 0.5, {_KNOWN: (2, 2, 3, 0.5)})}
    data = marshal.dumps(int_times)
    parsed = read_cprofile(data)
    assert parsed.functions["cumtime"].to_pylist() == [float(2**60), 0.5]
    assert parsed.functions["function"].to_pylist() == ["f:1(g)", "{len}"]
    assert _outcome(read_cprofile, data) == _outcome(_careful, data)
    assert _outcome(read_cprofile, marshal.dumps({})) == _outcome(_careful, marshal.dumps({}))


def test_cprofile_known_keys_start_over_past_their_limit(monkeypatch):
    monkeypatch.setattr(fast_reader, "_KNOWN_KEYS_LIMIT", 100)
    monkeypatch.setattr(fast_reader, "_known", fast_reader._known)  # restored afterwards
    for path in CPROFILE_FILES * 2:  # files of 59 to 2722 functions: the known keys start over often
        data = path.read_bytes()
        assert _outcome(read_cprofile, data) == _outcome(_careful, data)
    assert len(fast_reader._known.row) == fast_reader._known.columns.num_rows <= 2 * 2722


def _mostly(valid, odd):
    # Rarely odd, so that about half the dumps are valid and the rest have one or two bad values.
    return st.integers(0, 39).flatmap(lambda i: odd if i == 0 else valid)


_names = _mostly(st.sampled_from(["f", "g", "~"]), st.sampled_from(["<lambda>", "<len>", "", "\ud800"]))
_linenos = _mostly(st.integers(0, 3), st.sampled_from([1.0, True, False, 1 + 0j, -1, 2**63, None]))
_counts = _mostly(st.integers(0, 3), st.sampled_from([True, 1.0, -1, 2**63 - 1, 2**63, None, "1"]))
_times = _mostly(
    st.floats(0, 2), st.sampled_from([1, True, 2**53 + 1, 2**63 - 1, float("nan"), float("inf"), 1e19, -0.0])
)
_keys = _mostly(st.tuples(_names, _linenos, _names), st.sampled_from([("f", 1), ("f", 1, "g", 1), 7, b"f1g"]))
_edges = _mostly(st.tuples(_counts, _counts, _times, _times), st.sampled_from([[1, 1, 0.5, 0.5], (1, 0.5)]))
_values = _mostly(
    st.tuples(_counts, _counts, _times, _times, st.dictionaries(_keys, _edges, max_size=3)),
    st.sampled_from([[1, 1, 0.5, 0.5, {}], (1, 1, 0.5, 0.5), (1, 1, 0.5, 0.5, []), (1, 1, 0.5, 0.5, {}, 1)]),
)


@given(st.dictionaries(_keys, _values, max_size=4))
def test_cprofile_fast_path_agrees_with_the_careful_path(stats):
    data = marshal.dumps(stats)
    assert _outcome(read_cprofile, data) == _outcome(_careful, data)


# -- the compiled decoder must agree with the Python paths ------------------------------------------
def _python_paths(data: bytes):
    compiled, fast_reader._compiled = fast_reader._compiled, None
    try:
        return read_cprofile(data)
    finally:
        fast_reader._compiled = compiled


def test_the_compiled_decoder_is_built():
    assert fast_reader._compiled is not None, (
        "etl/proflake/readers/_pstats_columns.c was not compiled: install gcc and the Python headers, then "
        "reinstall proflake (bin/test does when the source changes)"
    )


@pytest.mark.parametrize("path", CPROFILE_FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_compiled_decoder_takes_real_dumps_and_matches_the_python_paths(path):
    data = path.read_bytes()
    compiled = fast_reader.compiled_tables(data)  # Unusual here would be a silent slowdown
    python = _python_paths(data)
    assert compiled.functions.schema == python.functions.schema and compiled.functions.equals(python.functions)
    assert compiled.callers.schema == python.callers.schema and compiled.callers.equals(python.callers)
    assert compiled.profiled_seconds == python.profiled_seconds


@pytest.mark.parametrize("version", range(5))
def test_compiled_decoder_reads_every_marshal_version_or_declines(version):
    stats = pstats.Stats(str(CPROFILE_FILES[0])).stats
    data = marshal.dumps(stats, version)
    assert _outcome(read_cprofile, data) == _outcome(_python_paths, data)
    if version >= 2:  # binary floats; versions 0 and 1 write text floats, which it leaves to Python
        fast_reader.compiled_tables(data)


def _spelled(*items) -> bytes:
    """A dict of marshal items laid out by hand (version 2: no references), keys repeated at will."""
    return b"{" + b"".join(marshal.dumps(item, 2) for item in items) + b"0"


@pytest.mark.parametrize(
    "data",
    [
        # A dict keeps the last value of a repeated key, and its first position.
        _spelled(_KNOWN, (1, 1, 0.5, 0.5, {}), ("h", 2, "i"), (2, 2, 0.1, 0.1, {}), _KNOWN, (3, 3, 0.2, 0.2, {})),
        b"{" + marshal.dumps(_KNOWN, 2) + b"(\x05\x00\x00\x00" + b"".join(marshal.dumps(v, 2) for v in (1, 1, 0.5, 0.5))
        + _spelled(("h", 2, "i"), (1, 1, 0.1, 0.1), ("h", 2, "i"), (2, 2, 0.2, 0.2)) + b"0",
        # ASCII-typed strings with bytes above 127: marshal.loads reads them as latin-1.
        b"{)\x03z\x02f\xe9i\x01\x00\x00\x00z\x01g)\x05i\x01\x00\x00\x00i\x01\x00\x00\x00"
        + marshal.dumps(0.5) + marshal.dumps(0.5) + b"{00",
        # A count read through a reference (fine), then a caller key that refers back to a string.
        b"{)\x03\xda\x01fi\x01\x00\x00\x00\xda\x01g)\x05\xe9\x01\x00\x00\x00r\x02\x00\x00\x00"
        + marshal.dumps(0.5) + marshal.dumps(0.5) + b"{r\x00\x00\x00\x00" + marshal.dumps((1, 1, 0.5, 0.5), 2) + b"00",
    ],
    ids=["repeated function", "repeated caller", "latin-1 ascii", "key refers to a string"],
)
def test_compiled_decoder_leaves_what_marshal_reads_otherwise_to_python(data):
    assert _outcome(read_cprofile, data) == _outcome(_python_paths, data)


_shared_keys = st.lists(st.tuples(_names, _linenos, _names), min_size=1, max_size=6, unique=True)
_big_counts = st.one_of(st.integers(0, 3), st.integers(2**31 - 2, 2**31 + 2), st.integers(2**62, 2**64),
                        st.sampled_from([2**63 - 1, -(2**40), 2**45]))
_shared_times = st.one_of(st.floats(0, 2), st.just(0.0), st.sampled_from([2.0**63, -1e-300, 1e18]))


@given(_shared_keys, st.data())
def test_compiled_decoder_agrees_on_shared_keys_and_big_numbers(keys, data):
    # The same key and count objects used again are written as references to the first.
    shared_count, shared_time = data.draw(_big_counts), data.draw(_shared_times)
    count = st.one_of(_big_counts, st.just(shared_count))
    time = st.one_of(_shared_times, st.just(shared_time))
    stats = {}
    for key in data.draw(st.lists(st.sampled_from(keys), max_size=len(keys), unique=True)):
        callers = {caller: data.draw(st.tuples(count, count, time, time))
                   for caller in data.draw(st.lists(st.sampled_from(keys), max_size=3))}
        stats[key] = data.draw(st.tuples(count, count, time, time, st.just(callers)))
    encoded = marshal.dumps(stats)
    assert _outcome(read_cprofile, encoded) == _outcome(_python_paths, encoded)


_SMALL_DUMP = min(CPROFILE_FILES, key=lambda p: p.stat().st_size).read_bytes()


def test_compiled_decoder_agrees_on_damaged_dumps():
    # Some damage makes a stream marshal.loads would crash on (a garbled code object, a tuple that refers
    # to itself): both paths refuse those first, with the same words (marshal_guard.py is the C walk).
    refused = 0
    # Mostly the small dump: the Python walk reads a 420 KB one in ~60 ms, the small one in ~3 ms.
    for data in damaged([_SMALL_DUMP] * 5 + [CPROFILE_FILES[0].read_bytes()], 400, seed=20261130):
        compiled = _outcome(read_cprofile, data)
        refused += compiled[0] == "error" and ("from inside itself" in compiled[2] or "code object" in compiled[2])
        assert compiled == _outcome(_python_paths, data)
    assert refused < 30


def test_a_tuple_that_contains_itself_is_refused_before_marshal_reads_it():
    # marshal.loads would hash these caller keys, whose line number refers back to the key itself, and
    # recurse until the process crashes. In the second dump the decoder has declined already (a file
    # name that is a number) when it meets the cycle: its walk of the whole dump finds it.
    one, half = b"i\x01\x00\x00\x00", b"g" + struct.pack("<d", 0.5)
    key = b"\xa9\x03\xfa\x01f" + one + b"\xfa\x01g"  # reference slots 0 (the key), 1 ("f"), 2 ("g")
    cyclic_caller = b"\xa9\x03r\x01\x00\x00\x00r\x03\x00\x00\x00r\x02\x00\x00\x00"  # slot 3, its line: slot 3
    entry = key + b")\x05" + one + one + half + half + b"{" + cyclic_caller + b")\x04" + one + one + half + half + b"0"
    number_as_file_name = b")\x03" + one + one + b"z\x01h" + b")\x05" + one + one + half + half + b"{0"
    for data in (b"{" + entry + b"0", b"{" + number_as_file_name + entry + b"0"):
        with pytest.raises(ParseError, match="refers to a tuple from inside itself"):
            read_cprofile(data)


def _frames(node, out):
    """(function, time) of every real frame, recursively (test data is shallow)."""
    if node is None:
        return out
    if node["function"] != "[self]":
        out.append((node["function"], node["time"]))
    for child in node.get("children", []):
        _frames(child, out)
    return out


@pytest.mark.parametrize("path", PYINSTRUMENT_FILES, ids=lambda p: p.name)
def test_pyinstrument_versions_flatten_to_the_same_tree(path):
    doc = json.loads(path.read_bytes())
    data = read_pyinstrument(path.read_bytes())
    rows = data.frames.to_pylist()
    assert sorted((r["function_name"], r["time"]) for r in rows) == sorted(_frames(doc["root_frame"], []))
    assert data.target == doc.get("target_description", doc.get("program"))
    assert data.sample_count == doc["sample_count"]
    assert data.profiled_seconds == doc["root_frame"]["time"]
    by_id = {r["frame_id"]: r for r in rows}
    for r in rows:
        if r["parent_id"] is not None:
            assert by_id[r["parent_id"]]["depth"] == r["depth"] - 1
            assert by_id[r["parent_id"]]["path_id"] == r["parent_path_id"]
        children = [c for c in rows if c["parent_id"] == r["frame_id"]]
        assert r["self_time"] == pytest.approx(max(r["time"] - sum(c["time"] for c in children), 0.0), abs=1e-12)
    # Self time adds up to the root's time: nothing is lost or counted twice.
    assert sum(r["self_time"] for r in rows) == pytest.approx(rows[0]["time"], rel=1e-6)
    # The rebuilt tree carries the same frames.
    assert sorted(_frames(dumps_tree(rows), [])) == sorted(_frames(doc["root_frame"], []))


def test_recursion_is_marked_so_inclusive_time_counts_once():
    sample = json.loads((FORMAT_SAMPLES / "pyinstrument-5.1.3.json").read_bytes())
    rows = read_pyinstrument(json.dumps(sample).encode()).frames.to_pylist()
    fib = [r for r in rows if r["function_name"] == "fib"]
    assert len(fib) > 1
    outer = [r for r in fib if r["is_outermost"]]
    assert outer and all(r["depth"] == min(f["depth"] for f in fib) for r in outer)


def test_null_root_is_an_empty_session_not_an_error():
    data = read_pyinstrument(b'{"root_frame": null}')
    assert data.is_empty and data.frames.num_rows == 0


def test_a_tree_deeper_than_the_recursion_limit_ingests():
    depth = 30_000
    text = '{"root_frame": ' + '{"function": "f", "file_path": "x.py", "line_no": 1, "time": 1.0, "children": [' * depth
    text += "]}" * depth + "}"
    data = read_pyinstrument(text.encode())
    assert data.frames.num_rows == depth
    assert data.frames["depth"][-1].as_py() == depth - 1
    assert sum(data.frames["is_outermost"].to_pylist()) == 1


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"", "empty"),
        (b"{not json", "malformed JSON"),
        (b"\xff\xfe\x00garbage", "malformed JSON"),
        (b"[]", "top level is list"),
        (b"{}", "no root_frame"),
        (b'{"root_frame": {"function": "f", "time": -1}}', "finite non-negative"),
        (b'{"root_frame": {"function": "f", "time": NaN}}', "finite non-negative"),
        (b'{"root_frame": {"function": 3, "time": 1}}', "expected a string"),
        (b'{"root_frame": {"function": "f", "time": 1, "children": {}}}', "children are not a list"),
    ],
)
def test_pyinstrument_rejects_malformed_sessions(payload, message):
    with pytest.raises(ParseError, match=message):
        read_pyinstrument(payload)


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, -3e2, true, false, null, "x\\u00e9\\n"]}', "[]", '"s"', "[[[{}]]]"])
def test_iterative_json_decoder_matches_json(text):
    from proflake.readers.jsontree import _loads_iterative

    assert _loads_iterative(text) == json.loads(text)
    assert loads_deep(text) == json.loads(text)


@pytest.mark.parametrize("text", ["[1,", "{\"a\" 1}", "[1] x", "{'a': 1}", "[01]"])
def test_iterative_json_decoder_rejects_what_json_rejects(text):
    from proflake.readers.jsontree import _loads_iterative

    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        _loads_iterative(text)
