"""The Brownian paths of a solve at a temperature: which one drives the noise
(`Brownian`), and the key-chain path that draws its increments as the authors' graph
code draws its noise."""

import dataclasses
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

BrownianKind = Literal["step", "tree", "key_chain"]
BROWNIAN_KINDS: tuple[BrownianKind, ...] = ("step", "tree", "key_chain")


@dataclasses.dataclass(frozen=True)
class Brownian:
    """Which Brownian path drives a solve at a temperature (`solve(..., brownian=...)`;
    a name is `Brownian(name)`).

    - `"step"`: an increment drawn per step from the key folded with the step's end
      times (`diffrax.UnsafeBrownianPath`): the cheapest, for constant steps; a solve
      with another step size sees another path.
    - `"tree"`: `diffrax.VirtualBrownianTree`, one path on `[t0, t1]` resolved to `tol`
      (default: `dt0 / 16` for constant steps, `(t1 - t0) 2^-16` for adaptive ones)
      whatever the steps: the same path under refinement (strong-order measurements)
      and under adaptive steps (rejected steps re-query it).
    - `"key_chain"`: constant steps only; step `k` gets `sqrt(dt) N(0, 1)` drawn with
      the key `k + 1` splits down the chain `key <- jax.random.split(key)[0]`: the noise
      of the authors' graph code (`src/model/et.py`), so that their noisy update is this
      solve with Euler-Maruyama, their step, temperature and key.

    `tol` is read by `"tree"` only.
    """

    kind: BrownianKind = "step"
    tol: float | None = None

    def __post_init__(self):
        if self.kind not in BROWNIAN_KINDS:
            raise ValueError(
                f"brownian must be one of {', '.join(map(repr, BROWNIAN_KINDS))} or a "
                f"solvers.Brownian (got {self.kind!r})."
            )
        if self.tol is not None and not (self.kind == "tree" and float(self.tol) > 0):
            raise ValueError(
                f"Brownian tol is the resolution of a 'tree' path: a positive number, with "
                f"kind='tree' (got kind={self.kind!r}, tol={self.tol!r})."
            )


class StepPath(diffrax.AbstractBrownianPath):
    """Brownian increments on a grid of constant steps `t0 + k dt`: step `k` is
    `sqrt(t1 - t0) N(0, 1)` drawn with `jax.random.fold_in(key, k)` (`chain=False`) or,
    with `chain=True`, with the key reached by `k + 1` steps of
    `key <- jax.random.split(key)[0]` (the authors' graph code; precomputed, one key per
    step). With `levy_area=diffrax.SpaceTimeLevyArea` a step also draws its space-time
    Levy area `H ~ N(0, (t1 - t0) / 12)`, independent of the increment (the
    additive-noise Runge-Kutta solvers read it).

    Queried only between consecutive grid times (a constant-step solver's steps; the
    same step queried twice gives the same increment, so the checkpointed adjoint can
    recompute it); `evaluate(t)` alone (a value, not an increment) is not defined.
    `shape` is the state's (`[N, D]`, its dtype).
    """

    shape: jax.ShapeDtypeStruct = eqx.field(static=True)
    key: PRNGKeyArray
    chain_keys: PRNGKeyArray | None
    start: Array
    dt: Array
    levy_area: type = eqx.field(static=True)

    def __init__(
        self,
        shape: jax.ShapeDtypeStruct,
        key: PRNGKeyArray,
        start,
        dt,
        steps: int,
        *,
        chain: bool = False,
        levy_area: type = diffrax.BrownianIncrement,
    ):
        def advance(key, _):
            key = jax.random.split(key)[0]
            return key, key

        self.shape = shape
        self.key = key
        self.chain_keys = jax.lax.scan(advance, key, length=steps)[1] if chain else None
        self.start = jnp.asarray(start, shape.dtype)
        self.dt = jnp.asarray(dt, shape.dtype)
        self.levy_area = levy_area

    @property
    def t0(self):
        return self.start

    @property
    def t1(self):
        return jnp.inf

    def evaluate(self, t0, t1=None, left=True, use_levy=False):
        if t1 is None:
            raise ValueError(
                "a step path gives increments between consecutive steps, not values of the "
                "path: it drives constant-step solvers only (use brownian='tree')."
            )
        step = jnp.round((t0 - self.start) / self.dt).astype(jnp.int32)
        if self.chain_keys is not None:
            key = self.chain_keys[jnp.clip(step, 0, self.chain_keys.shape[0] - 1)]
        else:
            key = jax.random.fold_in(self.key, step)
        dt = jnp.asarray(t1 - t0, self.shape.dtype)
        if not (use_levy and self.levy_area is diffrax.SpaceTimeLevyArea):
            w = jnp.sqrt(dt) * jax.random.normal(key, self.shape.shape, self.shape.dtype)
            return diffrax.BrownianIncrement(dt=dt, W=w) if use_levy else w
        key_w, key_h = jax.random.split(key)
        w = jnp.sqrt(dt) * jax.random.normal(key_w, self.shape.shape, self.shape.dtype)
        h = jnp.sqrt(dt / 12) * jax.random.normal(key_h, self.shape.shape, self.shape.dtype)
        return diffrax.SpaceTimeLevyArea(dt=dt, W=w, H=h)
