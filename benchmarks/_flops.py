"""Row 2, arithmetic efficiency: the FLOP rate of a batched vector-field evaluation and of
a real training step (`et_ode.tasks.train_step`), against this machine's own rate on a
large float32 matmul measured in the same run.

FLOP convention: 2 FLOPs per multiply-add; only the matrix products are counted (the
LayerNorm, softmax, ReLU and other elementwise work is not), from the shapes. Per sample,
with `a = 2 H Y D N` (one of the projections `Wq g`, `Wk g`), `s = 2 H N N Y` (the scores
`Q.K`) and `h = 2 N K D` (the Hopfield product `g xi^T`): the energy costs
`2a + s + h`, its gradient with respect to `g` (reverse mode) `2a + 2s + h`, so one
vector-field evaluation costs `4a + 3s + 2h`. A training step is counted the usual way,
3x the forward pass (every product's reverse mode costs two products of its size):
`3 (steps * field + encoder + decoder)`, with `encoder = decoder = 2 N P D`; the
forward steps that recursive checkpointing recomputes are not counted. XLA's own count
(`compiled.cost_analysis()['flops']`, which also counts elementwise work) is given
beside it; XLA counts a while loop's body once, so for the training step it is taken
from a loop-free equivalent (the same loss with the Euler steps unrolled in Python).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

import et_ode
from et_ode.tasks import make_optimizer, train_step

from ._common import aot, cost_flops, pair_ratio, row, spread, time_interleaved

FAMILY = "flops"
GOAL = 0.7
MATMUL = 2048


def field_flops(n, d, h, y, k) -> dict:
    a, s, hop = 2 * h * y * d * n, 2 * h * n * n * y, 2 * n * k * d
    return {
        "projection": a,
        "scores": s,
        "hopfield": hop,
        "energy": 2 * a + s + hop,
        "field": 4 * a + 3 * s + 2 * hop,
    }


def train_step_flops(n, d, h, y, k, p, steps, batch) -> float:
    forward = steps * field_flops(n, d, h, y, k)["field"] + 2 * (2 * n * p * d)
    return 3.0 * forward * batch


def _batched_field(model, x):
    return jax.vmap(lambda s: model.vector_field(0.0, s, None, "native"))(x)


def _unrolled_loss(model, patches, masks, steps, dt):
    """`MaskedImageET.loss` with the Euler steps written out (no loop): for XLA's count."""
    mean, std = jax.vmap(model.context_statistics)(patches, masks)
    mean, std = mean[:, None], std[:, None]
    x, _ = jax.vmap(model.encode)((patches - mean) / std, masks)
    for _ in range(steps):
        x = x + dt * _batched_field(model.core, x)
    recon = jax.vmap(model.decode)(x) * std + mean
    return et_ode.masked_mse(recon, patches, masks.occluded)


def run(problem, opts) -> list[dict]:
    model, image_model, x0 = problem.core, problem.image_model, problem.x0
    core = model
    n, d = problem.n_tokens, problem.dim
    h, y = core.attention.Wq.shape[:2]
    k = core.hopfield.xi.shape[0]
    p = problem.patches.shape[-1]
    batch = problem.batch
    dyn = image_model.dynamics
    if dyn.solver != "euler" or dyn.rtol is not None or dyn.dt0 is None:
        raise ValueError(
            "the flops row counts a constant-step Euler training step; "
            f"this model's dynamics are {dyn}."
        )
    steps = round(dyn.t1 / dyn.dt0)

    size = 512 if opts.tiny else MATMUL
    mat = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    run_mm, _, _ = aot(lambda a: a @ a, mat)
    run_vf, compiled_vf, _ = aot(_batched_field, model, x0)
    # where the time goes: the two parts of dE/dg, at g = LayerNorm(x0)
    g0 = jax.vmap(core.norm)(x0)
    run_hop, _, _ = aot(lambda m, g: jax.vmap(jax.grad(m.hopfield))(g), core, g0)
    run_att, _, _ = aot(lambda m, g: jax.vmap(jax.grad(lambda q: m.attention(q)))(g), core, g0)

    # the real trainer's step, on the problem's images (drawn by the step's own key)
    config = et_ode.TrainConfig(model=image_model.config, dynamics=dyn)
    optimizer = make_optimizer(config)
    opt_state = optimizer.init(eqx.filter(image_model, eqx.is_array))
    images = jax.vmap(image_model.image)(problem.patches)
    base_key = jax.random.key(0)
    step_index = jnp.asarray(0)

    def one_step():
        return train_step(
            image_model, opt_state, images, step_index, base_key, optimizer, batch, 0.5, 0.9, False
        )[2]

    xla_step_loopless = None
    if not opts.quick:  # a large program to compile: skipped in quick runs
        _, compiled_loopless, _ = aot(
            lambda m, pt, ms: eqx.filter_grad(_unrolled_loss)(m, pt, ms, steps, dyn.dt0),
            image_model,
            problem.patches,
            problem.masks,
        )
        xla_step_loopless = cost_flops(compiled_loopless)

    repeats = opts.reps(3 if opts.quick else None)
    times = time_interleaved(
        {
            "matmul": run_mm,
            "field": run_vf,
            "hopfield part": run_hop,
            "attention part": run_att,
            "train step": one_step,
        },
        repeats,
        budget=20.0,
    )
    mm_rate = 2.0 * size**3 / spread(times["matmul"])["median"]

    counts = field_flops(n, d, h, y, k)
    vf_shape = counts["field"] * batch
    vf_xla = cost_flops(compiled_vf)
    step_shape = train_step_flops(n, d, h, y, k, p, steps, batch)

    def rates(name, flops):
        # per round: (flops / t) / (matmul flops / t_mm), paired with the same round's matmul
        ratio = pair_ratio(times, "matmul", name)
        scale = flops / (2.0 * size**3)
        return {
            key: (v * scale if key in ("median", "min", "max", "iqr") else v)
            for key, v in ratio.items()
        }

    vf_eff = rates("field", vf_shape)
    hop_flops = 2 * counts["hopfield"] * batch  # forward product and its transpose
    att_flops = (4 * counts["projection"] + 3 * counts["scores"]) * batch
    hop_eff = rates("hopfield part", hop_flops)
    att_eff = rates("attention part", att_flops)
    t_field = spread(times["field"])["median"]
    t_hop = spread(times["hopfield part"])["median"]
    t_att = spread(times["attention part"])["median"]
    step_eff = rates("train step", step_shape)
    vf_note = (
        f"shape count {vf_shape / 1e6:.1f} MFLOP per call, XLA count "
        f"{(vf_xla or float('nan')) / 1e6:.1f} MFLOP; matmul {size}x{size} float32 "
        f"{mm_rate / 1e9:.1f} GFLOP/s"
    )
    met = vf_eff["median"] >= GOAL
    if not met:
        slow = "attention" if att_eff["median"] < hop_eff["median"] else "Hopfield"
        vf_note += (
            f"; measured by part: the attention gradient runs at "
            f"{att_eff['median']:.2f} of the matmul rate ({t_att * 1e3:.1f} ms), the "
            f"Hopfield gradient at {hop_eff['median']:.2f} ({t_hop * 1e3:.1f} ms), of "
            f"{t_field * 1e3:.1f} ms for the field: the {slow} part limits it"
            + (
                f" (narrow products: per head [{n}x{y}]x[{y}x{n}] scores and "
                f"[{y}x{d}] projections, and the softmax between them)"
                if slow == "attention"
                else ""
            )
        )
    return [
        row(
            FAMILY,
            f"matmul {size}x{size} float32",
            value=mm_rate / 1e9,
            unit="GFLOP/s",
            reference="this machine's peak reference",
            seconds=spread(times["matmul"]),
        ),
        row(
            FAMILY,
            f"vector field, batch {batch}",
            value=vf_eff["median"],
            unit="of matmul rate",
            reference=f"matmul {size}^3",
            spread_=vf_eff,
            goal=f">= {GOAL}",
            met=met,
            note=vf_note,
            gflops_per_s=vf_shape / spread(times["field"])["median"] / 1e9,
            flops_shape_count=vf_shape,
            flops_xla=vf_xla,
            flops_per_sample=counts,
            seconds=spread(times["field"]),
        ),
        row(
            FAMILY,
            "part: Hopfield gradient (relu, xi products)",
            value=hop_eff["median"],
            unit="of matmul rate",
            reference=f"matmul {size}^3",
            spread_=hop_eff,
            goal="reported",
            met=None,
            note=f"{t_hop * 1e3:.2f} ms; 2h FLOPs per sample",
            gflops_per_s=hop_flops / t_hop / 1e9,
            seconds=spread(times["hopfield part"]),
        ),
        row(
            FAMILY,
            f"part: attention gradient ({h} heads of {y})",
            value=att_eff["median"],
            unit="of matmul rate",
            reference=f"matmul {size}^3",
            spread_=att_eff,
            goal="reported",
            met=None,
            note=f"{t_att * 1e3:.2f} ms; 4a + 3s FLOPs per sample",
            gflops_per_s=att_flops / t_att / 1e9,
            seconds=spread(times["attention part"]),
        ),
        row(
            FAMILY,
            f"training step (train_step, batch {batch}, {steps} Euler steps)",
            value=step_eff["median"],
            unit="of matmul rate",
            reference=f"matmul {size}^3",
            spread_=step_eff,
            goal="reported",
            met=None,
            note=(
                f"shape count {step_shape / 1e9:.2f} GFLOP (3x forward); XLA count of "
                "the loop-free equivalent loss+grad "
                f"{(xla_step_loopless or float('nan')) / 1e9:.2f} GFLOP; AdamW update "
                "not counted"
            ),
            gflops_per_s=step_shape / spread(times["train step"])["median"] / 1e9,
            flops_shape_count=step_shape,
            flops_xla_loop_free=xla_step_loopless,
            seconds=spread(times["train step"]),
        ),
    ]
