"""Files the project writes: atomically, with the record of what produced them.

The one place for two things every layer needs (checkpoints, results, figures, videos):

- `atomic_path` / `atomic_write_bytes`: a file appears under its final name complete or
  not at all (a temporary file in the same folder, flushed and fsynced, renamed over the
  target, then the folder fsynced so that the rename itself survives a power cut);
- `versions`: the installed versions of the packages a result depends on.

This module imports nothing of the model, the solvers or the tasks.
"""

import contextlib
import os
import platform
import tempfile
from importlib import metadata as _metadata
from pathlib import Path

PACKAGES = ("et-ode", "jax", "jaxlib", "diffrax", "equinox", "optimistix", "lineax", "optax",
            "numpy", "scipy")


def versions() -> dict:
    """Installed versions of the packages a result depends on (`None` if absent), and
    the Python version, keyed by distribution name (`"et-ode"`, `"jax"`, ...)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = _metadata.version(name)
        except _metadata.PackageNotFoundError:
            found[name] = None
    found["python"] = platform.python_version()
    return found


def _fsync_folder(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform or file system without directory handles
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _shared_mode(path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)  # mkstemp makes 0600; results are shared data


@contextlib.contextmanager
def atomic_path(path, suffix: str | None = None):
    """Yield a temporary path in the folder of `path` (created if needed), with the same
    suffix (or `suffix`, for writers that choose a format by it); when the block
    succeeds the temporary file is fsynced and renamed onto `path`, and the folder is
    fsynced. On an error the temporary file is removed and `path` is left as it was.

    **Arguments:**

    - `path`: the final file name.
    - `suffix`: the temporary file's suffix (default: `path`'s).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp" + (suffix or path.suffix))
    os.close(handle)
    try:
        yield Path(temporary)
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        _shared_mode(temporary)
        os.replace(temporary, path)
        _fsync_folder(path.parent)
    finally:
        Path(temporary).unlink(missing_ok=True)


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write `data` to `path` atomically (see `atomic_path`). **Returns:** the path."""
    path = Path(path)
    with atomic_path(path) as temporary:
        temporary.write_bytes(data)
    return path


def atomic_write_text(path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically (see `atomic_path`). **Returns:** the path."""
    return atomic_write_bytes(path, text.encode("utf-8"))
