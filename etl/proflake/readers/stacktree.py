"""Weighted stacks -> a call tree in pyinstrument_frames' columns: the shape sampled profiles land in.

Every stack adds its weight to each frame on its path (inclusive ``time``) and to its leaf's
``self_time``, as a flame graph draws it; frames are merged by call path, so the tree is the one
pyinstrument would build from the same samples. Weights are summed in the file's own unit and scaled
once (``scale``: seconds per unit, 1 to keep sample counts). Trees are walked with explicit stacks,
never recursion: sampled stacks can be deeper than Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from proflake.readers.pyinstrument import FRAME_SCHEMA, path_hash

Frame = tuple[str, str, int]  # (function_name, filename, lineno): a frame as the file names it


@dataclass(frozen=True)
class StackTree:
    """A call tree's rows and what the interval row says of it."""

    frames: pa.Table  # pyinstrument_frames' own columns
    total: float  # every weight, scaled: the roots' time plus the samples with no frame (idle, say)
    samples: int  # stacks added (each a sample, or a collapsed line's samples)
    frameless: float  # the weight, scaled, of samples whose stack was empty: in total, in no frame


class _Node:
    __slots__ = ("children", "frame", "self_weight", "weight")

    def __init__(self, frame: Frame | None) -> None:
        self.frame = frame
        self.weight = 0.0
        self.self_weight = 0.0
        self.children: dict[Frame, _Node] = {}


class StackTreeBuilder:
    """Add stacks (outermost frame first) with their weights; ``build`` emits the tree depth first."""

    def __init__(self) -> None:
        self._root = _Node(None)
        self.samples = 0
        self.frameless = 0.0

    def add(self, stack: Sequence[Frame], weight: float, samples: int = 1) -> None:
        if not stack or weight == 0:
            self.frameless += weight
            self.samples += samples
            return
        node = self._root
        node.weight += weight
        for frame in stack:
            child = node.children.get(frame)
            if child is None:
                child = node.children[frame] = _Node(frame)
            child.weight += weight
            node = child
        node.self_weight += weight
        self.samples += samples

    def build(self, scale: float = 1.0) -> StackTree:
        cols: dict[str, list] = {field.name: [] for field in FRAME_SCHEMA}
        # (node, parent frame_id, depth, parent path id); None entries take a key off the current path
        stack: list[tuple] = [(child, None, 0, None) for child in reversed(list(self._root.children.values()))]
        on_path: dict[str, int] = {}
        while stack:
            node, parent_id, depth, parent_path = stack.pop()
            if node is None:
                on_path[parent_id] -= 1
                continue
            name, filename, line = node.frame
            key = f"{filename}:{line}({name})"
            frame_id = len(cols["frame_id"])
            path_id = path_hash(parent_path, key)
            seen = on_path.get(key, 0)
            cols["frame_id"].append(frame_id)
            cols["parent_id"].append(parent_id)
            cols["depth"].append(depth)
            cols["function"].append(key)
            cols["function_name"].append(name)
            cols["filename"].append(filename)
            cols["file_path_short"].append(None)
            cols["lineno"].append(line)
            cols["class_name"].append(None)
            cols["time"].append(node.weight * scale)
            cols["self_time"].append(node.self_weight * scale)
            cols["await_time"].append(0.0)
            cols["is_application_code"].append(False)
            cols["is_outermost"].append(seen == 0)
            cols["path_id"].append(path_id)
            cols["parent_path_id"].append(parent_path)
            on_path[key] = seen + 1
            stack.append((None, key, 0, None))
            for child in reversed(list(node.children.values())):
                stack.append((child, frame_id, depth + 1, path_id))
        frameless = self.frameless * scale
        return StackTree(pa.table(cols, schema=FRAME_SCHEMA), self._root.weight * scale + frameless, self.samples, frameless)
