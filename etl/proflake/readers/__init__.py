"""Readers: the bytes of one stats file (cProfile dump, pyinstrument JSON) -> Arrow columns."""
