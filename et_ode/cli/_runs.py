"""What every job shares: run folders, a model with its training config, the held-out
images and masks, the record of what produced a result, and progress messages.

The command line (`et-ode demo|frames|compare-solvers|study`) and the figure scripts
(`paper_figures/`) both build on these.
"""

import contextlib
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from .. import solvers
from ..analysis import cast, float64_available, held_out_images, metadata
from ..tasks import (
    EVAL_KEY,
    TEST_SCENES,
    default_scale,
    eval_masks,
    folder_images,
    held_out_split,
    image_problem,
)

RUN_ROOT = "runs"


# ------------------------------------------------------------------------ folders


def fresh_run_folder(root=RUN_ROOT, prefix: str = "run") -> Path:
    """Create and return `root/<prefix>-YYYYmmdd-HHMMSS`, or with `-1`, `-2`, ... appended
    when that exists: never an existing folder (creation is atomic, so two jobs started
    in the same second get different folders)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    Path(root).mkdir(parents=True, exist_ok=True)
    n = 0
    while True:
        path = Path(root) / (f"{prefix}-{stamp}" + (f"-{n}" if n else ""))
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1


def output_folder(out=None, *, prefix: str, root=RUN_ROOT, force: bool = False) -> Path:
    """The folder a job writes into: a fresh run folder (`fresh_run_folder(root, prefix)`)
    when `out` is None; else `out`, created if needed, refused when it exists and is not
    empty unless `force` (then files of the same names are replaced)."""
    if out is None:
        return fresh_run_folder(root, prefix)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(
            f"--out {out} is a file, not a folder; give a folder (created if missing)."
        )
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ValueError(
            f"--out {out} is not empty; choose a new folder, leave --out out for "
            "a fresh run folder, or pass --force to write into it."
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextlib.contextmanager
def job_folder(out=None, *, prefix: str, root=RUN_ROOT, force: bool = False):
    """`output_folder(out, prefix=..., root=..., force=...)` for the block; when the
    block fails and the folder is one this call created and still empty, it is removed
    (a refused option or a failed solve leaves no empty folder behind), and so are the
    missing parents it created for it, while they are empty."""
    target = Path(root) if out is None else Path(out)
    missing = [p for p in (target, *target.parents) if not p.exists()]
    folder = output_folder(out, prefix=prefix, root=root, force=force)
    created = ([folder] if out is None else []) + missing  # innermost first
    try:
        yield folder
    except BaseException:
        for path in created:
            if not path.is_dir() or any(path.iterdir()):
                break
            path.rmdir()
        raise


# ------------------------------------------------------------------- model and data


def held_out(model, config, n: int, seed: int = EVAL_KEY):
    """`(images [n, S, S, C] in [0, 1], indices, masks)`: `n` held-out crops spread evenly
    over the test split (the evaluation's crops), and the paper's exact-count masking
    keyed by `seed` (the default gives the masks of `et-ode eval`). `indices` index the
    test split (`None` for a TFDS source)."""
    if config.data.source == "photos":
        images, indices = held_out_images(
            n, image_size=config.model.image_size, crops_seed=config.training.seed
        )
    else:
        images, indices = held_out_split(config, n), None
    return images, indices, eval_masks(config, n, seed)


def folder_photos(config, folder, n: int | None = None, seed: int = EVAL_KEY):
    """`(images [M, S, S, 3] in [0, 1], names, masks)`: the first `n` (default all)
    photos of `folder` in name order, centre-cropped and resized to the model's image
    size (`et_ode.tasks.folder_images`), with the masks `held_out` would give `M`
    images (the model's masking, keyed by `seed`)."""
    if config.model.channels != 3:
        raise ValueError(
            f"--images-dir reads RGB photos; this model takes {config.model.channels} channel(s)."
        )
    images, names = folder_images(folder, config.model.image_size, limit=n)
    return images, names, eval_masks(config, len(images), seed)


def held_out_description(config, images_dir=None) -> str:
    """Where a job's images come from, in words (printed and recorded)."""
    size = config.model.image_size
    if images_dir is not None:
        return f"photos of {images_dir}, centre-cropped and resized to {size} x {size}"
    if config.data.source != "photos":
        return f"the test split of TFDS {config.data.tfds_name!r} at {size} x {size}"
    return (
        f"crops {size} x {size} of the held-out photos ({', '.join(TEST_SCENES)}), "
        f"each scaled to a shorter side of {default_scale(size)} pixels"
    )


def encoded(model, images, masks, dtype=None):
    """The core's problem for held-out images `[B, S, S, C]` in [0, 1]: `(core,
    x0 [B, N, D], conditions)`, the tokens and conditions `MaskedImageET.reconstruct`
    would start from (`et_ode.tasks.image_problem`), cast to `dtype` when given (float64
    needs `jax_enable_x64`)."""
    problem = image_problem(model, images, masks)
    core, x0, conditions = problem.core, problem.x0, problem.args
    if dtype is not None:
        check_dtype(dtype)
        core, x0, conditions = cast((core, x0, conditions), jnp.dtype(dtype))
    return core, x0, conditions


def check_dtype(dtype) -> None:
    """Refuse a dtype other than float32/float64, and float64 without `jax_enable_x64`."""
    if jnp.dtype(dtype) not in (jnp.float32, jnp.float64):
        raise ValueError(f"--dtype must be float32 or float64 (got {dtype}).")
    if jnp.dtype(dtype) == jnp.float64 and not float64_available():
        raise ValueError(
            "float64 needs jax_enable_x64: call jax.config.update('jax_enable_x64', True) first."
        )


def place(x0, args):
    """`(x0, args)` split over every device along the batch (`solvers.shard_batch`) when
    the device count divides the batch, so that per-sample results need no trimming;
    as they are otherwise (one device computes all)."""
    if jax.device_count() == 1 or len(x0) % jax.device_count():
        return x0, args
    batched = eqx.filter(args, lambda leaf: eqx.is_array(leaf) and jnp.ndim(leaf) > 0)
    (x0, batched), _ = solvers.shard_batch((x0, batched))
    return x0, eqx.combine(batched, args)


# ------------------------------------------------------------------------ records


def model_record(name_or_path, config, header) -> dict:
    """A model in metadata: its training step, architecture, dynamics and the held-out
    metrics stored with it."""
    as_dict = config.to_dict()
    record = {
        "step": header.get("step"),
        "config": as_dict["model"],
        "dynamics": as_dict["dynamics"],
        "training_metrics": header.get("metrics", {}),
        "name": str(name_or_path),
    }
    if header.get("kind") == "authors_npz":  # provenance of a file we did not write
        record |= {
            "kind": "authors_npz",
            "source": header.get("source"),
            "sha256": header.get("sha256"),
        }
    return record


def data_record(config, indices=None, mask_seed=None, *, images_dir=None, files=None) -> dict:
    """The data in metadata: the held-out split, scenes, crop size and seed (or the
    photo folder and its files), the masking and its seed."""
    masking = {
        "mask_ratio": config.data.mask_ratio,
        "mask_fraction": config.data.mask_fraction,
        "masked_patches": round(config.data.mask_ratio * config.model.n_patches),
    }
    if images_dir is not None:
        record = {
            "images_dir": str(images_dir),
            "files": list(files or []),
            **masking,
            "description": held_out_description(config, images_dir),
        }
    else:
        record = {
            "split": "test",
            "scenes": list(TEST_SCENES),
            "crops_seed": config.training.seed,
            **masking,
            "description": held_out_description(config),
        }
    if indices is not None:
        record["image_indices"] = np.asarray(indices)
    if mask_seed is not None:
        record["mask_seed"] = mask_seed
    return record


def job_metadata(
    study: str,
    checkpoint,
    config,
    header,
    *,
    options=None,
    indices=None,
    mask_seed=None,
    images_dir=None,
    files=None,
    **extra,
) -> dict:
    """`analysis.metadata` for a job on a trained model: `checkpoint`, `model` (see
    `model_record`), `data` (see `data_record`: the held-out crops of `indices`, or the
    photos `files` of `images_dir`), the command-line `options` and `extra`, which are
    `analysis.metadata`'s own keywords (`dtype`: the dtype the numbers were computed in)
    and any further entries; seeds are the crops' and the masks' (`mask_seed`)."""
    seeds = {"crops": config.training.seed}
    if mask_seed is not None:
        seeds["masks"] = mask_seed
    return metadata(
        study=study,
        seeds=seeds,
        checkpoint=str(checkpoint),
        model=model_record(checkpoint, config, header),
        data=data_record(config, indices, mask_seed, images_dir=images_dir, files=files),
        options=dict(options or {}),
        **extra,
    )


# ----------------------------------------------------------------------- progress


class Stages:
    """Progress over the stages of a job, on stderr: a tqdm bar (stage count, elapsed
    time, the stage running) only when stderr is a terminal, and one line per finished
    stage with its wall and CPU seconds (`seconds`, `cpu_seconds`: the CPU time of all
    threads, a measure that a busy machine does not inflate), terminal or not: plain
    lines without carriage returns, what a log keeps. `enabled=False` (`--no-progress`)
    prints neither; the seconds are measured all the same."""

    def __init__(self, total: int, description: str, enabled: bool = True):
        self._tqdm = tqdm
        self.bar = tqdm(
            total=total,
            desc=description,
            unit="stage",
            file=sys.stderr,
            disable=None if enabled else True,  # None: drawn only on a terminal
            dynamic_ncols=True,
            bar_format="{desc}: {n}/{total} stages [{elapsed}] {postfix}",
        )
        self.enabled = enabled
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, label: str):
        """Context manager: one stage named `label`, timed in wall and CPU seconds."""
        self.bar.set_postfix_str(label)
        start, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds[label] = time.perf_counter() - start
        self.cpu_seconds[label] = time.process_time() - cpu
        if self.enabled:
            self._tqdm.write(
                f"  {label}: {self.seconds[label]:.1f} s (CPU {self.cpu_seconds[label]:.1f} s)",
                file=sys.stderr,
            )
        self.bar.update(1)

    def close(self):
        """Close the progress bar."""
        self.bar.set_postfix_str("done")
        self.bar.close()
