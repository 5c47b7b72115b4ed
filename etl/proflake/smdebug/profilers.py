"""The two profilers' analysis classes: what a selection of intervals becomes for each."""

from __future__ import annotations

import json
import warnings

from proflake.errors import ProflakeError
from proflake.readers.pyinstrument import dumps_tree
from proflake.smdebug.analysis import PythonProfileAnalysis
from proflake.smdebug.stats import PyinstrumentStepStats, cProfileStats
from proflake.smdebug.store_view import Answer
from proflake.sources import Source, SourceObject, open_source
from proflake.sources.settings import is_s3


class cProfileAnalysis(PythonProfileAnalysis):
    """smdebug's cProfileAnalysis: fetch methods return a cProfileStats (None when nothing matched)."""

    name = "cprofile"

    def _aggregate(self, answer: Answer, group: tuple = ()) -> cProfileStats:
        if group:  # one of a roll-up's results: built when used
            return cProfileStats.deferred(lambda: answer.pstats(group))
        return cProfileStats(answer.pstats(group))


class PyinstrumentAnalysis(PythonProfileAnalysis):
    """smdebug's PyinstrumentAnalysis: fetch methods return one PyinstrumentStepStats per interval, whose
    ``json_stats`` is the interval's JSON file as pyinstrument wrote it."""

    name = "pyinstrument"

    def __init__(self, *args, **kwargs) -> None:
        self._s3_readers: dict[str, Source] = {}  # bucket -> source, to read json files from S3
        super().__init__(*args, **kwargs)

    def _aggregate(self, answer: Answer, group: tuple = ()) -> list[PyinstrumentStepStats]:
        intervals = answer.result.group_intervals(group).to_pylist()  # in smdebug's order: start time, then node
        return [PyinstrumentStepStats(_html_path(i), self._document(i)) for i in intervals]

    def _document(self, interval: dict) -> dict:
        """The JSON file's own document, read again as smdebug reads it at every fetch; rebuilt from the
        store (with a warning) only when the file can no longer be read."""
        uri = interval["source_uri"]
        try:
            return json.loads(self._read(uri))
        except (ProflakeError, OSError, ValueError) as e:
            warnings.warn(
                f"json_stats of {uri} is rebuilt from the store, not read from the file ({e}): its fields "
                "are proflake's and its tree may hold [self] frames the file did not have",
                stacklevel=4,
            )
            frames = self.profiles.sql(
                "SELECT * FROM pyinstrument_frames WHERE interval_id = $id ORDER BY frame_id",
                {"id": interval["interval_id"]},
            ).to_pylist()
            return _session(interval, frames)

    def _read(self, uri: str) -> bytes:
        if not is_s3(uri):
            with open(uri, "rb") as f:
                return f.read()
        bucket = uri[len("s3://") :].split("/", 1)[0]
        src = self._src if self._src is not None and self._src.uri.startswith(f"s3://{bucket}/") else None
        if src is None:
            src = self._s3_readers.get(bucket) or self._s3_readers.setdefault(bucket, open_source(f"s3://{bucket}/"))
        return src.read(SourceObject(uri, (), 0, ""))


def _html_path(interval: dict) -> str:
    # smdebug derived it from the JSON's path; the store records the HTML found beside it.
    if interval.get("html_uri"):
        return interval["html_uri"]
    uri = interval["source_uri"]
    return uri[: -len(".json")] + ".html" if uri.endswith(".json") else uri


def _session(interval: dict, frames: list[dict]) -> dict:
    return {
        "start_time": interval.get("session_start_time"),
        "duration": interval.get("session_duration_s"),
        "sample_count": interval.get("session_sample_count"),
        "target_description": interval.get("session_target"),
        "cpu_time": interval.get("session_cpu_time_s"),
        "root_frame": dumps_tree(frames),
    }
