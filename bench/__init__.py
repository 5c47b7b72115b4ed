"""proflake's benchmark: a realistic smdebug corpus, a faithful smdebug baseline, and one runner.

    python -m bench.run --files 2000        # see bench/README.md
"""
