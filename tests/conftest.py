"""Test session set-up: float64 everywhere unless a test asks for float32 explicitly,
and small shared models so that compiled functions are reused across tests."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

import et_ode  # noqa: E402

N_TOKENS, DIM = 6, 16


def make_model(hopfield="relu", self_attention=False, init_std=0.3, dtype=jnp.float64, seed=0):
    return et_ode.EnergyTransformer(
        DIM, 2, 8, 24, key=jax.random.key(seed), hopfield=hopfield,
        self_attention=self_attention, init_std=init_std, dtype=dtype,
    )


def make_state(seed=1, dtype=jnp.float64, batch=()):
    return jax.random.normal(jax.random.key(seed), batch + (N_TOKENS, DIM), dtype)


@pytest.fixture(scope="session")
def model():
    """The default tiny model: ReLU Hopfield, no self-attention, float64."""
    return make_model()


@pytest.fixture(scope="session")
def smooth_model():
    """A smooth model (softmax Hopfield) for order-of-convergence and reference tests."""
    return make_model(hopfield="softmax")


@pytest.fixture(scope="session")
def x0():
    return make_state()
