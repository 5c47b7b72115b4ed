"""Parse workers: a crash, hang or memory blow-up costs one file, never the batch."""

from __future__ import annotations

import pytest


from etl.workers import ParsePool, Task


@pytest.mark.parametrize("workers", [1, 2])
def test_misbehaving_files_cost_only_themselves(workers):
    payloads = [b"ok-%d" % i for i in range(40)]
    bad = {7: (b"segfault", "crash"), 13: (b"hang", "timeout"), 21: (b"hog", "memory"), 30: (b"exit", "crash")}
    for index, (data, _) in bad.items():
        payloads[index] = data
    with ParsePool(workers, memory_mb=512, timeout_s=1.5, parse="crashy:parse") as pool:
        results = dict(o for chunk in pool.parse(Task(i, "cprofile", data) for i, data in enumerate(payloads)) for o in chunk.outcomes)
    assert sorted(results) == list(range(40))
    for index, result in results.items():
        if index in bad:
            assert result.kind == bad[index][1], (index, result)
        else:
            assert result == {"profiler": "cprofile", "size": len(payloads[index])}
    assert "signal 11" in results[7].message


def test_real_parser_in_workers_reports_parse_errors():
    with ParsePool(2) as pool:
        chunks = list(pool.parse([Task(0, "cprofile", b"junk"), Task(1, "pyinstrument", b'{"root_frame": null}')]))
        results = dict(o for chunk in chunks for o in chunk.outcomes)
    assert results[0].kind == "cprofile" and "not a cProfile stats dump" in results[0].message
    assert results[1].summary["is_empty"] is True
