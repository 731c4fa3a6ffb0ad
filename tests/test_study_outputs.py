"""Each `et-ode study` writes the JSON keys it wrote before its result became typed
(issue 48), with its finding first (issue 49), and counts the images it used: every
study run through the command line (quick, an untrained tiny checkpoint of 8-pixel
patches: 17 tokens of 16, 272 entries, small enough for the dense paths; two held-out
images or as many as the study uses), its file's key paths against
`tests/data/study_keys.json`, recorded on the same checkpoint from the commit before the
typed results (32cd613) by `key_paths` below, plus the one key added since, `finding`.
A key path names every key at every depth (`branches[].bifurcations[].kind`); the
numbers are not pinned here (they move with a CPU's rounding), only that each leaf
keeps its kind. The image count is checked three ways: the metadata's `images`, the
held-out indices recorded, and the result's own per-image axis where it has one."""

import json
from pathlib import Path

import pytest

import et_ode
from et_ode import cli
from et_ode.cli._study_commands import COMMANDS
from et_ode.tasks import new_model, save_checkpoint
from et_ode.tasks.images._train import _header

KEYS = Path(__file__).parent / "data" / "study_keys.json"
RECORDED = json.loads(KEYS.read_text())


def key_paths(value, prefix: str = "") -> dict[str, str]:
    """`{path: kind}` for every leaf and container of a JSON value: dicts by key, lists
    as `[]` (their items merged), the kind `number`, `string`, `bool`, `null`, `dict` or
    `list`. `metadata` is left out below its own keys (versions, dates and settings that
    are not the study's numbers); an empty list counts as `list` alone."""
    paths: dict[str, str] = {}
    if isinstance(value, dict):
        paths[prefix or "."] = "dict"
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            if key == "metadata":
                paths[path] = "dict"
                continue
            paths.update(key_paths(item, path))
    elif isinstance(value, list):
        paths[prefix] = "list"
        for item in value:
            for path, kind in key_paths(item, f"{prefix}[]").items():
                # a leaf null in one item and a number in another: both are that key
                if paths.get(path) in (None, "null"):
                    paths[path] = kind
    else:
        kinds = {bool: "bool", int: "number", float: "number", str: "string"}
        paths[prefix] = "null" if value is None else kinds[type(value)]
    return paths


def comparable(paths: dict[str, str]) -> dict[str, str]:
    """Leaves that are null in one run and a number in another are the same key."""
    return {path: ("number" if kind == "null" else kind) for path, kind in paths.items()}


TINY = et_ode.TrainConfig(
    model=et_ode.ImageModelConfig(
        patch=8, dim=16, n_heads=2, head_dim=8, n_memories=32, init_std=0.3
    ),
    dynamics=et_ode.Dynamics(t1=0.3),
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """An untrained tiny image model saved as a checkpoint (as the keys were recorded)."""
    normalisation = et_ode.ChannelNormalisation((0.45, 0.35, 0.3), (0.3, 0.25, 0.25))
    path = tmp_path_factory.mktemp("model") / "tiny.eqx"
    save_checkpoint(path, _header(TINY, 0, normalisation, None), new_model(TINY, normalisation))
    return path


# Studies added after the typed results (issue 50): no keys from before to keep; their
# finding and image counts are checked like the others'.
NEWER = {"temperature", "escape"}


# Shorter runs where the default is long for a test (the keys do not depend on it).
FASTER = {"escape": ["--horizon", "50"]}


def test_every_study_is_recorded():
    assert sorted(RECORDED) == sorted(set(cli.STUDIES) - NEWER)


@pytest.mark.parametrize("name", sorted(cli.STUDIES))
def test_a_study_writes_the_keys_it_wrote_before(name, tiny, tmp_path, capsys):
    out = tmp_path / name
    count = COMMANDS[name].images[1] or 2
    argv = ["study", name, "--checkpoint", str(tiny), "--images", str(count), "--quick"]
    argv += ["--no-progress", "--out", str(out)]
    argv += FASTER.get(name, [])
    assert cli.main(argv) == 0
    text = (out / f"{name}.json").read_text()
    written = json.loads(text)
    assert next(iter(written)) == "finding" and text.startswith('{"finding":')
    assert len(written["finding"]) > 40 and written["finding"] in capsys.readouterr().out
    meta = written["metadata"]
    assert meta["images"] == count == len(meta["data"]["image_indices"])
    assert meta["options"]["images"] == count
    assert per_image(name, written) in (None, count)
    if name == "temperature":  # 0 added first; the tolerated T before the first degraded
        temperatures, mse = written["temperatures"], written["mse"]
        assert temperatures[0] == 0 and temperatures == sorted(temperatures)
        assert written["energy_rise"][0] == 0 and len(mse) == len(temperatures)
        worse = [t for t, m in zip(temperatures, mse) if m > (1 + written["tolerance"]) * mse[0]]
        assert written["degraded_at"] == (worse[0] if worse else None)
    if name == "escape":  # an adjacent memory, a saddle between, the escapes' fit
        escapes = written["escapes"]
        assert written["interior_minima"] == 0 or written["hops"] == 4
        assert written["barrier"] > 0 and len(escapes["escaped"]) == 3
        assert escapes["barrier"] == written["barrier"] and escapes["paths"] == 32
        for temperature, ratio in zip(escapes["temperatures"], (1, 1.5, 2)):
            assert temperature == pytest.approx(written["barrier"] / ratio)
    if name in NEWER:
        return
    now, before = comparable(key_paths(written)), comparable(RECORDED[name])
    missing = sorted(set(before) - set(now))
    added = sorted(set(now) - set(before))
    assert not missing and added == ["finding"], f"{name}: missing {missing}, added {added}"
    changed = {p: (before[p], now[p]) for p in before if before[p] != now[p]}
    assert not changed, f"{name}: kinds changed {changed}"


def per_image(name: str, result: dict) -> int | None:
    """The length of the result's own per-image axis, for the studies that batch the
    images they are given (None for the others)."""
    if name == "convergence":
        return len(next(iter(result["flows"].values()))["residual_rms"])
    if name == "energy-descent":
        return len(result["runs"][0]["energies"])
    if name == "overshoot":
        return len(result["mse_per_image"])
    if name == "contributions":
        return len(result["total"]["masked"])
    if name == "temperature":
        return len(result["mse_per_image"][0])
    return None
