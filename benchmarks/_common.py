"""What every row shares: the problem, the machine, timing, and the row format.

Timings are wall-clock seconds of a call followed by `jax.block_until_ready`, taken
after a warm-up call (compilation excluded unless a row says otherwise). A row compares
a measurement with a reference measured in the same run; where the two are timed, they
are timed in alternation (A, B, A, B, ...) so that a change in the machine's load hits
both, and the row reports the median of the per-pair ratios with their min and max.
"""

import dataclasses
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import et_ode
from et_ode import solvers
from et_ode.records import versions
from et_ode.tasks import scene_crops

Key = TypeVar("Key", bound=Hashable)  # the names of the functions `time_interleaved` times

# ----------------------------------------------------------------------------- problem


@dataclasses.dataclass
class Problem:
    """The problem every row runs on: an image model (for the training-step rows), its
    Energy Transformer core, and a batch of initial tokens `x0: [B, N, D]` encoded from
    masked images (for the shipped model: held-out crops), plus the batch's patches and
    masks (for the loss).

    `name` says where the model came from; `data` where the images came from."""

    name: str
    data: str
    image_model: Any
    x0: jax.Array  # [B, N, D]
    patches: jax.Array  # [B, N, P]
    masks: Any  # et_ode.Masking with [B, N] fields
    seed: int = 0

    @property
    def core(self):
        return self.image_model.core

    @property
    def batch(self) -> int:
        return int(self.x0.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.x0.shape[1])

    @property
    def dim(self) -> int:
        return int(self.x0.shape[2])

    def describe(self) -> dict:
        core = self.core
        return {
            "model": self.name,
            "data": self.data,
            "batch": self.batch,
            "tokens": self.n_tokens,
            "dim": self.dim,
            "heads": int(core.attention.Wq.shape[0]),
            "head_dim": int(core.attention.Wq.shape[1]),
            "memories": int(core.hopfield.xi.shape[0]),
            "hopfield": core.hopfield.activation,
            "self_attention": core.attention.self_attention,
            "dtype": str(self.x0.dtype),
            "seed": self.seed,
            "image_model_dynamics": dataclasses.asdict(self.image_model.dynamics),
        }

    def tokens(self, batch: int) -> jax.Array:
        """`batch` initial states: the problem's, repeated (with a small deterministic
        perturbation on the copies, so no two samples are identical) if more are asked."""
        reps = -(-batch // self.batch)
        x = jnp.concatenate([self.x0] * reps, axis=0)[:batch]
        if reps > 1:
            noise = jax.random.normal(jax.random.key(self.seed + 7), x.shape, x.dtype)
            copy = (jnp.arange(batch) >= self.batch)[:, None, None]
            x = jnp.where(copy, x + 0.01 * noise, x)
        return x


@eqx.filter_jit
def _prepare(model, images, key):
    """Patches, the paper's masking (one key per image) and the encoded `x0`, in one
    compiled program (op by op, this is dozens of small compilations)."""
    patches = jax.vmap(model.patches)(images)
    n = patches.shape[1]
    masks = jax.vmap(lambda k: et_ode.random_masking(k, n))(jax.random.split(key, images.shape[0]))
    return patches, masks, model.encode_batch(patches, masks)[0]


def shipped_problem(name: str = "paper", batch: int = 32, seed: int = 0) -> Problem:
    """The shipped model (`et_ode.MaskedImageET.load(name)`) and `batch` held-out crops
    (scenes `et_ode.TEST_SCENES`), masked with the paper's masking (seeded)."""
    model = et_ode.MaskedImageET.load(name)
    per_scene = -(-batch // len(et_ode.TEST_SCENES))
    crops = scene_crops(et_ode.TEST_SCENES, crops_per_image=per_scene, seed=seed)
    # interleave the scenes so that a prefix of the batch holds both
    order = np.argsort(np.arange(len(crops)) % per_scene, kind="stable")
    images = jnp.asarray(model.normalisation.apply(crops[order][:batch]))
    return _image_problem(
        model,
        images,
        f"shipped '{name}' (MaskedImageET.load)",
        f"held-out crops of {', '.join(et_ode.TEST_SCENES)}",
        seed,
    )


def tiny_problem(batch: int = 4, seed: int = 0) -> Problem:
    """A tiny random image model (8x8 images, 2x2 patches: N = 16 tokens, D = 16,
    2 heads of 8, 32 memories, every parameter N(0, 0.1^2)) on uniform noise images: for
    tests of the benchmark code, not for numbers."""
    config = et_ode.ImageModelConfig(
        image_size=8,
        patch=2,
        channels=3,
        dim=16,
        n_heads=2,
        head_dim=8,
        n_memories=32,
        init_std=0.1,
    )
    # the structure from the constructor (abstract: nothing compiled), the values from
    # NumPy: compiling the constructor's PRNG code takes seconds, more than the rows
    skeleton = eqx.filter_eval_shape(lambda: et_ode.MaskedImageET(config, key=jax.random.key(0)))
    rng = np.random.default_rng(seed)
    model = jax.tree.map(
        lambda leaf: (
            jnp.asarray(0.1 * rng.standard_normal(leaf.shape), leaf.dtype)
            if isinstance(leaf, jax.ShapeDtypeStruct)
            else leaf
        ),
        skeleton,
    )
    images = jnp.asarray(rng.uniform(size=(batch, 8, 8, 3)), jnp.float32)
    return _image_problem(
        model,
        images,
        "tiny random MaskedImageET (parameters N(0, 0.1^2))",
        "uniform noise images",
        seed,
    )


def _image_problem(model, images, name, data, seed) -> Problem:
    patches, masks, x0 = _prepare(model, images, jax.random.key(seed + 2))
    return Problem(
        name=name, data=data, image_model=model, x0=x0, patches=patches, masks=masks, seed=seed
    )


def random_core_like(core, seed: int = 1):
    """A random `et_ode.EnergyTransformer` of the same size and options as `core`
    (library default initialisation)."""
    return et_ode.EnergyTransformer(
        core.dim,
        core.attention.Wq.shape[0],
        core.attention.Wq.shape[1],
        core.hopfield.xi.shape[0],
        key=jax.random.key(seed),
        beta=core.attention.beta,
        self_attention=core.attention.self_attention,
        hopfield=core.hopfield.activation,
        tau=core.tau,
        dtype=core.hopfield.xi.dtype,
        learn_beta=core.attention.log_beta is not None,
    )


@eqx.filter_jit
def paper_solve(model, x0):
    """The paper's solve (Euler, dt 0.1, 12 steps, native flow), end state; one jitted
    function shared by the rows, so that each shape compiles once."""
    return solvers.solve(model, x0).x_final


# ----------------------------------------------------------------------------- machine


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    device = jax.devices()[0]
    cores: int | None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    info = {
        "cpu": cpu_model(),
        "cpu_cores": cores,
        "python": platform.python_version(),
        "jax_backend": jax.default_backend(),
        "versions": versions(),
        "device_kind": device.device_kind,
        "devices": jax.device_count(),
        "local_devices": jax.local_device_count(),
        "processes": jax.process_count(),
        "x64": bool(jax.config.read("jax_enable_x64")),
        "xla_flags": public_flags(os.environ.get("XLA_FLAGS", "")),
        "git_commit": _git_commit(),
    }
    return info


def public_flags(flags: str) -> str:
    """XLA flags as a record may keep them: a flag whose value is a path (a dump folder,
    say) keeps its name only, since records are committed and name no local path."""
    kept = []
    for flag in flags.split():
        name, _, value = flag.partition("=")
        kept.append(f"{name}=<path>" if "/" in value or "\\" in value else flag)
    return " ".join(kept)


def _git_commit():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=here,
                capture_output=True,
                text=True,
                timeout=5,
            )
            return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except Exception:
        pass
    return None


# ----------------------------------------------------------------------------- timing


def block(value):
    return jax.block_until_ready(value)


def time_call(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    block(fn())
    return time.perf_counter() - start


MIN_ROUNDS = 3


def time_interleaved(
    fns: Mapping[Key, Callable[..., Any]],
    repeats: int,
    warmup: int = 1,
    budget: float | None = None,
) -> dict[Key, list[float]]:
    """Call every function `warmup` times, then `repeats` rounds of one call each, in
    alternation. With `budget` (seconds), stop after the first round past it, but not
    before `MIN_ROUNDS` rounds. Returns `{name: [seconds per round]}`."""
    for _ in range(warmup):
        for fn in fns.values():
            block(fn())
    times: dict[Key, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    for done in range(1, repeats + 1):
        for name, fn in fns.items():
            times[name].append(time_call(fn))
        if budget is not None and done >= MIN_ROUNDS and time.perf_counter() - start > budget:
            break
    return times


def spread(values) -> dict:
    """Median, min, max and interquartile range of a list of numbers."""
    values = [float(v) for v in values]
    q1, q3 = np.percentile(values, [25, 75]) if values else (math.nan, math.nan)
    return {
        "median": statistics.median(values) if values else math.nan,
        "min": min(values) if values else math.nan,
        "max": max(values) if values else math.nan,
        "iqr": float(q3 - q1),
        "n": len(values),
    }


def pair_ratio(times: dict, name: str, reference: str) -> dict:
    """Spread of the per-round ratio `times[name] / times[reference]`."""
    return spread([a / b for a, b in zip(times[name], times[reference])])


class Compiled:
    """A program compiled ahead of time for arguments of one structure: arrays in the
    arguments (models included) are inputs, so models of the same structure and shapes
    share it. `compiled` is JAX's `Compiled`; `seconds` the time `lower + compile` took."""

    def __init__(self, fn: Callable, *args, compiler_options: dict | None = None):
        dynamic, self._static = eqx.partition(args, eqx.is_array)
        self._treedef = jax.tree.structure(dynamic)
        jitted = jax.jit(lambda d: fn(*eqx.combine(d, self._static)))
        start = time.perf_counter()
        self.lowered = jitted.lower(dynamic)
        self.compiled = self.lowered.compile(compiler_options)
        self.seconds = time.perf_counter() - start
        self._dynamic = dynamic

    def __call__(self, *args):
        if not args:
            return self.compiled(self._dynamic)
        dynamic, static = eqx.partition(args, eqx.is_array)
        same = (
            jax.tree.structure(dynamic) == self._treedef
            and jax.tree.structure(static) == jax.tree.structure(self._static)
            and jax.tree.leaves(static) == jax.tree.leaves(self._static)
        )
        if not same:
            raise ValueError("arguments of another structure than the compiled program's")
        return self.compiled(dynamic)


def aot(fn: Callable, *args):
    """Compile `fn(*args)` ahead of time, every array in `args` an argument.

    **Returns:** `(run, compiled, compile_seconds)`: `run()` calls the compiled program
    on `args`."""
    program = Compiled(fn, *args)
    return (lambda: program()), program.compiled, program.seconds


def cost_flops(compiled) -> float | None:
    """XLA's own FLOP count of a compiled program (`cost_analysis()['flops']`). XLA counts
    the body of a while loop once, whatever its trip count."""
    try:
        cost = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    if not cost or "flops" not in cost:
        return None
    return float(cost["flops"])


def memory_bytes(compiled) -> dict:
    """`compiled.memory_analysis()`: XLA's buffer assignment, known at compile time
    (on CPU and GPU alike). `total` = temp + argument + output bytes (aliased bytes
    subtracted once); `peak` where the backend reports it."""
    stats = compiled.memory_analysis()
    temp = int(stats.temp_size_in_bytes)
    arg = int(stats.argument_size_in_bytes)
    out = int(stats.output_size_in_bytes)
    alias = int(getattr(stats, "alias_size_in_bytes", 0) or 0)
    peak = getattr(stats, "peak_memory_in_bytes", None)
    return {
        "temp": temp,
        "argument": arg,
        "output": out,
        "alias": alias,
        "total": temp + arg + out - alias,
        "peak": int(peak) if peak else None,
    }


# ----------------------------------------------------------------------------- rows


def row(
    family: str,
    name: str,
    *,
    value=None,
    unit: str = "",
    reference: str = "",
    spread_: dict | None = None,
    goal: str = "",
    met=None,
    note: str = "",
    **extra,
) -> dict:
    """One line of the table (and of the JSON). `value` is usually a ratio against
    `reference`, measured in the same run; `spread_` its min/max/IQR; `met` is True,
    False or None (no goal); `note` says what limits a goal that is not met."""
    out = {
        "family": family,
        "name": name,
        "value": _clean(value),
        "unit": unit,
        "reference": reference,
        "goal": goal,
        "met": met,
        "note": note,
    }
    if spread_ is not None:
        out["spread"] = {k: _clean(v) for k, v in spread_.items()}
    out.update({k: _clean(v) for k, v in extra.items()})
    return out


def _clean(value):
    """JSON-friendly: numpy and JAX scalars to Python numbers, NaN/inf to None."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        value = np.asarray(value)
        value = value.item() if value.ndim == 0 else value.tolist()
        return _clean(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclasses.dataclass
class Options:
    """Run options shared by the rows."""

    quick: bool = False
    repeats: int = 5
    tiny: bool = False

    def reps(self, default: int | None = None) -> int:
        n = self.repeats if default is None else min(default, self.repeats)
        return max(1, n)
