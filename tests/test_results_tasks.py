"""Typed results of the tasks room (`et_ode.analysis.tasks`): each study returns its
record (`Overshoot`, `GraphOvershoot`, `GradientDepth`, `ImageBasins`,
`ImageBasinContinuation`), read by key and by attribute alike, its JSON that of the dict
with its keys, read back typed (arrays, NaN, nested records) and written again the same.
Tiny untrained models (8 x 8 images, a 120-node graph, conftest's ET): the numbers are
not checked here (test_analysis.py, test_graphs.py, test_cli.py do)."""

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from et_ode import analysis, solvers, tasks
from et_ode.analysis import landscape
from et_ode.analysis import tasks as records


def read_back(result):
    """`result` through JSON and back as its own type, after checking that its JSON is
    the dict's (key for key) and survives `json`; the copy writes the same JSON again."""
    data = result.to_json()
    assert data == analysis.to_json(dict(result))
    assert json.loads(json.dumps(data)) == data
    back = type(result).from_json(json.loads(json.dumps(data)))
    assert type(back) is type(result) and list(back) == list(result)
    assert back.to_json() == data
    return back


def read_only(result, key):
    assert result[key] is getattr(result, key)
    with pytest.raises(TypeError):
        result[key] = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, key, None)


@pytest.fixture(scope="module")
def image_model():
    """An untrained `MaskedImageET` on 8 x 8 images with a stored normalisation and a
    decoder with weights (untrained, it decodes to zero)."""
    config = et_ode.ImageModelConfig(
        image_size=8, patch=4, dim=8, n_heads=1, head_dim=4, n_memories=8, init_std=0.3
    )
    normalisation = et_ode.ChannelNormalisation((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    model = et_ode.MaskedImageET(config, key=jax.random.key(5), normalisation=normalisation)
    weight = 0.3 * jax.random.normal(jax.random.key(8), model.decoder.weight.shape, jnp.float32)
    return eqx.tree_at(lambda m: m.decoder.weight, model, weight)


@pytest.fixture(scope="module")
def images():
    """Two images in [0, 1] and their masks."""
    pictures = jax.random.uniform(jax.random.key(9), (2, 8, 8, 3))
    masking = jax.vmap(lambda k: et_ode.random_masking(k, 4, 0.5, 0.9))(
        jax.random.split(jax.random.key(7), 2)
    )
    return pictures, masking


def test_overshoot(image_model, images):
    pictures, masking = images
    result = analysis.overshoot(
        image_model, pictures, masking, normalised=False, n_times=3, t_max_factor=3.0
    )
    assert isinstance(result, records.Overshoot)
    read_only(result, "mse")
    assert result["horizon"] == result.horizon == pytest.approx(1.2)
    back = read_back(result)
    assert isinstance(back.mse_per_image, np.ndarray)
    assert back.mse_per_image.shape == (2, len(result.times))
    np.testing.assert_array_equal(back.energy, result.energy)
    assert back.horizon_kind == "t1" and back.metadata["study"] == "overshoot"


def test_graph_overshoot():
    graph = tasks.anomaly_benchmark(
        120, seed=1, n_features=6, anomalies=tasks.AnomalyInjection(clique_size=6)
    )
    config = tasks.GraphModelConfig(
        dim=8, n_heads=1, head_dim=4, n_memories=8, init_std=0.3, self_attention=True
    )
    model = tasks.NodeAnomalyET(
        config, n_nodes=graph.n_nodes, n_features=graph.n_features, key=jax.random.key(2)
    )
    features = jnp.asarray(tasks.standardise(graph.features))
    senders, receivers = jnp.asarray(graph.senders), jnp.asarray(graph.receivers)
    result = analysis.graph_overshoot(
        model,
        features,
        senders,
        receivers,
        graph.labels,
        np.arange(60),
        t_max_factor=3.0,
        n_times=3,
    )
    assert isinstance(result, records.GraphOvershoot)
    read_only(result, "auc")
    back = read_back(result)
    np.testing.assert_array_equal(back.auc, result.auc)
    assert back.best_auc == result.best_auc and back.solve_options == result.solve_options


def test_gradient_depth(model, x0):
    """Backsolve skipped at both horizons (beyond its stable 1.2 tau on the projected
    flow): its NaN norms and ratio read back as NaN, its `last_grad` None; the implicit
    gradient without `check_implicit` has no keys of it, and a result without an
    implicit gradient has no `implicit`."""
    settings = analysis.GradientDepthSettings(
        n_splits=2,
        implicit_options=solvers.SolveOptions(solver="euler", dt0=0.1, max_steps=1000),
        implicit_t1=100.0,
        fixed_point_atol=1e-4,
    )
    result = analysis.gradient_depth(
        model,
        x0,
        horizons=(1.6, 2.4),
        options=analysis.GRADIENT_DEPTH_OPTIONS.replace(flow="projected"),
        settings=settings,
    )
    assert isinstance(result, records.GradientDepth)
    read_only(result, "adjoints")
    check, skipped = result.adjoints["checkpoint"], result.adjoints["backsolve"]
    assert isinstance(check, records.AdjointGradients) and check["ratio"] == check.ratio
    assert isinstance(result.implicit, records.ImplicitGradient)
    assert isinstance(result["adjoint_state"], records.AdjointState)
    assert "relative_difference_to_checkpoint" in result.implicit
    assert "checkpoint_t1" not in result.implicit and result.implicit.checkpoint_t1 is None
    np.testing.assert_array_equal(result.steps, [16, 24])
    back = read_back(result)
    back_skipped = back.adjoints["backsolve"]
    assert isinstance(back_skipped, records.AdjointGradients)
    assert isinstance(back_skipped.grad_norm, np.ndarray) and np.all(
        np.isnan(back_skipped.grad_norm)
    )
    assert np.isnan(back_skipped.ratio) and np.isnan(skipped.ratio)
    assert back_skipped.vanishes is None and back_skipped.last_grad is None
    np.testing.assert_array_equal(back.adjoints["checkpoint"].last_grad, check.last_grad)
    assert isinstance(back.implicit, records.ImplicitGradient)
    assert isinstance(back.adjoint_state, records.AdjointState)
    np.testing.assert_array_equal(back.adjoint_state.grad_norm, result.adjoint_state.grad_norm)
    without = records.GradientDepth.from_json(
        {k: v for k, v in result.to_json().items() if k != "implicit"}
    )
    assert "implicit" not in without and without.implicit is None


# constant steps (their solve compiles faster than tsit5's) to RMS G 1e-4
BASIN_OPTIONS = analysis.BASIN_OPTIONS.replace(solver="euler", rtol=None, atol=None, dt0=0.2)
BASIN_SETTINGS = analysis.BasinSettings(fixed_point_atol=1e-4, t1=1000.0, k=2)


def test_image_basins(image_model, images):
    result = analysis.image_basins(
        image_model,
        *images,
        resolution=5,
        random_starts=2,
        options=BASIN_OPTIONS,
        settings=BASIN_SETTINGS.replace(polish_max=1, distance_tol=1e-2),
    )
    assert isinstance(result, records.ImageBasins)
    read_only(result, "attractors")
    assert all(isinstance(a, records.ImageAttractor) for a in result.attractors)
    assert isinstance(result.plane, records.ImagePlane)
    assert isinstance(result.random, records.ImageRandomStarts)
    assert isinstance(result.plane.basin_entropy, landscape.BasinEntropy)
    polished = [a for a in result.attractors if a.polished]
    assert polished and polished[0]["decoded_image"].shape == (8, 8, 3)
    assert "x" not in polished[0] and "count" not in polished[0]
    back = read_back(result)
    assert all(isinstance(a, records.ImageAttractor) for a in back.attractors)
    assert isinstance(back.plane.basin_entropy, landscape.BasinEntropy)
    assert isinstance(back.random, records.ImageRandomStarts)
    np.testing.assert_array_equal(back.plane.labels_grid, result.plane.labels_grid)
    for mine, theirs in zip(back.attractors, result.attractors):
        if theirs.decoded_image is None:
            assert mine.decoded_image is None
        else:
            np.testing.assert_allclose(mine.decoded_image, theirs.decoded_image)


def test_image_basin_continuation(image_model, images):
    pictures, masking = images
    result = analysis.image_basin_continuation(
        image_model,
        pictures[:1],
        jax.tree.map(lambda a: a[:1], masking),
        np.array([0.4, 0.5]),
        random_starts=2,
        options=BASIN_OPTIONS,
        settings=analysis.BasinContinuationSettings(
            match="overlap",
            # as the command line's --quick: no Newton, no Hessian
            basins=BASIN_SETTINGS.replace(polish_max=0),
        ),
    )
    assert isinstance(result, records.ImageBasinContinuation)
    assert isinstance(result, landscape.BasinContinuation)
    read_only(result, "image_track")
    assert all(isinstance(t, records.ImageTrack) and "x" not in t for t in result.tracks)
    assert result.image_track.shape == (2,) and result.metadata["random_starts"] == 2
    back = read_back(result)
    assert all(isinstance(t, records.ImageTrack) for t in back.tracks)
    np.testing.assert_array_equal(back.image_track, result.image_track)
    np.testing.assert_array_equal(back.labels, result.labels)
    # a track polished at one value and not at another: its eigenvalues stay a list
    mixed = dict(result.tracks[0].to_json(), smallest_eigenvalues=[None, [0.5, 1.0]])
    track = records.ImageTrack.from_json(mixed)
    assert track.smallest_eigenvalues[0] is None
    np.testing.assert_array_equal(track.smallest_eigenvalues[1], [0.5, 1.0])
