"""One number format for people (proflake.numbers): durations, percentages, counts and p-values, and the
diff's terminal table and lines drawn with it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from proflake.numbers import count, p_value, percent, printable, seconds
from proflake.render.terminal import draw


@pytest.mark.parametrize(("value", "text"), [
    (5.19785e-05, "52.0 µs"), (0.0177995, "17.8 ms"), (1.04, "1.04 s"), (153.4, "153 s"), (0, "0"), (None, ""),
    (-0.000812194, "-812 µs"), (2.5e-10, "0.25 ns"),
])
def test_seconds_have_a_unit_and_three_significant_digits(value, text):
    assert seconds(value) == text


@pytest.mark.parametrize(("ratio", "text"), [
    (0.361, "+36.1%"), (-0.0489182, "-4.89%"), (193.52, "+19,352%"), (19.238725882, "+1,924%"), (0.0, "0%"),
    (-0.00262, "-0.262%"), (None, ""), (float("inf"), "new"),
])
def test_ratios_are_signed_percentages_with_three_significant_digits(ratio, text):
    assert percent(ratio) == text


@pytest.mark.parametrize(("value", "text"), [(33825, "33,825"), (33825.0, "33,825"), (0.25, "0.25"), (1057.4, "1,057"),
                                             (1.0, "1"), (None, "")])
def test_counts_are_grouped_and_mean_counts_keep_three_digits(value, text):
    assert count(value) == text


def test_p_values_have_two_significant_digits():
    assert [p_value(v) for v in (0.0041, 0.3141, 1.0, 8.4e-10, None)] == ["0.0041", "0.31", "1", "8.4e-10", ""]


def test_the_diff_table_on_a_terminal_reads_as_times_percentages_and_counts():
    table = pa.table({
        "function": ["a.py(backward)", "re.py(_compile_info)"],
        "status": ["noise", "minor"],
        "base_self": [0.005397632, 2.19e-06],
        "head_self": [0.003451561, 4.4318e-05],
        "self_change_ratio": [-0.360541623, 19.238725882],
        "self_ci_low": [-0.005667343, -9.8696e-05],
        "self_ci_high": [0.001775201, 0.000182952],
        "p_adjusted": [1.0, None],
        "share_of_change": [0.676387735, -0.014642252],
        "base_calls": [33825.0, 0.25],
        "head_calls": [33825.0, 0.25],
    })
    text = draw(table, 140).text
    rows = [line.split() for line in text.splitlines()[-2:]]
    assert rows[0] == ["a.py(backward)", "noise", "5.40", "ms", "3.45", "ms", "-36.1%", "-5.67", "ms", "1.78", "ms", "1",
                       "+67.6%", "33,825", "33,825"]
    assert rows[1] == ["re.py(_compile_info)", "minor", "2.19", "µs", "44.3", "µs", "+1,924%", "-98.7", "µs", "183", "µs",
                       "-1.46%", "0.25", "0.25"]
    assert "e-0" not in text  # no scientific notation anywhere


def test_control_characters_in_names_never_reach_the_terminal():
    """Escape sequences in a function name or a job id (a window title, a clear screen, colours) are shown
    as text in a terminal table."""
    evil = ["set\x1b]0;pwned\x07title", "clear\x1b[2Jscreen", "red\x1b[31mtext\x9b", "tab\there"]
    text = draw(pa.table({"function": evil, "tottime": [1.0, 2.0, 3.0, 4.0]}), 80).text
    assert not any(ch in text for ch in "\x1b\x07\x9b\t")
    assert "set\\x1b]0;pwned\\x07title" in text and "clear\\x1b[2Jscreen" in text
    assert printable("a\rb\nc") == "a\\x0db\\nc" and printable("a\nb", keep_newlines=True) == "a\nb"


def test_a_job_id_with_escape_sequences_is_escaped_in_the_one_line_error(tmp_path):
    from click.testing import CliRunner
    from helpers.profiles import JobBuilder
    from proflake import ingest
    from proflake.cli import cli

    JobBuilder(tmp_path / "jobs" / "fine").cprofile("algo-1", "train-0-stepstart-1000_train-0-stepend-2000", "a")
    ingest(str(tmp_path / "jobs"), str(tmp_path / "store"))
    result = CliRunner().invoke(cli, ["fetch", "by-step", "0", "1", "--job", "evil\x1b]0;pwned\x07", "--store", str(tmp_path / "store")])
    assert result.exit_code != 0 and "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "evil\\x1b]0;pwned\\x07" in result.stderr, result.stderr


def test_ranked_ties_the_same_times_summed_in_another_order_in_python_and_in_sql():
    """proflake.numbers.ranked and the SQL macro ranked (queries/macros.sql) both keep 12 significant
    digits, so the report, the flame graph and the fetch queries all break such ties by name. (The macro
    computes in binary floating point: a value exactly half-way at the 13th digit may round the other way
    than Python's decimal rounding, each the same way every time.)"""
    import duckdb
    from proflake import sql as queries
    from proflake.numbers import ranked

    con = duckdb.connect()
    queries.install_macros(con)
    tied = [(0.1 + 0.2, 0.3), (1.8540000000000002e-06, 1.854e-06), (sum([0.7] * 10), 7.0), (-(0.1 + 0.2), -0.3),
            (sum([1e-9] * 1000), 1e-6), (sum([0.1] * 36_000), 3600.0)]
    for a, b in tied:
        assert a != b and ranked(a) == ranked(b)
        assert con.execute("SELECT ranked($a) = ranked($b), ranked($b) = $c", {"a": a, "b": b, "c": ranked(b)}).fetchone() == (True, True)
    assert con.execute("SELECT ranked(0.0), ranked(NULL::DOUBLE), ranked(1e-300)").fetchone() == (0.0, None, 1e-300)


def test_a_recursive_cycle_is_drawn_from_its_largest_function_and_a_tie_goes_to_the_first_key():
    from proflake.render.callgraph import CallGraph

    keys = [("model.py", 1, "alpha"), ("model.py", 2, "zeta")]  # each calls the other, nothing calls them
    graph = CallGraph(keys, ["alpha", "zeta"], [0.1, 0.1], [0.3, 0.1 + 0.2], [(0, 1, 0.2, 1), (1, 0, 0.2, 1)])
    assert graph.rooted_at() == ("alpha",)
    graph = CallGraph(keys, ["alpha", "zeta"], [0.1, 0.1], [0.3, 0.31], [(0, 1, 0.2, 1), (1, 0, 0.2, 1)])
    assert graph.rooted_at() == ("zeta",)
