"""Performance measurements of et-ode (`make bench`, `python -m benchmarks`).

Every row is a ratio against a reference measured in the same run, on a stated problem
(default: the shipped `paper` model's core, dim 64, 4 heads of 16, 256 memories, a batch
of 32 held-out images, N = 64 tokens, float32), with the median of several repeats after
warm-up and its spread. Rows, one module each:

- `overhead` (`_overhead`): `solvers.solve` against a hand-written `lax.scan`.
- `flops` (`_flops`): FLOP rate of the vector field and of a training step against a
  large matmul.
- `closed_form` (`_closed_form`): the paper's eq. 17 against `jax.grad` of the energy.
- `fixed_point` (`_fixed_point`): NFE and time to RMS G < 1e-5, every method, both flows.
- `memory` (`_memory`): a training step's memory against the horizon, per adjoint.
- `compile` (`_compile`): first-call time and recompilations.
- `batch` (`_batch`): throughput against batch size.
- `devices` (`_devices`): the solve sharded over 1, 2, 4 devices.
- `distributed` (`_distributed`, with `--distributed`): over several processes.

Nothing here is a test: speed is never asserted, only measured and reported.
"""

__all__ = ["ROWS", "run_benchmarks"]


def __getattr__(name):
    # Lazy: worker subprocesses (`benchmarks._devices`, `benchmarks._distributed`) must be
    # able to set up JAX (device count, distributed runtime) before anything touches it.
    if name in __all__:
        from . import _run

        return getattr(_run, name)
    raise AttributeError(f"module 'benchmarks' has no attribute {name!r}")
