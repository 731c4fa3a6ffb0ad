"""Your own images (issue 49, item 6): `tasks.image_problem` from photo files, a folder or
an array to the core's problem for a batch and for one sample, the command line's path
through it, and progress bars drawn only on a terminal (no carriage returns in a log)."""

import ast
import dataclasses
import io
import sys
from pathlib import Path

import equinox as eqx
import imageio.v2 as imageio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from et_ode import solvers, tasks
from et_ode.cli import encoded
from et_ode.cli._runs import Stages, folder_photos
from et_ode.tasks.images._train import _header

ROOT = Path(__file__).resolve().parents[1]
TINY = et_ode.TrainConfig(
    model=et_ode.ImageModelConfig(dim=16, n_heads=2, head_dim=8, n_memories=32, init_std=0.3),
    # conditions in every field: the visible tokens clamped, the encoded tokens a field
    dynamics=et_ode.Dynamics(t1=0.3, clamp_visible=True, external_field=True),
    data=et_ode.DataConfig(mask_ratio=0.25, mask_fraction=1.0),
    training=et_ode.TrainingConfig(
        steps=1, batch_size=2, warmup_steps=0, eval_every=1, checkpoint_every=1
    ),
)
NORMALISATION = et_ode.ChannelNormalisation((0.45, 0.35, 0.3), (0.3, 0.25, 0.25))
SIZE, N, D = 32, 64, 16


@pytest.fixture(scope="module")
def model():
    """An untrained tiny model with a random decoder (the default one is zero)."""
    model = tasks.new_model(TINY, NORMALISATION)
    key_w, key_b = jax.random.split(jax.random.key(7))
    return eqx.tree_at(
        lambda m: (m.decoder.weight, m.decoder.bias),
        model,
        (
            0.5 * jax.random.normal(key_w, model.decoder.weight.shape, jnp.float32),
            0.1 * jax.random.normal(key_b, model.decoder.bias.shape, jnp.float32),
        ),
    )


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A folder of three photos of other sizes and shapes (one a JPEG, upper case), and a
    text file that is not a photo."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for name, shape in (("b.png", (40, 56, 3)), ("a.png", (48, 48, 3)), ("c.JPG", (70, 50, 3))):
        imageio.imwrite(folder / name, rng.integers(0, 256, shape, dtype=np.uint8))
    (folder / "notes.txt").write_text("not a photo")
    return folder


def _equal(a, b) -> bool:
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(leaves_a, leaves_b)
    )


def test_a_folder_to_the_batch_and_its_samples(model, photos):
    problem = tasks.image_problem(model, photos)
    assert problem.names == ("a.png", "b.png", "c.JPG")  # name order, photos only
    images, names = tasks.folder_images(photos, SIZE)  # read as the folder reader reads
    assert names == list(problem.names) and np.array_equal(problem.images, images)
    assert problem.images.shape == (3, SIZE, SIZE, 3) and problem.x0.shape == (3, N, D)
    assert problem.patches.shape == (3, N, 48) and problem.mean.shape == (3, 1, 48)
    assert problem.core is model.core
    # no config: the evaluation masks with the paper's ratio and fraction, keyed by seed
    assert _equal(problem.masking, tasks.evaluation_masks(N, 3))
    again = tasks.image_problem(model, photos, seed=5)
    assert _equal(again.masking, tasks.evaluation_masks(N, 3, 5))
    # the state and conditions of `MaskedImageET.encode_batch`, and the command line's
    patches = jax.vmap(model.patches)(jnp.asarray(NORMALISATION.apply(images)))
    x0, conditions, mean, std = model.encode_batch(patches, problem.masking)
    assert _equal((problem.x0, problem.args, problem.mean), (x0, conditions, mean))
    _, x0_cli, args_cli = encoded(model, images, problem.masking)
    assert _equal((problem.x0, problem.args), (x0_cli, args_cli))

    # one sample: x0 [T, D] and its conditions un-batched, solved as the batch solves it
    x0_1, args_1 = problem.sample(1)
    assert x0_1.shape == (N, D) and args_1.clamped.shape == (N,)
    assert args_1.field.shape == (N, D) and jnp.ndim(args_1.field_strength) == 0
    assert bool(jnp.all(args_1.clamped == ~problem.masking.replaced[1]))
    options = model.dynamics.solve_options()
    one = solvers.solve(problem.core, x0_1, args=args_1, **options)
    batch = solvers.solve(problem.core, problem.x0, args=problem.args, args_batched=True, **options)
    np.testing.assert_allclose(one.x_final, batch.x_final[1], rtol=1e-5, atol=1e-6)
    assert _equal(problem.sample(-1), problem.sample(2))
    with pytest.raises(IndexError):
        problem.sample(3)  # JAX would clip the index silently

    # read back: decoded patches, their masked MSE, the completed images
    reconstruction, _ = model.reconstruct(problem.patches, problem.masking)
    np.testing.assert_allclose(problem.decode(batch.x_final), reconstruction, atol=1e-5)
    np.testing.assert_allclose(problem.decode(one.x_final, 1), reconstruction[1], atol=1e-5)
    expected = float(et_ode.masked_mse(reconstruction, problem.patches, problem.masking.occluded))
    assert problem.masked_mse(batch.x_final) == pytest.approx(expected, rel=1e-5)
    occluded = problem.masking.occluded[1:2]
    alone = float(et_ode.masked_mse(reconstruction[1:2], problem.patches[1:2], occluded))
    assert problem.masked_mse(one.x_final, 1) == pytest.approx(alone, rel=1e-5)
    completed, _ = model.complete(images, problem.masking)
    np.testing.assert_allclose(problem.complete(batch.x_final), completed, atol=1e-5)
    np.testing.assert_allclose(problem.complete(one.x_final, 1), completed[1], atol=1e-5)


def test_files_arrays_masks_and_limits(model, photos):
    by_folder = tasks.image_problem(model, photos)
    files = [photos / "c.JPG", str(photos / "a.png")]  # in the order given, Path or str
    by_files = tasks.image_problem(model, files)
    assert by_files.names == (str(photos / "c.JPG"), str(photos / "a.png"))
    assert np.array_equal(by_files.images, by_folder.images[np.array([2, 0])])
    one = tasks.image_problem(model, photos / "b.png")
    assert one.names == (str(photos / "b.png"),) and np.array_equal(
        one.images[0], by_folder.images[1]
    )
    # an array: the same problem as its files, without names
    array = tasks.image_problem(model, np.asarray(by_folder.images))
    assert array.names is None and _equal(array.x0, by_folder.x0)
    assert tasks.image_problem(model, photos, limit=2).names == ("a.png", "b.png")
    assert len(tasks.image_problem(model, np.asarray(by_folder.images), limit=1).x0) == 1
    # masks given: one per image, or one for every image
    right = jnp.arange(N) % 8 >= 4
    same = tasks.image_problem(model, photos, et_ode.Masking(occluded=right, replaced=right))
    assert same.masking.occluded.shape == (3, N) and bool(jnp.all(same.masking.occluded == right))
    given = tasks.evaluation_masks(N, 3, 11)
    assert _equal(tasks.image_problem(model, photos, given).masking, given)
    # a config: its mask ratio and fraction (16 of 64 occluded, all replaced)
    with_config = tasks.image_problem(model, photos, config=TINY, seed=3)
    assert _equal(with_config.masking, tasks.eval_masks(TINY, 3, 3))
    assert int(with_config.masking.occluded[0].sum()) == 16
    # what the command line's `--images-dir` reads and masks
    images, names, masks = folder_photos(TINY, photos, 2, seed=3)
    assert names == ["a.png", "b.png"] and np.array_equal(images, with_config.images[:2])
    assert _equal(masks, tasks.eval_masks(TINY, 2, 3))


def test_a_model_by_path_brings_its_masking(model, photos, tmp_path):
    path = tmp_path / "tiny.eqx"
    tasks.save_checkpoint(path, _header(TINY, 0, NORMALISATION, None), model)
    problem = tasks.image_problem(path, photos, seed=4)
    assert _equal(problem.masking, tasks.eval_masks(TINY, 3, 4))  # the checkpoint's config
    assert _equal(problem.x0, tasks.image_problem(model, photos, problem.masking).x0)


def test_refusals(model, photos, tmp_path):
    with pytest.raises(ValueError, match="neither a folder nor an image file"):
        tasks.image_problem(model, tmp_path / "missing.png")
    with pytest.raises(ValueError, match="not a readable image"):
        tasks.image_problem(model, [photos / "notes.txt"])
    with pytest.raises(ValueError, match="no image files given"):
        tasks.image_problem(model, [])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no photos"):
        tasks.image_problem(model, tmp_path / "empty")
    with pytest.raises(ValueError, match=r"masks must have \[N\] = \[64\] fields"):
        tasks.image_problem(model, photos, tasks.evaluation_masks(N, 2))
    with pytest.raises(ValueError, match="must be 32 x 32"):
        tasks.image_problem(model, np.zeros((1, 16, 16, 3), np.float32))
    with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
        tasks.image_problem(model, np.full((1, SIZE, SIZE, 3), 2.0, np.float32))
    wide = dataclasses.replace(TINY, model=dataclasses.replace(TINY.model, patch=8))
    with pytest.raises(ValueError, match="config has 16 patches per image, the model 64"):
        tasks.image_problem(model, photos, config=wide)
    with pytest.raises(ValueError, match="no data normalisation"):
        tasks.image_problem(tasks.new_model(TINY, None), photos)


# ------------------------------------------------------------------ progress bars


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _stages(monkeypatch, stream, enabled=True) -> str:
    monkeypatch.setattr(sys, "stderr", stream)
    stages = Stages(2, "job", enabled)
    for label in ("first", "second"):
        with stages.stage(label):
            pass
    stages.close()
    assert set(stages.seconds) == {"first", "second"}  # measured, shown or not
    return stream.getvalue()


def test_stages_draw_a_bar_only_on_a_terminal(monkeypatch):
    log = _stages(monkeypatch, io.StringIO())
    assert "\r" not in log and "\x1b" not in log
    lines = log.splitlines()  # one plain line per stage, what a log keeps
    assert len(lines) == 2 and lines[0].startswith("  first: ") and " s (CPU " in lines[0]
    terminal = _stages(monkeypatch, _Terminal())
    assert "\r" in terminal and "job: 2/2 stages" in terminal and "  second: " in terminal
    assert _stages(monkeypatch, _Terminal(), enabled=False) == ""  # --no-progress
    assert _stages(monkeypatch, io.StringIO(), enabled=False) == ""


def test_every_progress_bar_is_drawn_only_on_a_terminal():
    """Every `tqdm(...)` of the package passes `disable=None if <progress> else True`:
    None is tqdm's "only when the stream is a terminal"."""
    calls = []
    paths = [
        path
        for folder in ("et_ode", "solvers", "analysis")
        for path in (ROOT / folder).rglob("*.py")
    ]
    for path in sorted(paths):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tqdm":
                disable = {k.arg: k.value for k in node.keywords}.get("disable")
                calls.append((path.name, ast.unparse(disable) if disable else None))
    assert len(calls) == 3, calls  # the command line's stages, the two trainings
    for name, disable in calls:
        assert (
            disable is not None
            and disable.startswith("None if ")
            and disable.endswith(" else True")
        ), (name, disable)
