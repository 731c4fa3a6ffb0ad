"""Masked image completion: patches, masking counts, the loss, training, checkpoints and
exact resume, and bad input that must leave files alone."""

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import et_ode
from et_ode.tasks import read_checkpoint

TINY = et_ode.TrainConfig(
    model=et_ode.ImageModelConfig(dim=16, n_heads=2, head_dim=8, n_memories=32),
    dynamics=et_ode.Dynamics(t1=0.3),
    data=et_ode.DataConfig(eval_images=8),
    training=et_ode.TrainingConfig(
        steps=6, batch_size=4, warmup_steps=1, eval_every=3, checkpoint_every=3, learning_rate=3e-3
    ),
)


def test_patchify_round_trip_and_order():
    image = jnp.arange(32 * 32 * 3, dtype=jnp.float32).reshape(32, 32, 3)
    patches = et_ode.patchify(image, 4)
    assert patches.shape == (64, 48)
    np.testing.assert_array_equal(patches[1].reshape(4, 4, 3), image[:4, 4:8])  # row-major
    np.testing.assert_array_equal(et_ode.unpatchify(patches, 32, 4), image)
    with pytest.raises(ValueError, match="patch size 5 does not divide the image size 32x32"):
        et_ode.patchify(image, 5)


def test_masking_exact_counts_and_determinism():
    keys = jax.random.split(jax.random.key(0), 50)
    masks = jax.jit(jax.vmap(lambda k: et_ode.random_masking(k, 64)))(keys)
    np.testing.assert_array_equal(masks.occluded.sum(-1), 32)  # round(0.5 * 64)
    np.testing.assert_array_equal(masks.replaced.sum(-1), 29)  # round(0.9 * 32)
    assert bool(jnp.all(~masks.replaced | masks.occluded))
    again = et_ode.random_masking(keys[3], 64)
    np.testing.assert_array_equal(again.occluded, masks.occluded[3])
    odd = et_ode.random_masking(keys[0], 10, ratio=0.3, mask_fraction=0.5)
    assert int(odd.occluded.sum()) == 3 and int(odd.replaced.sum()) == 2


def test_masking_favours_no_position():
    keys = jax.random.split(jax.random.key(1), 4000)
    masks = jax.jit(jax.vmap(lambda k: et_ode.random_masking(k, 64)))(keys)
    frequency = np.asarray(masks.occluded.mean(0))
    # Binomial(4000, 0.5): std 0.0079 per position; 5 sigma over 64 positions.
    assert np.abs(frequency - 0.5).max() < 0.04
    replaced = np.asarray(masks.replaced.mean(0))
    assert np.abs(replaced - 29 / 64).max() < 0.04
    assert abs(frequency[0] - 0.5) < 0.04  # patch 0 is not special (a public-code bug)


def test_masked_mse_by_hand():
    rng = np.random.default_rng(0)
    prediction, target = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))
    occluded = np.array([[1, 0, 1, 0, 0], [0, 0, 0, 1, 1]], bool)
    expected = np.mean(
        [
            np.mean((prediction[b, n] - target[b, n]) ** 2)
            for b in range(2)
            for n in range(5)
            if occluded[b, n]
        ]
    )
    assert float(et_ode.masked_mse(prediction, target, occluded)) == pytest.approx(
        expected, rel=1e-12
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An uninterrupted 6-step run of the tiny config."""
    out = tmp_path_factory.mktemp("full")
    state = et_ode.train(TINY, out, progress=False)
    return out, state


def test_training_lowers_the_loss(trained):
    out, state = trained
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    evals = [r["eval_masked_mse"] for r in records if "eval_masked_mse" in r]
    assert len(evals) == 2
    # Held-out masked-patch MSE on fixed images and masks: untrained, step 3, step 6.
    from et_ode.tasks import eval_masks, held_out_split, new_model

    images = state.model.normalisation.apply(held_out_split(TINY, 8))
    untrained = et_ode.evaluate_model(
        new_model(TINY, state.model.normalisation), images, eval_masks(TINY, 8)
    )
    assert evals[1] < evals[0] < untrained


def test_resume_is_bit_identical(trained, tmp_path, capsys):
    _, full = trained
    et_ode.train(TINY, tmp_path, stop_after=3, progress=True)  # into a log, not a terminal:
    captured = capsys.readouterr()  # no bar, so no carriage return
    assert "\r" not in captured.err + captured.out
    header, _ = read_checkpoint(tmp_path / "checkpoint.eqx")
    assert header["step"] == 3
    # An interrupted run logged steps past its checkpoint; resuming drops and redoes them.
    with (tmp_path / "metrics.jsonl").open("a") as file:
        file.write(json.dumps({"step": 4, "loss": 123.0}) + "\n")
    resumed = et_ode.train(TINY, tmp_path, resume=True, progress=False)
    assert resumed.step == 6
    for a, b in zip(
        jax.tree.leaves(eqx.filter(full.model, eqx.is_array)),
        jax.tree.leaves(eqx.filter(resumed.model, eqx.is_array)),
    ):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(full.opt_state), jax.tree.leaves(resumed.opt_state)):
        np.testing.assert_array_equal(a, b)
    steps = [
        json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_fine_tune_starts_from_the_source_model(trained, tmp_path):
    out, state = trained
    fixed_point = dataclasses.replace(
        TINY,
        dynamics=et_ode.Dynamics(
            solver="tsit5",
            dt0=None,
            rtol=1e-3,
            atol=1e-5,
            t1=20.0,
            flow="projected",
            fixed_point_atol=1e-3,
            clamp_visible=True,
            external_field=True,
        ),
        training=dataclasses.replace(
            TINY.training, steps=1, warmup_steps=0, init_from=str(out / "checkpoint.eqx")
        ),
    )
    from et_ode.tasks.images._train import initial_model

    start, normalisation = initial_model(fixed_point, None)
    assert normalisation == state.model.normalisation
    assert start.dynamics == fixed_point.dynamics and float(start.field_strength) == 1.0
    for name in ("positions", "mask_token", "core", "encoder", "decoder"):
        for a, b in zip(
            jax.tree.leaves(eqx.filter(getattr(start, name), eqx.is_array)),
            jax.tree.leaves(eqx.filter(getattr(state.model, name), eqx.is_array)),
        ):
            np.testing.assert_array_equal(a, b)
    wider = dataclasses.replace(fixed_point, model=dataclasses.replace(TINY.model, dim=32))
    with pytest.raises(ValueError, match="different \\[model\\] section"):
        initial_model(wider, None)


def test_sincos_positions(no_runtime_types):
    # no_runtime_types: "learned" is not a `PositionInit`, refused below by the config's
    # own message (the one users get) rather than by the suite's run-time type checks.
    from et_ode.tasks import sincos_positions

    codes = np.asarray(sincos_positions(8, 16))
    assert codes.shape == (64, 16)
    # Row-major grid: patch 9 is row 1, column 1; the first row frequency is 1 rad/patch.
    np.testing.assert_allclose(codes[9, 0], np.sin(1.0), rtol=1e-6)
    np.testing.assert_allclose(codes[1, 4 * 2], np.sin(1.0), rtol=1e-6)  # column sin block
    np.testing.assert_allclose(codes[:, [0, 4]] ** 2 @ [1, 1], 1.0, rtol=1e-6)  # sin^2 + cos^2
    similarity = codes @ codes.T
    assert np.argsort(similarity[27])[-2] in (19, 26, 28, 35)  # nearest code: a neighbour
    with pytest.raises(ValueError, match="position_init = 'learned': input should be 'normal'"):
        et_ode.ImageModelConfig(position_init="learned")


def test_checkpoint_round_trip_holds_everything(trained):
    out, state = trained
    header, blobs = read_checkpoint(out / "checkpoint.eqx")
    assert header["step"] == 6 and len(blobs) == 2
    assert header["config"] == TINY.to_dict()
    assert set(header["versions"]) >= {"et-ode", "jax", "diffrax", "equinox", "optax"}
    assert set(header["normalisation"]) == {"mean", "std"}
    model = et_ode.MaskedImageET.load(out / "checkpoint.eqx")
    for a, b in zip(
        jax.tree.leaves(eqx.filter(model, eqx.is_array)),
        jax.tree.leaves(eqx.filter(state.model, eqx.is_array)),
    ):
        np.testing.assert_array_equal(a, b)
    assert model.normalisation == state.model.normalisation
    assert model.dynamics == TINY.dynamics


def test_complete_images_and_bad_images(trained):
    _, state = trained
    model = state.model
    images = et_ode.photo_crops("test", seed=0)[:2]
    masks = jax.vmap(lambda k: et_ode.random_masking(k, 64))(jax.random.split(jax.random.key(2), 2))
    completed, _ = model.complete(images, masks)
    assert completed.shape == images.shape
    shown = np.asarray(~masks.occluded)
    patches_in = np.asarray(jax.vmap(lambda im: et_ode.patchify(im, 4))(jnp.asarray(images)))
    patches_out = np.asarray(jax.vmap(lambda im: et_ode.patchify(im, 4))(completed))
    np.testing.assert_allclose(patches_out[shown], patches_in[shown], atol=1e-5)
    with pytest.raises(ValueError, match="32"):
        model.complete(np.zeros((1, 28, 28, 3), np.float32), masks)
    with pytest.raises(ValueError, match="channel"):
        model.complete(np.zeros((1, 32, 32, 4), np.float32), masks)
    with pytest.raises(ValueError, match="NaN|finite"):
        model.complete(np.full((1, 32, 32, 3), np.nan, np.float32), masks)


def test_corrupt_and_foreign_checkpoints(trained, tmp_path):
    out, _ = trained
    data = (out / "checkpoint.eqx").read_bytes()
    truncated = tmp_path / "truncated.eqx"
    truncated.write_bytes(data[:-100])
    with pytest.raises(ValueError, match="corrupt checkpoint"):
        et_ode.MaskedImageET.load(truncated)
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF
    (tmp_path / "flipped.eqx").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="corrupt checkpoint"):
        et_ode.MaskedImageET.load(tmp_path / "flipped.eqx")
    (tmp_path / "foreign.eqx").write_bytes(b"\x80\x04pickle or anything else")
    with pytest.raises(ValueError, match="not an et-ode checkpoint"):
        et_ode.MaskedImageET.load(tmp_path / "foreign.eqx")
    with pytest.raises(ValueError, match="no shipped model or file named 'nonsense'"):
        et_ode.MaskedImageET.load("nonsense")
    import struct

    from et_ode.tasks._checkpoint import MAGIC

    for header in (
        b"[1]",
        b'{"format": 1, "blobs": [{}]}',
        b'{"format": 1, "kind": "masked_image_et", "blobs": []}',
    ):
        bad = tmp_path / "bad_header.eqx"
        bad.write_bytes(MAGIC + struct.pack("<Q", len(header)) + header)
        with pytest.raises(ValueError, match="corrupt checkpoint|holds no model"):
            et_ode.MaskedImageET.load(bad)


def test_export_refuses_to_overwrite(trained, tmp_path):
    from et_ode.tasks import export_model

    out, _ = trained
    with pytest.raises(ValueError, match="exists; pass --force"):
        export_model(out / "checkpoint.eqx", out / "checkpoint.eqx")
    export_model(out / "checkpoint.eqx", tmp_path / "model.eqx")
    assert len(read_checkpoint(tmp_path / "model.eqx")[1]) == 1


def test_nothing_overwritten(trained, tmp_path):
    out, _ = trained
    checkpoint = out / "checkpoint.eqx"
    before = checkpoint.read_bytes()
    with pytest.raises(ValueError, match="exists: pass --resume"):
        et_ode.train(TINY, out, progress=False)
    other = dataclasses.replace(TINY, training=dataclasses.replace(TINY.training, seed=5))
    with pytest.raises(ValueError, match="different config"):
        et_ode.train(other, out, resume=True, progress=False)
    assert checkpoint.read_bytes() == before


@pytest.mark.parametrize(
    "text, message",
    [
        ("[model]\ndimension = 8\n", r"\[model\] unknown field dimension; allowed: image_size, "),
        ("[optimiser]\nlr = 1\n", r"unknown section \[optimiser\]; allowed: model, dynamics"),
        (
            "[training]\nsteps = -3\n",
            r"\[training\] steps = -3: input should be greater than or "
            "equal to 1",
        ),
        # strict types: no string for a number, no bool for a number or a number for a bool
        (
            '[training]\nsteps = "many"\n',
            r'\[training\] steps = "many": input should be a '
            "valid integer",
        ),
        (
            '[data]\nmask_fraction = "0.9"\n',
            r'mask_fraction = "0.9": input should be a valid '
            "number",
        ),
        (
            '[data]\naugment = "yes"\n',
            r'\[data\] augment = "yes": input should be a valid '
            "boolean",
        ),
        ("[model]\ntau = true\n", r"\[model\] tau = true: input should be a valid number"),
        ("[training]\nsteps = 10.0\n", r"steps = 10.0: input should be a valid integer"),
        ("[dynamics]\nt1 = inf\n", r"\[dynamics\] t1 = Infinity: input should be a finite number"),
        ("[dynamics]\nt1 = nan\n", r"\[dynamics\] t1 = NaN: input should be a finite number"),
        (
            "[data]\nmask_ratio = 1.5\n",
            r"mask_ratio = 1.5: input should be less than or equal to 1",
        ),
        ("[model]\npatch = 5\n", r"\[model\] patch size 5 does not divide image size 32"),
        ("[model]\nchannels = 2\n", r"\[model\] channels = 2: input should be 1 or 3"),
        (
            "[dynamics]\nflow = 'sideways'\n",
            r"flow = \"sideways\": input should be 'native' or "
            "'projected'",
        ),
        (
            "[dynamics]\nsolver = 'rk45'\n",
            r"\[dynamics\] solver = \"rk45\": input should be 'euler', "
            "'heun', .* or 'auto'",
        ),
        # limits beyond which a run could only crash or hang, with the value and the bound
        (
            "[dynamics]\ndt0 = 1e-300\n",
            r"\[dynamics\] dt0 = 1e-300 from t0 = 0 to t1 = 1.2 is "
            r"1.2e\+300 constant steps, above the limit of 2147483647 .* use dt0 >= 5.59e-10",
        ),
        (
            "[dynamics]\nmax_steps = 4611686018427387904\n",
            r"\[dynamics\] max_steps = "
            "4611686018427387904: input should be less than or equal to 2147483647",
        ),
        (
            "[training]\nseed = 4294967296\n",
            r"\[training\] seed = 4294967296: input should be "
            "less than or equal to 4294967295",
        ),
        ("[training]\nsteps = 2147483648\n", r"steps = 2147483648: input should be less than"),
        (
            "[model]\nimage_size = 2048\npatch = 32\n",
            r"image_size = 2048: input should be less "
            "than or equal to 1024",
        ),
        (
            "[model]\nimage_size = 512\npatch = 4\n",
            r"\[model\] image_size 512 with patch 4 makes "
            "16384 patches, above the limit of 4096 .* patch of 8 pixels or more",
        ),
        (
            "[data]\nmask_ratio = 0.005\n",
            r"\[data\] mask_ratio = 0.005 masks round\(mask_ratio x "
            r"64\) = 0 of the 64 patches .* use mask_ratio > 0.007812",
        ),
        # empty strings are not names
        (
            "[training]\ninit_from = ''\n",
            r'\[training\] init_from = "": string should have at '
            "least 1 character",
        ),
        ("[data]\ntfds_name = ''\n", r'tfds_name = "": string should have at least 1 character'),
        ("[data]\ndata_dir = ''\n", r'data_dir = "": string should have at least 1 character'),
        (
            "[dynamics]\nrtol = 1e-3\natol = 1e-5\n",
            r"\[dynamics\] solver 'euler' has no error estimate",
        ),
        (
            "[dynamics]\nadjoint = 'implicit'\n",
            r"\[dynamics\] adjoint='implicit' .* needs flow='projected'",
        ),
        ("[dynamics]\nsolver = 'kvaerno5'\n", r"\[dynamics\] solver 'kvaerno5' is implicit"),
        (
            "[training]\nsteps = 10\nwarmup_steps = 10\n",
            r"\[training\] warmup_steps \(10\) must be "
            r"below steps \(10\)",
        ),
        (
            "[training]\nout_dir = 1979-05-27\n",
            "is a TOML date or time, which no config field takes",
        ),
        (
            "[training]\nsteps = -3\n[data]\naugment = 1\n",
            r"\[data\] augment = 1: .*; \[training\] steps = -3: ",
        ),
        ("model = 3\n", r"\[model\] must be a table of fields"),
        ("[model\n", "not valid TOML"),
    ],
)
def test_bad_configs(tmp_path, text, message):
    """Each wrong value is refused with the section, the field, the value and what is
    allowed (every problem of the file at once)."""
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        et_ode.load_config(path)


def test_config_files_that_are_not_text_files(tmp_path):
    """A folder, a file that is not UTF-8: refused with the file named."""
    with pytest.raises(ValueError, match=f"config file {tmp_path} is a folder; give a TOML"):
        et_ode.load_config(tmp_path)
    path = tmp_path / "latin1.toml"
    path.write_bytes("[training]\nout_dir = 'caf\u00e9'\n".encode("latin-1"))
    with pytest.raises(ValueError, match=f"{path}: not UTF-8 text .* byte 0xe9 at offset 25"):
        et_ode.load_config(path)


def test_stop_after_must_be_positive(tmp_path, no_runtime_types):
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="stop_after must be a positive integer"):
            et_ode.train(TINY, tmp_path / "run", stop_after=bad, progress=False)
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


def test_configs_built_in_python_are_checked_too(no_runtime_types):
    # no_runtime_types: these values do not have the annotated types, which the suite's
    # run-time checks would refuse before the schema's own message, the one users get.
    from et_ode.tasks import DataConfig, Dynamics

    with pytest.raises(ValueError, match="t1 = -1.0: input should be greater than 0"):
        Dynamics(t1=-1.0)
    with pytest.raises(ValueError, match="augment = 'yes': input should be a valid boolean"):
        DataConfig(augment="yes")
    with pytest.raises(ValueError, match="solver 'euler' has no error estimate"):
        Dynamics(rtol=1e-3, atol=1e-5)


def test_config_schema_matches_the_dataclasses():
    """The JSON Schema is generated from the same fields: every field with its default,
    range and description; unknown names are refused."""
    from et_ode.tasks import TrainConfig, config_json_schema

    schema = config_json_schema(TrainConfig)
    training = schema["$defs"]["TrainingConfig"]
    assert training["additionalProperties"] is False
    steps = training["properties"]["steps"]
    assert steps["type"] == "integer" and steps["minimum"] == 1 and steps["default"] == 2000
    assert steps["description"]
    for name, section in schema["$defs"].items():
        for field, spec in section["properties"].items():
            assert spec.get("description") or "$ref" in spec, (name, field)


def test_shipped_configs_parse():
    import pathlib
    import tomllib

    from et_ode import tasks

    def same(loaded, written):
        if isinstance(written, list):
            return list(loaded) == written
        return loaded == written or (
            isinstance(written, float) and loaded == pytest.approx(written)
        )

    paths = sorted(pathlib.Path(__file__).resolve().parents[1].glob("configs/*.toml"))
    assert len(paths) >= 5  # paper, ode and the three graph configs
    checked = 0
    for path in paths:
        # graph_*.toml: `et-ode graph train` configs, with sections of their own
        load = tasks.load_graph_config if path.name.startswith("graph_") else et_ode.load_config
        config = load(path)
        # every value the file writes is the loaded config's, section by section
        for section, values in tomllib.loads(path.read_text()).items():
            for key, value in values.items():
                loaded = getattr(getattr(config, section), key)
                assert same(loaded, value), (path.name, section, key, loaded, value)
                checked += 1
    assert checked > 50


def test_without_context_standardisation_the_model_sees_raw_units():
    config = dataclasses.replace(TINY.model, standardise_context=False)
    model = et_ode.MaskedImageET(config, TINY.dynamics, key=jax.random.key(0))
    patches = jax.random.normal(jax.random.key(1), (2, 64, 48), jnp.float32)
    masks = jax.vmap(lambda k: et_ode.random_masking(k, 64))(jax.random.split(jax.random.key(2), 2))
    reconstruction, _ = model.reconstruct(patches, masks)
    # By hand: encode the raw patches, solve the core, decode; no context shift or scale.
    from et_ode import solvers

    x0, conditions = jax.vmap(model.encode)(patches, masks)
    sol = solvers.solve(
        model.core, x0, args=conditions, args_batched=True, **model.dynamics.solve_options()
    )
    expected = jax.vmap(model.decode)(sol.x_final)
    np.testing.assert_allclose(reconstruction, expected, rtol=1e-6, atol=1e-6)
    assert np.isfinite(float(model.loss(patches, masks)))


def test_reconstruct_takes_solve_options():
    """`reconstruct(..., options=)` replaces the dynamics' solver, step, tolerances, cap
    and flow: the model's own options give its own numbers, a variant those of the same
    keyword override; a field given both ways, or options that are not a SolveOptions,
    are refused."""
    model = et_ode.MaskedImageET(TINY.model, TINY.dynamics, key=jax.random.key(0))
    patches = jax.random.normal(jax.random.key(1), (2, 64, 48), jnp.float32)
    masks = jax.vmap(lambda k: et_ode.random_masking(k, 64))(jax.random.split(jax.random.key(2), 2))
    own, _ = model.reconstruct(patches, masks)
    same, _ = model.reconstruct(patches, masks, options=model.dynamics.options)
    np.testing.assert_array_equal(own, same)
    finer = model.dynamics.options.replace(dt0=0.05)
    by_options, sol = model.reconstruct(patches, masks, options=finer, t1=0.6)
    by_keyword, _ = model.reconstruct(patches, masks, dt0=0.05, t1=0.6)
    np.testing.assert_array_equal(by_options, by_keyword)
    assert sol.stats["dt0"] == 0.05 and sol.stats["t1"] == 0.6
    with pytest.raises(ValueError, match=r"^dt0= given both in options and as a keyword"):
        model.reconstruct(patches, masks, options=finer, dt0=0.05)
    with pytest.raises(TypeError):  # the annotation's check, or solve_keywords' own
        model.reconstruct(patches, masks, options=dict(dt0=0.05))


def test_config_errors_on_the_command_line(tmp_path, capsys):
    """A bad config file: exit code 2 and one line naming every problem."""
    from et_ode.cli import main

    path = tmp_path / "bad.toml"
    path.write_text('[training]\nsteps = "many"\n[data]\naugment = "yes"\n')
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and 'steps = "many"' in lines[0] and 'augment = "yes"' in lines[0]
    assert not (tmp_path / "run").exists()


def test_config_schema_command(tmp_path, capsys):
    from et_ode.cli import main

    assert main(["config-schema", "graph"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$defs"]["ProtocolConfig"]["properties"]["n_folds"]["minimum"] == 2
    out = tmp_path / "train.schema.json"
    assert main(["config-schema", "train", "--out", str(out)]) == 0
    schema = json.loads(out.read_text())
    assert set(schema["properties"]) == {"model", "dynamics", "data", "training"}
