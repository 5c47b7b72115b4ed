"""The phase roll-ups (etl/proflake/store/rollups.py): derived tables that answer by_training_phase and by_job_phase.

They must answer exactly like the fact tables, never be used when stale, and be rebuilt by the next
ingest after anything (a kill included) leaves them behind the live intervals.
"""

from __future__ import annotations

import json
import marshal
import signal
import sys
from pathlib import Path

import duckdb
import pytest
from helpers.forked import INLINE, Zygote
from helpers.profiles import JobBuilder, assert_same_pstats, pstats_of
from helpers.recovery import recover
from proflake import Profiles, ingest
from proflake import sql as queries
from proflake.store import rollups
from proflake.store.rollups import CHECKED_FILE, PHASE_TABLES, fresh_jobs, live_fingerprints
from proflake.store.store import Store


def build_jobs(root: Path, jobs: tuple[str, ...] = ("job-1", "job-2"), nodes: int = 2, steps: int = 4) -> dict[tuple, list[Path]]:
    """Two jobs with every kind of interval; (job, node, start_mode, end_mode, job_phase) -> files."""
    files: dict[tuple, list[Path]] = {}

    def add(job_id: str, builder: JobBuilder, node: str, name: str, key: tuple, workload: str, repeat: int = 1) -> None:
        files.setdefault((job_id, node, *key), []).append(builder.cprofile(node, name, workload, repeat))

    for j, job_id in enumerate(jobs):
        job = JobBuilder(root / job_id)
        for n in range(nodes):
            node = f"algo-{n + 1}"
            t = 1000 * (j + 1) + n
            add(job_id, job, node, f"prestepzero-*-start-{t}_train-0-stepstart-{t + 900}", ("prestepzero", "train", "initialization"), "c")
            for step in range(steps):
                start = 10_000 + step * 1000 + t
                name = f"train-{step}-stepstart-{start}_train-{step}-stepend-{start + 800}"
                add(job_id, job, node, name, ("train", "train", "training_loop"), "abc"[step % 3], 1 + step % 2)
            start = 50_000 + t
            add(job_id, job, node, f"train-{steps - 1}-stepend-{start}_eval-0-stepstart-{start + 100}", ("train", "eval", "training_loop"), "b")
            add(job_id, job, node, f"eval-0-stepstart-{start + 200}_eval-0-stepend-{start + 900}", ("eval", "eval", "training_loop"), "a")
            add(job_id, job, node, f"prestepzero-*-end-{start + 2000}_posthookclose-*-end-{start + 2500}", ("prestepzero", "posthookclose", "finalization"), "c")
    return files


def drop_rollups(store: Path, jobs: list[str]) -> None:
    st = Store(str(store))
    for name in PHASE_TABLES:
        st.replace_jobs(name, None, jobs, "test")


@pytest.mark.parametrize("method", ["by_training_phase", "by_job_phase"])
def test_phase_rollups_answer_like_the_fact_tables(tmp_path, method):
    files = build_jobs(tmp_path / "src")
    store = tmp_path / "store"
    ingest(str(tmp_path / "src"), str(store))
    fast = Profiles(str(store))
    assert fast._phase_rollup_state() == ({"job-1", "job-2"}, {"job-1", "job-2"})
    questions = [
        dict(job="job-1"),
        dict(all_jobs=True, node="all"),
        dict(job=["job-1", "job-2"], node="any"),
        dict(job="job-2", node="algo-2", sort="tottime"),
        dict(all_jobs=True, per_node=True, top=3, sort="ncalls"),
    ]
    from_rollups = [fast.fetch(method, **q) for q in questions]
    drop_rollups(store, ["job-1", "job-2"])
    slow = Profiles(str(store))
    assert slow._phase_rollup_state()[0] == set()
    from_facts = [slow.fetch(method, **q) for q in questions]

    for question, a, b in zip(questions, from_rollups, from_facts):
        assert a.table.column_names == b.table.column_names, question
        assert a.table.num_rows == b.table.num_rows > 0, question
        rows_a, rows_b = a.table.to_pylist(), b.table.to_pylist()
        for ra, rb in zip(rows_a, rows_b):
            for column, value in rb.items():
                if isinstance(value, float):
                    assert ra[column] == pytest.approx(value, rel=1e-9, abs=1e-12), (question, column)
                else:
                    assert ra[column] == value, (question, column)
        if question.get("top") is None:
            for group in b.groups():
                assert_same_pstats(a.to_pstats(group).stats, b.to_pstats(group).stats)
    # And both equal smdebug's way (pstats.Stats.add over the files), group by group.
    group_of = {"by_training_phase": lambda key: key[2:4], "by_job_phase": lambda key: key[4:5]}[method]
    one = from_rollups[0]  # job-1, every node
    for group in one.groups():
        wanted = [p for key, paths in files.items() if key[0] == "job-1" and group_of(key) == group for p in paths]
        assert_same_pstats(one.to_pstats(group).stats, pstats_of(wanted))


def test_equal_totals_summed_in_another_order_tie_and_the_name_decides(tmp_path):
    """0.1 + 0.2 is 0.30000000000000004, not 0.3: a function whose times add up to another's in another
    order must not outrank it by that last bit (roll-ups add per job first, DuckDB adds in parallel: a
    roll-up answer and the facts' answer swapped two such functions in CI). Ranked times tie; the name
    decides, in the fetch methods (roll-ups and facts, top N included) and in the top_functions view."""
    job, root = JobBuilder(tmp_path / "src" / "job-1"), ("model.py", 1, "step")
    for index, spent in enumerate([{"alpha": 0.3, "zeta": 0.1}, {"alpha": 0.0, "zeta": 0.2}]):
        folder = job.stats_dir("cprofile", "algo-1", f"train-{index}-stepstart-{1000 * index}_train-{index}-stepend-{1000 * index + 900}")
        folder.mkdir(parents=True)
        stats = {(root[0], 2 + i, name): (1, 1, s, s, {root: (1, 1, s, s)}) for i, (name, s) in enumerate(spent.items())}
        stats[root] = (1, 1, 0.0, 0.3, {})
        (folder / "python_stats").write_bytes(marshal.dumps(stats))
    store = tmp_path / "store"
    ingest(str(tmp_path / "src"), str(store))
    for answers in ("rollups", "facts"):
        profiles = Profiles(str(store))
        assert bool(profiles._phase_rollup_state()[0]) == (answers == "rollups")
        for sort, top in (("cumtime", 2), ("tottime", 1)):  # the root is first by cumtime, last by tottime
            answer = profiles.by_job_phase(job="job-1", sort=sort)
            assert [n for n in answer.table["function_name"].to_pylist() if n != "step"] == ["alpha", "zeta"], (answers, sort)
            first = profiles.by_job_phase(job="job-1", sort=sort, top=top)
            assert [n for n in first.table["function_name"].to_pylist() if n != "step"] == ["alpha"], (answers, sort)
        ranks = profiles.sql("SELECT function_name FROM top_functions WHERE rank <= 2 ORDER BY rank")
        assert ranks["function_name"].to_pylist() == ["alpha", "zeta"], answers
        drop_rollups(store, ["job-1"])


def answers_like_the_facts(store: Path, jobs: list[str]) -> None:
    """by_training_phase per node from the roll-ups equals the same question answered from the facts."""
    fast = Profiles(str(store))
    assert fast._phase_rollup_state()[0] == set(jobs)
    from_rollups = fast.by_training_phase(all_jobs=True, node="all", per_node=True)
    drop_rollups(store, jobs)
    from_facts = Profiles(str(store)).by_training_phase(all_jobs=True, node="all", per_node=True)
    assert from_rollups.groups() == from_facts.groups()
    for group in from_facts.groups():
        assert_same_pstats(from_rollups.to_pstats(group).stats, from_facts.to_pstats(group).stats)


def test_a_run_that_only_adds_intervals_adds_its_sums_to_the_rollups(tmp_path):
    """The workers' partial sums of a batch, added to the rows built before it, give what a rebuild from
    every fact gives; a run that replaces a changed file rebuilds instead."""
    source, held = tmp_path / "src", tmp_path / "held-back"
    files = build_jobs(source, jobs=("job-1", "job-2"), nodes=2, steps=3)
    later = [p for key, paths in files.items() if key[0] == "job-2" or key[2:4] == ("eval", "eval") for p in paths]
    for path in later:  # job-2, and job-1's eval steps, arrive with the second run
        (held / path.parent.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        path.parent.rename(held / path.parent.relative_to(source))
    store = tmp_path / "store"
    said: list[str] = []
    ingest(str(source), str(store), log=said.append)
    assert "added this run's sums to the phase roll-ups of 1 job(s)" in said  # an empty base: a new job
    for path in later:
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        (held / path.parent.relative_to(source)).rename(path.parent)
    said.clear()
    ingest(str(source), str(store), log=said.append)
    assert "added this run's sums to the phase roll-ups of 2 job(s)" in said and not any("rebuilt" in m for m in said)
    answers_like_the_facts(store, ["job-1", "job-2"])
    # A changed file: its old sums cannot be taken out of the roll-ups, so they are rebuilt.
    ingest(str(source), str(store))  # the roll-ups dropped above come back (nothing new: a rebuild)
    from helpers.profiles import write_cprofile

    write_cprofile(files[("job-1", "algo-1", "train", "train", "training_loop")][0].parent, "c", repeat=2)
    said.clear()
    ingest(str(source), str(store), log=said.append)
    assert "rebuilt the phase roll-ups of 1 job(s)" in said
    answers_like_the_facts(store, ["job-1", "job-2"])


def test_stale_rollups_are_ignored_and_the_next_ingest_rebuilds_them(tmp_path, monkeypatch):
    source = tmp_path / "src"
    files = build_jobs(source, jobs=("job-1",))
    store = tmp_path / "store"
    ingest(str(source), str(store))
    # New files arrive; the run that ingests them dies between its intervals commit and the rebuild.
    job = JobBuilder(source / "job-1")
    extra = job.cprofile("algo-3", "train-0-stepstart-70000_train-0-stepend-70500", "c")
    # (proflake.ingestion.bookkeeping the attribute is the function; the module is in sys.modules)
    monkeypatch.setattr(sys.modules["proflake.ingestion.bookkeeping"], "refresh_phase_rollups", lambda *args, **kwargs: [])
    ingest(str(source), str(store))
    monkeypatch.undo()

    stale = Profiles(str(store))
    assert stale._phase_rollup_state() == (set(), {"job-1"})
    every_train_step = [p for key, paths in files.items() if key[2:4] == ("train", "train") for p in paths] + [extra]
    answer = stale.by_training_phase(node="all")
    assert_same_pstats(answer.to_pstats(("train", "train")).stats, pstats_of(every_train_step))

    report = ingest(str(source), str(store))  # finds nothing new, still repairs the roll-ups
    assert report.new_intervals == 0
    fresh = Profiles(str(store))
    assert fresh._phase_rollup_state() == ({"job-1"}, {"job-1"})
    answer = fresh.by_training_phase(node="all")
    assert_same_pstats(answer.to_pstats(("train", "train")).stats, pstats_of(every_train_step))


def test_an_unchanged_rerun_skips_the_freshness_check_and_any_commit_brings_it_back(tmp_path, monkeypatch):
    source = tmp_path / "src"
    build_jobs(source, jobs=("job-1",))
    store = tmp_path / "store"
    ingest(str(source), str(store))
    checks: list[str] = []
    real = rollups.live_fingerprints
    monkeypatch.setattr(rollups, "live_fingerprints", lambda con: checks.append("checked") or real(con))

    assert ingest(str(source), str(store)).new_intervals == 0
    assert checks == []  # the tables are as the last check left them
    (store / CHECKED_FILE).unlink()
    ingest(str(source), str(store))
    assert checks == ["checked"] and (store / CHECKED_FILE).is_file()  # checked, and remembered again
    ingest(str(source), str(store))
    assert checks == ["checked"]
    # The same version of another table (one removed and created again) is not the table checked.
    note = json.loads((store / CHECKED_FILE).read_text())
    note["intervals"][0] = "an-earlier-table"
    (store / CHECKED_FILE).write_text(json.dumps(note))
    ingest(str(source), str(store))
    assert checks == ["checked"] * 2
    checks.clear()

    # A commit to a phase table (here: its rows emptied behind the ingest's back) changes its version.
    st = Store(str(store))
    st.replace_jobs("phase_function_stats", None, ["job-1"], "elsewhere")
    said: list[str] = []
    ingest(str(source), str(store), log=said.append)
    assert checks == ["checked"] and "rebuilt the phase roll-ups of 1 job(s)" in said
    answers_like_the_facts(store, ["job-1"])


def test_a_removed_job_loses_its_rollups(tmp_path):
    source = tmp_path / "src"
    build_jobs(source)
    store = tmp_path / "store"
    ingest(str(source), str(store))
    st = Store(str(store))
    st.delete_job("job-2")
    ingest(str(source / "job-1"), str(store), job_id="job-1")
    con = st.connect()
    assert set(live_fingerprints(con)) == {"job-1"}
    assert fresh_jobs(con) == {"job-1"}
    for name in PHASE_TABLES:
        assert {row[0] for row in con.sql(f"SELECT DISTINCT job_id FROM {name}").fetchall()} == {"job-1"}


def test_killed_at_every_commit_the_rollups_end_fresh_and_right(tmp_path):
    """Kill a real ingest after each of its Delta commits; the re-run must leave fresh roll-ups that
    answer exactly like a clean run's."""
    source = tmp_path / "src"
    build_jobs(source, jobs=("job-1",), nodes=2, steps=3)
    clean = tmp_path / "clean"
    ingest(str(source), str(clean))
    expected = Profiles(str(clean)).by_training_phase(node="all", per_node=True)

    def run(store: Path, kill_after: int | None) -> int:
        env = {"PROFLAKE_FLUSH_ROWS": "500"}
        if kill_after is not None:
            env["PROFLAKE_KILL_AFTER_COMMITS"] = str(kill_after)
        # A child forked from one interpreter that has imported proflake (helpers/forked.py): real
        # processes, killed at each commit, without a new interpreter's start-up for each; parsing on its
        # own threads (helpers.forked.INLINE), since what is killed is the committing process.
        return zygote.run(["ingest", str(source), "--store", str(store), *INLINE], env).wait()

    killed = 0
    with Zygote() as zygote:
        for k in range(1, 60):
            store = tmp_path / f"after-{k}"
            code = run(store, k)
            if code == 0:
                break
            assert code == -signal.SIGKILL
            killed += 1
            recover(source, store, {"PROFLAKE_FLUSH_ROWS": "500"})  # the next run, in this process
            profiles = Profiles(str(store))
            assert profiles._phase_rollup_state() == ({"job-1"}, {"job-1"}), k
            answer = profiles.by_training_phase(node="all", per_node=True)
            assert answer.table.num_rows == expected.table.num_rows, k
            for group in expected.groups():
                assert_same_pstats(answer.to_pstats(group).stats, expected.to_pstats(group).stats)
    assert killed >= 4  # facts, intervals, both roll-up tables at least


def fingerprints_of(rows: list[tuple[str, str, str, str]], batch_id: str | None = None) -> dict[str, str]:
    """phase_fingerprints (or phase_fingerprints_before ``batch_id``) over intervals (job, id, profiler, batch)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE intervals (job_id VARCHAR, interval_id VARCHAR, profiler VARCHAR, batch_id VARCHAR)")
    if rows:
        con.executemany("INSERT INTO intervals VALUES (?, ?, ?, ?)", rows)
    if batch_id is None:
        table = queries.run_named(con, "phase_fingerprints", {})
    else:
        table = queries.run_named(con, "phase_fingerprints_before", {"batch_id": batch_id})
    return dict(zip(table["job_id"].to_pylist(), table["built_from"].to_pylist()))


def test_the_fingerprint_is_the_set_of_live_cprofile_intervals():
    ids = [f"{i:020x}" for i in range(0, 3000, 7)]
    rows = [("job-1", i, "cprofile", "b1") for i in ids] + [("job-2", i, "cprofile", "b1") for i in ids[:50]]
    base = fingerprints_of(rows)
    doubled = fingerprints_of(rows + 2 * [("job-1", "a" * 20, "cprofile", "b1")])
    assert set(base) == {"job-1", "job-2"} and len({base["job-1"], base["job-2"], doubled["job-1"]}) == 3
    # The same set in any order, with pyinstrument intervals beside it: the same fingerprint.
    assert fingerprints_of(list(reversed(rows))) == base
    assert fingerprints_of(rows + [("job-1", "ffff", "pyinstrument", "b1")]) == base
    # Any change to one job's set changes its fingerprint, and only its.
    changed = {
        "one more": rows + [("job-1", "0" * 19 + "1", "cprofile", "b2")],
        "one fewer": rows[1:],
        "one replaced": [("job-1", "0" * 19 + "1", "cprofile", "b2")] + rows[1:],
        # Same count and XOR as ``doubled`` (another id twice, where XOR cancels): the sums tell them apart.
        "another id doubled": rows + 2 * [("job-1", "b" * 20, "cprofile", "b1")],
    }
    for what, other in changed.items():
        now = fingerprints_of(other)
        assert now["job-1"] != (doubled if what == "another id doubled" else base)["job-1"], what
        assert now["job-2"] == base["job-2"], what
    # Before a batch: the fingerprint of the set without that batch's intervals.
    later = rows + [("job-1", "0" * 19 + "1", "cprofile", "b2"), ("job-3", "0" * 19 + "2", "cprofile", "b2")]
    assert fingerprints_of(later, batch_id="b2") == base


def test_rollups_stamped_with_the_old_fingerprint_are_rebuilt_by_the_next_ingest(tmp_path):
    """A store written by a proflake that fingerprinted with md5 of the sorted interval ids: its roll-ups
    read as stale (fetches answer from the facts), and the next ingest rebuilds them, whether or not it
    finds new files."""
    source = tmp_path / "src"
    files = build_jobs(source, jobs=("job-1", "job-2"), nodes=2, steps=3)
    store = tmp_path / "store"
    ingest(str(source), str(store))

    def stamp_the_old_way() -> None:
        st = Store(str(store))
        con = st.connect()
        for name in PHASE_TABLES:
            rows = con.sql(
                f"SELECT * REPLACE (old.built_from AS built_from) FROM {name} JOIN ("
                "  SELECT job_id, md5(string_agg(interval_id, ',' ORDER BY interval_id)) AS built_from"
                "  FROM intervals WHERE profiler = 'cprofile' GROUP BY job_id) AS old USING (job_id)"
            ).to_arrow_table()
            st.replace_jobs(name, rows, ["job-1", "job-2"], "old-proflake")
        con.close()

    stamp_the_old_way()
    old = Profiles(str(store))
    assert old._phase_rollup_state() == (set(), {"job-1", "job-2"})
    every_train_step = [p for key, paths in files.items() if key[0] == "job-1" and key[2:4] == ("train", "train") for p in paths]
    assert_same_pstats(old.by_training_phase(job="job-1", node="all").to_pstats(("train", "train")).stats, pstats_of(every_train_step))

    said: list[str] = []
    assert ingest(str(source), str(store), log=said.append).new_intervals == 0
    assert "rebuilt the phase roll-ups of 2 job(s)" in said
    answers_like_the_facts(store, ["job-1", "job-2"])

    # Again, and this time the run brings a new file for job-2: the old rows cannot be added to.
    ingest(str(source), str(store))  # (the roll-ups dropped above come back)
    stamp_the_old_way()
    JobBuilder(source / "job-2").cprofile("algo-1", "train-9-stepstart-90000_train-9-stepend-90500", "a")
    said.clear()
    assert ingest(str(source), str(store), log=said.append).new_intervals == 1
    assert "rebuilt the phase roll-ups of 2 job(s)" in said and not any("added" in m for m in said)
    answers_like_the_facts(store, ["job-1", "job-2"])
