"""Sources and stores on a real S3 server (moto on 127.0.0.1 with authentication on)."""

from __future__ import annotations

import json
import pstats
import secrets

import pytest
from helpers.cli import run_cli
from helpers.profiles import LEGACY, JobBuilder, assert_same_pstats, pstats_of
from proflake import Profiles, ingest
from proflake.errors import ProflakeError, StoreLockedError
from proflake.sources.settings import S3Config
from proflake.store.lock import StoreLock
from proflake.store.store import Store


@pytest.fixture
def config(s3) -> S3Config:
    return S3Config(endpoint_url=s3.endpoint)


@pytest.fixture
def bucket(s3, monkeypatch) -> str:
    # Credentials reach the code under test the standard way: environment variables.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    name = f"bucket-{secrets.token_hex(4)}"
    s3.client().create_bucket(Bucket=name)
    return name


def test_s3_source_ingests_like_the_local_copy(s3, bucket, config, tmp_path):
    s3.upload_tree(LEGACY, bucket, "jobs/tf-legacy")
    report = ingest(f"s3://{bucket}/jobs", str(tmp_path / "store"), s3=config)
    assert report.new_intervals == 3 and not report.failed
    profiles = Profiles(str(tmp_path / "store"))
    assert profiles.job_ids() == ["tf-legacy"]
    uris = profiles.list_profile_stats()["source_uri"].to_pylist()
    assert all(u.startswith(f"s3://{bucket}/jobs/tf-legacy/framework/tensorflow/cProfile/") for u in uris)
    files = {int(p.parent.name.rsplit("_", 1)[1]): p for p in LEGACY.rglob("python_stats")}
    assert_same_pstats(profiles.by_step(2, 3).to_pstats().stats, pstats_of([files[2], files[3]]))
    # Versions are ETags: a re-run reads nothing.
    again = ingest(f"s3://{bucket}/jobs", str(tmp_path / "store"), s3=config)
    assert (again.new_intervals, again.unchanged, again.bytes_read) == (0, 3, 0)


def test_listing_goes_past_one_page(s3, bucket, config, tmp_path):
    s3.put_objects(bucket, (f"job/framework/pytorch/other/trace-{i:05d}.json" for i in range(1_050)), b"{}")
    s3.upload_tree(LEGACY, bucket, "job")
    report = ingest(f"s3://{bucket}/job", str(tmp_path / "store"), s3=config)
    assert report.files_seen == 1_053
    assert len(report.unrecognised) == 1_050 and report.new_intervals == 3


def test_empty_prefix_is_not_an_error(s3, bucket, config, tmp_path):
    report = ingest(f"s3://{bucket}/nothing-here", str(tmp_path / "store"), s3=config)
    assert report.files_seen == 0 and report.new_intervals == 0 and not report.partial
    assert report.summary().startswith(f"no files under s3://{bucket}/nothing-here")


def test_missing_bucket_is_one_clear_line(s3, bucket, tmp_path):
    done = run_cli(["ingest", "s3://no-such-bucket-here/x", "--store", str(tmp_path / "store")], s3.env())
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "proflake: error: bucket of s3://no-such-bucket-here/x does not exist; check the bucket name\n"


def test_wrong_credentials_are_named_without_leaking_them(s3, bucket, tmp_path):
    env = {**s3.env(), "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG1", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value-do-not-print"}
    done = run_cli(["ingest", f"s3://{bucket}/x", "--store", str(tmp_path / "store")], env)
    assert done.returncode == 1 and done.stdout == ""
    assert "S3 rejected the credentials" in done.stderr and done.stderr.count("\n") == 1
    assert "s3cr3t-value-do-not-print" not in done.stderr and "AKIAWRONG" not in done.stderr


def test_store_on_s3_answers_like_a_local_store(s3, bucket, tmp_path):
    job = JobBuilder(tmp_path / "job")
    job.cprofile("algo-1", "train-0-stepstart-2000_train-0-stepend-3000", "a")
    job.cprofile("algo-1", "train-1-stepstart-3000_train-1-stepend-4000", "b")
    job.pyinstrument("algo-1", "train-2-stepstart-4000_train-2-stepend-5000")
    store = f"s3://{bucket}/warehouse"
    # Endpoint and credentials only through the standard environment variables (run_cli: the whole environment).
    done = run_cli(["ingest", str(tmp_path / "job"), "--store", store, "--json"], s3.env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new_intervals"] == 3
    prof = tmp_path / "remote.prof"  # --prof aggregates the caller edges on a second cursor
    done = run_cli(["fetch", "by-step", "0", "1", "--store", store, "--format", "json", "--prof", str(prof)], s3.env())
    assert done.returncode == 0, done.stderr
    remote = {r["function"]: (r["total_calls"], r["tottime"]) for r in json.loads(done.stdout)}
    ingest(str(tmp_path / "job"), str(tmp_path / "local"))
    local = Profiles(str(tmp_path / "local")).by_step(0, 1)
    # JSON floats are rounded to 9 decimals (docs/cli.md), so within 5e-10 of the stored sums.
    expected = {r["function"]: (r["total_calls"], r["tottime"]) for r in local.table.to_pylist()}
    assert remote.keys() == expected.keys()
    assert all(remote[f][0] == calls and remote[f][1] == pytest.approx(tt, rel=0, abs=5e-10) for f, (calls, tt) in expected.items())
    assert_same_pstats(pstats.Stats(str(prof)).stats, local.to_pstats().stats)
    done = run_cli(["sql", "SELECT count(*) AS n FROM pyinstrument_frames", "--store", store, "--format", "csv"], s3.env())
    assert done.returncode == 0 and done.stdout.splitlines()[1] != "0"
    done = run_cli(["compact", "--store", store], s3.env())
    assert done.returncode == 0, done.stderr


def test_lock_on_s3_excludes_a_second_writer_and_expires(s3, bucket, config):
    store = Store(f"s3://{bucket}/locked", s3=config)
    with StoreLock(store, purpose="first"):
        with pytest.raises(StoreLockedError, match="in use by first"):
            StoreLock(store, purpose="second").acquire()
    # Released: the next writer gets it at once.
    with StoreLock(store, purpose="third"):
        pass
    # A lease nobody renews expires even when its holder looks alive (another host, say).
    stale = StoreLock(store, purpose="crashed elsewhere", lease=0.5)
    stale.acquire()
    stale._stop.set()  # stop renewing, as a dead host would
    import time

    time.sleep(0.8)  # the property under test: the 0.5 s lease runs out unrenewed (not synchronisation)
    # S3's clocks (Last-Modified, Date) count whole seconds: a contender that watches the lock stay
    # unchanged for its lease breaks it without them.
    with StoreLock(store, purpose="after expiry", wait=3):
        pass


def test_s3_source_errors_are_proflake_errors(s3, bucket):
    from proflake.sources.s3 import S3Source

    with pytest.raises(ProflakeError, match="does not exist"):
        list(S3Source("s3://missing-bucket-xyz/p", S3Config(endpoint_url=s3.endpoint)).list())


def test_keys_with_dot_segments_are_quarantined_unread(s3, bucket, config, tmp_path):
    s3.upload_tree(LEGACY, bucket, "job")
    body = (next(LEGACY.rglob("python_stats"))).read_bytes()
    sneaky = "job/framework/tensorflow/cProfile/../cProfile/1.0_2.0_151-algo-1_9/python_stats"
    s3.client().put_object(Bucket=bucket, Key=sneaky, Body=body)
    report = ingest(f"s3://{bucket}/job", str(tmp_path / "store"), s3=config)
    assert report.new_intervals == 3 and report.bytes_read == sum(p.stat().st_size for p in LEGACY.rglob("python_stats"))
    assert [(f.uri, f.kind) for f in report.failed] == [(f"s3://{bucket}/{sneaky}", "unsafe_path")]
    errors = Profiles(str(tmp_path / "store")).errors().to_pylist()
    assert [(e["source_uri"], e["error_kind"]) for e in errors] == [(f"s3://{bucket}/{sneaky}", "unsafe_path")]


def test_s3_options_reach_an_s3_source_when_the_store_is_local(s3, bucket, tmp_path):
    """--endpoint-url and --aws-profile once reached only an S3 store: a local store dropped them, and the
    S3 source was rebuilt from the environment (which here names no endpoint, so AWS itself was asked)."""
    s3.upload_tree(LEGACY, bucket, "jobs/tf-legacy")
    env = {k: v for k, v in s3.env().items() if not k.startswith("AWS_ENDPOINT_URL")}
    done = run_cli(
        ["ingest", f"s3://{bucket}/jobs", "--store", str(tmp_path / "store"), "--endpoint-url", s3.endpoint], env
    )
    assert done.returncode == 0, done.stderr
    assert Profiles(str(tmp_path / "store")).job_ids() == ["tf-legacy"]


def test_messages_name_the_option_that_exists(s3, bucket, tmp_path):
    """The CLI's option is --aws-profile; messages once told users to pass --profile, which does not exist."""
    env = {k: v for k, v in s3.env().items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3.endpoint, AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    done = run_cli(["ingest", f"s3://{bucket}/jobs", "--store", str(tmp_path / "store")], env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "--aws-profile" in done.stderr and "--profile " not in done.stderr.replace("--aws-profile", "")
    done = run_cli(["ingest", f"s3://{bucket}/jobs", "--store", str(tmp_path / "store"), "--aws-profile", "nope"], env)
    assert done.returncode == 1 and "--aws-profile" in done.stderr, done.stderr


def test_each_command_on_an_s3_store_makes_a_bounded_number_of_requests(s3, bucket, tmp_path):
    """S3 requests per command, counted on the server (a count is deterministic where time is not): a
    change that opens a Delta table again (a LIST and two GETs a commit), reads the lock back or lists a
    table per commit shows here. Counted at 2026-12-07's change (and before it, on this corpus): a first
    ingest 317 (363), an unchanged re-run 109 (167), a re-run with one new file 286 (407), check 288 (464),
    sql 68 (75); check 111 once it opened each table once (etl/proflake/ingestion/opened.py; 288 before);
    ingest 299, 90 and 238 once it handed its open tables from step to step (317, 109, 286 before).
    Bounds ~10% above; a deltalake release that reads its log otherwise may move them."""
    from helpers.s3server import counted

    s3.upload_tree(LEGACY, bucket, "jobs")
    store = f"s3://{bucket}/store"
    bounds = []

    def run(bound: int, *args: str) -> None:
        with counted() as seen:
            done = run_cli([*args, "--store", store], s3.env())
        assert done.returncode == 0, done.stderr
        bounds.append((args[0], len(seen), bound))

    run(330, "ingest", f"s3://{bucket}/jobs")
    run(100, "ingest", f"s3://{bucket}/jobs")
    step_3 = next(LEGACY.rglob("*_3/python_stats")).read_bytes()
    s3.client().put_object(Bucket=bucket, Key="jobs/framework/tensorflow/cProfile/1596585376020000.0_1596585376025000.0_151-algo-1_4/"
                           "python_stats", Body=step_3)
    run(262, "ingest", f"s3://{bucket}/jobs")
    run(122, "check")
    run(75, "sql", "SELECT count(*) FROM intervals")
    assert all(count <= bound for _, count, bound in bounds), bounds


def test_sessions_share_what_botocore_parsed_and_each_has_its_own_credentials(s3, monkeypatch):
    """Each S3Config has a boto3 session of its own (its profile, its credentials); the endpoint and service
    models botocore parses are parsed once per process, not once per session (134 -> 15 ms of CPU per
    session and client), and boto3's data folder is not appended again for every session."""
    import botocore.loaders

    S3Config(endpoint_url=s3.endpoint).client()  # this process's first: whatever it parses is parsed now
    parsed: list[str] = []
    real_load = botocore.loaders.JSONFileLoader.load_file

    def counted(self, file_path: str, *args, **kwargs):
        parsed.append(file_path)
        return real_load(self, file_path, *args, **kwargs)

    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", counted)
    first, second = S3Config(endpoint_url=s3.endpoint), S3Config(endpoint_url=s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFIRST00000000000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first")
    first.client()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASECOND0000000000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "second")
    second.client()
    assert parsed == []
    assert first.session is not second.session
    assert first.session.get_credentials().access_key == "AKIAFIRST00000000000"
    assert second.session.get_credentials().access_key == "AKIASECOND0000000000"
    paths = first.session._session.get_component("data_loader").search_paths
    assert len(paths) == len(set(paths))
