"""Record what smdebug 1.0.34's own analysis classes answer on the committed files (run with .venv-smdebug).

    python tests/smdebug/smdebug_answers.py tests/data/smdebug-1.0.34 tests/data/smdebug-1.0.34/smdebug-answers.json

For each profiler folder: ``python_profile_stats`` (every attribute, enums by name, ``stats_path``
relative to the folder; entries of one start time sorted by file name, since smdebug keeps the order
os.listdir gave), ``list_profile_stats()``'s shape and columns, and the keys
``fetch_profile_stats_by_job_phase`` / ``fetch_profile_stats_by_training_phase`` return (cProfile).
tests/test_compat_parity.py compares proflake's answers with these.
"""

import contextlib
import io
import json
import math
import os
import sys

from smdebug.profiler.analysis.python_profile_analysis import PyinstrumentAnalysis, cProfileAnalysis


def plain(value):
    if hasattr(value, "name") and hasattr(value, "value"):  # an enum member
        return value.name
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


def names(stats):
    return None if stats is None else sorted(s.function_name for s in stats.function_stats_list)


def answers(folder, cls):
    with contextlib.redirect_stdout(io.StringIO()):
        analysis = cls(local_profile_dir=folder)
        entries = [
            {k: (os.path.relpath(v, folder) if k == "stats_path" else plain(v)) for k, v in vars(e).items()}
            for e in analysis.python_profile_stats
        ]
        entries.sort(key=lambda e: (e["start_time_since_epoch_in_micros"], e["node_id"], os.path.basename(e["stats_path"])))
        df = analysis.list_profile_stats()
        out = {"python_profile_stats": entries, "list_profile_stats": {"shape": list(df.shape), "columns": list(df.columns)}}
        if cls is cProfileAnalysis:
            out["by_job_phase"] = list(analysis.fetch_profile_stats_by_job_phase())
            out["by_training_phase"] = [[a.name, b.name] for a, b in analysis.fetch_profile_stats_by_training_phase()]
            out["by_step_mode_1"] = names(analysis.fetch_profile_stats_by_step(1, mode=1))
            out["between_modes_1_2"] = names(analysis.fetch_profile_stats_between_modes(1, 2))
    return out


if __name__ == "__main__":
    root = sys.argv[1]
    result = {}
    for case, framework in (("analysis", "tensorflow"), ("scenarios", "pytorch")):
        for name, cls in (("cprofile", cProfileAnalysis), ("pyinstrument", PyinstrumentAnalysis)):
            folder = os.path.join(root, case, "framework", framework, name)
            result[f"{case}/{name}"] = answers(folder, cls)
    with open(sys.argv[2], "w") as f:  # not stdout: smdebug logs there
        json.dump(result, f, indent=1)  # keys in smdebug's order
        f.write("\n")
