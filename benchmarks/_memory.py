"""Row 4, memory against horizon: the memory of one training step's gradient (loss =
masked MSE through `MaskedImageET.loss`, gradient with respect to every parameter) at 12,
48 and 192 Euler steps (dt 0.1), for each adjoint:

- checkpoint, diffrax's default checkpoint count (`max_steps` = the horizon);
- checkpoint storing every step (`checkpoints = max_steps`);
- implicit (projected flow to a fixed point, `FixedPointStop(1e-5)`; the horizon is the
  step cap `max_steps`);
- backsolve (native flow, where it is stable).

Measured as XLA's buffer assignment of the compiled program,
`jax.jit(f).lower(...).compile().memory_analysis()`: temp + argument + output bytes. It is
known at compile time, needs no run, and works on CPU and GPU alike (on GPU it is what
the device will allocate for the program, on CPU what the host will). Each ratio is
against the same adjoint at the shortest horizon.

The programs are never run, so they are compiled with
`xla_backend_optimization_level = 0` (less optimisation in code generation, about half
the compile time): buffer assignment happens before it, and a full run checks on one
program that the sizes are the same as with the default level.
"""

import equinox as eqx

from et_ode import solvers

from ._common import Compiled, memory_bytes, row

FAMILY = "memory"
FAST_COMPILE = {"xla_backend_optimization_level": 0}
HORIZONS = (12, 48, 192)
GOAL_IMPLICIT = 1.3


def _adjoints(steps: int) -> dict:
    base = dict(solver="euler", dt0=0.1, t1=0.1 * steps, max_steps=steps, rtol=None, atol=None)
    return {
        "checkpoint (diffrax default)": dict(base, flow="native", adjoint="checkpoint"),
        "checkpoint every step": dict(base, flow="native", adjoint="checkpoint", checkpoints=steps),
        "implicit (projected, fixed point)": dict(
            base, flow="projected", adjoint="implicit", stop=solvers.FixedPointStop(atol=1e-5)
        ),
        "backsolve (native)": dict(base, flow="native", adjoint="backsolve"),
    }


def _grad_program(problem, overrides):
    def grad(model, patches, masks):
        return eqx.filter_grad(lambda m: m.loss(patches, masks, **overrides))(model)

    return Compiled(
        grad, problem.image_model, problem.patches, problem.masks, compiler_options=FAST_COMPILE
    )


QUICK = ("implicit (projected, fixed point)",)


def run(problem, opts) -> list[dict]:
    # quick runs: the implicit adjoint at the two ends (each program takes seconds to
    # compile)
    horizons = (HORIZONS[0], HORIZONS[-1]) if opts.quick else HORIZONS
    measured, programs = {}, {}
    for steps in horizons:
        for name, overrides in _adjoints(steps).items():
            if opts.quick and name not in QUICK:
                continue
            program = programs[(name, steps)] = _grad_program(problem, overrides)
            measured[(name, steps)] = memory_bytes(program.compiled) | {
                "compile_seconds": program.seconds
            }
    check = None
    if not opts.quick:  # the sizes do not depend on the code-generation level
        name = next(iter(_adjoints(horizons[0])))
        default = memory_bytes(programs[(name, horizons[0])].lowered.compile())
        check = {
            k: default[k] == measured[(name, horizons[0])][k]
            for k in ("temp", "argument", "output")
        }
    rows = []
    first, last = horizons[0], horizons[-1]
    for name in _adjoints(first):
        if (name, first) not in measured:
            continue
        base = measured[(name, first)]["total"]
        for steps in horizons:
            mem = measured[(name, steps)]
            ratio = mem["total"] / base
            is_goal = name.startswith("implicit") and steps == last
            rows.append(
                row(
                    FAMILY,
                    f"{name}, {steps} steps",
                    value=ratio,
                    unit="x",
                    reference=f"same adjoint at {first} steps ({base / 2**20:.2f} MiB)",
                    goal=f"<= {GOAL_IMPLICIT}" if is_goal else "",
                    met=(ratio <= GOAL_IMPLICIT) if is_goal else None,
                    note=(
                        f"{mem['total'] / 2**20:.2f} MiB (temp {mem['temp'] / 2**20:.2f}, "
                        f"arguments {mem['argument'] / 2**20:.2f}, outputs "
                        f"{mem['output'] / 2**20:.2f}); XLA memory_analysis at compile time"
                    ),
                    bytes=mem,
                    steps=steps,
                    adjoint=name,
                    same_sizes_at_default_optimization=check,
                )
            )
    return rows
