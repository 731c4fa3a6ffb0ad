"""The figure scripts (paper_figures/) and the video writer, on a tiny untrained model:
the files they write, and the numbers in them against independent computations. Every
figure a script writes (and the energy video's still) is checked on the way out: a title,
and no overlapping or clipped text (`analysis.layout_problems`)."""

import importlib
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import equinox as eqx  # noqa: E402
import imageio.v2 as imageio  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

import et_ode  # noqa: E402
from et_ode.analysis import layout_problems, write_frames, write_video  # noqa: E402
from et_ode.tasks import eval_masks, new_model, save_checkpoint  # noqa: E402
from et_ode.tasks.images._train import _header  # noqa: E402

FIGURES = Path(__file__).resolve().parents[1] / "paper_figures"
TINY = et_ode.TrainConfig(
    model=et_ode.ImageModelConfig(dim=16, n_heads=2, head_dim=8, n_memories=32, init_std=0.3),
    dynamics=et_ode.Dynamics(t1=0.3),
)
IMAGES, FRAMES, HORIZON = 2, 5, 0.4  # frame times 0, 0.1, ..., 0.4; t1 = 0.3 is frame 3


def script(name):
    if str(FIGURES) not in sys.path:
        sys.path.insert(0, str(FIGURES))
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """An untrained tiny model with a random decoder (the default one is zero, which
    would make every reconstruction the context mean), saved as a checkpoint."""
    normalisation = et_ode.ChannelNormalisation((0.45, 0.35, 0.3), (0.3, 0.25, 0.25))
    model = new_model(TINY, normalisation)
    key_w, key_b = jax.random.split(jax.random.key(7))
    model = eqx.tree_at(
        lambda m: (m.decoder.weight, m.decoder.bias),
        model,
        (
            0.5 * jax.random.normal(key_w, model.decoder.weight.shape, jnp.float32),
            0.1 * jax.random.normal(key_b, model.decoder.bias.shape, jnp.float32),
        ),
    )
    path = tmp_path_factory.mktemp("model") / "tiny.eqx"
    save_checkpoint(path, _header(TINY, 0, normalisation, None), model)
    return path, et_ode.MaskedImageET.load(path)


@pytest.fixture(autouse=True)
def legible(monkeypatch):
    """Check every figure the scripts write (through `_common.write_figure`) and every
    still of the energy-video job (through its `figure_to_frame` or `write_figure`): a
    title, and no overlapping or clipped text. Yields the list of `(file, title,
    problems)` checked."""
    from et_ode.cli import _jobs

    common = script("_common")
    checked = []
    real_write, real_frame = common.write_figure, _jobs.figure_to_frame

    def write(path, fig, **options):
        checked.append((Path(path).name, fig.get_suptitle(), layout_problems(fig)))
        return real_write(path, fig, **options)

    def frame(fig):
        checked.append(("the still", fig.get_suptitle(), layout_problems(fig)))
        return real_frame(fig)

    monkeypatch.setattr(common, "write_figure", write)
    monkeypatch.setattr(_jobs, "write_figure", write)
    monkeypatch.setattr(_jobs, "figure_to_frame", frame)
    yield checked
    for name, title, problems in checked:
        assert title.strip(), f"{name} has no title"
        assert not problems, f"{name}:\n" + "\n".join(problems)


def run(name, tiny, out, *extra):
    return script(name).main(["--checkpoint", str(tiny[0]), "--out", str(out), *extra])


def read(path):
    return json.loads(Path(path).read_text())


def held_out(data, model):
    """The images the script used, from the indices it recorded; normalised patches."""
    images = et_ode.photo_crops("test", seed=TINY.training.seed)[np.asarray(data["image_indices"])]
    return images, model.normalisation.apply(images)


def reference(model, normalised, masks):
    """The model's own solve to its training horizon (save="final"): reconstructions'
    masked MSE, and the end states' energies `[B]`."""
    patches = jax.vmap(model.patches)(jnp.asarray(normalised))
    reconstruction, sol = model.reconstruct(patches, masks)
    mean, std = jax.vmap(model.context_statistics)(patches, masks)
    _, cond = jax.vmap(model.encode)((patches - mean[:, None]) / std[:, None], masks)
    energies = jax.vmap(model.core.energy)(sol.x_final, cond)
    return float(et_ode.masked_mse(reconstruction, patches, masks.occluded)), np.asarray(energies)


def png_size(path):
    assert path.stat().st_size > 0
    with Image.open(path) as image:
        return image.size


def test_fig2_positions(tiny, tmp_path):
    png, js = run("fig2_positions", tiny, tmp_path)
    assert png_size(png) == (640, 560)
    data = read(js)
    cosine = np.asarray(data["data"]["cosine_similarity"])
    p = np.asarray(tiny[1].positions, np.float64)
    expected = (p @ p.T) / np.outer(np.linalg.norm(p, axis=1), np.linalg.norm(p, axis=1))
    np.testing.assert_allclose(cosine, expected, atol=1e-6)
    assert data["data"]["grid"] == 8
    assert data["metadata"]["checkpoint"] == str(tiny[0])
    assert data["metadata"]["versions"]["jax"] == jax.__version__


def test_fig3_reconstructions(tiny, tmp_path):
    png, js = run("fig3_reconstructions", tiny, tmp_path, "--images", str(IMAGES))
    assert png_size(png)[0] > 0
    data = read(js)["data"]
    model = tiny[1]
    masks = eval_masks(TINY, IMAGES)  # the default seed is the evaluation's
    np.testing.assert_array_equal(data["occluded"], masks.occluded)
    np.testing.assert_array_equal(data["replaced"], masks.replaced)
    images, normalised = held_out(data, model)
    assert sorted(data["image_indices"]) == [0, 799]  # both held-out scenes
    # The per-image MSEs average (same occluded count per image) to the model's own.
    assert np.mean(data["masked_mse"]) == pytest.approx(
        reference(model, normalised, masks)[0], rel=1e-4
    )
    assert np.mean(data["masked_mse"]) != pytest.approx(np.mean(data["mean_fill_mse"]), rel=1e-3)
    # Shown patches are the originals; only occluded ones were predicted.
    occluded = (
        np.asarray(
            jax.vmap(lambda o: model.image(jnp.repeat(o[:, None], 48, axis=1).astype(jnp.float32)))(
                masks.occluded
            )
        )
        > 0.5
    )
    completed = np.asarray(data["completed"])
    np.testing.assert_allclose(completed[~occluded], images[~occluded], atol=1e-5)
    assert np.abs(completed[occluded] - images[occluded]).max() > 0.01


def test_fig4_tokens_over_time(tiny, tmp_path):
    png, js = run(
        "fig4_tokens_over_time",
        tiny,
        tmp_path,
        "--images",
        str(IMAGES),
        "--index",
        "1",
        "--frames",
        str(FRAMES),
        "--horizon",
        str(HORIZON),
    )
    assert png_size(png)[0] > 0
    record = read(js)
    data = record["data"]
    np.testing.assert_allclose(data["times"], np.linspace(0, HORIZON, FRAMES))
    assert data["index"] == 1 and data["image_index"] == 799
    tokens = np.asarray(data["tokens"])
    assert tokens.shape == (FRAMES, 32, 32, 3) and tokens.min() >= 0 and tokens.max() <= 1
    for part in ("attention", "hopfield"):
        assert np.asarray(data[part]).shape == (FRAMES, 32, 32, 3)
        assert data[f"{part}_scale"] > 0
    assert "external" not in data
    assert np.all(np.isfinite(data["energies"])) and len(data["mse"]) == FRAMES
    assert record["metadata"]["solve"]["solver"] == "euler"
    assert record["metadata"]["solve"]["t1"] == pytest.approx(HORIZON)


def test_fig5_and_fig6(tiny, tmp_path, legible):
    model = tiny[1]
    png, js = run("fig5_memories", tiny, tmp_path, "--count", "10")
    assert png_size(png)[0] > 0
    data = read(js)["data"]
    norms = np.linalg.norm(np.asarray(model.core.hopfield.xi, np.float64), axis=1)
    np.testing.assert_allclose(data["norms"], np.sort(norms)[::-1][:10], rtol=1e-6)
    np.testing.assert_allclose(
        data["decoded"],
        model.decode(model.core.hopfield.xi[np.asarray(data["indices"])]),
        atol=1e-6,
    )
    pdf, js = run("fig6_attention_weights", tiny, tmp_path, "--format", "pdf")
    assert pdf.name == "fig6_attention_weights.pdf" and pdf.read_bytes()[:4] == b"%PDF"
    assert [name for name, _, _ in legible] == ["fig5_memories.png", "fig6_attention_weights.pdf"]
    assert "model tiny.eqx" in legible[1][1]  # the caption names the model
    data = read(js)["data"]
    assert np.asarray(data["Wq"]).shape == (2, 8, 48) == np.asarray(data["Wk"]).shape
    ranges = np.asarray(data["Wk_ranges"])
    np.testing.assert_allclose(ranges[..., 1], np.asarray(data["Wk"]).max(-1), atol=1e-6)


def test_fig8_energy_video(tiny, tmp_path):
    out = run(
        "fig8_energy_video",
        tiny,
        tmp_path,
        "--images",
        str(IMAGES),
        "--frames",
        str(FRAMES),
        "--horizon",
        str(HORIZON),
    )
    model = tiny[1]
    frames = sorted((tmp_path / "fig8_frames").glob("frame_*.png"))
    assert [f.name for f in frames] == [f"frame_{i:04d}.png" for i in range(FRAMES)]
    size = png_size(frames[0])
    assert all(png_size(f) == size for f in frames) and png_size(out["still"]) == size
    assert out["video"].suffix == ".mp4" and out["video"].stat().st_size > 0
    reader = imageio.get_reader(out["video"])
    video = list(reader.iter_data())
    reader.close()
    assert len(video) == FRAMES
    assert video[0].shape[:2] == (size[1] + size[1] % 2, size[0] + size[0] % 2)
    assert not list(tmp_path.glob(".*tmp*"))  # atomic writes left nothing behind

    record = read(out["json"])
    data, meta = record["data"], record["metadata"]
    times, energies, mse = (np.asarray(data[k]) for k in ("times", "energies", "mse"))
    np.testing.assert_allclose(times, np.linspace(0, HORIZON, FRAMES))
    assert energies.shape == (IMAGES, FRAMES) and np.all(np.isfinite(energies))
    assert mse.shape == (FRAMES,) and data["frames"] == FRAMES
    assert meta["solve"]["t1"] == pytest.approx(HORIZON) and meta["solve"]["stop"] is None
    assert data["reference_time"] == pytest.approx(0.3)
    assert data["reference_label"] == "training horizon"

    images, normalised = held_out(data, model)
    masks = eval_masks(TINY, IMAGES)
    patches = jax.vmap(model.patches)(jnp.asarray(normalised))
    # t = 0.3, the training horizon: the model's own solve, run separately, gives the MSE
    # and the energies.
    mse_ref, energies_ref = reference(model, normalised, masks)
    assert mse[3] == pytest.approx(mse_ref, rel=1e-4)
    np.testing.assert_allclose(energies[:, 3], energies_ref, rtol=1e-5)
    assert mse[3] != pytest.approx(mse[0], rel=1e-3)  # the dynamics moved the tokens
    # t = 0: the decoded initial tokens, built by hand (no dynamics).
    mean, std = jax.vmap(model.context_statistics)(patches, masks)
    x0, cond = jax.vmap(model.encode)((patches - mean[:, None]) / std[:, None], masks)
    decoded0 = jax.vmap(model.decode)(x0) * std[:, None] + mean[:, None]
    assert mse[0] == pytest.approx(
        float(et_ode.masked_mse(decoded0, patches, masks.occluded)), rel=1e-4
    )
    np.testing.assert_allclose(energies[:, 0], jax.vmap(model.core.energy)(x0, cond), rtol=1e-5)


def test_frames_command_writes_the_still_as_vector_graphics(tiny, tmp_path, legible):
    """`et-ode frames --format svg` on the tiny checkpoint (the fig8 test's solve): the
    still as SVG, checked like every figure; the frames and the video stay PNG and mp4."""
    from et_ode.cli import main

    out = tmp_path / "svg"
    assert (
        main(
            [
                "frames",
                "--checkpoint",
                str(tiny[0]),
                "--images",
                str(IMAGES),
                "--frames",
                str(FRAMES),
                "--horizon",
                str(HORIZON),
                "--format",
                "svg",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert b"<svg" in (out / "energy_video.svg").read_bytes()[:1000]
    assert not (out / "energy_video.png").exists()
    assert len(list((out / "energy_video_frames").glob("frame_*.png"))) == FRAMES
    assert (out / "energy_video.mp4").stat().st_size > 0
    data = read(out / "energy_video.json")["data"]
    assert data["still"] == "energy_video.svg" and data["still_frame"] == 3  # t = 0.3
    assert data["still_note"] == "still: the frame nearest the training horizon t = 0.3 (t = 0.3)"
    assert data["interpolated_frames"] == 0  # Euler steps of 0.1, frames every 0.1
    ((name, title, _),) = legible
    assert (
        name == "energy_video.svg"
        and "model tiny.eqx" in title
        and data["still_note"] in " ".join(title.split())
    )


def test_write_video_pads_and_falls_back(tmp_path, monkeypatch):
    frames = [np.full((21, 33, 3), 10 * i, np.uint8) for i in range(3)]
    mp4 = write_video(frames, tmp_path / "v.mp4", fps=5)
    reader = imageio.get_reader(mp4)
    read_back = list(reader.iter_data())
    reader.close()
    assert len(read_back) == 3 and read_back[0].shape == (22, 34, 3)
    assert abs(int(read_back[2][5, 5, 0]) - 20) <= 3  # content survives the encoding

    import et_ode.analysis.figures._video as video

    monkeypatch.setattr(video, "_write_mp4", lambda *a: (_ for _ in ()).throw(OSError("no")))
    with pytest.warns(UserWarning, match="GIF"):
        gif = write_video(frames, tmp_path / "w.mp4")
    assert gif == tmp_path / "w.gif" and len(imageio.mimread(gif)) == 3
    assert not (tmp_path / "w.mp4").exists()
    paths = write_frames(frames, tmp_path / "f", prefix="x")
    assert [p.name for p in paths] == ["x_0000.png", "x_0001.png", "x_0002.png"]
    with pytest.raises(ValueError, match="uint8"):
        write_video([np.zeros((4, 4, 3))], tmp_path / "bad.mp4")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "v.mp4", "w.gif"]
