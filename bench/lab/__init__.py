"""The lab: the A/B driver, the full benchmark with its targets and noise probes, and the side benchmarks.

    python -m bench.lab.run --files 2000    # see bench/README.md
"""
