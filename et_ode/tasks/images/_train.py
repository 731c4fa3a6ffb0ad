"""Training a `MaskedImageET` through the ODE: AdamW, warmup-cosine, clipping, exact
resume, held-out evaluation, JSON-lines metrics, atomic checkpoints."""

import dataclasses
import functools
import json
import time
from pathlib import Path
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from ...records import (
    filter_json_lines,
    remove_temporaries,
    run_folder_lock,
    versions,
    write_error,
)
from .._checkpoint import fill, read_checkpoint, save_checkpoint
from .._training import check_stop_after, diverged, what_failed
from . import _data, _tfds
from ._config import TrainConfig, config_from_header
from ._evaluate import eval_masks, evaluate_baselines, evaluate_model
from ._model import MaskedImageET
from ._normalisation import ChannelNormalisation
from ._patches import random_masking

CHECKPOINT_NAME = "checkpoint.eqx"
METRICS_NAME = "metrics.jsonl"
# what `initial_model` is given: a fitted normalisation, or None (then one comes with init_from)
_Normalisation = TypeVar("_Normalisation", ChannelNormalisation, None)


@functools.lru_cache(maxsize=16)
def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """AdamW with warmup-cosine and clipping; cached per config so that runs of one
    config share one compiled training step."""
    t = config.training
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=t.learning_rate,
        warmup_steps=t.warmup_steps,
        decay_steps=t.steps,
        end_value=0.01 * t.learning_rate,
    )
    return optax.chain(
        optax.clip_by_global_norm(t.clip_norm),
        optax.adamw(schedule, weight_decay=t.weight_decay),
    )


def load_split(config: TrainConfig, split: _data.Split) -> np.ndarray:
    """Images `[M, H, W, C]` in [0, 1] for `split` ("train" or "test")."""
    size = config.model.image_size
    if config.data.source == "photos":
        return _data.photo_crops(split, size=size, seed=config.training.seed)
    return _tfds.tfds_images(
        config.data.tfds_name, split=split, data_dir=config.data.data_dir, size=size
    )


def held_out_indices(total: int, count: int) -> np.ndarray:
    """`count` indices spread evenly over `total` test images (first and last included),
    so that every held-out scene is represented: the evaluation's selection."""
    if int(count) != count or not 1 <= count <= total:
        raise ValueError(f"asked for {count} held-out images; the test split has {total}.")
    return np.round(np.linspace(0, total - 1, int(count))).astype(int)


def held_out_split(config: TrainConfig, count: int | None = None) -> np.ndarray:
    """The evaluation images `[count, H, W, C]` in [0, 1] (default `data.eval_images`):
    `held_out_indices` of the test split."""
    images = load_split(config, "test")
    count = config.data.eval_images if count is None else count
    return images[held_out_indices(len(images), count)]


def new_model(config: TrainConfig, normalisation: ChannelNormalisation | None) -> MaskedImageET:
    """A freshly initialised model of `config` (key from `training.seed`)."""
    key = jax.random.fold_in(jax.random.key(config.training.seed), 0)
    return MaskedImageET(config.model, config.dynamics, key=key, normalisation=normalisation)


def initial_model(
    config: TrainConfig, normalisation: _Normalisation
) -> tuple[MaskedImageET, _Normalisation | ChannelNormalisation]:
    """The model a new run starts from, and its data normalisation: a random one, or the
    parameters and normalisation of `config.training.init_from` under this config's
    dynamics (a learnable field strength the source did not use starts at 1)."""
    source = config.training.init_from
    if source is None:
        return new_model(config, normalisation), normalisation
    base = MaskedImageET.load(source)
    base_normalisation = base.normalisation
    assert base_normalisation is not None  # a loaded model carries its data normalisation
    if base.config != config.model:
        raise ValueError(
            f"init_from={source!r} has a different [model] section ({base.config}); "
            "a fine-tune needs the same architecture."
        )
    model = new_model(config, base_normalisation)
    if not base.dynamics.external_field:
        base = eqx.tree_at(lambda m: m.field_strength, base, model.field_strength)
    arrays, rest = eqx.partition(model, eqx.is_array)
    arrays = jax.tree.unflatten(
        jax.tree.structure(arrays), jax.tree.leaves(eqx.filter(base, eqx.is_array))
    )
    return eqx.combine(arrays, rest), base_normalisation


def augment(key, image):
    """A random flip, quarter turn and permutation of the colour channels of one
    `[H, W, C]` image (square): the 8 symmetries of the square times the channel orders."""
    k_flip, k_turn, k_colour = jax.random.split(key, 3)
    image = jnp.where(jax.random.bernoulli(k_flip), image[:, ::-1], image)
    turns = jax.random.randint(k_turn, (), 0, 4)
    image = jax.lax.switch(turns, [lambda im, k=k: jnp.rot90(im, k) for k in range(4)], image)
    return image[..., jax.random.permutation(k_colour, image.shape[-1])]


@eqx.filter_jit
def train_step(
    model,
    opt_state,
    images,
    step,
    base_key,
    optimizer,
    batch_size,
    mask_ratio,
    mask_fraction,
    augment_images=False,
):
    """One optimiser step on a batch drawn (with replacement) from `images [M, H, W, C]`
    (normalised): the step `et_ode.train` repeats, public for a training loop of your own
    (your schedule, logging or stopping rule) and for the FLOP benchmark.

    - `model`: a `MaskedImageET`; `opt_state`: `optimizer.init` of its arrays;
      `optimizer`: an optax transformation (`make_optimizer` builds the configured one).
    - `step`: the step number (an int); `base_key`: a JAX key. The batch, its masks and
      its augmentation depend only on `(base_key, step)`, so a resumed run sees exactly
      the data an uninterrupted one would.
    - `batch_size` (`TrainingConfig`), `mask_ratio` and `mask_fraction` (`DataConfig`:
      the paper's masking, `random_masking`); `augment_images` (`DataConfig.augment`):
      random flips, quarter turns and channel permutations.

    Returns `(model, opt_state, loss)`: the model after the step, and the loss before
    it (the MSE over the occluded patches, normalised pixel units)."""
    key_batch, key_mask, key_augment = jax.random.split(jax.random.fold_in(base_key, step), 3)
    index = jax.random.randint(key_batch, (batch_size,), 0, images.shape[0])
    batch = images[index]
    if augment_images:
        batch = jax.vmap(augment)(jax.random.split(key_augment, batch_size), batch)
    patches = jax.vmap(model.patches)(batch)
    masks = jax.vmap(lambda k: random_masking(k, patches.shape[1], mask_ratio, mask_fraction))(
        jax.random.split(key_mask, batch_size)
    )
    # A fixed-point model's sample that reaches the time cap first still trains on its
    # end state (the evaluation reports it); any other solver failure aborts the run.
    lenient = dict(throw=False) if model.dynamics.fixed_point_atol is not None else {}
    loss, grads = eqx.filter_value_and_grad(lambda m: m.loss(patches, masks, **lenient))(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


@dataclasses.dataclass
class TrainState:
    model: MaskedImageET
    opt_state: object
    step: int


def _header(config: TrainConfig, step: int, normalisation, metrics: dict | None) -> dict:
    return {
        "kind": "masked_image_et",
        "config": config.to_dict(),
        "step": step,
        "normalisation": normalisation.to_dict(),
        "versions": versions(),
        "metrics": metrics or {},
    }


def _restore(path, config: TrainConfig, optimizer) -> tuple[TrainState, ChannelNormalisation, dict]:
    header, blobs = read_checkpoint(path)
    stored = config_from_header(header, path)
    if stored != config:
        raise ValueError(
            f"{path} was written with a different config; resume with the same config, or "
            "start a new run in another --out folder."
        )
    if len(blobs) < 2:
        raise ValueError(f"{path} holds a model only (no optimiser state): it cannot be resumed.")
    normalisation = ChannelNormalisation.from_dict(header["normalisation"])
    model = fill(new_model(config, normalisation), blobs[0], path)
    opt_state = fill(optimizer.init(eqx.filter(model, eqx.is_array)), blobs[1], path)
    return TrainState(model, opt_state, int(header["step"])), normalisation, header


def _truncate_metrics(path: Path, step: int) -> None:
    """Keep only metric lines up to `step` (a resumed run rewrites what came after)."""
    filter_json_lines(path, lambda record: record.get("step", step + 1) <= step)


def train(
    config: TrainConfig,
    out_dir=None,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
) -> TrainState:
    """Train (or resume) a `MaskedImageET`; returns the final state.

    Writes `out_dir/checkpoint.eqx` every `checkpoint_every` steps, at the end and when
    interrupted (Ctrl-C), and appends metrics to `out_dir/metrics.jsonl`. `resume`
    continues from the checkpoint bit-identically; `stop_after` ends this run after
    that many steps (for time-limited jobs; resume later). `progress`: a tqdm bar on
    stderr, drawn only when stderr is a terminal (a log gets no carriage returns).

    One writer per run folder: the folder is locked for the whole run
    (`et_ode.records.run_folder_lock`); another process on it is refused at once with a
    `ValueError` naming the holder. Temporary files of a killed run are removed. A write
    that fails ends the run with an `et_ode.records.WriteError` naming the file, the OS's
    reason and the last good checkpoint with its step.
    """
    check_stop_after(stop_after, "steps of this run")
    out = Path(out_dir or config.training.out_dir)
    with run_folder_lock(out):
        remove_temporaries(out)
        return _train(config, out, resume, stop_after, progress)


def _train(
    config: TrainConfig, out: Path, resume: bool, stop_after: int | None, progress: bool
) -> TrainState:
    """`train` inside its lock."""
    checkpoint, metrics_path = out / CHECKPOINT_NAME, out / METRICS_NAME
    t = config.training
    optimizer = make_optimizer(config)
    train_images = load_split(config, "train")
    saved = None  # the step of the last good checkpoint

    def written(path, write):
        """Run `write()`; a failure names `path`, the reason and the last checkpoint."""
        try:
            write()
        except OSError as error:
            advice = (
                f"the last good checkpoint is {checkpoint} at step {saved} (resume with --resume)"
                if saved is not None
                else "no checkpoint was written yet (start again)"
            )
            raise write_error(path, error, advice) from None

    if resume:
        state, normalisation, _ = _restore(checkpoint, config, optimizer)
        saved = state.step
        written(metrics_path, lambda: _truncate_metrics(metrics_path, state.step))
    else:
        if checkpoint.exists():
            raise ValueError(
                f"{checkpoint} exists: pass --resume to continue it, or choose another --out."
            )
        # stale lines of a run that never checkpointed
        written(metrics_path, lambda: metrics_path.unlink(missing_ok=True))
        model, normalisation = initial_model(config, ChannelNormalisation.fit(train_images))
        state = TrainState(model, optimizer.init(eqx.filter(model, eqx.is_array)), 0)
    test_images = normalisation.apply(held_out_split(config))
    images = jnp.asarray(normalisation.apply(train_images))
    masks = eval_masks(config, len(test_images))
    base_key = jax.random.fold_in(jax.random.key(t.seed), 1)

    def log(record):
        def append():
            with metrics_path.open("a") as file:
                file.write(json.dumps(record) + "\n")

        written(metrics_path, append)

    def save(state, last_eval):
        nonlocal saved
        written(
            checkpoint,
            lambda: save_checkpoint(
                checkpoint,
                _header(config, state.step, normalisation, {"eval_masked_mse": last_eval}),
                state.model,
                state.opt_state,
            ),
        )
        saved = state.step

    last_eval = None
    end = t.steps if stop_after is None else min(t.steps, state.step + stop_after)
    bar = tqdm(
        total=t.steps,
        initial=state.step,
        disable=None if progress else True,  # None: drawn only on a terminal
        desc="train",
        unit="step",
        dynamic_ncols=True,
    )
    started, first_step = time.perf_counter(), state.step
    try:
        while state.step < end:
            try:  # a solve that fails inside the step (its state became NaN) raises here
                model, opt_state, loss = train_step(
                    state.model,
                    state.opt_state,
                    images,
                    jnp.asarray(state.step),
                    base_key,
                    optimizer,
                    t.batch_size,
                    config.data.mask_ratio,
                    config.data.mask_fraction,
                    config.data.augment,
                )
                loss = float(loss)
            except eqx.EquinoxRuntimeError:
                loss = None  # nothing of this step is kept: `state` stays the last good one
            if loss is None or not np.isfinite(loss):
                raise diverged(
                    what_failed(loss),
                    state.step + 1,
                    t.learning_rate,
                    f"the last good checkpoint is {checkpoint} at step {saved}"
                    if saved is not None
                    else "no checkpoint was written",
                )
            state = TrainState(model, opt_state, state.step + 1)
            record = {"step": state.step, "loss": loss, "seconds": time.perf_counter() - started}
            if state.step % t.eval_every == 0 or state.step == t.steps:
                last_eval = evaluate_model(state.model, test_images, masks, t.batch_size)
                record["eval_masked_mse"] = last_eval
            log(record)
            rate = (state.step - first_step) / (time.perf_counter() - started)
            bar.set_postfix(loss=f"{loss:.4f}", eval=last_eval, steps_per_s=f"{rate:.2f}")
            bar.update(1)
            if state.step % t.checkpoint_every == 0 or state.step == end:
                save(state, last_eval)
    except KeyboardInterrupt:
        save(state, last_eval)
        raise
    finally:
        bar.close()
    return state


def export_model(checkpoint, destination, force: bool = False) -> None:
    """Write a model-only copy of a training checkpoint (no optimiser state), with its
    held-out evaluation and the two baselines, computed now by the current evaluation
    code, in the header's `metrics`. Refuses to overwrite an existing file unless
    `force`."""
    if Path(destination).exists() and not force:
        raise ValueError(f"{destination} exists; pass --force to replace it.")
    if Path(destination).resolve() == Path(checkpoint).resolve():
        raise ValueError("the destination is the training checkpoint itself; choose another file.")
    model = MaskedImageET.load(checkpoint)
    header, _ = read_checkpoint(checkpoint)
    header = {k: v for k, v in header.items() if k not in ("blobs", "format")}
    config = config_from_header(header, checkpoint)
    assert model.normalisation is not None  # a loaded model carries its data normalisation
    images = model.normalisation.apply(held_out_split(config))
    masks = eval_masks(config, len(images))
    header["metrics"] = {
        "eval_masked_mse": evaluate_model(model, images, masks),
        "eval_images": len(images),
        **evaluate_baselines(
            images, masks, config.model.image_size, config.model.patch, config.model.channels
        ),
    }
    save_checkpoint(destination, header, model)
