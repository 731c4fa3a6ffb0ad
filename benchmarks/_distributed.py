"""Several processes (hosts): one solve over the devices of all of them.

Every process runs the same program (JAX's multi-controller model). After
`jax.distributed.initialize`, `jax.devices()` lists the devices of every process; a
global batch is placed with `solvers.shard_batch` over `solvers.batch_mesh()` (all of
them), each process holding its share, and the jitted solve runs as one program across
the processes. The result is gathered to every process with
`jax.experimental.multihost_utils.process_allgather`.

On CPUs the processes talk through gloo collectives
(`jax_cpu_collectives_implementation = "gloo"`, JAX's default, set explicitly here); on
GPUs through NCCL. `initialize()` with no arguments lets JAX read a cluster's environment
(SLURM, Open MPI, Kubernetes, Cloud TPU, or `JAX_COORDINATOR_ADDRESS`,
`JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`); or pass the coordinator `host:port`, the number of
processes and this process's id.

Used by `python -m benchmarks --distributed ...` and, as a worker for the tests, by
`python -m benchmarks._distributed --coordinator localhost:PORT --num-processes 2
--process-id I --out DIR`.
"""

import argparse
import json
import os
import time
from pathlib import Path

from et_ode.records import atomic_path, atomic_write_text

FAMILY = "distributed"
TOLERANCE = 1e-6


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout: int = 120,
) -> None:
    """`jax.distributed.initialize`, with gloo collectives for CPU devices. Must run
    before any JAX computation. Arguments left as `None` are read from the environment
    (`JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`) or detected from
    the cluster (SLURM, Open MPI, ...)."""
    import jax

    coordinator = coordinator or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None and os.environ.get("JAX_NUM_PROCESSES"):
        num_processes = int(os.environ["JAX_NUM_PROCESSES"])
    if process_id is None and os.environ.get("JAX_PROCESS_ID"):
        process_id = int(os.environ["JAX_PROCESS_ID"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=num_processes,
        process_id=process_id,
        initialization_timeout=timeout,
    )


def gloo_available() -> tuple[bool, str]:
    """Whether this jaxlib can make gloo CPU collectives (the reason if not)."""
    try:
        from jax._src.lib import _jax
    except ImportError:  # older jaxlib layouts
        try:
            from jax._src.lib import xla_extension as _jax  # type: ignore[attr-defined]
        except ImportError as error:
            return False, f"jaxlib internals not found: {error}"
    if not hasattr(_jax, "make_gloo_tcp_collectives"):
        return False, "this jaxlib was built without gloo CPU collectives"
    return True, ""


def sharded_solve(model, x0, repeats: int = 3, **options):
    """Solve the global batch `x0: [B, N, D]` (the same array on every process) sharded
    over every device of every process; return `(x_final as NumPy [B, N, D] on every
    process, seconds per solve)`. `options` go to `solvers.solve`."""
    import equinox as eqx
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    from et_ode import solvers

    mesh = solvers.batch_mesh()  # every device of every process
    x_global, batch = solvers.shard_batch(x0, mesh)
    model = jax.device_put(model, NamedSharding(mesh, PartitionSpec()))
    solve = eqx.filter_jit(lambda m, x: solvers.solve(m, x, **options).x_final)
    out = jax.block_until_ready(solve(model, x_global))  # compile and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(solve(model, x_global))
        times.append(time.perf_counter() - start)
    gathered = np.asarray(multihost_utils.process_allgather(out, tiled=True))[:batch]
    return gathered, times


def local_solve(model, x0, **options):
    """The same solve on this process's first device only (no collectives)."""
    import equinox as eqx
    import jax
    import numpy as np

    from et_ode import solvers

    device = jax.local_devices()[0]
    model, x0 = jax.device_put((model, x0), device)
    solve = eqx.filter_jit(lambda m, x: solvers.solve(m, x, **options).x_final)
    return np.asarray(solve(model, x0))


def small_problem(batch: int = 6, seed: int = 0):
    """A small deterministic float32 problem, the same in every process."""
    import jax
    import jax.numpy as jnp

    import et_ode

    model = et_ode.EnergyTransformer(
        16, 2, 8, 32, key=jax.random.key(seed), init_std=0.3, dtype=jnp.float32
    )
    x0 = jax.random.normal(jax.random.key(seed + 1), (batch, 8, 16), jnp.float32)
    return model, x0


def run(problem, opts) -> list[dict]:
    """The benchmark row (after `initialize`): the problem's solve over every device of
    every process against a single-device solve on this process."""
    import jax
    import numpy as np

    from ._common import row, spread

    x0 = np.asarray(problem.x0)
    gathered, times = sharded_solve(problem.core, x0, repeats=opts.reps(2 if opts.quick else 5))
    reference = local_solve(problem.core, x0)
    diff = float(np.max(np.abs(gathered - reference)))
    t = spread(times)
    return [
        row(
            FAMILY,
            f"euler-12 solve over {jax.device_count()} devices in {jax.process_count()} processes",
            value=diff,
            unit="max |diff|",
            reference="the same solve on one local device",
            goal=f"<= {TOLERANCE:g}",
            met=diff <= TOLERANCE,
            note=f"{x0.shape[0] / t['median']:.1f} samples/s over all processes",
            samples_per_second=x0.shape[0] / t["median"],
            seconds=t,
            processes=jax.process_count(),
            devices=jax.device_count(),
        )
    ]


def _save_array(path: Path, array) -> None:
    """`numpy.save` to `path`, atomically (the parent reads it when the workers end)."""
    import numpy as np

    with atomic_path(path) as temporary:
        np.save(temporary, np.asarray(array))


def _worker(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    parser.add_argument(
        "--single", action="store_true", help="no distributed runtime: the single-process reference"
    )
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=6)
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.single:
        import numpy as np

        model, x0 = small_problem(args.batch)
        _save_array(out / "x0.npy", x0)
        _save_array(out / "single.npy", local_solve(model, x0))
        return
    if None in (args.coordinator, args.num_processes, args.process_id):
        parser.error("--coordinator, --num-processes and --process-id, or --single")
    initialize(args.coordinator, args.num_processes, args.process_id)
    import jax
    import numpy as np

    model, x0 = small_problem(args.batch)
    gathered, _ = sharded_solve(model, np.asarray(x0), repeats=0)
    if jax.process_index() == 0:
        _save_array(out / "gathered.npy", gathered)
        atomic_write_text(
            out / "info.json",
            json.dumps(
                {
                    "process_count": jax.process_count(),
                    "device_count": jax.device_count(),
                    "local_device_count": jax.local_device_count(),
                    "devices": [str(d) for d in jax.devices()],
                }
            ),
        )
    jax.distributed.shutdown()


if __name__ == "__main__":
    _worker()
