"""Damaged copies of real stats files, from a fixed seed, for the tests of the compiled decoder."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence


def damaged(dumps: Sequence[bytes], count: int, seed: int) -> Iterator[bytes]:
    """``count`` copies of ``dumps``, each with bytes flipped, cut off, inserted or deleted."""
    rng = random.Random(seed)
    for _ in range(count):
        data = bytearray(rng.choice(dumps))
        how = rng.randrange(4)
        if how == 0:
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1:
            del data[rng.randrange(len(data)):]
        elif how == 2:
            at = rng.randrange(len(data))
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            at = rng.randrange(len(data))
            del data[at:at + rng.randint(1, 16)]
        yield bytes(data)
