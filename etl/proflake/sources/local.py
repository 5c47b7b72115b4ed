"""A local folder as a source of stats files."""

from __future__ import annotations

import builtins
import os
import stat
from collections.abc import Generator, Iterator
from pathlib import Path

from proflake.errors import SourceError
from proflake.sources.base import SourceObject


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
        each level of `yield from`. Each level of that stack holds only its subfolders' names: a
        node's folder holds one subfolder per interval, and a path and parts for each of them were
        ~460 bytes apiece, 11 MB for a node of 25,000 intervals, which the ingest's main process kept
        as fragmented heap for the rest of its run.
        """
        stack: list[tuple[str, tuple[str, ...], list[str]]] = []
        folder, parts = str(self.root), self.root.parts
        while True:
            subfolders = yield from self._files_of(folder, parts)
            if subfolders:
                stack.append((folder, parts, subfolders))
            while stack and not stack[-1][2]:
                stack.pop()
            if not stack:
                return
            parent, parent_parts, names = stack[-1]
            name = names.pop()  # names are held in reverse order: popped in name order
            folder, parts = os.path.join(parent, name), (*parent_parts, name)

    def _files_of(self, folder: str, parts: tuple[str, ...]) -> Generator[SourceObject, None, builtins.list[str]]:
        """The files of one folder in name order; returns its subfolders' names, in reverse name order."""
        subfolders: list[str] = []
        files: list[os.DirEntry] = []
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        is_folder = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue  # vanished between listing and its type
                    if is_folder:
                        subfolders.append(entry.name)
                    else:
                        files.append(entry)
        except FileNotFoundError:
            if folder == str(self.root):
                raise SourceError(f"source folder {folder!r} vanished while it was listed") from None
            # Deleted while the source was walked: skipped, and reported (the batch goes on).
            yield SourceObject(
                uri=folder, parts=parts, size=0, version="",
                problem="vanished while the source was listed; skipped", problem_kind="vanished",
            )
            return []
        except OSError as error:
            raise SourceError(f"cannot list {folder!r}: {error.strerror}; check its permissions") from error
        files.sort(key=lambda e: e.name)
        for entry in files:
            try:
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
        subfolders.sort(reverse=True)
        return subfolders

    def read(self, obj: SourceObject) -> bytes:
        try:
            # O_NOFOLLOW: a file swapped for a link after listing is still not followed.
            fd = os.open(obj.uri, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                return f.read()
        except OSError as e:
            raise SourceError(f"cannot read {obj.uri!r}: {e.strerror}") from e
