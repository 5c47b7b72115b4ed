"""A local folder as a source of stats files."""

from __future__ import annotations

import builtins
import errno
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
    A folder below the root that cannot be listed (permissions, a path over the system's limit, an I/O
    error, a stale NFS handle) is listed as one object with a ``problem`` (kind ``listing``) and the walk
    goes on; only the root itself failing raises.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        path = Path(root).expanduser()
        try:
            found = os.stat(path)
        except FileNotFoundError:
            raise SourceError(f"source folder {str(root)!r} does not exist; check the path") from None
        except OSError as error:  # a path too long, a stale NFS handle: stat raises, not just "no"
            raise SourceError(unlistable_root(str(root), error)) from error
        if not stat.S_ISDIR(found.st_mode):
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
        problems: list[tuple[os.DirEntry, OSError]] = []  # entries whose type or stat failed
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        is_folder = entry.is_dir(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # vanished between listing and its type
                    except OSError as error:
                        problems.append((entry, error))
                        continue
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
            if folder == str(self.root):
                raise SourceError(unlistable_root(folder, error)) from error
            # One folder that cannot be listed costs its own files only: reported and quarantined
            # (the files it did list before failing are left for the next run, with the rest of it).
            yield SourceObject(uri=folder, parts=parts, size=0, version="", problem=unlistable(error), problem_kind="listing")
            return []
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
            except FileNotFoundError:
                continue  # vanished between listing and stat
            except OSError as error:
                problems.append((entry, error))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            yield SourceObject(uri=entry.path, parts=(*parts, entry.name), size=st.st_size, version=str(st.st_mtime_ns))
        for entry, failure in sorted(problems, key=lambda p: p[0].name):
            yield SourceObject(uri=entry.path, parts=(*parts, entry.name), size=0, version="", problem=unlistable(failure, "it was skipped"), problem_kind="listing")
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


def unlistable(error: OSError, skipped: str = "its files were skipped") -> str:
    """Why a folder (or an entry of one) below the root cannot be listed, ending the sentence that
    starts with its path: the system's reason and what to do."""
    hint = _HINTS.get(error.errno or 0, "it is tried again on the next run")
    return f"cannot be listed ({_reason(error)}), so {skipped}; {hint}"


def unlistable_root(folder: str, error: OSError) -> str:
    """The one sentence for a source root that cannot be listed at all."""
    hint = _HINTS.get(error.errno or 0, "check the folder and its file system")
    return f"cannot list the source folder {folder!r} ({_reason(error)}); {hint}"


def _reason(error: OSError) -> str:
    code = errno.errorcode.get(error.errno or 0)
    return f"{error.strerror or error}, {code}" if code else str(error.strerror or error)


_HINTS = {
    errno.EACCES: "check its permissions",
    errno.EPERM: "check its permissions",
    errno.ENAMETOOLONG: "its path is longer than the system allows: move or rename it to shorten the path",
    errno.ESTALE: "a stale NFS handle: remount the file system",
}
