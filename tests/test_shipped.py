"""The shipped models load by name and reproduce the held-out numbers they were shipped
with (and that the README quotes), computed by the same evaluation code; and the suite's
compiler settings (tests/conftest.py) change no number beyond rounding.

Both run their numbers in one fresh process with XLA's default compiler settings, as a
user's run compiles: the shipped models' evaluation (256 crops each, the fixed-point model
to its stop) is the heaviest computation of the suite, and code compiled with the suite's
settings runs it 2-3x slower."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import et_ode
from conftest import ROOT, SUITE_XLA_FLAGS, given_xla_flags
from et_ode.tasks import (
    SHIPPED,
    held_out_split,
    read_checkpoint,
    shipped_path,
)
from et_ode.tasks.images._config import config_from_header

# Run in both processes: a tiny float64 model (the shapes of conftest.make_model), a
# constant-step solve and a gradient through it, and an adaptive solve of the smooth
# (softmax) model: with ReLU memories a step that lands on the other side of a kink
# changes an adaptive solve by far more than its tolerance, whatever the compiler.
TINY_NUMBERS = """
import equinox as eqx
import jax
import jax.numpy as jnp
import et_ode
from et_ode import solvers


def tiny_numbers():
    model = et_ode.EnergyTransformer(16, 2, 8, 24, key=jax.random.key(0), init_std=0.3,
                                     dtype=jnp.float64)
    x0 = jax.random.normal(jax.random.key(1), (6, 16), jnp.float64)
    heun = solvers.solve(model, x0, solver="heun", dt0=0.1, t1=1.2).x_final
    smooth = et_ode.EnergyTransformer(16, 2, 8, 24, key=jax.random.key(0), init_std=0.3,
                                      hopfield="softmax", dtype=jnp.float64)
    tsit5 = solvers.solve(smooth, x0, solver="tsit5", t1=3.0, rtol=1e-8, atol=1e-10).x_final

    def loss(m):
        return jnp.sum(jnp.sin(m.norm(solvers.solve(m, x0, solver="euler", dt0=0.1,
                                                    t1=1.2).x_final)))

    grads = jax.tree.leaves(eqx.filter_grad(loss)(model))
    return dict(heun=heun.tolist(), tsit5=tsit5.tolist(),
                grad=jnp.concatenate([jnp.ravel(g) for g in grads]).tolist())
"""

DEFAULT_COMPILER = (
    TINY_NUMBERS
    + """
import json
from et_ode.tasks import (SHIPPED, eval_masks, evaluate_model, held_out_split,
                          load_model_and_config)

jax.config.update("jax_enable_x64", True)  # as the suite
mse = {}
for name in sorted(SHIPPED):
    model, config, _ = load_model_and_config(name)
    images = model.normalisation.apply(held_out_split(config))
    mse[name] = evaluate_model(model, images, eval_masks(config, len(images)))
print("RESULT " + json.dumps(dict(mse=mse, tiny=tiny_numbers())))
"""
)


@pytest.fixture(scope="module")
def default_compiler():
    """The numbers above, from a fresh process with XLA's default compiler settings."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=" ".join(given_xla_flags()))
    done = subprocess.run(
        [sys.executable, "-c", DEFAULT_COMPILER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(out for out in done.stdout.splitlines() if out.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_model_reproduces_its_numbers(name, default_compiler):
    path = shipped_path(name)
    header, blobs = read_checkpoint(path)
    assert len(blobs) == 1  # model only, no optimiser state
    assert path.stat().st_size < 4_000_000
    config = config_from_header(header, path)
    model = et_ode.MaskedImageET.load(name)
    assert model.dynamics == config.dynamics
    assert len(held_out_split(config)) == header["metrics"]["eval_images"]
    mse = default_compiler["mse"][name]
    assert mse == pytest.approx(header["metrics"]["eval_masked_mse"], rel=1e-4)
    # Held-out scenes only: the shipped numbers are not training numbers.
    assert header["config"]["data"]["source"] == "photos"
    assert np.isfinite(jax.tree.leaves(model)[0]).all()


def test_suite_compiler_settings_change_no_number(default_compiler):
    """The suite's settings against XLA's defaults on the same computations: a constant-step
    solve and a gradient through it agree to rounding (1e-12); an adaptive solve to a
    fraction of its tolerance (rounding may move a step size in its last digits)."""
    namespace = {}
    exec(TINY_NUMBERS, namespace)
    here, there = namespace["tiny_numbers"](), default_compiler["tiny"]
    np.testing.assert_allclose(here["heun"], there["heun"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(here["grad"], there["grad"], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(here["tsit5"], there["tsit5"], rtol=1e-9, atol=1e-9)
    if not os.environ.get("ET_ODE_TEST_XLA_DEFAULTS"):  # else both are the defaults
        assert os.environ["XLA_FLAGS"].split()[: len(SUITE_XLA_FLAGS)] == list(SUITE_XLA_FLAGS)


def test_format_1_checkpoints_still_load(tmp_path):
    """The shipped files are format 2 (a SHA-256 of the header too). A format-1 file (the
    magic ending in 1, no header digest), as et-ode 0.1 wrote them, loads to the same
    model."""
    import hashlib
    import json
    import struct

    from et_ode.tasks._checkpoint import MAGIC, MAGIC_V1

    path = shipped_path("paper")
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    header, blobs = read_checkpoint(path)
    encoded = json.dumps(dict(header, format=1), sort_keys=True).encode()
    old = tmp_path / "paper-format-1.eqx"
    old.write_bytes(MAGIC_V1 + struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))
    old_header, old_blobs = read_checkpoint(old)
    assert old_blobs == blobs and old_header["format"] == 1
    for a, b in zip(
        jax.tree.leaves(et_ode.MaskedImageET.load(old)),
        jax.tree.leaves(et_ode.MaskedImageET.load("paper")),
    ):
        np.testing.assert_array_equal(a, b)
    assert hashlib.sha256(blobs[0]).hexdigest() == header["blobs"][0]["sha256"]
