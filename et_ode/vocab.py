"""The named choices that several layers share, each once: a `Literal` type for
signatures and the tuple of its values for checks, messages and command-line choices.

- `Flow`: `"native"` (the paper's `tau dx/dt = -dE/dg`) or `"projected"` (the normal
  part of `dE/dg` dropped: each token's LayerNorm scale stays fixed).
- `Adjoint`: how `solvers.solve` is differentiated: `"checkpoint"` (exact gradients of
  the discrete solve), `"backsolve"` (the continuous adjoint integrated backwards) or
  `"implicit"` (the implicit function theorem at a fixed point).
- `EnergyTerm`: the learned terms of the energy, `"attention"` and `"hopfield"`; a
  model built with one of them only is an ablation (the paper's "ATT only" and "HN
  only" rows).
- `Noise`: the noise of a solve at a temperature: `"isotropic"` (white noise on every
  coordinate of `x`, the authors' graph code) or `"tangent"` (white noise in the tangent
  space of the LayerNorm manifold, scaled by the mobility: what samples `exp(-E/T)`).
- `Activation`: the Hopfield module's `"relu"` (the paper's), `"softmax"`
  (log-sum-exp) or `"power"`.

Imports nothing of the project: the model and the solvers both build on it.
"""

from typing import Literal, get_args

__all__ = [
    "ACTIVATIONS",
    "ADJOINTS",
    "ENERGY_TERMS",
    "FLOWS",
    "NOISES",
    "Activation",
    "Adjoint",
    "EnergyTerm",
    "Flow",
    "Noise",
    "check_choice",
]

Flow = Literal["native", "projected"]
Adjoint = Literal["checkpoint", "backsolve", "implicit"]
Noise = Literal["isotropic", "tangent"]
Activation = Literal["relu", "softmax", "power"]
EnergyTerm = Literal["attention", "hopfield"]

FLOWS: tuple[Flow, ...] = get_args(Flow)
ADJOINTS: tuple[Adjoint, ...] = get_args(Adjoint)
NOISES: tuple[Noise, ...] = get_args(Noise)
ACTIVATIONS: tuple[Activation, ...] = get_args(Activation)
ENERGY_TERMS: tuple[EnergyTerm, ...] = get_args(EnergyTerm)


def check_choice(kind: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise `ValueError` naming `kind`, the value given and the choices when `value`
    is not one of `choices`."""
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"{kind} must be one of {', '.join(map(repr, choices))} (got {value!r}).")
