# ruff: noqa  -- smdebug's test, kept verbatim in smdebug's own style
"""smdebug's own analysis test, ported: ``tests/profiler/core/test_python_profiler.py::test_python_analysis``.

From awslabs/sagemaker-debugger (Apache-2.0), smdebug 1.0.34. The body of ``test_python_analysis`` and of
``_validate_analysis`` is smdebug's, assertion for assertion; what changed, and why:

* the import lines: the analysis classes and enums come from ``proflake``; smdebug's constants and its
  ``FRAMEWORK`` enum are restated below (the values smdebug 1.0.34 defines), since smdebug itself is
  not installed beside proflake (it pins pyinstrument 3.4.2);
* the profiling in the local branch: instead of running smdebug's profilers in this process, the
  fixture copies the files that smdebug 1.0.34's own profiler classes wrote when
  ``tests/smdebug/make_profiles.py`` ran that same call sequence (tests/data/smdebug-1.0.34/README.md);
  the slow tier regenerates them with smdebug in a fresh venv (tests/test_smdebug_live.py);
* S3: the bucket lives on the local moto server (tests/s3server.py) and is uploaded by smdebug's own
  ``_upload_s3_folder`` through the standard AWS_* variables; the local case runs first and uploads, the
  S3 case reads what it uploaded, as in smdebug's session;
* the store the compatible classes write goes to a temporary folder through ``$PROFLAKE_STORE``.
"""

# Standard Library
import os
import shutil
import time
from enum import Enum
from multiprocessing.pool import ThreadPool
from pathlib import Path

# Third Party
import boto3
import pandas as pd
import pytest
from helpers import s3server

# First Party (smdebug: from smdebug.profiler.analysis.python_profile_analysis import ...)
from proflake import PyinstrumentAnalysis, PythonProfileModes, StepPhase, cProfileAnalysis

# smdebug.profiler.profiler_constants and smdebug.core.utils.FRAMEWORK, as smdebug 1.0.34 defines them.
CONVERT_TO_MICROSECS = 1000000
CPROFILE_NAME = "cprofile"
PYINSTRUMENT_NAME = "pyinstrument"


class FRAMEWORK(Enum):
    TENSORFLOW = "tensorflow"


# tests/test_smdebug_live.py points this at files it has just written with smdebug.
SMDEBUG_FILES = Path(os.environ.get("PROFLAKE_SMDEBUG_FILES") or Path(__file__).parent / "data" / "smdebug-1.0.34") / "analysis"


def is_s3(url):  # smdebug.core.access_layer.utils.is_s3
    if url.startswith("s3://"):
        bucket, _, prefix = url[len("s3://"):].partition("/")
        return True, bucket, prefix
    return False, None, None


@pytest.fixture(scope="module")
def s3_env():
    """A moto S3 server with authentication on, beside the other modules' in the same process: its own
    user (moto's IAM state is per process) and its own three unauthenticated bootstrap requests."""
    import secrets

    os.environ.setdefault("INITIAL_NO_AUTH_ACTION_COUNT", "3")
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.server import ThreadedMotoServer

    saved_count = ActionAuthenticatorMixin.request_count
    ActionAuthenticatorMixin.request_count = 0
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="bootstrap",
                       aws_secret_access_key="bootstrap", region_name="us-east-1")
    user = f"smdebug-port-{secrets.token_hex(4)}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=s3server._ADMIN_POLICY)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    server = s3server.S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")}
    os.environ.update({k: v for k, v in server.env().items() if k.startswith("AWS_")})
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    moto.stop()
    ActionAuthenticatorMixin.request_count = saved_count


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("out"))


@pytest.fixture(autouse=True)
def store_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFLAKE_STORE", str(tmp_path / "proflake-store"))


@pytest.fixture
def framework():
    return FRAMEWORK.TENSORFLOW


class _Replay:
    """Stands in for smdebug's profiler objects: the local branch's calls already ran in smdebug 1.0.34
    (tests/smdebug/make_profiles.py); the first start_profiling call puts the files it wrote in place."""

    def __init__(self, out_dir, name):
        self.out_dir, self.name = out_dir, name

    def start_profiling(self, *args, **kwargs):
        src = SMDEBUG_FILES / "framework" / "tensorflow" / self.name
        dst = Path(self.out_dir) / "framework" / "tensorflow" / self.name
        if not dst.exists():
            shutil.copytree(src, dst)

    def stop_profiling(self, *args, **kwargs):
        pass


@pytest.fixture()
def cprofile_python_profiler(out_dir, framework):
    return _Replay(out_dir, CPROFILE_NAME)


@pytest.fixture()
def pyinstrument_python_profiler(out_dir, framework):
    return _Replay(out_dir, PYINSTRUMENT_NAME)


@pytest.fixture()
def framework_dir(out_dir, framework):
    return "{0}/framework/{1}".format(out_dir, framework.value)


@pytest.fixture(autouse=True)
def reset_python_profiler_dir(framework_dir):
    shutil.rmtree(framework_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def bucket_prefix(s3_env):
    bucket = "smdebug-testing"
    s3_env.client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/resources/python_profile/{int(time.time())}"


# -- smdebug's test module from here, unchanged but for the profiling calls' stand-ins above ------------
def pre_step_zero_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def start_end_step_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def end_start_step_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def between_modes_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def eval_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def post_hook_close_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def time_function():
    time.sleep(
        0.0011
    )  # stall long enough to be recorded by pyinstrument, which records every 0.001 seconds


def _upload_s3_folder(bucket, key, folder):
    s3_client = boto3.client("s3")
    filenames = []
    for root, _, files in os.walk(folder):
        for file in files:
            node_id = os.path.basename(os.path.dirname(root))
            stats_dir = os.path.basename(root)
            full_key = os.path.join(key, node_id, stats_dir, file)
            filenames.append((os.path.join(root, file), bucket, full_key))

    def upload_files(args):
        s3_client.upload_file(*args)

    pool = ThreadPool(processes=10)
    pool.map(upload_files, filenames)


def _validate_analysis(profiler_name, stats, expected_functions):
    function_names = [
        pre_step_zero_function.__name__,
        start_end_step_function.__name__,
        end_start_step_function.__name__,
        between_modes_function.__name__,
        eval_function.__name__,
        post_hook_close_function.__name__,
        time_function.__name__,
    ]

    assert stats is not None, "No stats found!"

    for analysis_function in function_names:
        if profiler_name == CPROFILE_NAME:
            function_stats_list = stats.function_stats_list
            assert len(function_stats_list) > 0

            if analysis_function in expected_functions:
                assert any(
                    [analysis_function in stat.function_name for stat in function_stats_list]
                ), f"{analysis_function} should be found in function stats!"
            else:
                assert all(
                    [analysis_function not in stat.function_name for stat in function_stats_list]
                ), f"{analysis_function} should not be found in function stats!"
        else:
            assert len(stats) == 1
            actual_functions = map(
                lambda x: x["function"], stats[0].json_stats["root_frame"]["children"]
            )
            assert set(actual_functions) == set(expected_functions)


@pytest.mark.parametrize("use_pyinstrument", [False, True])
@pytest.mark.parametrize("s3", [False, True])
def test_python_analysis(
    use_pyinstrument,
    cprofile_python_profiler,
    pyinstrument_python_profiler,
    framework_dir,
    framework,
    bucket_prefix,
    s3,
):
    """
    This test is meant to test that the cProfile/pyinstrument analysis retrieves the correct step's stats based on the
    specified interval. Stats are either retrieved from s3 or generated manually through python profiling.
    """
    if use_pyinstrument:
        python_profiler = pyinstrument_python_profiler
        analysis_class = PyinstrumentAnalysis
        profiler_name = PYINSTRUMENT_NAME
        num_expected_files = 14
    else:
        python_profiler = cprofile_python_profiler
        analysis_class = cProfileAnalysis
        profiler_name = CPROFILE_NAME
        num_expected_files = 7

    python_stats_dir = os.path.join(framework_dir, profiler_name)

    if s3:
        # Fetch stats from s3
        os.makedirs(python_stats_dir)
        python_profile_analysis = analysis_class(
            local_profile_dir=python_stats_dir, s3_path=bucket_prefix
        )
    else:
        # Do analysis and use those stats.

        # pre_step_zero_function is called in between the start of the script and the start of first step of TRAIN.
        python_profiler.start_profiling(StepPhase.START)
        pre_step_zero_function()
        python_profiler.stop_profiling(
            StepPhase.STEP_START, end_mode=PythonProfileModes.TRAIN, end_step=1
        )

        # start_end_step_function is called in between the start and end of first step of TRAIN.
        python_profiler.start_profiling(
            StepPhase.STEP_START, start_mode=PythonProfileModes.TRAIN, start_step=1
        )
        start_end_step_function()
        python_profiler.stop_profiling(
            StepPhase.STEP_END, end_mode=PythonProfileModes.TRAIN, end_step=1
        )

        # end_start_step_function is called in between the end of first step and the start of second step of TRAIN.
        python_profiler.start_profiling(
            StepPhase.STEP_END, start_mode=PythonProfileModes.TRAIN, start_step=1
        )
        end_start_step_function()
        python_profiler.stop_profiling(
            StepPhase.STEP_START, end_mode=PythonProfileModes.TRAIN, end_step=2
        )

        # train_and_eval function is called in between the TRAIN and EVAL modes.
        python_profiler.start_profiling(
            StepPhase.STEP_END, start_mode=PythonProfileModes.TRAIN, start_step=1
        )
        between_modes_function()
        python_profiler.stop_profiling(
            StepPhase.STEP_START, end_mode=PythonProfileModes.EVAL, end_step=1
        )

        # eval function is called in between the start and end of first step of EVAL.
        python_profiler.start_profiling(
            StepPhase.STEP_START, start_mode=PythonProfileModes.EVAL, start_step=1
        )
        eval_function()
        python_profiler.stop_profiling(
            StepPhase.STEP_END, end_mode=PythonProfileModes.EVAL, end_step=1
        )

        # post_hook_close_function is called in between the end of the last step of EVAL and the end of the script.
        python_profiler.start_profiling(
            StepPhase.STEP_END, start_mode=PythonProfileModes.EVAL, start_step=1
        )
        post_hook_close_function()
        python_profiler.stop_profiling(StepPhase.END)

        # time function is called in between start and end of second step of TRAIN.
        # NOTE: This needs to be profiled last for tests to pass.
        python_profiler.start_profiling(
            StepPhase.STEP_START, start_mode=PythonProfileModes.TRAIN, start_step=2
        )
        time_function()
        python_profiler.stop_profiling(
            StepPhase.STEP_END, end_mode=PythonProfileModes.TRAIN, end_step=2
        )

        python_profile_analysis = analysis_class(local_profile_dir=python_stats_dir)
        _, bucket, prefix = is_s3(bucket_prefix)
        key = os.path.join(prefix, "framework", framework.value, profiler_name)
        _upload_s3_folder(bucket, key, python_stats_dir)

    python_profile_stats_df = python_profile_analysis.list_profile_stats()
    assert isinstance(python_profile_stats_df, pd.DataFrame)
    assert python_profile_stats_df.shape[0] == num_expected_files

    # Test that pre_step_zero_function call is recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_pre_step_zero_profile_stats(refresh_stats=False)
    _validate_analysis(profiler_name, stats, [pre_step_zero_function.__name__])

    # Test that start_end_step_function call is recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_profile_stats_by_step(1, refresh_stats=False)
    _validate_analysis(profiler_name, stats, [start_end_step_function.__name__])

    # Test that end_start_step_function call is recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_profile_stats_by_step(
        1,
        end_step=2,
        start_phase=StepPhase.STEP_END,
        end_phase=StepPhase.STEP_START,
        refresh_stats=False,
    )
    _validate_analysis(profiler_name, stats, [end_start_step_function.__name__])

    # Test that train_and_eval_function call is recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_profile_stats_between_modes(
        PythonProfileModes.TRAIN, PythonProfileModes.EVAL, refresh_stats=False
    )
    _validate_analysis(profiler_name, stats, [between_modes_function.__name__])

    # Test that eval_function call is recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_profile_stats_by_step(
        1, mode=PythonProfileModes.EVAL, refresh_stats=False
    )
    _validate_analysis(profiler_name, stats, [eval_function.__name__])

    # Test that pre_step_zero_function call is recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_post_hook_close_profile_stats(refresh_stats=False)
    _validate_analysis(profiler_name, stats, [post_hook_close_function.__name__])

    # Test that time_function call is recorded in received stats, but not the other functions.
    time_function_step_stats = python_profile_analysis.python_profile_stats[-1]
    step_start_time = (
        time_function_step_stats.start_time_since_epoch_in_micros / CONVERT_TO_MICROSECS
    )
    stats = python_profile_analysis.fetch_profile_stats_by_time(
        step_start_time, time.time(), refresh_stats=False
    )
    _validate_analysis(profiler_name, stats, [time_function.__name__])

    # Following analysis functions are for cProfile only
    if use_pyinstrument:
        return

    # Test that functions called in TRAIN are recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_profile_stats_by_training_phase(refresh_stats=False)[
        (PythonProfileModes.TRAIN, PythonProfileModes.TRAIN)
    ]
    _validate_analysis(
        profiler_name,
        stats,
        [
            start_end_step_function.__name__,
            end_start_step_function.__name__,
            time_function.__name__,
        ],
    )

    # Test that functions called in training loop are recorded in received stats, but not the other functions.
    stats = python_profile_analysis.fetch_profile_stats_by_job_phase(refresh_stats=False)[
        "training_loop"
    ]
    _validate_analysis(
        profiler_name,
        stats,
        [
            start_end_step_function.__name__,
            end_start_step_function.__name__,
            between_modes_function.__name__,
            eval_function.__name__,
            time_function.__name__,
        ],
    )
