"""Row: sparse neighbour attention at graph scale (`et_ode.Conditions(edges=...)`).

A random Energy Transformer core (D 32, 2 heads of 16, 64 memories, library default
initialisation, float32) on a random graph of 100,000 nodes and 2,000,000 edges (average
degree 20, distinct pairs, in CSR order: sorted by query), against the dense key-mask
path at N = 2,000 with the same average degree (40,000 edges). Two programs:

- one vector-field evaluation (native flow);
- one gradient step: the gradient with respect to every parameter of the model of
  `mean(x(T)^2)`, `x(T)` the end state of 3 Euler steps (dt 0.1) of `solvers.solve`
  (checkpoint adjoint), so a second derivative of the energy.

Times are per edge (the dense path costs `O(N^2)` whatever the mask, so its time per
allowed pair grows with N); the sparse path also runs on the N = 2,000 graph, for a
like-for-like ratio. Memory is XLA's buffer assignment of the compiled program
(`memory_analysis()`, temp + argument + output), as in the memory rows. The largest graph
within `BUDGET` (same degree) is extrapolated linearly from the memory at 1/10 and full
scale, checked by compiling (not running) the program at the predicted size, and refitted
through that point until it fits within 5% of the budget.

`opts.tiny`: 2,000 nodes and 40,000 edges against dense N = 200 (tests the code).
Standalone: `python -m benchmarks._sparse [--tiny] [--quick]` prints the rows as JSON.
"""

import argparse
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import et_ode
from et_ode import solvers

from ._common import Compiled, Options, memory_bytes, row, spread, time_interleaved

FAMILY = "sparse"
DIM, HEADS, HEAD_DIM, MEMORIES = 32, 2, 16, 64
DEGREE = 20
NODES, DENSE_NODES = 100_000, 2_000
TINY_NODES, TINY_DENSE_NODES = 2_000, 200
EULER_STEPS = 3
BUDGET = 16 * 2**30  # the stated budget for "the largest graph that fits"
GOAL_BYTES = 4 * 2**30  # the full-scale programs must fit in this


def random_graph(n_nodes: int, n_edges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`n_edges` distinct random pairs `(query, key)` of `n_nodes` nodes (self-loops
    possible), sorted by query then key (CSR order); int32."""
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(0, n_nodes * n_nodes, int(n_edges * 1.01) + 16))
    while ids.size < n_edges:  # a handful of collisions: top up
        ids = np.unique(np.concatenate([ids, rng.integers(0, n_nodes * n_nodes, n_edges)]))
    ids = np.sort(rng.choice(ids, n_edges, replace=False))
    return (ids // n_nodes).astype(np.int32), (ids % n_nodes).astype(np.int32)


def dense_mask(n_nodes: int, queries, keys) -> jax.Array:
    mask = np.zeros((n_nodes, n_nodes), bool)
    mask[queries, keys] = True
    return jnp.asarray(mask)


def random_core(seed: int = 0) -> et_ode.EnergyTransformer:
    return et_ode.EnergyTransformer(DIM, HEADS, HEAD_DIM, MEMORIES, key=jax.random.key(seed))


def field(model, x, args):
    """One vector-field evaluation, native flow."""
    return model.vector_field(0.0, x, args)


def grad_step(model, x, args):
    """The gradient, with respect to the model, of `mean(x(T)^2)` after `EULER_STEPS`
    Euler steps of dt 0.1 (checkpoint adjoint)."""

    def loss(m):
        sol = solvers.solve(
            m, x, args=args, solver="euler", dt0=0.1, t1=0.1 * EULER_STEPS, max_steps=EULER_STEPS
        )
        return jnp.mean(sol.x_final**2)

    return eqx.filter_grad(loss)(model)


PROGRAMS = {"vector field": field, f"gradient step ({EULER_STEPS} euler steps)": grad_step}


def abstract_memory(fn, model, n_nodes: int, n_edges: int) -> dict:
    """`memory_bytes` of `fn` compiled (never run, nothing allocated) for a graph of
    `n_nodes` nodes and `n_edges` edges."""
    params, static = eqx.partition(model, eqx.is_array)
    shape = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype)  # noqa: E731
    edges = jax.ShapeDtypeStruct((n_edges,), jnp.int32)
    x = jax.ShapeDtypeStruct((n_nodes, DIM), model.hopfield.xi.dtype)

    def program(p, x_, q, k):
        return fn(eqx.combine(p, static), x_, et_ode.Conditions(edges=(q, k)))

    compiled = jax.jit(program).lower(jax.tree.map(shape, params), x, edges, edges).compile()
    return memory_bytes(compiled)


def largest_graph(fn, model, measured: dict, budget: int = BUDGET) -> dict:
    """The most edges (degree `DEGREE`, a multiple of `DEGREE * 1000`) whose program
    fits `budget` bytes: a line through the two largest sizes of `measured`
    (`{edges: total bytes}`), checked by compiling at the predicted size and refitted
    through that point (secant steps, at most 5) until a size within 5% under the
    budget fits."""
    measured = dict(measured)
    unit = DEGREE * 1000
    for _ in range(5):
        (e1, m1), (e2, m2) = sorted(measured.items())[-2:]
        per_edge = (m2 - m1) / (e2 - e1)
        base = m1 - per_edge * e1
        edges = max(unit, int((budget - base) / per_edge) // unit * unit)
        if edges in measured:
            break
        measured[edges] = abstract_memory(fn, model, edges // DEGREE, edges)["total"]
        if 0.95 * budget <= measured[edges] <= budget:
            break
    edges = max((e for e, m in measured.items() if m <= budget), default=0)
    return {
        "edges": edges,
        "nodes": edges // DEGREE,
        "total": measured.get(edges),
        "fits": edges > 0,
        "bytes_per_edge": per_edge,
        "fixed_bytes": base,
        "compiled_sizes": {str(e): m for e, m in sorted(measured.items())},
    }


def run(problem, opts) -> list[dict]:
    """`problem` is not used: the row builds its own graph and model."""
    n_nodes, dense_nodes = (TINY_NODES, TINY_DENSE_NODES) if opts.tiny else (NODES, DENSE_NODES)
    n_edges, dense_edges = n_nodes * DEGREE, dense_nodes * DEGREE
    model = random_core()
    key_x, key_small = jax.random.split(jax.random.key(1))
    x = jax.random.normal(key_x, (n_nodes, DIM))
    x_small = jax.random.normal(key_small, (dense_nodes, DIM))
    big = et_ode.Conditions(edges=random_graph(n_nodes, n_edges, seed=2))
    small_edges = random_graph(dense_nodes, dense_edges, seed=3)
    small = et_ode.Conditions(edges=small_edges)
    dense = et_ode.Conditions(key_mask=dense_mask(dense_nodes, *small_edges))
    for cond, n in ((big, n_nodes), (small, dense_nodes), (dense, dense_nodes)):
        cond.check(n, DIM)
    repeats = opts.reps(2 if opts.quick else 3)
    rows = []
    for label, fn in PROGRAMS.items():
        programs = {
            "sparse": Compiled(fn, model, x, big),
            "sparse small": Compiled(fn, model, x_small, small),
            "dense small": Compiled(fn, model, x_small, dense),
        }
        leaves = lambda out: jax.tree.leaves(eqx.filter(out, eqx.is_array))  # noqa: E731
        diff = max(
            float(jnp.max(jnp.abs(a - b)))
            for a, b in zip(leaves(programs["sparse small"]()), leaves(programs["dense small"]()))
        )
        times = time_interleaved({name: p for name, p in programs.items()}, repeats)
        sec = {name: spread(t) for name, t in times.items()}
        per_edge = {
            "sparse": sec["sparse"]["median"] / n_edges,
            "sparse small": sec["sparse small"]["median"] / dense_edges,
            "dense small": sec["dense small"]["median"] / dense_edges,
        }
        mem = {name: memory_bytes(p.compiled) for name, p in programs.items()}
        ratio = per_edge["sparse"] / per_edge["dense small"]
        fits = mem["sparse"]["total"] < GOAL_BYTES
        rows.append(
            row(
                FAMILY,
                f"{label}, N {n_nodes}, E {n_edges}",
                value=ratio,
                unit="x dense time per edge",
                reference=f"dense key_mask path at N {dense_nodes}, E {dense_edges} "
                f"(same degree {DEGREE})",
                goal=f"reported; memory < {GOAL_BYTES / 2**30:.0f} GiB",
                met=fits,
                note=(
                    f"{sec['sparse']['median']:.3g} s, {per_edge['sparse'] * 1e9:.3g} ns/edge "
                    f"(dense {per_edge['dense small'] * 1e9:.3g} ns/edge, sparse at "
                    f"N {dense_nodes} {per_edge['sparse small'] * 1e9:.3g} ns/edge); memory "
                    f"{mem['sparse']['total'] / 2**20:.0f} MiB (dense at N {dense_nodes}: "
                    f"{mem['dense small']['total'] / 2**20:.0f} MiB); sparse = dense at "
                    f"N {dense_nodes} to {diff:.2g}"
                ),
                nodes=n_nodes,
                edges=n_edges,
                dense_nodes=dense_nodes,
                dense_edges=dense_edges,
                seconds=sec["sparse"],
                dense_seconds=sec["dense small"],
                sparse_small_seconds=sec["sparse small"],
                ns_per_edge=per_edge["sparse"] * 1e9,
                dense_ns_per_edge=per_edge["dense small"] * 1e9,
                sparse_small_ns_per_edge=per_edge["sparse small"] * 1e9,
                same_size_ratio=per_edge["sparse small"] / per_edge["dense small"],
                bytes=mem["sparse"],
                dense_bytes=mem["dense small"],
                sparse_small_bytes=mem["sparse small"],
                max_abs_diff_vs_dense=diff,
                compile_seconds=programs["sparse"].seconds,
            )
        )
        tenth = abstract_memory(fn, model, n_nodes // 10, n_edges // 10)["total"]
        biggest = largest_graph(fn, model, {n_edges // 10: tenth, n_edges: mem["sparse"]["total"]})
        rows.append(
            row(
                FAMILY,
                f"{label}, largest graph in {BUDGET / 2**30:.0f} GiB",
                value=biggest["edges"],
                unit="edges",
                reference=f"degree {DEGREE}; memory linear in E: "
                f"{biggest['bytes_per_edge']:.0f} bytes/edge",
                goal="reported",
                met=None,
                note=(
                    f"{biggest['nodes']} nodes, {biggest['edges']} edges: "
                    f"{biggest['total'] / 2**30:.2f} GiB (compiled, not run)"
                    + ("" if biggest["fits"] else "; still over the budget")
                ),
                budget_bytes=BUDGET,
                **{k: v for k, v in biggest.items()},
            )
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks._sparse", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rows = run(None, Options(quick=args.quick, repeats=3, tiny=args.tiny))
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
