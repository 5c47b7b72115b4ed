"""S3 failures, injected by a proxy on 127.0.0.1 in front of the local S3 server (tests/helpers/faultproxy.py):
each ends in one line naming the cause and a remedy, with the documented exit code, and nothing is doubled
or lost (docs/operations.md).

The CLI runs in this process (tests/helpers/cli.py) with the environment each test gives it: what is tested
is its error line, exit code and store, not its process. Each run makes its own S3Config from that
environment, so its own boto3 session, clients and credentials; nothing S3 is cached between runs. One test
keeps a real process: test_a_run_longer_than_its_temporary_credentials_completes (see there)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest
from helpers.cli import run_cli
from helpers.faultproxy import FaultProxy
from helpers.profiles import LEGACY
from helpers.recovery import environment
from proflake.errors import ExitCode
from proflake.sources.settings import S3Config
from proflake.store.store import Store


@pytest.fixture(scope="module")
def proxy(s3):
    proxy = FaultProxy(s3.endpoint)
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def stored(s3, proxy):
    """A bucket holding the legacy job under src/ and a store ingested from it under store/."""
    bucket = f"faults-{secrets.token_hex(4)}"
    s3.client().create_bucket(Bucket=bucket)
    s3.upload_tree(LEGACY, bucket, "src")
    done = run_cli(["ingest", f"s3://{bucket}/src", "--store", f"s3://{bucket}/store"], env(s3, proxy))
    assert done.returncode == 0, done.stderr
    return bucket


@pytest.fixture(autouse=True)
def no_faults_left(proxy):
    proxy.clear()
    yield
    proxy.clear()


def env(s3, proxy) -> dict[str, str]:
    return {**s3.env(), "AWS_ENDPOINT_URL": proxy.endpoint}


def error_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("proflake: error: "), done.stderr
    return last


def written_past_sys_streams(capfd) -> str:
    """What reached this process's file descriptors 1 and 2 and not sys.stdout/sys.stderr (a Rust or C
    library writes there directly): in a real process it would have been in the run's own streams."""
    captured = capfd.readouterr()
    return captured.out + captured.err


def count_intervals(bucket, s3, proxy) -> int:
    """The store's live intervals as every reader sees them (its ``intervals`` view), read through the proxy in
    this process with only that table opened: ~0.3 s of CPU, where ``proflake sql`` (which opens every table's
    view, twice) took ~0.9 s. What is counted is the store's content; the sql command is tested elsewhere."""
    with environment({k: v for k, v in env(s3, proxy).items() if k.startswith("AWS_")}):
        con = Store(f"s3://{bucket}/store", s3=S3Config(endpoint_url=proxy.endpoint)).connect(tables=())
        try:
            return con.sql("SELECT count(*) FROM intervals").fetchall()[0][0]
        finally:
            con.close()


QUERY = ["sql", "SELECT count(*) AS n FROM intervals", "--format", "json"]


def test_bursts_of_5xx_and_throttling_are_absorbed(s3, proxy, stored):
    proxy.fail(503, "SlowDown", times=3)
    proxy.fail(500, "InternalError", times=2)
    done = run_cli([*QUERY, "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": 3}]
    assert sum(f.hits for f in proxy.faults) == 5


def test_an_outage_is_named_with_the_retries_it_took(s3, proxy, stored):
    proxy.outage()
    done = run_cli([*QUERY, "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE
    line = error_line(done)
    assert "cannot reach the S3 endpoint" in line and "after 10 retries" in line and "AWS_ENDPOINT_URL" in line
    # The same cause met by boto3 (listing an S3 source) reads the same way.
    done = run_cli(["ingest", f"s3://{stored}/src", "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE and "cannot reach the S3 endpoint" in error_line(done)


@pytest.mark.parametrize("command", ["sql", "ingest-source"])
def test_expired_credentials_are_named_and_never_printed(s3, proxy, stored, command, capfd):
    proxy.fail(400, "ExpiredToken", message="The provided token has expired.", times=None)
    args = [*QUERY, "--store", f"s3://{stored}/store"] if command == "sql" else \
        ["ingest", f"s3://{stored}/src", "--store", f"s3://{stored}/store"]
    done = run_cli(args, env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE
    line = error_line(done)
    assert "the AWS credentials expired" in line and "ExpiredToken" in line
    assert s3.secret_key not in done.stderr and s3.access_key not in done.stderr
    leaked = written_past_sys_streams(capfd)
    assert s3.secret_key not in leaked and s3.access_key not in leaked


def test_a_wrong_region_names_the_buckets_real_region(s3, proxy, stored):
    # object_store (the store): S3 answers 400 AuthorizationHeaderMalformed ... expecting 'eu-west-1'
    proxy.fail(400, "AuthorizationHeaderMalformed", times=None,
               message="The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'eu-west-1'")
    done = run_cli([*QUERY, "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE
    assert "is in region eu-west-1" in error_line(done) and "AWS_REGION=eu-west-1" in done.stderr
    # boto3 (the source): a 301 PermanentRedirect carrying the x-amz-bucket-region header
    proxy.clear()
    proxy.fail(301, "PermanentRedirect", times=None, headers={"x-amz-bucket-region": "ap-south-1"})
    done = run_cli(["ingest", f"s3://{stored}/src", "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE and "is in region ap-south-1" in error_line(done)


def test_access_denied_names_the_key(s3, proxy, stored):
    proxy.fail(403, "AccessDenied", times=None, path="/store/intervals/")
    done = run_cli([*QUERY, "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE
    line = error_line(done)
    assert f"access denied to s3://{stored}/store/intervals/_delta_log/" in line


def test_a_server_failing_for_good_is_named_with_its_retries(s3, proxy, stored):
    proxy.fail(500, "InternalError", times=None)
    done = run_cli([*QUERY, "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE
    line = error_line(done)
    assert "S3 kept failing" in line and "after 10 retries" in line and "InternalError" in line


def test_a_commit_applied_but_answered_500_is_neither_doubled_nor_lost(s3, proxy, stored, tmp_path):
    bucket = stored
    # New stats to ingest: the legacy job again, as a second job under another prefix.
    s3.upload_tree(LEGACY, bucket, "src2/other-job")
    before = count_intervals(bucket, s3, proxy)
    # The intervals commit (the batch's visibility point) is written upstream, but its answer is a 500.
    fault = proxy.fail(500, "InternalError", when="apply", method="PUT", path=r"/store/intervals/_delta_log/\d+\.json")
    first = run_cli(["ingest", f"s3://{bucket}/src2", "--store", f"s3://{bucket}/store"], env(s3, proxy))
    assert fault.hits == 1
    # object_store retries the lost PUT; the retry finds its own commit there and the batch completes.
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    proxy.clear()
    assert count_intervals(bucket, s3, proxy) == before + 3
    # The next run finds everything ingested once: nothing doubled, nothing lost.
    again = run_cli(["ingest", f"s3://{bucket}/src2", "--store", f"s3://{bucket}/store"], env(s3, proxy))
    assert again.returncode == 0 and again.stderr.startswith("nothing new: 3 stats file(s) already ingested"), again.stderr
    assert count_intervals(bucket, s3, proxy) == before + 3


def test_a_run_longer_than_its_temporary_credentials_completes(s3, proxy, tmp_path):
    """An assumed role's tokens live 20 s here (the proxy shortens STS's answer and enforces it); listing
    the source is made to take 25 s, so the run outlives the token it started with. boto3 refreshes its
    own; the Delta writes get the current ones because the store's options are derived on every use.

    The run is a real process, the suite's one S3 CLI run that takes its S3 settings (endpoint, config
    file, profile chain) from the environment it starts with, as a scheduled nightly run does. (In this
    process it would be as valid: each run makes its own boto3 session, the role is new, and the proxy
    counts the AssumeRole answers of this run alone.)"""
    import boto3

    iam = boto3.client("iam", endpoint_url=s3.endpoint, aws_access_key_id=s3.access_key,
                       aws_secret_access_key=s3.secret_key, region_name="us-east-1")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
    name = f"short-{secrets.token_hex(3)}"
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    config = tmp_path / "aws-config"
    config.write_text(
        f"[profile base]\naws_access_key_id = {s3.access_key}\naws_secret_access_key = {s3.secret_key}\n"
        f"[profile short]\nrole_arn = {arn}\nsource_profile = base\nregion = us-east-1\n"
    )
    bucket = f"sts-{secrets.token_hex(4)}"
    s3.client().create_bucket(Bucket=bucket)
    s3.upload_tree(LEGACY, bucket, "src")
    run_env = {k: v for k, v in env(s3, proxy).items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    run_env.update(AWS_CONFIG_FILE=str(config), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    # Longer than any one Delta operation or DuckDB connection of the run lasts, even on a busy machine
    # (botocore hands out credentials with 10 minutes or more left; these have 20 s).
    proxy.token_lifetime = 20.0
    slow = proxy.fail(0, delay=25.0, times=1, path=r"list-type=2&prefix=src")
    done = subprocess.run(
        [sys.executable, "-m", "proflake.cli", "ingest", f"s3://{bucket}/src", "--store", f"s3://{bucket}/store",
         "--aws-profile", "short"], capture_output=True, text=True, env=run_env, check=False,
    )
    assert slow.hits == 1
    assert done.returncode == 0, done.stderr
    assert len(proxy.tokens) >= 2  # credentials were refreshed during the run
    assert proxy.expired_requests == 0  # and no request went out with an expired one
    proxy.clear()
    assert count_intervals(bucket, s3, proxy) == 3


def test_a_lock_applied_but_answered_500_is_still_ours(s3, proxy, stored):
    # The conditional put creating the lock is applied upstream, its answer lost; boto3 retries it and
    # meets our own lock (412): that must count as acquired, not as "in use" by ourselves for a lease.
    fault = proxy.fail(500, "InternalError", when="apply", method="PUT", path=r"_proflake/writer\.lock")
    done = run_cli(["compact", "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert fault.hits == 1
    assert done.returncode == 0, done.stderr
    lock = s3.client().list_objects_v2(Bucket=stored, Prefix="store/_proflake/writer.lock")
    assert lock.get("KeyCount", 0) == 0  # released


@pytest.mark.parametrize("command", [
    ["sql", "SELECT count(*) FROM intervals"], ["fetch", "by-step", "2"], ["jobs"], ["list"], ["batches"],
    ["compact"], ["catalog", "--list"],
])
def test_every_command_names_an_s3_outage_in_one_line(s3, proxy, stored, command):
    proxy.outage()
    done = run_cli([*command, "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE, done.stderr
    assert "cannot reach the S3 endpoint" in error_line(done)


@pytest.mark.parametrize(("fault", "expected"), [
    ({"status": 0}, "cannot reach the S3 endpoint"),
    ({"status": 403, "code": "AccessDenied"}, "access denied to s3://"),
])
def test_a_failure_while_duckdb_reads_the_data_files_is_one_sentence(s3, proxy, stored, fault, expected, capfd):
    # The Delta logs answer, the Parquet data files do not: the failure comes out of DuckDB's own S3
    # reader, in the middle of the query, not out of deltalake's.
    proxy.fail(fault.pop("status"), path=r"\.parquet", times=None, **fault)
    done = run_cli(["fetch", "by-step", "2", "--store", f"s3://{stored}/store"], env(s3, proxy))
    assert done.returncode == ExitCode.FAILURE
    line = error_line(done)
    assert expected in line and "DuckDB failed" not in line, line
    assert s3.env()["AWS_SECRET_ACCESS_KEY"] not in done.stderr
    assert s3.env()["AWS_SECRET_ACCESS_KEY"] not in written_past_sys_streams(capfd)
