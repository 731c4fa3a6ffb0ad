"""Row: the training step of `configs/paper.toml` (12 Euler steps of 0.1 on the native
flow, gradients by the checkpointed adjoint) with `Dynamics.max_steps=None` (solve's
exact cap, 12: every step checkpointed) against the former explicit caps 64 and 4096
(diffrax's checkpointing then spreads fewer checkpoints over a longer, mostly unused
loop). Timed in alternation, warm; the ratio is None's step time over the faster of the
two caps'. The batch is the config's (32), from the config's training split; tiny mode
uses the tiny problem's model and images at batch 4."""

import copy
import dataclasses
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from et_ode.tasks import load_config, load_split, make_optimizer, train_step

from ._common import block, row, spread, time_interleaved

FAMILY = "training_step"
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "paper.toml"
CAPS = (None, 64, 4096)


def _with_dynamics(model, dynamics):
    m = copy.copy(model)
    object.__setattr__(m, "dynamics", dynamics)
    return m


def _setup(problem, opts):
    """The config, the problem's model with the config's dynamics, training images
    (normalised) and the batch size."""
    config = load_config(CONFIG)
    model = problem.image_model
    if opts.tiny:  # the tiny model on noise images, batch 4
        rng = np.random.default_rng(0)
        images = jnp.asarray(
            rng.uniform(
                size=(8, model.config.image_size, model.config.image_size, model.config.channels)
            ),
            jnp.float32,
        )
        return config, model, images, 4
    images = jnp.asarray(model.normalisation.apply(load_split(config, "train")))
    return config, model, images, config.training.batch_size


def run(problem, opts) -> list[dict]:
    config, model, images, batch = _setup(problem, opts)
    optimizer = make_optimizer(config)
    base_key = jax.random.key(config.training.seed)
    caps = CAPS[:2] if opts.tiny else CAPS  # tiny: fewer compilations
    models = {
        cap: _with_dynamics(model, dataclasses.replace(config.dynamics, max_steps=cap))
        for cap in caps
    }
    # one optimiser state per model: the dynamics are static metadata of its pytree
    states = {cap: optimizer.init(eqx.filter(models[cap], eqx.is_array)) for cap in caps}

    def step(cap):
        return train_step(
            models[cap],
            states[cap],
            images,
            jnp.asarray(0),
            base_key,
            optimizer,
            batch,
            config.data.mask_ratio,
            config.data.mask_fraction,
            config.data.augment,
        )

    losses = {cap: float(block(step(cap))[2]) for cap in caps}
    times = time_interleaved(
        {cap: (lambda cap=cap: step(cap)) for cap in caps},
        opts.reps(3 if opts.quick else 9),
        budget=60.0,
    )
    medians = {cap: spread(times[cap])["median"] for cap in caps}
    best_cap = min((c for c in caps if c is not None), key=lambda c: medians[c])
    ratios = spread(
        [
            times[None][i] / min(times[c][i] for c in caps if c is not None)
            for i in range(len(times[None]))
        ]
    )
    same = len({round(v, 6) for v in losses.values()}) == 1
    return [
        row(
            FAMILY,
            "paper training step, max_steps=None / best of caps "
            + ", ".join(str(c) for c in caps[1:]),
            value=medians[None] / medians[best_cap],
            unit="x",
            reference=f"max_steps={best_cap} (the faster cap), same batch {batch}",
            spread_=ratios,
            goal="<= 1",
            met=medians[None] <= medians[best_cap] and same,
            note=(
                ", ".join(f"cap {c}: {medians[c] * 1e3:.0f} ms" for c in caps)
                + f"; losses {'equal' if same else 'differ: ' + str(losses)}"
            ),
            step_seconds={str(c): spread(times[c]) for c in caps},
            losses={str(c): losses[c] for c in caps},
            batch=batch,
            config=str(CONFIG.relative_to(CONFIG.parent.parent)),
        )
    ]
