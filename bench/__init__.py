"""proflake's benchmark: how much faster than smdebug, on your corpus (``python -m bench --corpus PATH``).

The lab, what the project measures itself with, is ``bench.lab`` (``python -m bench.lab.run``); see bench/README.md.
"""
