"""What ``marshal.loads`` must never read: the two marshal streams that can crash the process.

``marshal.loads`` trusts its input. Two kinds of stream crash CPython 3.11 rather than raise:

- a tuple that refers to itself from inside (a ``TYPE_REF`` to a tuple still being read): hashing it,
  as a dict key always is, recurses until the C stack overflows. Thirteen bytes are enough.
- a code object, which it builds without checking the fields against each other (a garbled one
  crashes it).

No pstats dump holds either, so :func:`check` refuses both before ``marshal.loads`` sees the bytes. It
walks the stream as marshal would, numbering reference slots exactly as marshal does (singletons such
as ``None`` take none, even when flagged), and gives up, leaving marshal.loads to refuse, on whatever
is cut short or not a value at all. The compiled decoder runs the same walk in C
(``_pstats_columns.check``); this one stands in where the module was not built, and
tests/test_hostile.py holds the two to the same answers.
"""

from __future__ import annotations

import struct

_FLAG_REF = 0x80
_MAX_DEPTH = 2000  # marshal.loads refuses deeper nesting itself
_SINGLETONS = frozenset(b"NFTS.")  # None, False, True, StopIteration, Ellipsis
_FIXED = {ord("i"): 4, ord("g"): 8, ord("y"): 16}  # int32, binary float, binary complex
_ONE_BYTE_LENGTH = frozenset(b"fzZ")  # text float, short ascii (interned or not): a length byte
_FOUR_BYTE_LENGTH = frozenset(b"saAut")  # bytes, ascii (interned or not), unicode, interned
_CONTAINERS = frozenset(b")([<>")  # small tuple, tuple, list, set, frozenset
_TUPLES = frozenset(b")(")
_DICT, _NULL, _REF, _CODE = ord("{"), ord("0"), ord("r"), ord("c")


class UnsafeMarshal(ValueError):
    """The bytes hold a self-referring tuple or a code object: marshal.loads could crash on them."""


class _GiveUp(Exception):
    """Not a stream the walk can follow: marshal.loads decides (and refuses it)."""


def check(data: bytes) -> None:
    """Raise :class:`UnsafeMarshal` when ``marshal.loads(data)`` could crash the process; else return."""
    try:
        _walk(data)
    except _GiveUp:
        pass


def _walk(data: bytes) -> None:
    """The C walk (_pstats_columns.c, ``walk``) with an explicit stack instead of recursion: per open
    container, how many values it still holds (-1: a dict, up to its NULL) and its slot if a tuple."""
    at, end = 0, len(data)
    building: list[bool] = []  # per reference slot: a tuple still being read
    open_containers: list[list[int]] = []  # [values left, tuple slot or -1]

    def take(size: int) -> int:
        nonlocal at
        if size < 0 or end - at < size:
            raise _GiveUp
        at += size
        return at - size

    def int32() -> int:
        return int(struct.unpack_from("<i", data, take(4))[0])

    while True:
        while open_containers and open_containers[-1][0] == 0:  # containers read to their end
            _, slot = open_containers.pop()
            if slot >= 0:
                building[slot] = False
        if not open_containers and at > 0:
            return
        if open_containers and open_containers[-1][0] < 0 and at < end and data[at] == _NULL:
            at += 1  # a dict's end: marshal ends a dict at a NULL where a key *or a value* would be
            open_containers.pop()
            continue
        if open_containers and open_containers[-1][0] > 0:
            open_containers[-1][0] -= 1
        if len(open_containers) > _MAX_DEPTH or at >= end:
            raise _GiveUp
        code = data[take(1)]
        flag, kind = code & _FLAG_REF, code & ~_FLAG_REF
        if kind in _SINGLETONS:
            continue  # marshal gives these no slot, flagged or not
        if kind == _NULL:  # only a dict's end, read above
            raise _GiveUp
        if kind == _REF:
            slot = int32()
            if slot < 0 or slot >= len(building):
                raise _GiveUp
            if building[slot]:
                raise UnsafeMarshal("marshal data refers to a tuple from inside itself")
            continue
        if kind == _CODE:
            raise UnsafeMarshal("marshal data holds a code object")
        if kind in _CONTAINERS:
            count = data[take(1)] if kind == ord(")") else int32()
            if count < 0:
                raise _GiveUp
            slot = -1
            if flag:
                building.append(kind in _TUPLES)
                slot = len(building) - 1 if kind in _TUPLES else -1
            open_containers.append([count, slot])
            continue
        if kind == _DICT:
            if flag:
                building.append(False)
            open_containers.append([-1, -1])
            continue
        if kind in _FIXED:
            take(_FIXED[kind])
        elif kind == ord("x"):  # text complex: two parts, each with a length byte
            for _ in range(2):
                take(data[take(1)])
        elif kind == ord("l"):
            digits = int32()
            if digits == -(2**31):
                raise _GiveUp
            take(2 * abs(digits))
        elif kind in _ONE_BYTE_LENGTH:
            take(data[take(1)])
        elif kind in _FOUR_BYTE_LENGTH:
            take(int32())
        else:
            raise _GiveUp  # an unknown type code: marshal.loads refuses it
        if flag:
            building.append(False)
