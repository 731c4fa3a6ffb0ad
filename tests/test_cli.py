"""The command line (`et-ode demo | frames | compare-solvers | study`) on the shipped
`paper` model and two held-out images: the files each command writes, the numbers in
them against independent computations, run folders, refusals and bad options, and the
sharded path (four forced host devices) against one device.

The demo runs once per session (quick mode): conftest's `installed_demo` runs it from the
installed wheel in a subprocess, which test_install.py checks; here, the files it wrote.
The other commands run in this process at the demo's sizes and are checked against the
demo's files (the same images, frames and dynamics give the same numbers)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import imageio.v2 as imageio
import jax
import numpy as np
import pytest
from PIL import Image

from conftest import suite_xla_flags
from et_ode.cli import STUDIES
from et_ode.cli import _main as cli
from et_ode.cli._runs import fresh_run_folder, output_folder

IMAGES = 2  # what --quick uses in the demo
ROOT = Path(__file__).resolve().parents[1]


def run(*argv):
    return cli.main([*map(str, argv), "--no-progress"])


def read(path):
    return json.loads(Path(path).read_text())


def png_ok(path):
    path = Path(path)
    assert path.stat().st_size > 0
    with Image.open(path) as image:
        assert min(image.size) > 10
        return image.size


def all_finite(values):
    array = np.asarray(values, float)
    return array.size > 0 and bool(np.all(np.isfinite(array)))


@pytest.fixture(scope="module")
def demo(installed_demo):
    """`et-ode demo --quick --no-progress --out OUT` (from the installed wheel: see
    test_install.py): its folder and summary."""
    done, out = installed_demo
    assert done.returncode == 0, done.stderr[-4000:]
    return out, read(out / "summary.json")


@pytest.fixture(scope="module")
def held_out_mse():
    """The evaluation's own masked MSE of `paper` on the first two evaluation crops and
    masks (`et-ode eval`'s code path)."""
    from et_ode.tasks import eval_masks, evaluate_model, held_out_split, load_model_and_config

    model, config, _ = load_model_and_config("paper")
    images = model.normalisation.apply(held_out_split(config, IMAGES))
    return evaluate_model(model, images, eval_masks(config, IMAGES))


def test_demo_quick_summary(demo, held_out_mse):
    out, summary = demo
    md = (out / "summary.md").read_text()
    for heading in ("# et-ode demo", "## What was found", "## Stages", "## Files"):
        assert heading in md
    for key in (
        "run",
        "held_out",
        "overshoot",
        "solvers",
        "convergence",
        "energy_video",
        "findings",
        "files",
        "metadata",
    ):
        assert key in summary
    assert summary["run"]["quick"] and summary["run"]["seconds"] > 0
    assert f"took {summary['run']['seconds']:.0f} s" in md
    # The MSE table is the evaluation's, and the sentences carry its numbers.
    paper = summary["held_out"]["paper"]
    assert paper["model"] == pytest.approx(held_out_mse, rel=1e-5)
    assert f"paper {paper['model']:.4f}" in md and f"{paper['mean_fill']:.4f}" in md
    assert set(summary["overshoot"]) == {"paper", "ode"}
    shoot = summary["overshoot"]["paper"]
    assert shoot["horizon"] == pytest.approx(1.2) and shoot["t_max"] == pytest.approx(12.0)
    assert shoot["mse_at_horizon"] == pytest.approx(held_out_mse, rel=1e-4)
    assert f"{shoot['mse_at_horizon']:.4f} at its training horizon t = 1.2" in md
    assert set(summary["convergence"]) == {"native", "projected"}
    native = summary["convergence"]["native"]
    assert native["scale_growth"] > 1.5  # on the native flow the token scales grow
    assert summary["convergence"]["projected"]["scale_growth"] == pytest.approx(1, abs=1e-3)
    assert set(summary["energy_video"]) == {"paper"}
    assert summary["solvers"]["paper_error_exact"] > 0
    # The landscape studies it names but does not run are commands the parser takes.
    from et_ode.cli._summary import LANDSCAPE_COMMANDS

    for command, _ in LANDSCAPE_COMMANDS:
        line = f"et-ode study {command} --checkpoint paper --quick"
        assert f"`{line}`" in md
        cli.build_parser().parse_args(line.split()[1:])
    for item in summary["files"]:
        path = out / item["path"]
        assert path.exists(), path
        if path.suffix == ".json":
            assert read(path)["metadata"]["versions"]["jax"] == jax.__version__
    for f in (
        "summary.md",
        "summary.json",
        "held_out_mse.json",
        "compare-solvers.png",
        "overshoot_paper.png",
        "overshoot_ode.png",
        "convergence.png",
        "energy_video_paper.mp4",
    ):
        assert (out / f).stat().st_size > 0, f


def test_demo_summary_quotes_what_its_convergence_figure_shows(demo):
    """The summary's decay fit of each flow is the one the convergence figure's legend
    shows (both from `analysis.quoted_decay`): the figure re-drawn from the demo's
    convergence.json gives the same text and number, with its r^2, and draws as many
    images as the summary counts (its caption says how many)."""
    import re

    from et_ode import analysis

    out, summary = demo
    md = (out / "summary.md").read_text()
    fig = analysis.plot_convergence(read(out / "convergence.json"))
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    fitted = []
    for flow, found in summary["convergence"].items():
        decay, images = found["decay"], found["images"]
        entries = [t for t in legend if t.startswith(f"{flow} fit: ")]
        if not decay["fitted"]:  # (the quick demo's projected flow: no tail yet by t = 5)
            assert not entries and decay["text"] in md
            continue
        fitted.append(flow)
        assert entries == [f"{flow} fit: {decay['text']}"], (legend, decay)
        if decay["law"] == "exponential":
            shown = float(re.search(r"rate ([0-9.e+-]+)/tau", entries[0]).group(1))
        else:  # t^-p, written t^-0.52 (or t^+0.0025 where G grew)
            shown = -float(re.search(r"t\^([+-][0-9.e+-]+)", entries[0]).group(1))
        assert shown == pytest.approx(decay["value"], rel=5e-3)  # 3 digits: the same number
        assert f"r^2 {decay['r2']:.2g}" in decay["text"] or images > 1
        assert decay["text"] in md  # and the sentence quotes it
        assert (flow if images == 1 else f"{flow} ({images} images)") in legend
        assert f"{images} image" in fig.get_suptitle()
    assert fitted, f"no fit quoted: {legend}"  # a test that can fail: a fit is compared
    assert summary["convergence"]["projected"]["decay"]["law"] == "exponential"
    assert summary["convergence"]["native"]["decay"]["law"] == "power_law"


def test_frames(demo, tmp_path, held_out_mse):
    out = tmp_path / "frames"
    assert (
        run("frames", "--checkpoint", "paper", "--images", IMAGES, "--frames", 5, "--out", out) == 0
    )
    frames = sorted((out / "energy_video_frames").glob("frame_*.png"))
    assert [f.name for f in frames] == [f"frame_{i:04d}.png" for i in range(5)]
    size = png_ok(frames[0])
    assert png_ok(out / "energy_video.png") == size
    reader = imageio.get_reader(out / "energy_video.mp4")
    assert len(list(reader.iter_data())) == 5
    reader.close()
    record = read(out / "energy_video.json")
    data, meta = record["data"], record["metadata"]
    np.testing.assert_allclose(data["times"], np.linspace(0, 4.8, 5))  # 4 x the horizon
    assert np.shape(data["energies"]) == (IMAGES, 5) and all_finite(data["energies"])
    assert data["mse"][1] == pytest.approx(held_out_mse, rel=1e-4)  # t = 1.2, the model's
    assert meta["checkpoint"] == "paper" and meta["solve"]["solver"] == "euler"
    assert meta["seeds"]["masks"] == 20230213 and meta["data"]["image_indices"] == [0, 799]
    assert meta["versions"]["jax"] == jax.__version__ and meta["dtype"] == "float32"
    # The same video as the demo's (same images, frames and dynamics).
    demo_data = read(demo[0] / "energy_video_paper.json")["data"]
    np.testing.assert_allclose(data["energies"], demo_data["energies"], rtol=1e-6)
    # at a temperature: the same times, the noise recorded, energies that differ
    noisy = tmp_path / "noisy"
    argv = ["frames", "--checkpoint", "paper", "--images", IMAGES, "--frames", 5]
    assert run(*argv, "--temperature", 0.05, "--noise-seed", 3, "--out", noisy) == 0
    hot_record = read(noisy / "energy_video.json")
    hot, solve = hot_record["data"], hot_record["metadata"]["solve"]
    np.testing.assert_allclose(hot["times"], data["times"])
    assert solve["temperature"] == 0.05 and solve["noise_seed"] == 3
    assert hot["energies"][0][0] == data["energies"][0][0]  # t = 0: no noise yet
    assert np.max(np.abs(np.subtract(hot["energies"], data["energies"]))) > 1.0


def test_compare_solvers(demo, tmp_path):
    out = tmp_path / "compare"
    assert (
        run(
            "compare-solvers",
            "--checkpoint",
            "paper",
            "--images",
            IMAGES,
            "--quick",
            "--fixed-solvers",
            "euler",
            "--step-sizes",
            "0.1,0.05",
            "--out",
            out,
        )
        == 0
    )
    png_ok(out / "compare-solvers.png")
    result = read(out / "compare-solvers.json")
    runs = {(r["solver"], r.get("rtol") or r.get("dt0")): r for r in result["runs"]}
    assert set(runs) == {("tsit5", 1e-3), ("tsit5", 1e-5), ("euler", 0.1), ("euler", 0.05)}
    for r in runs.values():
        assert r["nfe"] > 0 and r["ok"] and all_finite([r["error_exact"], r["error_paper"]])
    assert runs["euler", 0.1]["error_paper"] < 1e-6  # it is the paper's map
    assert runs["euler", 0.1]["nfe"] == 12
    assert runs["tsit5", 1e-5]["error_exact"] < runs["tsit5", 1e-3]["error_exact"]
    assert runs["tsit5", 1e-5]["error_exact"] < runs["euler", 0.05]["error_exact"]
    assert result["metadata"]["flow"] == "native" and result["metadata"]["t1"] == 1.2
    assert "x_final" not in result["reference"]  # states are left out of the files


def test_study_overshoot_and_contributions(demo, tmp_path):
    out = tmp_path / "overshoot"
    assert (
        run(
            "study",
            "overshoot",
            "--checkpoint",
            "paper",
            "--images",
            IMAGES,
            "--quick",
            "--out",
            out,
        )
        == 0
    )
    png_ok(out / "overshoot.png")
    mine, demos = read(out / "overshoot.json"), read(demo[0] / "overshoot_paper.json")
    np.testing.assert_allclose(mine["mse"], demos["mse"], rtol=1e-6)
    assert mine["metadata"]["job"]["quick"] and mine["metadata"]["horizon_kind"] == "t1"
    assert mine["metadata"]["model"]["dynamics"]["solver"] == "euler"
    out = tmp_path / "contributions"
    assert run("study", "contributions", "--images", IMAGES, "--quick", "--out", out) == 0
    png_ok(out / "contributions.png")
    result = read(out / "contributions.json")
    np.testing.assert_allclose(result["times"], np.linspace(0, 1.2, 7))
    assert np.max(result["sum_mismatch"]) < 1e-4  # the parts add up to the update
    assert all_finite(result["attention"]["masked"])


@pytest.mark.skipif(
    not os.environ.get("ET_ODE_SLOW_TESTS"),
    reason="every study through the command line: ET_ODE_SLOW_TESTS=1",
)
@pytest.mark.parametrize(
    "name",
    [
        "convergence",
        "energy-descent",
        "stability",
        "fixed-points",
        "gradient-depth",
        "work-precision",
        "lyapunov-spectrum",
    ],
)
def test_every_study(name, tmp_path):
    from et_ode.cli._study_commands import COMMANDS

    out = tmp_path / name
    images = min(IMAGES, COMMANDS[name].images[1] or IMAGES)
    assert run("study", name, "--images", images, "--quick", "--out", out) == 0
    png_ok(out / f"{name}.png")
    result = read(out / f"{name}.json")
    assert result["metadata"]["checkpoint"] == "paper"
    assert result["metadata"]["versions"]["et-ode"]


def test_study_names_match_analysis():
    assert cli.STUDY_NAMES == STUDIES


@pytest.mark.parametrize("name", STUDIES)
def test_each_study_has_its_own_help(name, capsys):
    """`et-ode study NAME --help` lists the options that study reads, with what they
    mean there and the defaults its runner uses (from the same `StudyCommand`), and
    no other; the help of two studies differs."""
    from et_ode.cli._study_commands import ARGUMENTS, COMMANDS

    with pytest.raises(SystemExit) as exit_:
        cli.main(["study", name, "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    command = COMMANDS[name]
    assert command.summary[1:30] in text and command.uses in text
    for option, (flags, _) in ARGUMENTS.items():
        shown = f"{flags[0]} " in text or f"{flags[0]}," in text
        assert shown == (option in command.options), (name, flags[0])
    for option, entry in command.options.items():
        assert " ".join(entry.help().split())[:60] in text, (name, option)


def test_study_helps_differ_and_defaults_are_the_runners():
    from et_ode.cli._study_commands import COMMANDS

    helps = {
        name: command.options["horizon"].help()
        for name, command in COMMANDS.items()
        if "horizon" in command.options
    }
    assert len(set(helps.values())) >= 8  # what --horizon means differs by study
    assert COMMANDS["convergence"].default("horizon", quick=True) == 20.0
    assert COMMANDS["convergence"].default("horizon", quick=False) == 100.0
    assert "default 100; --quick: 20" in helps["convergence"]
    assert COMMANDS["stability"].default("flow", quick=False) == "projected"


def test_study_job_refuses_what_a_study_does_not_read(tmp_path):
    from et_ode.cli import study_job

    with pytest.raises(ValueError, match="--factor is not an option of `et-ode study stability`"):
        study_job("stability", None, None, None, tmp_path, factor=5.0)
    with pytest.raises(ValueError, match="uses one image .* give --images 1 \\(got 3\\)"):
        study_job("stability", None, np.zeros((3, 4, 4, 3)), None, tmp_path)


def test_fresh_run_folders_never_reused(tmp_path, monkeypatch):
    import time

    monkeypatch.setattr(time, "strftime", lambda fmt: "20260101-000000")
    first = fresh_run_folder(tmp_path, "demo")
    (tmp_path / "demo-20260101-000000-1").mkdir()  # taken by someone else
    second = fresh_run_folder(tmp_path, "demo")
    assert first.name == "demo-20260101-000000" and second.name == "demo-20260101-000000-2"
    assert first.is_dir() and second.is_dir() and not any(second.iterdir())
    assert output_folder(None, prefix="demo", root=tmp_path).name.endswith("-3")


def test_refuses_non_empty_out(tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert run("frames", "--images", 1, "--frames", 2, "--out", out) == 2
    message = capsys.readouterr().err
    assert "--out" in message and "not empty" in message and "--force" in message
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert output_folder(out, prefix="frames", force=True) == out  # --force writes into it
    assert output_folder(tmp_path / "new" / "deep", prefix="x").is_dir()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["study", "overshoot", "--checkpoint", "ode", "--horizon", "10"], ["--factor"]),
        (
            ["study", "basin-continuation", "--p-span", "1,2"],
            ["--p-span 1,2", "contain the trained value of beta, 0.25"],
        ),
        (
            ["study", "basin-continuation", "--parameter", "field_strength"],
            ["field_strength is 0", "--parameter beta or memory_scale"],
        ),
        (
            ["study", "continuation", "--parameter", "field_strength"],
            ["field_strength is 0", "--parameter beta or memory_scale"],
        ),
        (["frames", "--atol", "1e-6"], ["--atol needs --rtol"]),
        (["frames", "--solver", "milstein"], ["'milstein' is an SDE solver", "temperature"]),
        (["frames", "--checkpoint", "no-such-model"], ["no shipped model or file", "paper"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, words, tmp_path, capsys):
    assert run(*argv, "--images", 1, "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert err.startswith("et-ode: error: ") and err.count("\n") == 1 and "Traceback" not in err
    for word in words:
        assert word in err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["frames", "--images", "0"], ["--images", "must be an integer >= 1"]),
        (["frames", "--frames", "1"], ["--frames", ">= 2"]),
        (["compare-solvers", "--solvers", "tsit5,rk4"], ["--solvers", "unknown solver 'rk4'"]),
        (["compare-solvers", "--tolerances", "1e-3,-1"], ["--tolerances", "positive"]),
        (["study", "convergence", "--flow", "sideways"], ["--flow", "invalid choice"]),
        (["study", "nonsense"], ["invalid choice: 'nonsense'", "convergence", "work-precision"]),
        (["study", "fixed-points", "--flow", "native"], ["--flow", "not an option", "projected"]),
        (
            ["study", "stability", "--p-span", "0.5,2"],
            ["--p-span", "not an option of `et-ode study stability`", "stability --help"],
        ),
        (["study", "stability", "--factor", "5"], ["--factor", "drop it"]),
        (["study", "long-horizon", "--dt0", "0.1"], ["--dt0", "adaptive"]),
        (["study", "work-precision", "--rtol", "1e-6"], ["--rtol", "--tolerances"]),
        (["study", "continuation", "--horizon", "5"], ["--horizon", "no end time", "--p-span"]),
        (["study", "continuation", "--flow", "native"], ["projected flow", "--flow"]),
        (["study", "basin-continuation", "--flow", "native"], ["projected flow", "--flow"]),
        (["study", "stability", "--images", "8"], ["--images", "uses one image", "--images 1"]),
        (["study", "basins", "--images", "1"], ["--images", "two images", "--images 2"]),
        (["study", "convergence", "--rtol", "-1e-6"], ["--rtol", "positive number", "'-1e-6'"]),
        (["frames", "--horizon", "-inf"], ["--horizon", "positive number", "'-inf'"]),
        (["frames", "--temperature", "-1"], ["--temperature", "number >= 0", "'-1'"]),
        (["frames", "--solver", "rk4"], ["unknown solver", "at a temperature", "milstein"]),
        (["study", "temperature", "--temperatures", "0.1,-2"], ["--temperatures", "positive"]),
        (["study", "energy-descent", "--horizon", "-5"], ["--horizon", "positive number", "'-5'"]),
        (["demo", "--images", "x"], ["--images", "'x'"]),
        (["frames", "--format", "jpg"], ["--format", "invalid choice", "pdf", "svg"]),
        (["study", "convergence", "--format", "eps"], ["--format", "invalid choice"]),
        (["graph", "study", "overshoot", "--format", "gif"], ["--format", "invalid choice"]),
    ],
)
def test_bad_options_are_argparse_errors(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    for word in words:
        assert word in err


def test_sharded_equals_single_device(demo, tmp_path):
    """The overshoot study on 4 forced host devices (2 images padded to 4, placed with
    `solvers.shard_batch`) gives the single-device numbers of the demo."""
    out = tmp_path / "sharded"
    code = (
        "import sys; from et_ode.cli import main; sys.exit(main(['study', 'overshoot', "
        f"'--images', '{IMAGES}', '--quick', '--no-progress', '--out', {str(out)!r}]))"
    )
    env = dict(
        os.environ,
        XLA_FLAGS=suite_xla_flags("--xla_force_host_platform_device_count=4"),
        JAX_PLATFORMS="cpu",
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    sharded, single = read(out / "overshoot.json"), read(demo[0] / "overshoot_paper.json")
    assert sharded["metadata"]["devices"]["count"] == 4
    assert single["metadata"]["devices"]["count"] == 1
    # the compiler settings are recorded (they change wall times)
    assert "xla_force_host_platform_device_count=4" in sharded["metadata"]["xla_flags"]
    assert "device_count" not in single["metadata"]["xla_flags"]
    np.testing.assert_allclose(sharded["mse"], single["mse"], rtol=1e-6)
    np.testing.assert_allclose(sharded["energy"], single["energy"], rtol=1e-6)
    np.testing.assert_allclose(sharded["mse_per_image"], single["mse_per_image"], rtol=1e-6)


def test_a_solver_alone_means_constant_steps_in_studies():
    """`et-ode study convergence --solver euler` (no --rtol): constant steps of --dt0
    (default 0.1), not the study's adaptive tolerances (which euler refuses); `auto` or
    tsit5 alone keep the study's tolerances."""
    import et_ode
    from et_ode.cli._study_runners import StudySettings

    model = et_ode.MaskedImageET.load("paper")
    steps = StudySettings(solver="euler").steps(model, "float64")
    assert steps == dict(solver="euler", dt0=0.1, rtol=None, atol=None)
    assert StudySettings(solver="heun", dt0=0.05).steps(model, "float64")["dt0"] == 0.05
    adaptive = StudySettings(solver="tsit5", rtol=1e-6, atol=1e-8).steps(model, "float64")
    assert adaptive == dict(solver="tsit5", dt0=None, rtol=1e-6, atol=1e-8)
    assert StudySettings().steps(model, "float64")["solver"] == "tsit5"
    # a solver with an error estimate, alone: the study's tight tolerances
    assert StudySettings(solver="auto").steps(model, "float64")["rtol"] == 1e-7
    with pytest.raises(ValueError, match="--atol 1e-08 was given without --rtol"):
        StudySettings(atol=1e-8).steps(model, "float64")


def test_continuation_starts_at_each_parameters_trained_value():
    """`study continuation` starts its branches at the trained model: `p` is a scale of
    the memories (1), or the external field's strength and the attention's beta
    themselves (the `ode` model's field strength is not 1)."""
    from et_ode.cli._landscape_runners import trained_value
    from et_ode.tasks import load_model_and_config

    model = load_model_and_config("ode")[0]
    assert trained_value(model, "memory_scale") == 1.0
    assert trained_value(model, "beta") == model.core.attention.beta
    strength = float(model.field_strength)
    assert trained_value(model, "field_strength") == strength and abs(strength - 1) > 0.1
