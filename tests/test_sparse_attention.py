"""Sparse neighbour attention (`Conditions(edges=(queries, keys))`): the segment-reduction
energy equals the dense key-mask energy built from the same pairs (energy, both flows,
residual, dE/dt, solves, stops and adjoints, with their gradients), refuses duplicate
edges, holds no `[N, N]` array (gradients included), validates its edges, and gives the
one-device numbers with its edges split over 4 forced host devices."""

import json
import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from conftest import DIM, make_model, suite_xla_flags
from et_ode import solvers
from et_ode.core import _attention

ROOT = Path(__file__).resolve().parent.parent
N = 12  # tokens of the graph tests


def _graph(seed, n=N, n_edges=40, isolated=(3, 7), duplicates=False):
    """Random edges with self-loops; the `isolated` tokens have no edge as queries
    (token 7 none as a key either). Without `duplicates`, distinct pairs."""
    rng = np.random.default_rng(seed)
    queries = rng.integers(0, n, n_edges)
    keys = rng.integers(0, n, n_edges)
    queries[:3] = keys[:3] = [0, 5, 9]  # self-loops, surely
    keep = ~np.isin(queries, isolated) & (keys != 7)
    queries, keys = queries[keep], keys[keep]
    if duplicates:
        queries = np.concatenate([queries, queries[:4], queries[:1]])
        keys = np.concatenate([keys, keys[:4], keys[:1]])
    else:
        pairs = np.unique(np.stack([queries, keys], 1), axis=0)
        pairs = pairs[rng.permutation(len(pairs))]  # no order to rely on
        queries, keys = pairs[:, 0], pairs[:, 1]
    return queries.astype(np.int32), keys.astype(np.int32)


def _mask(queries, keys, n=N):
    mask = np.zeros((n, n), bool)
    mask[queries, keys] = True
    return jnp.asarray(mask)


def _state(seed, n=N, batch=()):
    return jax.random.normal(jax.random.key(seed), batch + (n, DIM), jnp.float64)


def _close(a, b, tol=1e-12):
    """Equal to `tol`, relative to the size of `b` (and absolute below 1)."""
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.max(np.abs(b))))
    err = float(np.max(np.abs(a - b))) / scale
    assert err <= tol, err
    return err


@eqx.filter_jit
def _everything(model, x, cond):
    """Energy, its attention part, both fields, both dE/dt, the residual, the paper's
    closed form and a forward-mode derivative of the energy (as stability studies and
    the implicit adjoint use), in one compiled program."""
    v = model.vector_field(0.0, x, cond)
    return {
        "energy": model.energy(x, cond),
        "attention": model.energy_parts(x, cond)["attention"],
        **{
            f"{flow} field": model.vector_field(0.0, x, cond, flow)
            for flow in ("native", "projected")
        },
        **{f"{flow} dEdt": model.dEdt(x, cond, flow) for flow in ("native", "projected")},
        "residual": model.residual(x, cond),
        "closed form": et_ode.closed_form_update(model, x, cond),
        "jvp": jax.jvp(lambda y: model.energy(y, cond), (x,), (v,))[1],
    }


@pytest.mark.parametrize("self_attention", [False, True])
def test_edges_equal_the_dense_mask_of_the_same_pairs(self_attention):
    model = make_model(self_attention=self_attention)
    queries, keys = _graph(seed=1)
    assert np.any(queries == keys)  # self-loops: counted exactly when self_attention
    sparse = et_ode.Conditions(edges=(queries, keys))
    dense = et_ode.Conditions(key_mask=_mask(queries, keys))
    x = jnp.stack([_state(2), _state(3)])
    for sample in x:
        got, expected = _everything(model, sample, sparse), _everything(model, sample, dense)
        for name in expected:
            _close(got[name], expected[name])
        # the paper's closed form (eq. 17) restricted to the edges = autodiff
        _close(got["closed form"], got["native field"], 1e-10)
        assert np.isfinite(float(got["energy"]))


def test_an_empty_edge_list_is_no_attention():
    model = make_model()
    x = _state(4)
    empty = jnp.zeros((0,), jnp.int32)
    cond = et_ode.Conditions(edges=(empty, empty))
    cond.check(N, DIM)
    assert float(model.energy_parts(x, cond)["attention"]) == 0.0
    _close(
        model.vector_field(0.0, x, cond),
        model.vector_field(0.0, x, et_ode.Conditions(key_mask=jnp.zeros((N, N), bool))),
    )


def test_duplicate_edges_are_refused():
    """An edge list is a set of pairs, as a key mask is: concrete duplicates are refused
    at construction, per sample of a batch, with the count and the fix."""
    queries, keys = _graph(seed=5, duplicates=True)
    n_pairs = len(set(zip(queries.tolist(), keys.tolist())))
    repeats = len(queries) - n_pairs
    assert repeats >= 5  # 4 edges repeated, one of them twice (and any random repeats)
    with pytest.raises(ValueError, match=rf"lists {repeats} duplicate edge\(s\).*np\.unique"):
        et_ode.Conditions(edges=(queries, keys))
    batch = (np.stack([queries, queries[::-1]]), np.stack([keys, keys[::-1]]))
    with pytest.raises(ValueError, match=rf"{2 * repeats} duplicate edge\(s\) \(in 2 of the 2 "):
        et_ode.Conditions(edges=batch)
    # the fix the message names gives the set, which equals the key mask of the pairs
    pairs = np.unique(np.stack([queries, keys], 1), axis=0)
    assert len(pairs) == n_pairs
    model, x = make_model(self_attention=True), _state(6)
    sparse = et_ode.Conditions(edges=(pairs[:, 0], pairs[:, 1]))
    dense = et_ode.Conditions(key_mask=_mask(queries, keys))
    _close(model.energy(x, sparse), model.energy(x, dense))
    # the same pair in two samples of a batch is no duplicate
    et_ode.Conditions(edges=(np.stack([pairs[:, 0]] * 2), np.stack([pairs[:, 1]] * 2)))


def test_chunked_scores_equal_unchunked(monkeypatch):
    """Large edge lists are scored chunk by chunk (memory); with tiny chunks forced, the
    energy, the field and a second derivative equal the dense path's."""
    model = make_model()
    queries, keys = _graph(seed=7)
    sparse = et_ode.Conditions(edges=(queries, keys))
    dense = et_ode.Conditions(key_mask=_mask(queries, keys))
    x = _state(8)

    @eqx.filter_jit
    def program(m, cond):
        loss = lambda m_: jnp.sum(m_.vector_field(0.0, x, cond, "projected") ** 2)  # noqa: E731
        return m.energy(x, cond), m.vector_field(0.0, x, cond), eqx.filter_grad(loss)(m)

    expected = program(model, dense)
    monkeypatch.setattr(_attention, "EDGE_CHUNK", 7)  # 40-odd edges: padded, 6+ chunks
    got = program(model, sparse)  # traced after the patch
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        _close(a, b)


def _avals(jaxpr):
    """Every variable's abstract value in `jaxpr` and in the jaxprs inside it."""
    for var in list(jaxpr.invars) + list(jaxpr.constvars):
        yield var.aval
    for eqn in jaxpr.eqns:
        for var in eqn.outvars:
            yield var.aval
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                if hasattr(sub, "eqns"):
                    yield from _avals(sub)
                elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    yield from _avals(sub.jaxpr)


def _largest(fn, *args) -> int:
    return max(
        int(np.prod(getattr(aval, "shape", ()))) for aval in _avals(jax.make_jaxpr(fn)(*args).jaxpr)
    )


def test_no_dense_array_anywhere_gradients_included():
    n, n_edges = 64, 150  # E << N^2 = 4096; E H Y = 2400
    model = make_model()
    rng = np.random.default_rng(9)
    pairs = np.unique(rng.integers(0, n, (n_edges, 2)), axis=0)
    queries, keys = (jnp.asarray(pairs[:, i], jnp.int32) for i in (0, 1))
    x = _state(10, n=n)
    sparse = et_ode.Conditions(edges=(queries, keys))
    dense = et_ode.Conditions(key_mask=_mask(queries, keys, n))

    def loss(m, cond):  # a second derivative of the energy: training through the field
        return jnp.sum(m.vector_field(0.0, x, cond) ** 2)

    programs = {
        "energy": lambda c: model.energy(x, c),
        "native field": lambda c: model.vector_field(0.0, x, c),
        "projected field": lambda c: model.vector_field(0.0, x, c, "projected"),
        "dEdt": lambda c: model.dEdt(x, c),
        "gradient of a loss of the field": lambda c: eqx.filter_grad(loss)(model, c),
    }
    for name, fn in programs.items():
        assert _largest(fn, sparse) < n * n, name
    assert _largest(programs["native field"], dense) >= n * n  # the check sees [N, N]


def test_edge_validation():
    model = make_model()
    q = np.array([0, 1, 2], np.int32)
    with pytest.raises(ValueError, match="key_mask and edges are mutually exclusive"):
        et_ode.Conditions(key_mask=jnp.ones((N, N), bool), edges=(q, q))
    with pytest.raises(ValueError, match="key_mask and edges"):
        model.attention(_state(1), jnp.ones((N, N), bool), (jnp.asarray(q), jnp.asarray(q)))
    with pytest.raises(ValueError, match="pair"):
        et_ode.Conditions(edges=(q, q, q))
    bad = {
        "integer array": (q.astype(np.float32), q),
        "1-D": (q[None], q[None]),
        "same length": (q, q[:2]),
        r"lie in \[0, 12\)": (q, np.array([0, 1, 12], np.int32)),
    }
    for message, edges in bad.items():
        with pytest.raises(ValueError, match=message):
            et_ode.Conditions(edges=edges).check(N, DIM)
    with pytest.raises(ValueError, match=r"lie in \[0, 12\)"):
        et_ode.Conditions(edges=(q - 1, q)).check(N, DIM)
    # a [2, E] array is a pair; batched args carry [B, E]
    et_ode.Conditions(edges=np.stack([q, q])).check(N, DIM)
    et_ode.Conditions(edges=(np.stack([q, q]), np.stack([q, q]))).check(N, DIM, (2,))
    with pytest.raises(ValueError, match="with batched args"):
        et_ode.Conditions(edges=(q, q)).check(N, DIM, (2,))
    # through the solver's own checks
    with pytest.raises(ValueError, match=r"lie in \[0, 6\)"):
        solvers.solve(model, _state(1, n=6), args=et_ode.Conditions(edges=(q + 4, q)))


@eqx.filter_jit
def _solve_and_grad(model, x0, args, stop=None):
    """The end state of a solve and the gradient of a loss of it with respect to the
    model: without `stop`, the native flow over 1 tau with the backsolve adjoint (the
    flow integrated backwards, VJPs of the field along it); with a `FixedPointStop`,
    the projected flow to its fixed point with the implicit adjoint (a Krylov solve by
    JVPs of the residual there). tsit5 at tight tolerances either way."""
    options = (
        dict(flow="native", t1=1.0, adjoint="backsolve")
        if stop is None
        else dict(flow="projected", t1=500.0, stop=stop, max_steps=20000, adjoint="implicit")
    )

    def loss(m):
        sol = solvers.solve(m, x0, args=args, solver="tsit5", rtol=1e-10, atol=1e-12, **options)
        return jnp.sum(jnp.sin(m.norm(sol.x_final))), (sol.x_final, sol.stats["residual_rms"])

    (_, (x_final, residual)), grads = eqx.filter_value_and_grad(loss, has_aux=True)(model)
    return x_final, grads, residual


@pytest.mark.parametrize("adjoint", ["backsolve", "implicit"])
def test_solves_stops_and_adjoints_equal_the_dense_mask(adjoint):
    """The backsolve adjoint on the native flow, on a batch of 2 sharing one graph (vmap
    inside `solve`); the projected flow stopped at its fixed point (`FixedPointStop`,
    about 3,700 tsit5 steps) with the implicit adjoint. The end states and the gradients
    equal the key mask's. (The checkpoint adjoint differentiates the steps themselves:
    the field's gradients are compared in the tests above.)"""
    model = make_model(hopfield="softmax")  # smooth: a clean fixed point
    implicit = adjoint == "implicit"
    queries, keys = _graph(seed=16 if implicit else 11)
    x0 = _state(17) if implicit else _state(12, batch=(2,))
    stop = solvers.FixedPointStop(atol=1e-10) if implicit else None
    sparse = _solve_and_grad(model, x0, et_ode.Conditions(edges=(queries, keys)), stop)
    dense = _solve_and_grad(model, x0, et_ode.Conditions(key_mask=_mask(queries, keys)), stop)
    if implicit:
        assert float(sparse[2]) < 1e-10  # stopped at a fixed point
    _close(sparse[0], dense[0], 1e-9)
    leaves, reference = jax.tree.leaves(sparse[1]), jax.tree.leaves(dense[1])
    assert len(leaves) == len(reference) > 2
    for a, b in zip(leaves, reference):
        _close(a, b, 1e-9)


def test_batched_args_with_one_graph_per_sample():
    model = make_model()
    pairs = [[a[:20] for a in _graph(seed=s, n_edges=30)] for s in (13, 14)]
    graphs, keys = [p[0] for p in pairs], [p[1] for p in pairs]
    x0 = _state(15, batch=(2,))
    sparse = et_ode.Conditions(edges=(np.stack(graphs), np.stack(keys)))
    dense = et_ode.Conditions(key_mask=jnp.stack([_mask(q, k) for q, k in zip(graphs, keys)]))
    sparse.check(N, DIM, (2,))
    # as `solvers.solve(..., args_batched=True)` maps them: every array leaf on axis 0
    field = eqx.filter_jit(
        lambda c: jax.vmap(
            lambda x, c_: model.vector_field(0.0, x, c_),
            in_axes=(0, jax.tree.map(lambda leaf: 0 if jnp.ndim(leaf) else None, c)),
        )(x0, c)
    )
    _close(field(sparse), field(dense))
    _close(
        field(sparse)[1],
        model.vector_field(0.0, x0[1], et_ode.Conditions(edges=(graphs[1], keys[1]))),
    )


SHARDED = r"""
import json, jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import et_ode

assert jax.device_count() == 4
model = et_ode.EnergyTransformer(16, 2, 8, 24, key=jax.random.key(0), init_std=0.3,
                                 dtype=jnp.float64)
n = 40
rng = np.random.default_rng(0)
x = jax.random.normal(jax.random.key(1), (n, 16), jnp.float64)
mesh = Mesh(np.asarray(jax.devices()), ("edges",))
errors = {}

def distinct(count):  # `count` distinct random pairs (query, key)
    codes = rng.choice(n * n, count, replace=False)
    return jnp.asarray(codes // n, jnp.int32), jnp.asarray(codes % n, jnp.int32)

# shard_map: 203 edges (padded to 204), partial segment reductions combined over devices
q, k = distinct(203)
att, g = model.attention, model.norm(x)
single = jax.jit(jax.value_and_grad(lambda g_: att.edge_energy(g_, q, k)))(g)
split = jax.jit(jax.value_and_grad(lambda g_: att.edge_energy(g_, q, k, mesh=mesh)))(g)
errors["shard_map energy"] = float(abs(split[0] - single[0]))
errors["shard_map dE/dg"] = float(jnp.max(jnp.abs(split[1] - single[1])))
def field_split(x_):  # the model's native field with the attention energy sharded
    e = lambda g_: att.edge_energy(g_, q, k, mesh=mesh) + model.hopfield(g_)
    return -jax.grad(e)(model.norm(x_)) / model.tau
vf = model.vector_field(0.0, x, et_ode.Conditions(edges=(q, k)))
errors["shard_map field"] = float(jnp.max(jnp.abs(jax.jit(field_split)(x) - vf)))
w = jnp.asarray(rng.normal(size=(203, 2)))  # a weight per edge and head (pair_weights)
single = jax.jit(jax.value_and_grad(lambda g_: att.edge_energy(g_, q, k, weights=w)))(g)
split = jax.jit(jax.value_and_grad(
    lambda g_: att.edge_energy(g_, q, k, weights=w, mesh=mesh)))(g)
errors["shard_map weighted energy"] = float(abs(split[0] - single[0]))
errors["shard_map weighted dE/dg"] = float(jnp.max(jnp.abs(split[1] - single[1])))

# automatic partitioning: edges placed over the devices, the model's own code under jit
q, k = distinct(200)
placed = [jax.device_put(i, NamedSharding(mesh, P("edges"))) for i in (q, k)]
assert len(placed[0].sharding.device_set) == 4
one, four = et_ode.Conditions(edges=(q, k)), et_ode.Conditions(edges=tuple(placed))
energy = jax.jit(lambda c: model.energy(x, c))
field = jax.jit(lambda c: [model.vector_field(0.0, x, c, f) for f in ("native", "projected")])
errors["placed energy"] = float(abs(energy(four) - energy(one)))
errors["placed fields"] = max(float(jnp.max(jnp.abs(a - b)))
                              for a, b in zip(field(four), field(one)))
print("RESULT " + json.dumps(errors))
"""


def test_edges_sharded_over_devices_equal_one_device():
    env = dict(
        os.environ,
        XLA_FLAGS=suite_xla_flags("--xla_force_host_platform_device_count=4"),
        JAX_PLATFORMS="cpu",
    )
    done = subprocess.run(
        [sys.executable, "-c", SHARDED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(out for out in done.stdout.splitlines() if out.startswith("RESULT "))
    errors = json.loads(line[len("RESULT ") :])
    assert len(errors) == 7
    for name, err in errors.items():
        assert err <= 1e-12, (name, err)
