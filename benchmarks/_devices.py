"""Row 7, devices: the paper's solve (Euler dt 0.1, 12 steps) with the batch sharded over
1, 2 and 4 devices by `solvers.batch_mesh` / `solvers.shard_batch`: the largest
difference from the 1-device result (also of the same solve at a temperature, 0.01:
each sample's noise is its own whatever the sharding), and the throughput against 1
device.

On a CPU the devices are forced host devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=4`), which must be set before JAX is
imported: the row runs in a subprocess (`python -m benchmarks._devices`), which gets the
model and the batch through a temporary folder. On a machine that already has that many
devices (GPUs) the subprocess uses them as they are.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from et_ode.records import atomic_path, atomic_write_text

FAMILY = "devices"
COUNTS = (1, 2, 4)
TOLERANCE = 1e-6
FORCE_FLAG = "--xla_force_host_platform_device_count"


def save_core(core, folder: Path) -> None:
    """The core's hyperparameters as JSON and its arrays with equinox serialisation."""
    import equinox as eqx

    hyper = {
        "dim": core.dim,
        "n_heads": int(core.attention.Wq.shape[0]),
        "head_dim": int(core.attention.Wq.shape[1]),
        "n_memories": int(core.hopfield.xi.shape[0]),
        "beta": core.attention.beta,
        "self_attention": core.attention.self_attention,
        "hopfield": core.hopfield.activation,
        "tau": core.tau,
        "eps": core.norm.eps,
        "dtype": str(core.hopfield.xi.dtype),
        "softmax_beta": core.hopfield.softmax_beta,
        "power": core.hopfield.power,
        "learn_beta": core.attention.log_beta is not None,
    }
    atomic_write_text(folder / "core.json", json.dumps(hyper))
    with atomic_path(folder / "core.eqx") as temporary:
        eqx.tree_serialise_leaves(temporary, core)


def load_core(folder: Path):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import et_ode

    h = json.loads((folder / "core.json").read_text())
    options = {}
    if h["hopfield"] == "softmax":
        options["softmax_beta"] = h["softmax_beta"]
    if h["hopfield"] == "power":
        options["power"] = h["power"]
    skeleton = et_ode.EnergyTransformer(
        h["dim"],
        h["n_heads"],
        h["head_dim"],
        h["n_memories"],
        key=jax.random.key(0),
        beta=h["beta"],
        self_attention=h["self_attention"],
        hopfield=h["hopfield"],
        tau=h["tau"],
        eps=h["eps"],
        hopfield_options=options or None,
        dtype=jnp.dtype(h["dtype"]),
        learn_beta=h.get("learn_beta", False),
    )
    return eqx.tree_deserialise_leaves(folder / "core.eqx", skeleton)


def run(problem, opts) -> list[dict]:
    import numpy as np

    from ._common import row

    counts = COUNTS
    repeats = opts.reps(2 if opts.quick else 5)
    with tempfile.TemporaryDirectory(prefix="et-ode-bench-") as tmp:
        folder = Path(tmp)
        save_core(problem.core, folder)
        with atomic_path(folder / "x0.npy") as temporary:
            np.save(temporary, np.asarray(problem.x0))
        env = dict(os.environ)
        flags = env.get("XLA_FLAGS", "")
        if FORCE_FLAG not in flags:
            env["XLA_FLAGS"] = f"{flags} {FORCE_FLAG}={max(counts)}".strip()
        cmd = [
            sys.executable,
            "-m",
            "benchmarks._devices",
            str(folder),
            ",".join(map(str, counts)),
            str(repeats),
        ]
        root = Path(__file__).resolve().parent.parent
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"devices worker failed:\n{done.stderr[-3000:]}")
        result = json.loads((folder / "result.json").read_text())
    rows = []
    base = result["runs"][0]
    for r in result["runs"]:
        equal = max(r["max_abs_diff"], r["noisy_max_abs_diff"]) <= TOLERANCE
        rows.append(
            row(
                FAMILY,
                f"euler-12 solve sharded over {r['devices']} device(s)",
                value=r["samples_per_second"] / base["samples_per_second"],
                unit="x throughput",
                reference=f"1 device: {base['samples_per_second']:.1f} samples/s",
                goal=f"max |diff| <= {TOLERANCE:g}",
                met=equal,
                note=(
                    f"max |diff| vs 1 device {r['max_abs_diff']:.2g} (at T = 0.01: "
                    f"{r['noisy_max_abs_diff']:.2g}); "
                    f"{r['samples_per_second']:.1f} samples/s; {result['device_kind']} x "
                    f"{result['device_count']}"
                    + (
                        "; forced host devices share this machine's cores"
                        if result["platform"] == "cpu"
                        else ""
                    )
                ),
                max_abs_diff=r["max_abs_diff"],
                noisy_max_abs_diff=r["noisy_max_abs_diff"],
                samples_per_second=r["samples_per_second"],
                devices=r["devices"],
                seconds=r["seconds"],
                worker_xla_flags=result["xla_flags"],
            )
        )
    return rows


def worker(folder: Path, counts: list[int], repeats: int) -> dict:
    """In the subprocess: solve on 1, 2, 4 devices; write `result.json`."""
    import equinox as eqx
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    from et_ode import solvers

    from ._common import spread, time_interleaved

    core = load_core(folder)
    x0 = np.load(folder / "x0.npy")
    solve = eqx.filter_jit(lambda m, x: solvers.solve(m, x).x_final)
    # at a temperature each sample draws with fold_in(key, i): padding and sharding
    # leave every sample's noise as it is
    noisy = eqx.filter_jit(
        lambda m, x: solvers.solve(m, x, temperature=0.01, key=jax.random.key(0)).x_final
    )
    available = jax.devices()
    counts = [c for c in counts if c <= len(available)]
    calls, results, noisy_results = {}, {}, {}
    for count in counts:
        mesh = solvers.batch_mesh(available[:count])
        x_sharded, batch = solvers.shard_batch(x0, mesh)
        model = jax.device_put(core, NamedSharding(mesh, PartitionSpec()))
        calls[count] = lambda m=model, x=x_sharded: solve(m, x)
        results[count] = np.asarray(calls[count]())[:batch]
        noisy_results[count] = np.asarray(noisy(model, x_sharded))[:batch]
    times = time_interleaved(calls, repeats)
    runs = []
    for count in counts:
        t = spread(times[count])
        runs.append(
            {
                "devices": count,
                "seconds": t,
                "samples_per_second": x0.shape[0] / t["median"],
                "max_abs_diff": float(np.max(np.abs(results[count] - results[counts[0]]))),
                "noisy_max_abs_diff": float(
                    np.max(np.abs(noisy_results[count] - noisy_results[counts[0]]))
                ),
            }
        )
    out = {
        "runs": runs,
        "platform": available[0].platform,
        "device_kind": available[0].device_kind,
        "device_count": len(available),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    atomic_write_text(folder / "result.json", json.dumps(out))
    return out


if __name__ == "__main__":
    worker(Path(sys.argv[1]), [int(c) for c in sys.argv[2].split(",")], int(sys.argv[3]))
