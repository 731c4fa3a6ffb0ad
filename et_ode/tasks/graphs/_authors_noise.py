"""The noise of the authors' graph code (Lemon-cmd/energy-transformer-graph,
`src/model/et.py`) as a temperature: each of their steps is
`x <- x - alpha dE/dg + sqrt(alpha) xi` with `xi ~ N(0, std^2)`, `std = 0.02` (the
paper's appendix B.2), or annealed as `std_k = 0.55 / (1 + k)^0.55` at step `k` of a
block. That is Euler-Maruyama with step `alpha` on `tau dx/dt = -dE/dg` with isotropic
noise of coefficient `sqrt(2 T / tau) = std`: `T = std^2 tau / 2`. Their keys follow
`key <- jax.random.split(key)[0]`, once per step (`solvers.Brownian("key_chain")`), and
the same key serves every graph of a batch."""

from collections.abc import Callable

import jax.numpy as jnp

AUTHORS_NOISE_STD = 0.02
AUTHORS_ANNEALING_GAMMA = 0.55


def authors_temperature(std: float = AUTHORS_NOISE_STD, tau: float = 1.0) -> float:
    """The temperature `T = std^2 tau / 2` whose noise has the standard deviation `std`
    per unit of `sqrt(dt)`: 2e-4 for the authors' 0.02 (`tau = 1`)."""
    return std**2 * tau / 2


def authors_annealing(
    dt: float, gamma: float = AUTHORS_ANNEALING_GAMMA, tau: float = 1.0, t0: float = 0.0
) -> Callable:
    """The authors' annealed noise as a schedule `T(t)`: at step `k = (t - t0) / dt` the
    standard deviation `gamma / (1 + k)^gamma` (their `vary_noise`), so
    `T(t) = (tau / 2) (gamma / (1 + (t - t0) / dt)^gamma)^2`. Euler-Maruyama reads it at
    the start of each step, as their loop does."""

    def schedule(t):
        std = gamma / (1 + (t - t0) / dt) ** gamma
        return jnp.asarray(tau / 2) * std**2

    return schedule
