# The compiled cProfile decoder (_pstats_columns.c); see its decode_doc for the layout of each part.
def decode(
    data: bytes, known: dict[tuple[str, int, str], int]
) -> tuple[list[tuple[str, int, str]], bytes, bytes, bytes, bytes, bytes, bytes] | None: ...
