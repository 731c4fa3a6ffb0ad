"""Files the project writes: atomically, with the record of what produced them.

The one place for two things every layer needs (checkpoints, results, figures, videos):

- `atomic_path` / `atomic_write_bytes`: a file appears under its final name complete or
  not at all (a temporary file in the same folder, flushed and fsynced, renamed over the
  target, then the folder fsynced so that the rename itself survives a power cut);
- `versions`: the installed versions of the packages a result depends on;
- `run_folder_lock`: one writer per run folder (an OS lock held for a run's life).

A write that fails (no space, file too large, permission denied, a read-only folder)
raises `WriteError`, an `OSError` whose message names the file and the OS's reason; the
file under its final name is then untouched and no temporary file remains.

This module imports nothing of the model, the solvers or the tasks.
"""

import contextlib
import datetime
import errno as _errno
import fcntl
import functools
import json
import os
import platform
import socket
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata as _metadata
from pathlib import Path
from typing import Any

__all__ = [
    "WriteError",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "filter_json_lines",
    "remove_temporaries",
    "run_folder_lock",
    "versions",
    "write_error",
]

TEMPORARY = ".tmp"  # in the name of atomic_path's temporary files
LOCK_NAME = ".lock"  # the lock file of a run folder (run_folder_lock)
PACKAGES = (
    "et-ode",
    "jax",
    "jaxlib",
    "diffrax",
    "equinox",
    "optimistix",
    "lineax",
    "optax",
    "numpy",
    "scipy",
)


def versions() -> dict[str, str | None]:
    """Installed versions of the packages a result depends on (`None` if absent), and
    the Python version, keyed by distribution name (`"et-ode"`, `"jax"`, ...)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str | None], ...]:
    """`versions()`, read once a process: each lookup reads the installed metadata
    (about 2 ms a package), and every study's result asks."""
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = _metadata.version(name)
        except _metadata.PackageNotFoundError:
            found[name] = None
    found["python"] = platform.python_version()
    return tuple(found.items())


# fsync of a folder: what a file system that cannot sync folders answers (then there is
# nothing to do); any other error (EIO, ENOSPC, ...) means the rename may not be durable.
_NO_FOLDER_SYNC = {_errno.EINVAL, _errno.ENOTSUP, _errno.EOPNOTSUPP, _errno.EBADF}


def _fsync_folder(folder: Path) -> None:
    """fsync `folder` so that a rename in it survives a power cut; file systems that do
    not support it (EINVAL, ENOTSUP) and folders that cannot be opened for reading
    (EACCES) are skipped, any other error (EIO, ...) raises `OSError`."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as error:  # a folder we may write but not read: it cannot be synced
        if error.errno in _NO_FOLDER_SYNC | {_errno.EACCES, _errno.EPERM}:
            return
        raise
    try:
        os.fsync(descriptor)
    except OSError as error:
        if error.errno not in _NO_FOLDER_SYNC:
            raise
    finally:
        os.close(descriptor)


def _shared_mode(path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)  # mkstemp makes 0600; results are shared data


class WriteError(OSError):
    """A file could not be written: the message names it and the OS's reason (and, for
    a training run, the last good checkpoint). The command line prints it as one line
    and exits with code 1."""

    def __str__(self) -> str:
        # `write_error` always gives a message; OSError's own text otherwise (never None)
        return self.strerror if self.strerror is not None else super().__str__()


def write_error(path: Path | str | None, error: OSError, advice: str = "") -> WriteError:
    """A `WriteError` for `path` from the `OSError` that stopped the write, with
    `advice` (what is still good, how to go on) appended (`path` may be `None` when
    `error` is a `WriteError`: its message already names the file)."""
    if isinstance(error, WriteError):
        message = error.strerror
    else:
        reason = error.strerror or str(error)
        message = f"could not write {path}: {reason}"
        if error.errno is not None:
            message = f"could not write {path}: [Errno {error.errno}] {reason}"
    if advice:
        message = f"{message}; {advice}"
    return WriteError(error.errno or _errno.EIO, message)


@contextlib.contextmanager
def atomic_path(path: Path | str, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path in the folder of `path` (created if needed), with the same
    suffix (or `suffix`, for writers that choose a format by it); when the block
    succeeds the temporary file is fsynced and renamed onto `path`, and the folder is
    fsynced. On an error the temporary file is removed and `path` is left as it was.

    **Arguments:**

    - `path`: the final file name.
    - `suffix`: the temporary file's suffix (default: `path`'s).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.stem}.", suffix=TEMPORARY + (suffix or path.suffix)
        )
        os.close(handle)
    except OSError as error:
        raise write_error(path, error) from None
    try:
        yield Path(temporary)
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        _shared_mode(temporary)
        os.replace(temporary, path)
    except OSError as error:
        raise write_error(path, error) from None
    finally:
        Path(temporary).unlink(missing_ok=True)
    try:
        _fsync_folder(path.parent)
    except OSError as error:  # the file is in place; only its rename may not survive
        reason = error.strerror or str(error)
        raise WriteError(
            error.errno or _errno.EIO,
            (
                f"wrote {path}, but could not fsync its folder ([Errno {error.errno}] "
                f"{reason}): the new file may not survive a power cut"
            ),
        ) from None


def remove_temporaries(folder: Path | str) -> list[Path]:
    """Remove the temporary files that `atomic_path` left in `folder` when its process
    was killed mid-write (call it only while holding `run_folder_lock`: then no other
    writer is using them). Returns the paths removed."""
    found = sorted(Path(folder).glob(f".*{TEMPORARY}*"))
    for path in found:
        path.unlink(missing_ok=True)
    return found


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Write `data` to `path` atomically (see `atomic_path`). **Returns:** the path."""
    path = Path(path)
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)
    return path


def atomic_write_text(path: Path | str, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically (see `atomic_path`). **Returns:** the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def filter_json_lines(path: Path | str, keep: Callable[[dict[str, Any]], object]) -> None:
    """Rewrite the JSON-lines log `path` (if it exists), atomically, with only the
    records `r` (dicts) for which `keep(r)` is true; a line cut short by an interruption
    is dropped. What a resumed run does to the lines of the work it redoes."""
    path = Path(path)
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and keep(record):
            kept.append(line)
    atomic_write_text(path, "".join(line + "\n" for line in kept))


def _holder(descriptor) -> str:
    """Who holds a run folder's lock, from its lock file (written by the holder)."""
    try:
        record = json.loads(os.pread(descriptor, 4096, 0) or b"{}")
        return f"PID {record['pid']} on host {record['host']}, since {record['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


@contextlib.contextmanager
def run_folder_lock(folder: Path | str) -> Iterator[Path]:
    """Hold an exclusive OS lock (`fcntl.flock`) on the run folder `folder` (created if
    needed) for the duration of the block, so that one process at a time writes a run:
    a second `et-ode train` (or `graph train`) on the same folder is refused at once with
    a `ValueError` naming the holder (PID, host, start time). The lock file
    `folder/.lock` records the holder; the OS releases the lock when its process ends,
    however it ends, so a lock left by a killed process never blocks a resume.
    (POSIX only; on a network file system, flock is only as good as the server's.)"""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(
            f"{folder} is a file, not a folder: give a folder for the run (created if missing)."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise write_error(folder / LOCK_NAME, error) from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"{folder} is in use by another et-ode process ({_holder(descriptor)}): "
                "wait for it to end, or choose another --out."
            ) from None
        started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = json.dumps(dict(pid=os.getpid(), host=socket.gethostname(), started=started))
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, record.encode(), 0)
        yield folder
    finally:
        os.close(descriptor)  # releases the lock
