"""The authors' released ImageNet model (`plaindict_ckpt.npz`, bhoov/energy-transformer-jax):
small random files in exactly its format, loaded with `MaskedImageET.load`, against a
reference of their forward pass written here in plain NumPy from the description of their
pipeline (not by calling our model); the refusals of bad files; and every CLI command on
such a file.

Their pipeline, as the reference below computes it: pixels 0..255 normalised per channel
by the ImageNet mean and std (times 255); patches flattened channel first `(c, h, w)`;
encoded `patch @ Wenc + Benc`; MASK replaces the masked patches (none occluded but
visible); CLS prepended; `POS_embed` added to every token; 12 steps
`x <- x - 0.1 dE/dg`, `g = LN(x)` (scalar gamma, bias, eps 1e-5), `E = E_ATT + E_HN` with
self-attention, beta = 1/sqrt(Y), `E_HN = -1/2 sum relu(g Xi)^2`; CLS dropped; decoded
`LN(LN(x)) @ Wdec + Bdec`.
"""

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import et_ode
from et_ode.cli import _main as cli

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255
SIDE, PATCH = 4, 8  # 32 x 32 images of 8 x 8 patches: 16 patches, 17 tokens, P = 192
SIZE, N = SIDE * PATCH, SIDE * SIDE


# ------------------------------------------------------------------ files and reference


def make_file(
    path, *, dim=16, heads=2, head_dim=8, memories=24, dtype=np.float32, seed=0, cls=True, **changes
):
    """A random file in the authors' format (`changes`: replace a key; None drops it)."""
    rng = np.random.default_rng(seed)
    p = 3 * PATCH * PATCH
    arrays = dict(
        Wq=0.3 * rng.standard_normal((heads, head_dim, dim)),
        Wk=0.3 * rng.standard_normal((heads, head_dim, dim)),
        Xi=0.2 * rng.standard_normal((dim, memories)),
        Wenc=0.05 * rng.standard_normal((p, dim)),
        Benc=0.1 * rng.standard_normal(dim),
        Wdec=0.3 * rng.standard_normal((dim, p)),
        Bdec=0.1 * rng.standard_normal(p),
        LNORM_gamma=np.array(1.3),
        LNORM_bias=0.1 * rng.standard_normal(dim),
        MASK_token=rng.standard_normal(dim),
        POS_embed=0.5 * rng.standard_normal((N + cls, dim)),
    )
    if cls:
        arrays["CLS_token"] = rng.standard_normal(dim)
    arrays = {k: np.asarray(v, dtype) for k, v in arrays.items()}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    np.savez(path, **arrays)
    return arrays


def layer_norm(x, gamma, bias, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(var + eps) + bias


def energy(f, g):
    """Their energy at normalised tokens `g [T, D]`: attention (self included) + ReLU
    Hopfield."""
    beta = 1 / np.sqrt(f["Wq"].shape[1])
    q = np.einsum("hyd,nd->hny", f["Wq"], g)
    k = np.einsum("hyd,nd->hny", f["Wk"], g)
    a = beta * np.einsum("hcy,hby->hcb", q, k)
    peak = a.max(-1, keepdims=True)
    lse = np.log(np.exp(a - peak).sum(-1)) + peak[..., 0]
    return -lse.sum() / beta - 0.5 * (np.maximum(g @ f["Xi"], 0) ** 2).sum()


def energy_gradient(f, g):
    """`dE/dg [T, D]`, by hand: softmax-weighted keys and queries, and `-relu(g Xi) Xi^T`."""
    beta = 1 / np.sqrt(f["Wq"].shape[1])
    q = np.einsum("hyd,nd->hny", f["Wq"], g)
    k = np.einsum("hyd,nd->hny", f["Wk"], g)
    a = beta * np.einsum("hcy,hby->hcb", q, k)
    s = np.exp(a - a.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    d_q = -np.einsum("hcb,hby->hcy", s, k)
    d_k = -np.einsum("hcb,hcy->hby", s, q)
    attention = np.einsum("hny,hyd->nd", d_q, f["Wq"]) + np.einsum("hny,hyd->nd", d_k, f["Wk"])
    return attention - np.maximum(g @ f["Xi"], 0) @ f["Xi"].T


def reference(f, images, replaced, steps=12, alpha=0.1):
    """Their reconstruction in float64: `(patches [B, N, P] in normalised units,
    flattened (h, w, c) for comparison, completed images [B, S, S, 3] in [0, 1],
    tokens at the start and at the end)`."""
    f = {k: np.asarray(v, np.float64) for k, v in f.items()}
    b = len(images)
    p = 3 * PATCH * PATCH
    x = (np.asarray(images, np.float64) * 255 - MEAN) / STD
    chw = x.reshape(b, SIDE, PATCH, SIDE, PATCH, 3).transpose(0, 1, 3, 5, 2, 4).reshape(b, N, p)
    tokens = np.where(replaced[..., None], f["MASK_token"], chw @ f["Wenc"] + f["Benc"])
    gamma, bias = f["LNORM_gamma"], f["LNORM_bias"]
    decoded, starts, ends = [], [], []
    for i in range(b):
        x = np.concatenate([f["CLS_token"][None], tokens[i]]) + f["POS_embed"]
        starts.append(x)
        for _ in range(steps):
            x = x - alpha * energy_gradient(f, layer_norm(x, gamma, bias))
        ends.append(x)
        decoded.append(
            layer_norm(layer_norm(x[1:], gamma, bias), gamma, bias) @ f["Wdec"] + f["Bdec"]
        )
    hwc = np.stack(decoded).reshape(b, N, 3, PATCH, PATCH).transpose(0, 1, 3, 4, 2)
    hwc = hwc.reshape(b, N, p)
    image = hwc.reshape(b, SIDE, SIDE, PATCH, PATCH, 3).transpose(0, 1, 3, 2, 4, 5)
    image = (image.reshape(b, SIZE, SIZE, 3) * STD + MEAN) / 255
    occluded = np.repeat(np.repeat(replaced.reshape(b, SIDE, SIDE), PATCH, 1), PATCH, 2)
    completed = np.where(occluded[..., None], image, images)
    return hwc, completed, np.stack(starts), np.stack(ends)


def problem(seed=1):
    """Two images in [0, 1] and their masking: 8 of 16 patches replaced, none visible."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(size=(2, SIZE, SIZE, 3))
    replaced = np.zeros((2, N), bool)
    for row in replaced:
        row[rng.permutation(N)[:8]] = True
    return (
        images,
        replaced,
        et_ode.Masking(occluded=jnp.asarray(replaced), replaced=jnp.asarray(replaced)),
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("authors")
    out = {}
    for name, dtype in (("float32", np.float32), ("float64", np.float64)):
        path = folder / f"{name}.npz"
        out[name] = (path, make_file(path, dtype=dtype))
    return out


# ------------------------------------------------------------------------ exactness


def test_reference_gradient_is_the_gradient_of_the_reference_energy(tmp_path):
    """The hand-written dE/dg of the reference against central differences of its
    energy (float64), so that the reference is itself checked."""
    arrays = make_file(tmp_path / "f.npz", dtype=np.float64)
    f = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    g = np.random.default_rng(2).standard_normal((N + 1, 16))
    h = 1e-6
    numeric = np.zeros_like(g)
    for index in np.ndindex(g.shape):
        e = np.zeros_like(g)
        e[index] = h
        numeric[index] = (energy(f, g + e) - energy(f, g - e)) / (2 * h)
    assert np.max(np.abs(numeric - energy_gradient(f, g))) < 1e-6


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("float64", 1e-10)])
def test_reconstruction_equals_the_authors_pipeline(files, dtype, tolerance):
    """`reconstruct` and `complete` of the loaded file against the NumPy reference: the
    float32 file loads as a float32 model, the float64 file (x64 on) as a float64 one."""
    path, arrays = files[dtype]
    model = et_ode.MaskedImageET.load(path)
    assert model.core.hopfield.xi.dtype == np.dtype(dtype)
    images, replaced, masking = problem()
    patches_ref, completed_ref, start, end = reference(arrays, images, replaced)
    assert np.linalg.norm(end - start) > 0.5 * np.linalg.norm(start)  # the tokens move

    images = images.astype(dtype)
    patches = jnp.stack(
        [model.patches(jnp.asarray(im)) for im in model.normalisation.apply(images)]
    )
    x0, _, _, _ = model.encode_batch(patches, masking)
    np.testing.assert_allclose(np.asarray(x0), start, rtol=0, atol=tolerance)
    reconstruction, sol = model.reconstruct(patches, masking)
    np.testing.assert_allclose(
        np.asarray(sol.x_final), end, rtol=0, atol=tolerance * np.abs(end).max()
    )
    error = np.abs(np.asarray(reconstruction) - patches_ref).max()
    assert error <= tolerance * max(1.0, np.abs(patches_ref).max()), error
    completed, _ = model.complete(jnp.asarray(images), masking)
    assert np.abs(np.asarray(completed) - completed_ref).max() <= tolerance


def test_loaded_model_and_config(files):
    path, arrays = files["float32"]
    model, config, header = et_ode.tasks.load_model_and_config(path)
    m = config.model
    assert (m.image_size, m.patch, m.n_patches, m.n_tokens) == (SIZE, PATCH, N, N + 1)
    assert (m.cls_token, m.patch_order, m.decoder, m.self_attention) == (
        True,
        "chw",
        "layernorm_twice",
        True,
    )
    assert not m.standardise_context
    assert model.core.attention.beta == pytest.approx(1 / np.sqrt(8))
    assert model.normalisation == et_ode.ChannelNormalisation.imagenet()
    assert config.dynamics == et_ode.Dynamics(solver="euler", dt0=0.1, t1=1.2)
    masks = et_ode.tasks.eval_masks(config, 3)  # 100 of 196 scaled: 8 of 16, none visible
    assert np.all(np.asarray(masks.replaced).sum(-1) == 8)
    assert np.array_equal(np.asarray(masks.replaced), np.asarray(masks.occluded))
    assert round(config.data.mask_ratio * 196) == 100 and config.data.mask_fraction == 1.0
    assert header["kind"] == "authors_npz" and len(header["sha256"]) == 64
    np.testing.assert_array_equal(np.asarray(model.core.hopfield.xi), arrays["Xi"].T)
    np.testing.assert_array_equal(
        np.asarray(model.cls_token), arrays["CLS_token"] + arrays["POS_embed"][0]
    )


def test_file_without_cls_token(tmp_path):
    path = tmp_path / "no_cls.npz"
    make_file(path, cls=False)
    model = et_ode.MaskedImageET.load(path)
    assert model.cls_token is None and model.config.n_tokens == N
    _, _, masking = problem()
    patches = jnp.zeros((2, N, 3 * PATCH * PATCH), jnp.float32)
    assert model.encode_batch(patches, masking)[0].shape == (2, N, 16)


def test_our_models_are_unchanged():
    """A header written before the new fields existed loads with their defaults."""
    header, _ = et_ode.tasks.read_checkpoint(et_ode.tasks.shipped_path("paper"))
    assert not {"cls_token", "patch_order", "decoder"} & set(header["config"]["model"])
    model = et_ode.MaskedImageET.load("paper")
    assert model.cls_token is None
    assert (model.config.cls_token, model.config.patch_order, model.config.decoder) == (
        False,
        "hwc",
        "layernorm",
    )


# ------------------------------------------------------------------------ refusals


class _Opener:  # unpickling this would create the marker file
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _bad(tmp_path, **changes):
    path = tmp_path / "bad.npz"
    make_file(path, **changes)
    return path


@pytest.mark.parametrize(
    "changes, key",
    [
        (dict(Xi=None), "Xi"),
        (dict(Wenc=np.zeros((192, 12), np.float32)), "Wenc"),  # D 12, Wq's D 16
        (dict(POS_embed=np.zeros((N + 2, 16), np.float32)), "POS_embed"),  # 1 + 17 rows
        (dict(Wk=np.zeros((2, 4, 16), np.float32)), "Wk"),
        (dict(Bdec=np.zeros(191, np.float32)), "Bdec"),
        (dict(LNORM_gamma=np.array(-1.0, np.float32)), "LNORM_gamma"),
        (dict(Xi=np.full((16, 24), np.nan, np.float32)), "Xi"),
        (dict(MASK_token=np.array(["a"] * 16)), "MASK_token"),
    ],
)
def test_bad_files_are_refused_naming_the_key(tmp_path, changes, key):
    with pytest.raises(ValueError, match=f"'?{key}'?"):
        et_ode.MaskedImageET.load(_bad(tmp_path, **changes))


def test_pickled_object_array_is_refused_unread(tmp_path):
    marker = tmp_path / "unpickled"
    payload = np.empty(1, object)
    payload[0] = _Opener(str(marker))
    path = _bad(tmp_path, Benc=payload)
    with pytest.raises(ValueError, match="'Benc' holds a pickled object array"):
        et_ode.MaskedImageET.load(path)
    assert not marker.exists()


def test_other_npz_is_refused(tmp_path):
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    with pytest.raises(ValueError, match="without the keys"):
        et_ode.MaskedImageET.load(tmp_path / "other.npz")


def test_training_config_refuses_the_double_layernorm(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[model]\ndecoder = "layernorm_twice"\n')
    with pytest.raises(ValueError, match="layernorm_twice"):
        et_ode.load_config(config)


# ---------------------------------------------------------------------- complete()


def test_complete_checks_the_range_and_converts_uint8(files):
    model = et_ode.MaskedImageET.load(files["float32"][0])
    images, _, masking = problem()
    pixels = np.round(images * 255).astype(np.uint8)
    with pytest.raises(ValueError, match=r"in \[0, 1\].*divide"):
        model.complete(pixels.astype(np.float32), masking)  # 0..255 floats
    with pytest.raises(ValueError, match="uint8"):
        model.complete(pixels.astype(np.int32), masking)
    from_uint8, _ = model.complete(pixels, masking)
    from_float, _ = model.complete(jnp.asarray(pixels, jnp.float32) / 255, masking)
    np.testing.assert_array_equal(np.asarray(from_uint8), np.asarray(from_float))


# ------------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny file (D 8) and a folder of two photos of other sizes (and a text file)."""
    folder = tmp_path_factory.mktemp("tiny")
    make_file(folder / "tiny.npz", dim=8, heads=2, head_dim=4, memories=16)
    photos = folder / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (48, 40, 3), np.uint8)).save(photos / "a.png")
    Image.fromarray(rng.integers(0, 256, (30, 50, 3), np.uint8)).save(photos / "b.JPG")
    (photos / "notes.txt").write_text("not a photo")
    return folder / "tiny.npz", photos


def run(*argv):
    return cli.main([*map(str, argv)])


def test_cli_frames_on_own_photos(tiny, tmp_path):
    checkpoint, photos = tiny
    assert (
        run(
            "frames",
            "--checkpoint",
            checkpoint,
            "--images-dir",
            photos,
            "--frames",
            3,
            "--out",
            tmp_path,
            "--no-progress",
        )
        == 0
    )
    record = json.loads((tmp_path / "energy_video.json").read_text())
    assert record["metadata"]["data"]["files"] == ["a.png", "b.JPG"]
    assert record["metadata"]["model"]["kind"] == "authors_npz"
    assert (
        len(record["data"]["times"]) == 3
        and len(list((tmp_path / "energy_video_frames").glob("*.png"))) == 3
    )
    assert np.all(np.isfinite(record["data"]["mse"]))


def test_cli_eval(tiny, capsys):
    checkpoint, photos = tiny
    assert run("eval", "--checkpoint", checkpoint, "--images", 2, "--no-baselines") == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["images"] == 2 and "held-out photos" in result["images_source"]
    assert "held-out photos" in captured.err  # said so
    assert run("eval", "--checkpoint", checkpoint, "--images-dir", photos) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["files"] == ["a.png", "b.JPG"] and result["images"] == 2
    assert {"model_masked_mse", "mean_fill", "interpolation"} <= set(result)
    # the photos as the CLI reads them, through the model's own public method
    images, _ = et_ode.tasks.folder_images(photos, SIZE)
    model, config, _ = et_ode.tasks.load_model_and_config(checkpoint)
    assert images.shape == (2, SIZE, SIZE, 3) and 0 <= images.min() and images.max() <= 1
    masks = et_ode.tasks.eval_masks(config, 2)
    completed, _ = model.complete(jnp.asarray(images), masks)
    assert np.all(np.isfinite(np.asarray(completed)))


def test_cli_study_and_compare_solvers(tiny, tmp_path, monkeypatch):
    checkpoint, _ = tiny
    # as at the authors' size (a state above QUICK_STATE_LIMIT entries), where --quick
    # takes the model's own steps (the paper's Euler 0.1) in the model's dtype
    from et_ode.cli import _study_runners

    monkeypatch.setattr(_study_runners, "QUICK_STATE_LIMIT", 0)
    assert (
        run(
            "study",
            "convergence",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--images",
            1,
            "--flow",
            "projected",
            "--out",
            tmp_path / "study",
            "--no-progress",
        )
        == 0
    )
    result = json.loads((tmp_path / "study" / "convergence.json").read_text())
    assert result["metadata"]["model"]["kind"] == "authors_npz"
    meta = result["metadata"]
    assert (meta["solver"], meta["dt0"], meta["rtol"]) == ("euler", 0.1, None)
    assert meta["dtype"] == "float32"
    assert (
        run(
            "study",
            "stability",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--out",
            tmp_path / "stability",
            "--no-progress",
        )
        == 0
    )
    result = json.loads((tmp_path / "stability" / "stability.json").read_text())
    # at this size the start comes from Anderson acceleration, named in the result
    start = result["start"]
    assert start["stop_reason"] == "fixed_point" and start["residual_rms"] <= 1e-4
    assert start["method"] == "find_fixed_point (anderson)" and start["evaluations"] > 50
    assert result["lyapunov"]["solver"] == "tsit5" and result["lyapunov"]["rtol"] == 1e-5
    assert (
        run(
            "compare-solvers",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--images",
            1,
            "--tolerances",
            "1e-3",
            "--out",
            tmp_path / "compare",
            "--no-progress",
        )
        == 0
    )
    runs = json.loads((tmp_path / "compare" / "compare-solvers.json").read_text())["runs"]
    assert runs and all(np.isfinite(r["error_exact"]) for r in runs)


def test_cli_refuses_a_bad_file(tmp_path, capsys):
    path = _bad(tmp_path, Xi=None)
    assert run("eval", "--checkpoint", path) == 2
    assert "missing key(s) Xi" in capsys.readouterr().err


# ------------------------------------------------------------------- benchmark row


def test_imagenet_benchmark_row_tiny():
    """The `imagenet` benchmark row (benchmarks/_imagenet.py) in its tiny quick mode:
    every measurement present, the numbers that do not depend on timing checked."""
    import sys

    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # `benchmarks` lives in the checkout
        sys.path.insert(0, root)
    from benchmarks import _run

    record = _run.run_benchmarks(
        ("imagenet",), quick=True, batch=2, repeats=1, tiny=True, print_fn=lambda *a, **k: None
    )
    assert record["summary"]["errors"] == []
    rows = {r["name"]: r for r in record["rows"]}
    field = next(r for name, r in rows.items() if name.startswith("vector field"))
    assert field["flops_per_sample"]["field"] > 0 and field["value"] > 0
    fixed = next(r for name, r in rows.items() if name.startswith("fixed-point solve"))
    assert fixed["method"] == "euler dt 0.1" and fixed["nfe"] == fixed["steps"] > 0
    anderson = next(r for name, r in rows.items() if "anderson" in name)
    assert anderson["nfe"] > 50 and anderson["dtype"] == "float32"  # 50 warm steps
    default = next(r for r in record["rows"] if r.get("method", "").startswith("auto"))
    assert default["nfe"] > 0 and default["dtype"] == "float32"
    json.dumps(record["rows"])

    # the goals, on rows whose evaluations are known: the best (fewest evaluations among
    # those that reached) at <= 0.5x Euler's, the default within 1.2x of the best
    from benchmarks._imagenet import _fixed_point_goals

    def rows_of(euler, anderson, auto, auto_reached=True):
        return [
            dict(method="euler dt 0.1", nfe=euler, reached=True, note=""),
            dict(method="anderson", nfe=anderson, reached=True, note=""),
            dict(method="auto", nfe=auto, reached=auto_reached, note=""),
        ]

    found = rows_of(841, 145, 150)
    _fixed_point_goals(found)
    assert found[1]["met"] and "best" in found[1]["goal"] and found[2]["met"]
    assert "met" not in found[0]
    found = rows_of(841, 500, 700)  # best at 0.59x Euler; default 1.4x the best
    _fixed_point_goals(found)
    assert found[1]["met"] is False and found[2]["met"] is False
    found = rows_of(841, 145, 100, auto_reached=False)  # an unreached default fails
    _fixed_point_goals(found)
    assert found[1]["met"] and found[2]["met"] is False
    memory = [r for r in record["rows"] if r["name"].startswith("memory")]
    assert {r["adjoint"] for r in memory} == {
        "checkpoint (diffrax default)",
        "implicit (projected, fixed point)",
        "backsolve (native)",
    }
    assert all(r["bytes"]["total"] > 0 for r in memory)


def test_cli_landscape_studies(tiny, tmp_path):
    """`et-ode study continuation`, `study basins`, `study basin-continuation` and `study
    lyapunov-spectrum` on a checkpoint file: the first image's fixed point followed both
    ways in the attention's beta (every point a fixed point of the model at that beta,
    eigenvalues negative: the trained point is stable); the basins of a plane through
    two images and of random starts, every attractor polished to a fixed point and
    decoded; the attractors of the image and 8 random starts across two decades of
    beta; and the top exponents of the native flow with their running estimates."""
    checkpoint, _ = tiny
    beta = et_ode.tasks.load_model_and_config(checkpoint)[0].core.attention.beta
    assert (
        run(
            "study",
            "continuation",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--images",
            1,
            "--parameter",
            "beta",
            "--p-span",
            f"{0.9 * beta},{1.1 * beta}",
            "--out",
            tmp_path / "cont",
            "--no-progress",
        )
        == 0
    )
    result = json.loads((tmp_path / "cont" / "continuation.json").read_text())
    up, down = result["branches"]
    assert up["p"][0] == down["p"][0] == result["trained_value"] == beta
    assert up["p"][1] > beta > down["p"][1]
    assert result["largest_residual_rms"] < 1e-8 and result["parameter"] == "beta"
    assert result["start"]["polished_residual_rms"] < 1e-10
    leading = up["eigenvalues"][0][0]
    assert set(leading) == {"real", "imag"} and leading["real"] < 0
    assert (tmp_path / "cont" / "continuation.png").stat().st_size > 0
    assert (
        run(
            "study",
            "basins",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--images",
            2,
            "--out",
            tmp_path / "basins",
            "--no-progress",
        )
        == 0
    )
    basins = json.loads((tmp_path / "basins" / "basins.json").read_text())
    plane, randoms = basins["plane"], basins["random"]
    assert np.shape(plane["labels_grid"]) == (8, 8) and len(randoms["labels"]) == 16
    assert basins["stop_reasons"] == {"fixed_point": 8 * 8 + 16}
    assert 1 <= randoms["distinct"] <= len(basins["attractors"])
    for part in (plane, randoms):
        assert sum(part["fractions"]) == pytest.approx(1.0)
    polished = [a for a in basins["attractors"] if a["polished"]]
    assert 1 <= len(polished) <= 4
    tokens = basins["token_structure"]
    assert tokens["tokens"] == (N + 1) * len(polished) >= tokens["token_states"] >= 1
    for attractor in polished:  # a fixed point, its Morse index taken there, decoded
        assert attractor["residual_rms"] < 1e-9 and attractor["morse_index"] is not None
        assert np.shape(attractor["decoded_image"]) == (SIZE, SIZE, 3)
    assert (tmp_path / "basins" / "basins.png").stat().st_size > 0
    assert (
        run(
            "study",
            "basin-continuation",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--images",
            1,
            "--out",
            tmp_path / "tracks",
            "--no-progress",
        )
        == 0
    )
    tracks = json.loads((tmp_path / "tracks" / "basin-continuation.json").read_text())
    values = np.asarray(tracks["p"])
    # 7 values over two decades around the trained beta, the middle one the trained value
    assert len(values) == 7 and values[3] == beta and np.all(np.diff(values) > 0)
    np.testing.assert_allclose(values[[0, -1]], [0.1 * beta, 10 * beta], rtol=1e-12)
    assert tracks["trained_value"] == beta and tracks["parameter"] == "beta"
    assert np.shape(tracks["labels"]) == (7, 9) and len(tracks["image_track"]) == 7
    assert tracks["image_track"] == [row[0] for row in tracks["labels"]]
    assert all(step["not_converged"] == 0 for step in tracks["steps"])
    np.testing.assert_allclose(np.sum(tracks["fractions"], axis=1), 1.0)
    assert tracks["metadata"]["match"] == "overlap"
    for track in tracks["tracks"]:
        assert "x" not in track and len(track["energy"]) == len(track["p"])
    assert (tmp_path / "tracks" / "basin-continuation.png").stat().st_size > 0
    assert (
        run(
            "study",
            "lyapunov-spectrum",
            "--checkpoint",
            checkpoint,
            "--quick",
            "--images",
            1,
            "--horizon",
            "2",
            "--out",
            tmp_path / "lyap",
            "--no-progress",
        )
        == 0
    )
    spectrum = json.loads((tmp_path / "lyap" / "lyapunov-spectrum.json").read_text())
    assert len(spectrum["exponents"]) == 4 and spectrum["flow"] == "native"
    assert spectrum["exponents"] == sorted(spectrum["exponents"], reverse=True)
    assert len(spectrum["history"]) == 2 and spectrum["t1"] == 2.0
