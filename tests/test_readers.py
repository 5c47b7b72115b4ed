"""Readers: bytes -> Arrow columns, checked against pstats and the JSON trees themselves."""

from __future__ import annotations

import json
import marshal
import pstats

import pytest

from conftest import FORMAT_SAMPLES, LEGACY
from etl.errors import ParseError
from etl.readers.cprofile import read_cprofile
from etl.readers.jsontree import loads_deep
from etl.readers.pyinstrument import dumps_tree, read_pyinstrument
from etl.schema import arrow_schema

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
        (marshal.dumps(compile("1", "x", "eval")), "top level is code"),
    ],
)
def test_cprofile_rejects_anything_but_a_pstats_dict(payload, message):
    with pytest.raises(ParseError, match=message) as info:
        read_cprofile(payload)
    assert info.value.kind == "cprofile"


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
    from etl.readers.jsontree import _loads_iterative

    assert _loads_iterative(text) == json.loads(text)
    assert loads_deep(text) == json.loads(text)


@pytest.mark.parametrize("text", ["[1,", "{\"a\" 1}", "[1] x", "{'a': 1}", "[01]"])
def test_iterative_json_decoder_rejects_what_json_rejects(text):
    from etl.readers.jsontree import _loads_iterative

    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        _loads_iterative(text)
