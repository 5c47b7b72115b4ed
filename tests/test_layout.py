"""Paths -> intervals, for both smdebug namings."""

from __future__ import annotations

import pytest
from proflake.errors import LayoutError
from proflake.ingestion.listing import job_folder
from proflake.layout import job_phase, parse_stats_path


def parts(path: str) -> tuple[str, ...]:
    return tuple(path.strip("/").split("/"))


def test_current_naming_with_dashed_node_and_fractional_times():
    ip = parse_stats_path(
        parts("/data/job1/framework/pytorch/cprofile/151-algo-1/train-5-stepstart-1596585376012363.8_train-5-stepend-1596585376017246.5/python_stats")
    )
    assert ip is not None
    assert (ip.base, ip.framework, ip.profiler, ip.node_id) == (("data", "job1"), "pytorch", "cprofile", "151-algo-1")
    assert (ip.start_mode, ip.start_step, ip.start_phase, ip.start_time_us) == ("train", 5, "stepstart", 1596585376012363.8)
    assert (ip.end_mode, ip.end_step, ip.end_phase, ip.end_time_us) == ("train", 5, "stepend", 1596585376017246.5)
    assert ip.layout == "smdebug" and ip.job_phase == "training_loop"


def test_star_steps():
    pre = parse_stats_path(parts("b/framework/tf/cprofile/n/prestepzero-*-start-1_train-0-stepstart-2/python_stats"))
    post = parse_stats_path(parts("b/framework/tf/pyinstrument/n/prestepzero-*-end-3_posthookclose-*-end-4/python_stats.json"))
    assert (pre.start_step, pre.end_step, pre.job_phase) == (-1, 0, "initialization")
    assert (post.start_step, post.end_step, post.job_phase, post.profiler) == (-1, None, "finalization", "pyinstrument")


def test_legacy_naming_maps_to_modes_and_phases():
    pre = parse_stats_path(parts("x/framework/tensorflow/cProfile/1596585363775342.0_1596585373504789.0_151-algo-1_-1/python_stats"))
    assert pre.layout == "smdebug-legacy" and pre.node_id == "151-algo-1"
    assert (pre.start_mode, pre.start_step, pre.start_phase) == ("prestepzero", -1, "start")
    assert (pre.end_mode, pre.end_step, pre.end_phase) == ("train", 0, "stepstart")
    step = parse_stats_path(parts("x/framework/tensorflow/cProfile/1.0_2.0_node_with_underscores_3/python_stats"))
    assert step.node_id == "node_with_underscores"
    assert (step.start_mode, step.start_step, step.start_phase, step.end_step, step.end_phase) == ("train", 3, "stepstart", 3, "stepend")


@pytest.mark.parametrize(
    "path",
    [
        "b/framework/tf/cprofile/n/some/other/file.txt",
        "b/framework/tf/cprofile/n/train-1-stepstart-1_train-1-stepend-2/notes.txt",
        "python_stats",
        "b/python_stats",
    ],
)
def test_other_files_are_not_stats_files(path):
    assert parse_stats_path(parts(path)) is None


@pytest.mark.parametrize(
    "path, message",
    [
        ("b/framework/tf/cprofile/n/trian-1-stepstart-1_train-1-stepend-2/python_stats", "unknown mode 'trian'"),
        ("b/framework/tf/cprofile/n/train-1-middle-1_train-1-stepend-2/python_stats", "unknown phase 'middle'"),
        ("b/framework/tf/cprofile/n/train-1-stepstart-5_train-1-stepend-2/python_stats", "ends before it starts"),
        ("b/framework/tf/cprofile/n/train-1-stepstart_train-1-stepend-2/python_stats", "does not follow"),
        ("b/framework/tf/pyinstrument/n/train-1-stepstart-1_train-1-stepend-2/python_stats", "profiler folder"),
    ],
)
def test_near_misses_are_errors_not_silence(path, message):
    with pytest.raises(LayoutError, match=message):
        parse_stats_path(parts(path))


@pytest.mark.parametrize(
    "start, end, phase",
    [("start", "stepstart", "initialization"), ("stepstart", "end", "finalization"), ("end", "end", "finalization"),
     ("start", "end", "whole_job"), ("stepend", "stepstart", "training_loop")],
)
def test_job_phase(start, end, phase):
    assert job_phase(start, end) == phase


@pytest.mark.parametrize(
    "path, framework, base",
    [
        # smdebug's own S3 download folder: {local_profile_dir}/python_stats/{node}/{interval}/{file}
        ("tmp/nb/python_stats/0-algo-1/train-1-stepstart-1_train-1-stepend-2/python_stats", "nb", ("tmp", "nb")),
        # aws s3 sync s3://.../framework/pytorch/cprofile ./cprofile
        ("home/me/cprofile/0-algo-1/prestepzero-*-start-1_posthookclose-*-end-2/python_stats.json", "me", ("home", "me")),
        ("cprofile/n/train-1-stepstart-1_train-1-stepend-2/python_stats", "unknown", ()),
    ],
)
def test_a_profiler_folder_outside_framework(path, framework, base):
    ip = parse_stats_path(parts(path))
    assert ip is not None and ip.layout == "smdebug-folder"
    assert (ip.framework, ip.base, ip.node_id) == (framework, base, parts(path)[-3])
    assert ip.profiler == ("pyinstrument" if path.endswith(".json") else "cprofile")


@pytest.mark.parametrize(
    "path",
    [
        "x/folder/n/trian-1-stepstart-1_train-1-stepend-2/python_stats",  # a bad name outside framework/: not ours
        "x/folder/n/not-an-interval/python_stats",
        "n/train-1-stepstart-1_train-1-stepend-2/python_stats",  # no node folder above the interval
    ],
)
def test_outside_framework_only_well_formed_interval_folders_count(path):
    assert parse_stats_path(parts(path)) is None


@pytest.mark.parametrize(
    "uri, folder",
    [
        ("/d/run-7/framework/pytorch/cprofile/n/train-1-stepstart-1_train-1-stepend-2/python_stats", "/d/run-7"),
        # outside framework/: the job is the folder above the profiler folder, one for all its intervals
        ("/d/nb/python_stats/n/train-1-stepstart-1_train-1-stepend-2/python_stats", "/d/nb"),
        ("s3://b/nb/cprofile/n/prestepzero-*-start-1_train-1-stepstart-2/python_stats", "s3://b/nb"),
        ("/d/plain/run.prof", "/d/plain"),  # plain files: their folder
    ],
)
def test_job_folder(uri, folder):
    # The folder a job id belongs to (issue 18's job_conflict): every interval of one job folder agrees.
    assert job_folder(uri) == folder
