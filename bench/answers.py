"""Whether an answer of proflake (native or compatible API) is smdebug's: the baseline's ``pstats``
dictionaries compared key by key, call count by call count, time by time and caller edge by edge."""

from __future__ import annotations

from typing import Any

from bench import baseline as bl


def compare_pstats(actual: dict, expected: dict, rel: float = 1e-6) -> str | None:
    """None when equal (keys, call counts, times within rel, caller edges); else the first difference."""
    if set(actual) != set(expected):
        missing, extra = set(expected) - set(actual), set(actual) - set(expected)
        return f"function keys differ: {len(missing)} missing, {len(extra)} extra (of {len(expected)})"

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-12

    for key, (cc, nc, tt, ct, callers) in expected.items():
        a_cc, a_nc, a_tt, a_ct, a_callers = actual[key]
        if (a_cc, a_nc) != (cc, nc):
            return f"{key}: calls {(a_cc, a_nc)} != {(cc, nc)}"
        if not (close(a_tt, tt) and close(a_ct, ct)):
            return f"{key}: times {(a_tt, a_ct)} != {(tt, ct)}"
        if set(a_callers) != set(callers):
            return f"{key}: callers differ"
        for caller, edge in callers.items():
            a_edge = a_callers[caller]
            if tuple(a_edge[:2]) != tuple(edge[:2]) or not all(
                close(x, y) for x, y in zip(a_edge[2:], edge[2:])
            ):
                return f"{key} <- {caller}: edge {a_edge} != {edge}"
    return None


def _label(mode: Any) -> str:
    return getattr(mode, "label", mode)


def _check_pstats(kind: str, actual: Any, expected: Any) -> str:
    if expected is None:
        return (
            "match"
            if (actual is None or getattr(actual, "empty", False))
            else "mismatch: baseline found nothing"
        )
    if kind == "native":
        got = actual.to_pstats().stats
    elif actual is None:
        return "mismatch: nothing returned"
    else:
        got = actual.ps.stats
    diff = compare_pstats(got, expected.ps.stats)
    return "match" if diff is None else f"mismatch: {diff}"


def _check_phases(kind: str, actual: Any, expected: Any) -> str:
    # smdebug keys its phases by PythonProfileModes; compare by their folder-name strings.
    want = {tuple(bl.python_profile_mode_to_str(m) for m in k): v for k, v in expected.items()}
    if kind == "native":
        groups = {tuple(g) for g in actual.groups()}
        if groups != set(want):
            return f"mismatch: groups {sorted(groups)} != {sorted(want)}"
        got = {group: actual.to_pstats(group).stats for group in want}
    else:
        labelled = {(_label(a), _label(b)): v for (a, b), v in actual.items()}
        if set(labelled) != set(want):
            return f"mismatch: groups {sorted(labelled)} != {sorted(want)}"
        got = {group: labelled[group].ps.stats for group in want}
    for group, stats in want.items():
        diff = compare_pstats(got[group], stats.ps.stats)
        if diff:
            return f"mismatch in {group}: {diff}"
    return "match"


def _check_job_phase(kind: str, actual: Any, expected: Any) -> str:
    # Only training_loop is meant to agree: proflake fixes smdebug's initialization/finalization.
    want = expected["training_loop"].ps.stats
    got = actual.to_pstats(("training_loop",)).stats if kind == "native" else actual["training_loop"].ps.stats
    diff = compare_pstats(got, want)
    return "match (training_loop)" if diff is None else f"mismatch in training_loop: {diff}"


def _check_list(kind: str, actual: Any, expected: Any) -> str:
    want = (
        sorted(expected["stats_path"])
        if hasattr(expected, "columns")
        else sorted(r["stats_path"] for r in expected)
    )
    got = sorted(actual["source_uri"].to_pylist()) if kind == "native" else sorted(actual["stats_path"])
    return "match" if got == want else f"mismatch: {len(got)} rows != {len(want)}"


def _check_nodes(kind: str, actual: Any, expected: Any) -> str:
    return "match" if list(actual) == list(expected) else f"mismatch: {actual} != {expected}"


# How answers are compared, by FetchCase.check ("none": not compared).
CHECKS = {
    "pstats": _check_pstats,
    "phases": _check_phases,
    "job_phase": _check_job_phase,
    "list": _check_list,
    "nodes": _check_nodes,
}


def check_answer(check: str, kind: str, actual: Any, expected: Any) -> str:
    """'match', 'match (...)', 'mismatch: ...' or 'n/a: ...'; ``kind`` is native | compat, ``expected``
    the baseline's answer."""
    compare = CHECKS.get(check)
    if compare is None:
        return "n/a"
    try:
        return compare(kind, actual, expected)
    except Exception as e:
        return f"n/a: check failed ({type(e).__name__}: {e})"
