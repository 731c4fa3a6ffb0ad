"""The project's main programs compiled for NVIDIA H100s on a machine without a GPU
(tests/_deviceless.py; run by `make gpu-compile`, skipped elsewhere).

On one H100: the solves, the three adjoints' gradients, the fixed-point methods and the
two tasks' training steps, at the shipped models' shapes, each must compile as it is
(XLA's refusal of continuation's corrector, tests/test_gpu_compile.py, is the one known
case that needs passes off). On four H100s of one host, the batch split over them as
`solvers.shard_batch` places it: a solve must exchange nothing but a flag per loop
iteration (whether any sample still runs) and keep its results on their devices, and a
data-parallel gradient must all-reduce the parameters' gradient once, after its loops.
And every program that `et-ode demo --quick` lowers, run here on the CPU, must compile
for one H100 as it is.
"""

import contextlib
import functools
import io

import pytest
from _deviceless import (
    collectives,
    compile_for,
    compile_program,
    distinct,
    h100_mesh,
    is_flag,
    programs_lowered,
    requested,
)

pytestmark = requested

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import PartitionSpec  # noqa: E402

from et_ode import analysis, solvers  # noqa: E402

BATCH = 8  # samples; split 2 per device over four
TOL = {"float32": 1e-4, "float64": 1e-8}  # fixed-point stops (RMS G)


@functools.cache
def image_problem(dtype: str):
    """The shipped `paper` model and `BATCH` held-out masked crops, cast to `dtype`:
    `(image_model, core, x0 [BATCH, N, D])`."""
    from benchmarks._common import shipped_problem

    problem = shipped_problem("paper", BATCH)
    model, x0 = analysis.cast((problem.image_model, problem.x0), jnp.dtype(dtype))
    return model, model.core, x0


def adaptive(dtype, **options):
    """Tsit5 under PID control to a fixed point (time cap 100), as the studies solve."""
    defaults = dict(
        solver="tsit5",
        rtol=1e-4,
        atol=1e-6,
        dt0=None,
        stop=solvers.FixedPointStop(TOL[dtype]),
        t1=100.0,
        max_steps=4096,
    )
    return defaults | options


def solve_program(dtype, **options):
    _, core, x0 = image_problem(dtype)
    return (lambda c, x: solvers.solve(c, x, **options).x_final), (core, x0)


def gradient_program(dtype, adjoint):
    """d/d(core) of the sum of squares of a batch's end states, by `adjoint`."""
    _, core, x0 = image_problem(dtype)
    options = {
        "implicit": adaptive(dtype, flow="projected"),
        "backsolve": dict(solver="tsit5", rtol=1e-4, atol=1e-6, dt0=None, t1=1.2),
        "checkpoint": adaptive(dtype, stop=None),
    }[adjoint]

    def gradient(c, x):
        loss = lambda m: jnp.sum(solvers.solve(m, x, adjoint=adjoint, **options).x_final ** 2)  # noqa: E731
        return eqx.filter_grad(loss)(c)

    return gradient, (core, x0)


def fixed_point_program(dtype, method):
    _, core, x0 = image_problem(dtype)
    options = dict(method=method, linear="gmres") if method == "newton" else dict(method=method)
    return (lambda c, x: solvers.find_fixed_point(c, x, **options).x), (core, x0[0])


def image_training_program():
    """`et_ode.tasks.images.train_step` (Adam) on the shipped model, a batch of 8 drawn
    from 16 images of its size, the paper's masking."""
    import optax

    from et_ode.tasks.images._train import train_step

    model, _, _ = image_problem("float32")
    optimizer = optax.adam(1e-3)
    state = optimizer.init(eqx.filter(model, eqx.is_array))
    size = model.config.image_size
    images = jnp.zeros((16, size, size, model.config.channels), jnp.float32)

    def step(m, s, im, key):
        return train_step(m, s, im, 0, key, optimizer, BATCH, 0.5, 1.0)

    return step, (model, state, images, jax.random.key(0))


def graph_training_program():
    """One full-graph step of the shipped node-anomaly detector on its generated graph."""
    import optax

    from et_ode.tasks.graphs._fit import _graph_arrays, anomaly_step, load_node_graph
    from et_ode.tasks.graphs._train import load_graph_model

    model, config, _ = load_graph_model("graph_anomaly")
    features, senders, receivers, labels = _graph_arrays(load_node_graph(config))
    optimizer = optax.adam(1e-3)
    state = optimizer.init(eqx.filter(model, eqx.is_array))
    train = jnp.arange(labels.shape[0]) % 2 == 0

    def step(m, s, f, snd, rcv, y, t):
        return anomaly_step(m, s, optimizer, f, snd, rcv, y, t, jnp.float32(10.0))

    return step, (model, state, features, senders, receivers, labels, train)


PROGRAMS = {
    "solve, Euler 12 steps (float32)": lambda: solve_program("float32"),
    "solve, Tsit5 to a fixed point (float32)": lambda: solve_program(
        "float32", **adaptive("float32", throw=False)
    ),
    "solve, Tsit5 to a fixed point (float64)": lambda: solve_program(
        "float64", **adaptive("float64", throw=False)
    ),
    "solve, auto on the projected flow (float64)": lambda: solve_program(
        "float64", **dict(adaptive("float64", throw=False), solver="auto", flow="projected")
    ),
    "gradient, implicit adjoint (float32)": lambda: gradient_program("float32", "implicit"),
    "gradient, backsolve (float32)": lambda: gradient_program("float32", "backsolve"),
    "gradient, checkpointed (float32)": lambda: gradient_program("float32", "checkpoint"),
    "fixed point, Newton-GMRES (float64)": lambda: fixed_point_program("float64", "newton"),
    "fixed point, Anderson (float32)": lambda: fixed_point_program("float32", "anderson"),
    "fixed point, L-BFGS (float64)": lambda: fixed_point_program("float64", "lbfgs"),
    "images, train_step (float32)": image_training_program,
    "graphs, anomaly_step (float32)": graph_training_program,
}


@pytest.fixture(scope="module")
def one_h100():
    return h100_mesh(1)


@pytest.fixture(scope="module")
def four_h100():
    return h100_mesh(4)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_each_program_compiles_for_an_h100_as_it_is(one_h100, name):
    function, args = PROGRAMS[name]()
    answer, _ = compile_for(one_h100, function, args)
    if answer != "compiled":
        rescued, _ = compile_for(one_h100, function, args, passes_off=("triton-softmax-rewriter",))
        pytest.fail(f"XLA refused {name} for an H100: {answer} (that pass off: {rescued})")


@pytest.mark.parametrize(
    "options, flags",  # flags: whether its loops must ask if any sample still runs
    [(dict(throw=False), False), (adaptive("float32", throw=False), True)],
    ids=["Euler 12 steps", "Tsit5 to a fixed point"],
)
def test_a_sharded_solve_exchanges_only_flags_and_keeps_its_results_split(
    four_h100, options, flags
):
    function, args = solve_program("float32", **options)
    answer, compiled = compile_for(four_h100, function, args, split=(1,))
    assert answer == "compiled", answer
    found = collectives(compiled.as_text())
    moved = [c for c in found if not is_flag(c)]
    assert not moved, f"the sharded solve moves arrays between devices: {moved}"
    if not flags:
        assert not found, f"fixed steps need no exchange: {found}"
    assert compiled.output_shardings.spec == PartitionSpec("batch"), compiled.output_shardings


@pytest.mark.parametrize("adjoint", ["checkpoint", "implicit"])
def test_a_data_parallel_gradient_all_reduces_the_parameters_once(four_h100, adjoint):
    function, (core, x0) = gradient_program("float32", adjoint)
    answer, compiled = compile_for(four_h100, function, (core, x0), split=(1,))
    assert answer == "compiled", answer
    found = collectives(compiled.as_text())
    in_loops = [c for c in found if c["in_loop"] and not is_flag(c)]
    assert not in_loops, f"arrays move between devices inside the loops: {in_loops}"
    arrays = [c for c in found if not is_flag(c)]
    parameters = sum(leaf.size for leaf in jax.tree.leaves(eqx.filter(core, eqx.is_array)))
    # one all-reduce of every parameter's gradient (XLA concatenates the leaves)
    assert [(c["op"], c["bytes"]) for c in arrays] == [("all-reduce", 4 * parameters)], arrays


def test_the_collectives_of_a_batch_coupled_loop_are_found_in_it(four_h100):
    """The control of the two tests above: a loop that rescales the batch by its mean in
    every iteration must show an all-reduce of an array inside the loop."""

    def coupled(x):
        def body(_, y):
            return y / jnp.mean(y, axis=0)  # a mean over the split axis: devices talk

        return jax.lax.fori_loop(0, jnp.int32(x.shape[1]), body, x)

    x = jnp.ones((BATCH, 64), jnp.float32)
    answer, compiled = compile_for(four_h100, coupled, (x,), split=(0,))
    assert answer == "compiled", answer
    found = collectives(compiled.as_text())
    assert any(c["in_loop"] and c["arrays"] == [("f32", (64,))] for c in found), found


def test_every_program_the_quick_demo_lowers_compiles_for_an_h100(one_h100, tmp_path):
    """`et-ode demo --quick` (the README's first command, in its quick form) run here on
    the CPU, every program JAX lowers for it recorded (`programs_lowered`) and compiled
    for the H100 as it is: the whole job a user's first GPU run would compile, where its
    numbers take the CPU's path."""
    from et_ode import cli

    with programs_lowered() as lowered, contextlib.redirect_stdout(io.StringIO()):
        cli.main(["demo", "--quick", "--out", str(tmp_path / "demo"), "--no-progress"])
    assert (tmp_path / "demo" / "summary.md").is_file()
    programs = distinct(lowered)
    assert "solve_core" in {program.name for program in programs}  # the demo's solves
    refused = {}
    for program in programs:
        answer = compile_program(one_h100, program)
        if answer != "compiled":
            refused[program.name] = answer
    print(f"the quick demo: {len(lowered)} programs lowered, {len(programs)} distinct")
    assert not refused, refused
