"""A local folder as a source of stats files."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from etl.errors import SourceError
from etl.sources.base import SourceObject


class LocalSource:
    """Lists files below a folder and reads their bytes.

    Symbolic links are never followed: a link could lead outside the folder being ingested. Links to
    files are listed with a ``problem`` so a stats file behind one is reported, not silently skipped.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        path = Path(root).expanduser()
        if not path.exists():
            raise SourceError(f"source folder {str(root)!r} does not exist; check the path")
        if not path.is_dir():
            raise SourceError(f"source {str(root)!r} is a file, not a folder; pass the folder that holds framework/")
        self.root = path.resolve()
        self.uri = str(self.root)

    @property
    def root_parts(self) -> tuple[str, ...]:
        return self.root.parts

    def list(self) -> Iterator[SourceObject]:
        """Every file below the root, depth first, names sorted, files of a folder before its subfolders.

        os.scandir rather than os.walk + lstat + pathlib: the directory entries already say what is a
        folder or a link, and parts are built from the parent's, so a nightly re-run of a large
        unchanged job spends its time on one stat per file. The walk keeps its own stack of folders:
        smdebug writes one file per folder, and recursive generators passed every file up through
        each level of `yield from`.
        """
        pending: list[tuple[str, tuple[str, ...]]] = [(str(self.root), self.root.parts)]
        while pending:
            folder, parts = pending.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as error:
                raise SourceError(f"cannot list {folder!r}: {error.strerror}; check its permissions") from error
            subfolders = []
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subfolders.append((entry.path, (*parts, entry.name)))
                        continue
                    if entry.is_symlink():
                        if entry.is_dir():
                            continue  # a link to a folder: never walked into, as os.walk(followlinks=False)
                        st = entry.stat(follow_symlinks=False)
                        yield SourceObject(
                            uri=entry.path,
                            parts=(*parts, entry.name),
                            size=st.st_size,
                            version=str(st.st_mtime_ns),
                            problem=f"is a symbolic link (to {os.readlink(entry.path)!r}); links are not followed",
                            problem_kind="symlink",
                        )
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished between listing and stat
                if not stat.S_ISREG(st.st_mode):
                    continue
                yield SourceObject(uri=entry.path, parts=(*parts, entry.name), size=st.st_size, version=str(st.st_mtime_ns))
            pending.extend(reversed(subfolders))  # popped in name order

    def read(self, obj: SourceObject) -> bytes:
        try:
            # O_NOFOLLOW: a file swapped for a link after listing is still not followed.
            fd = os.open(obj.uri, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                return f.read()
        except OSError as e:
            raise SourceError(f"cannot read {obj.uri!r}: {e.strerror}") from e
