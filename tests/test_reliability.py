"""Nothing lost on kill, one writer per run folder, and writes that fail say what
happened.

- `et-ode train` killed with SIGKILL at random moments (no chance to save or clean up),
  then resumed with `--resume`, ends with the same checkpoint, byte for byte, as an
  uninterrupted run, and `metrics.jsonl` holds each step once with the same losses (the
  killed runs are separate processes, as a cluster's kill would leave them);
- a second writer on a run folder (`et-ode train`, `et-ode graph train`) is refused at
  once, naming the holder; a lock left by a killed process never blocks;
- faults injected into every file a training run writes (the checkpoint, the metrics
  log), a graph benchmark's results, a video, and into `atomic_path` itself (no space,
  file too large, permission denied, a read-only folder): the command ends with one line
  naming the file, the OS's reason and the last good checkpoint with its step (or the
  finished runs kept); that checkpoint is intact and no temporary file remains. The same
  for each file of a graph benchmark (a run's checkpoint and record, the metrics log,
  the results) and of a job (`et-ode frames`: its JSON and figure);
- `atomic_path` fsyncs the folder after the rename, and reports a failed folder fsync
  unless the file system does not support it;
- what else must end in one line: a NaN loss (image and graph training), out of memory,
  `--out` a file, a damaged benchmark record, option-parser refusals; and a refused
  job leaves no folder behind.
"""

import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import et_ode
from et_ode import records
from et_ode.cli import main

TINY_CONFIG = """
[model]
image_size = 8
patch = 4
dim = 8
n_heads = 1
head_dim = 4
n_memories = 8

[dynamics]
t1 = 0.3

[data]
eval_images = 4
augment = false

[training]
steps = {steps}
batch_size = 2
warmup_steps = 1
eval_every = {eval_every}
checkpoint_every = 2
learning_rate = 3e-3
"""
GRAPH_CONFIG = {
    "data": {"n_nodes": 60},
    "protocol": {"models": ["mlp"], "n_splits": 1},
    "training": {"steps": 2, "warmup_steps": 0},
}


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_CONFIG.format(steps=4, eval_every=2))
    return path


def _toml(raw: dict) -> str:
    lines = []
    for section, values in raw.items():
        lines += [f"[{section}]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _temporaries(folder):
    return [p.name for p in folder.rglob("*") if records.TEMPORARY in p.name]


# ------------------------------------------------------------- kill, then resume
KILLS = 2


def _start(config_path, out, resume: bool):
    command = [
        sys.executable,
        "-m",
        "et_ode.cli",
        "train",
        "--config",
        str(config_path),
        "--out",
        str(out),
    ] + (["--resume"] if resume else [])
    # the test session's numerics (float64 enabled), no run-time type checks
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_after_a_checkpoint(process, checkpoint, delay: float) -> bool:
    """SIGKILL `process` `delay` seconds after `checkpoint` changes (a step was saved).
    Returns whether it was killed before it ended on its own."""
    before = checkpoint.stat().st_mtime_ns if checkpoint.exists() else None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if checkpoint.exists() and checkpoint.stat().st_mtime_ns != before:
            time.sleep(delay)
            break
        time.sleep(0.01)
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


def _steps_and_losses(path):
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["step"] for r in records], [r["loss"] for r in records]


def test_sigkill_at_random_moments_then_resume_is_byte_identical(tmp_path):
    config_path = tmp_path / "tiny.toml"
    config_path.write_text(TINY_CONFIG.format(steps=40, eval_every=10))
    config = et_ode.load_config(config_path)
    reference = tmp_path / "reference"
    et_ode.train(config, reference, progress=False)

    out = tmp_path / "killed"
    checkpoint = out / "checkpoint.eqx"
    rng = np.random.default_rng(0)
    kills = 0
    for attempt in range(KILLS):
        process = _start(config_path, out, resume=attempt > 0)
        kills += _kill_after_a_checkpoint(process, checkpoint, float(rng.uniform(0, 0.3)))
    assert kills >= 1  # at least one kill landed mid-run
    et_ode.train(config, out, resume=True, progress=False)

    # a kill mid-write leaves a temporary file; the resume removed it (under its lock)
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]
    assert checkpoint.read_bytes() == (reference / "checkpoint.eqx").read_bytes()
    steps, losses = _steps_and_losses(out / "metrics.jsonl")
    want_steps, want_losses = _steps_and_losses(reference / "metrics.jsonl")
    assert steps == want_steps == list(range(1, 41))
    assert losses == want_losses


# ----------------------------------------------------------------- one writer per run
def test_a_second_writer_is_refused_naming_the_holder(config_file, tmp_path, capsys):
    run = tmp_path / "run"
    holder = f"PID {os.getpid()} on host {socket.gethostname()}"
    with records.run_folder_lock(run):
        with pytest.raises(ValueError, match=f"is in use by another et-ode process \\({holder}"):
            et_ode.train(et_ode.load_config(config_file), run, progress=False)
        graph = et_ode.tasks.GraphTrainConfig.from_dict(GRAPH_CONFIG)
        with pytest.raises(ValueError, match=holder):
            et_ode.tasks.run_graph_benchmark(graph, run, progress=False)
        assert main(["train", "--config", str(config_file), "--out", str(run)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and holder in lines[0] and "choose another --out" in lines[0]
        graph_file = tmp_path / "graph.toml"
        graph_file.write_text(_toml(GRAPH_CONFIG))
        assert main(["graph", "train", "--config", str(graph_file), "--out", str(run)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and holder in lines[0]
    assert not (run / "checkpoint.eqx").exists() and not (run / "config.json").exists()


HOLD = """
import sys, time
from et_ode.records import run_folder_lock
with run_folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_lock_left_by_a_killed_process_never_blocks(tmp_path):
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=f"PID {process.pid} on host"):
            with records.run_folder_lock(run):
                pass
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    with records.run_folder_lock(run):  # the OS released the killed holder's lock
        assert json.loads((run / records.LOCK_NAME).read_text())["pid"] == os.getpid()


# ------------------------------------------------------------------- failed writes
def _patch_writes(monkeypatch, fails, error: OSError) -> None:
    """Make the writes of every path for which `fails(path)` is true fail with `error`:
    at the rename of a temporary file onto it, or at an append to it."""
    real_replace, real_open = os.replace, type(records.Path()).open

    def replace(source, target, *args, **kwargs):
        if fails(str(target)):
            raise error
        return real_replace(source, target, *args, **kwargs)

    def open_(self, mode="r", *args, **kwargs):
        if "a" in mode and fails(str(self)):
            raise error
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(records.os, "replace", replace)
    monkeypatch.setattr(type(records.Path()), "open", open_)


def _fail_on(monkeypatch, name: str, after: int, error: OSError, checkpoint) -> dict:
    """Make the writes of the file `name` after the first `after` fail with `error`: at
    the rename of a checkpoint's temporary file, or at the append of a metrics line.
    Returns a dict that receives the bytes of `checkpoint` at the first failure."""
    calls = {"n": 0}

    def fails(path: str) -> bool:
        if os.path.basename(path) != name:
            return False
        calls["n"] += 1
        if calls["n"] == after + 1 and checkpoint.exists():
            calls["checkpoint"] = checkpoint.read_bytes()
        return calls["n"] > after

    _patch_writes(monkeypatch, fails, error)
    return calls


@pytest.mark.parametrize(
    "name, after, last_step",
    [
        ("checkpoint.eqx", 1, 2),  # the second checkpoint (step 4) cannot be written
        ("metrics.jsonl", 2, 2),  # the third metrics line (step 3) cannot be appended
        ("checkpoint.eqx", 0, None),  # not even the first checkpoint
    ],
)
def test_a_failed_write_names_the_file_and_the_last_good_checkpoint(
    config_file, tmp_path, monkeypatch, capsys, name, after, last_step
):
    run = tmp_path / "run"
    calls = _fail_on(
        monkeypatch,
        name,
        after,
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        run / "checkpoint.eqx",
    )
    assert main(["train", "--config", str(config_file), "--out", str(run), "--no-progress"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"could not write {run / name}: [Errno 28] No space left on device" in lines[0]
    if last_step is None:
        assert "no checkpoint was written yet" in lines[0]
        assert not (run / "checkpoint.eqx").exists()
    else:
        assert (
            f"the last good checkpoint is {run / 'checkpoint.eqx'} at step {last_step}" in lines[0]
        )
        assert (run / "checkpoint.eqx").read_bytes() == calls["checkpoint"]
    assert not _temporaries(run)


def _read_only(folder, monkeypatch) -> None:
    """Make `folder` read-only: chmod 0o500, or, as root (which ignores permissions),
    the OS's answer injected where a new file in it is made."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        return
    real = records.tempfile.mkstemp

    def refuse(*args, **kwargs):
        if os.path.samefile(kwargs.get("dir", "."), folder):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real(*args, **kwargs)

    monkeypatch.setattr(records.tempfile, "mkstemp", refuse)


def test_a_read_only_run_folder_names_the_last_good_checkpoint(
    config_file, tmp_path, monkeypatch, capsys
):
    run = tmp_path / "run"
    command = ["train", "--config", str(config_file), "--out", str(run), "--no-progress"]
    assert main(command + ["--stop-after", "2"]) == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    capsys.readouterr()
    _read_only(run, monkeypatch)
    try:
        assert main(command + ["--resume"]) == 1
    finally:
        run.chmod(0o700)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert (
        f"could not write {run / 'metrics.jsonl'}: [Errno 13] Permission denied; the "
        f"last good checkpoint is {run / 'checkpoint.eqx'} at step 2"
    ) in lines[0]
    after = {p.name: p.read_bytes() for p in run.iterdir()}
    assert {k: v for k, v in after.items() if k != records.LOCK_NAME} == {
        k: v for k, v in before.items() if k != records.LOCK_NAME
    }


def test_a_failed_graph_benchmark_write_keeps_the_finished_runs(tmp_path, monkeypatch, capsys):
    config_file, out = tmp_path / "graph.toml", tmp_path / "bench"
    config_file.write_text(_toml(GRAPH_CONFIG))
    command = ["graph", "train", "--config", str(config_file), "--out", str(out), "--no-progress"]
    with monkeypatch.context() as patch:
        _fail_on(
            patch,
            "results.json",
            0,
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
            out / "results.json",
        )
        assert main(command) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == (
        f"et-ode: error: could not write {out / 'results.json'}: [Errno 28] "
        f"No space left on device; 1 finished run(s) are kept in "
        f"{out / 'runs'} (resume with --resume)"
    )
    assert not (out / "results.json").exists() and not _temporaries(out)
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    assert main(command + ["--resume"]) == 0
    assert json.loads((out / "results.json").read_text())["complete"]
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == kept  # not redone


def test_a_refused_video_write_does_not_fall_back(tmp_path, monkeypatch):
    from et_ode.analysis import write_video

    _read_only(tmp_path, monkeypatch)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "writing a GIF instead"
            with pytest.raises(records.WriteError, match="v.mp4: \\[Errno 13\\] Permission"):
                write_video([np.zeros((4, 4, 3), np.uint8)] * 2, tmp_path / "v.mp4")
    finally:
        tmp_path.chmod(0o700)
    assert not list(tmp_path.iterdir())


def test_permission_denied_names_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "read-only"
    folder.mkdir()
    (folder / "result.json").write_text("old")
    if os.geteuid() != 0:
        folder.chmod(0o500)
    else:  # root ignores permissions: the OS's answer, injected where it comes

        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        monkeypatch.setattr(records.tempfile, "mkstemp", refuse)
    try:
        with pytest.raises(
            records.WriteError,
            match=f"could not write {folder / 'result.json'}: \\[Errno 13\\] Permission denied",
        ):
            records.atomic_write_text(folder / "result.json", "new")
    finally:
        folder.chmod(0o700)
    assert (folder / "result.json").read_text() == "old" and not _temporaries(folder)


TOO_LARGE = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then the write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from et_ode.records import WriteError, atomic_write_bytes
try:
    atomic_write_bytes(sys.argv[1], b"x" * 100_000)
except WriteError as error:
    print(error)
"""


def test_file_too_large_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "figure.png"
    target.write_bytes(b"old")
    out = subprocess.run(
        [sys.executable, "-c", TOO_LARGE, str(target)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == f"could not write {target}: [Errno 27] File too large"
    assert target.read_bytes() == b"old" and not _temporaries(tmp_path)


# ------------------------------------- every file a graph benchmark or a job writes
def _fail_matching(monkeypatch, match, error: OSError) -> list:
    """Make every write of a file whose path (relative to nothing: the full path as a
    string) satisfies `match` fail with `error`, at the rename of its temporary file
    or at an append; returns the list of the paths refused."""
    refused = []

    def fails(path: str) -> bool:
        if match(path):
            refused.append(path)
            return True
        return False

    _patch_writes(monkeypatch, fails, error)
    return refused


@pytest.mark.parametrize(
    "pattern, kept",
    [
        ("/runs/*.eqx", 0),  # a run's checkpoint
        ("/runs/*.json", 0),  # a run's record (its checkpoint is then not a finished run)
        ("/metrics.jsonl", 0),  # the first metrics line
        ("/results.md", 1),  # the table, after results.json
    ],
)
def test_each_graph_benchmark_file_that_cannot_be_written(
    tmp_path, monkeypatch, capsys, pattern, kept
):
    import fnmatch

    config_file, out = tmp_path / "graph.toml", tmp_path / "bench"
    config_file.write_text(_toml(GRAPH_CONFIG))
    command = ["graph", "train", "--config", str(config_file), "--out", str(out), "--no-progress"]
    with monkeypatch.context() as patch:
        refused = _fail_matching(
            patch,
            lambda path: fnmatch.fnmatch(path, "*" + pattern),
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        )
        assert main(command) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and refused, lines
    assert lines[0] == (
        f"et-ode: error: could not write {refused[0]}: [Errno 28] No space "
        f"left on device; {kept} finished run(s) are kept in {out / 'runs'} "
        "(resume with --resume)"
    )
    assert not _temporaries(out)
    assert main(command + ["--resume"]) == 0  # and the benchmark goes on from there
    assert json.loads((out / "results.json").read_text())["complete"]
    assert (out / "results.md").exists()


@pytest.mark.parametrize("name", ["energy_video.json", "energy_video.png"])
def test_a_job_whose_result_cannot_be_written(tmp_path, monkeypatch, capsys, name):
    """`et-ode frames`: its JSON or its still figure refused by the OS (no space): one
    line naming the file and the reason, exit code 1, no temporary file."""
    out = tmp_path / "frames"
    with monkeypatch.context() as patch:
        refused = _fail_matching(
            patch,
            lambda path: path.endswith("/" + name),
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        )
        assert (
            main(
                [
                    "frames",
                    "--images",
                    "1",
                    "--frames",
                    "2",
                    "--horizon",
                    "0.3",
                    "--out",
                    str(out),
                    "--no-progress",
                ]
            )
            == 1
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"et-ode: error: could not write {out / name}: [Errno 28] No space left on device"
    ), err
    assert refused == [str(out / name)] and not (out / name).exists()
    assert not _temporaries(out)


# ------------------------------------------------------------- the folder's fsync
def test_atomic_path_fsyncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    import stat

    happened = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(source, target):
        happened.append(("replace", str(target)))
        return real_replace(source, target)

    def fsync(descriptor):
        mode = os.fstat(descriptor).st_mode
        happened.append(("fsync", "folder" if stat.S_ISDIR(mode) else "file"))
        return real_fsync(descriptor)

    monkeypatch.setattr(records.os, "replace", replace)
    monkeypatch.setattr(records.os, "fsync", fsync)
    records.atomic_write_text(tmp_path / "result.json", "{}")
    assert happened == [
        ("fsync", "file"),
        ("replace", str(tmp_path / "result.json")),
        ("fsync", "folder"),
    ]


@pytest.mark.parametrize(
    "code, raises",
    [
        (errno.EINVAL, False),  # a file system that cannot sync folders: nothing to do
        (errno.ENOTSUP, False),
        (errno.EIO, True),  # an I/O error: the rename may not be durable, say so
    ],
)
def test_a_folder_fsync_error_is_reported_unless_unsupported(tmp_path, monkeypatch, code, raises):
    import stat

    real_fsync = os.fsync

    def fsync(descriptor):
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise OSError(code, os.strerror(code))
        return real_fsync(descriptor)

    monkeypatch.setattr(records.os, "fsync", fsync)
    target = tmp_path / "result.json"
    if raises:  # the file is in place; the message says so, and what is uncertain
        with pytest.raises(
            records.WriteError,
            match=f"wrote {target}, but could not fsync its folder \\(\\[Errno {code}\\]",
        ):
            records.atomic_write_text(target, "{}")
    else:
        records.atomic_write_text(target, "{}")
    assert target.read_text() == "{}"
    assert not _temporaries(tmp_path)


# ------------------------------------------------ what else ends in one clear line
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_a_nan_loss_is_one_line_naming_the_step(tmp_path, capsys):
    config_file = tmp_path / "nan.toml"
    config_file.write_text(
        TINY_CONFIG.format(steps=4, eval_every=2).replace(
            "learning_rate = 3e-3", "learning_rate = 1e300"
        )
    )
    assert (
        main(
            ["train", "--config", str(config_file), "--out", str(tmp_path / "run"), "--no-progress"]
        )
        == 1
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    # the parameters after step 1 make the solve of step 2 non-finite (or its loss NaN)
    assert re.match(
        r"et-ode: error: the (training loss became nan|solve of the training "
        r"step failed \(its state became non-finite\)) at step 2; lower "
        r"\[training\] learning_rate \(now 1e\+300\) .* \(no checkpoint was "
        r"written\)\.$",
        lines[0],
    ), lines


def test_a_solve_failing_at_the_first_step_is_one_line(monkeypatch, tmp_path, capsys):
    """A solve that fails inside the very first step (nothing trained yet, no step's
    result to keep) ends in the same one line, not a traceback."""
    import equinox as eqx

    from et_ode.tasks.images import _train

    def failing_step(*args, **kwargs):
        raise eqx.EquinoxRuntimeError("a non-finite state")

    monkeypatch.setattr(_train, "train_step", failing_step)
    config_file = tmp_path / "tiny.toml"
    config_file.write_text(TINY_CONFIG.format(steps=4, eval_every=2))
    assert (
        main(
            ["train", "--config", str(config_file), "--out", str(tmp_path / "run"), "--no-progress"]
        )
        == 1
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert re.match(
        r"et-ode: error: the solve of the training step failed \(its state "
        r"became non-finite\) at step 1; .* \(no checkpoint was written\)\.$",
        lines[0],
    ), lines


def test_a_graph_nan_loss_is_one_line(tmp_path, capsys):
    config_file = tmp_path / "graph.toml"
    raw = {**GRAPH_CONFIG, "training": {**GRAPH_CONFIG["training"], "learning_rate": 1e300}}
    config_file.write_text(_toml(raw))
    assert (
        main(
            [
                "graph",
                "train",
                "--config",
                str(config_file),
                "--out",
                str(tmp_path / "bench"),
                "--no-progress",
            ]
        )
        == 1
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert re.match(
        r"et-ode: error: ratio0.4-split0-mlp: the (training loss became nan|solve of the "
        r"training step failed .*) at step \d; lower \[training\] learning_rate "
        r"\(now 1e\+300\)",
        lines[0],
    ), lines


def test_out_of_memory_is_one_line(monkeypatch, config_file, tmp_path, capsys):
    import et_ode.cli._commands as cli_commands

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(cli_commands, "train", exhausted)
    assert main(["train", "--config", str(config_file), "--out", str(tmp_path / "r")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "et-ode: error: out of memory: use fewer --images (or a smaller "
        "batch_size, model or max_steps in the config), or free memory and run "
        "it again."
    ]


def test_out_that_is_a_file_is_exit_2(config_file, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert main(["train", "--config", str(config_file), "--out", str(afile)]) == 2
    assert capsys.readouterr().err == (
        f"et-ode: error: {afile} is a file, not a folder: give "
        "a folder for the run (created if missing).\n"
    )
    assert afile.read_text() == "mine"


def test_a_damaged_benchmark_record_is_named(tmp_path, capsys):
    config_file, out = tmp_path / "graph.toml", tmp_path / "bench"
    config_file.write_text(_toml(GRAPH_CONFIG))
    command = ["graph", "train", "--config", str(config_file), "--out", str(out), "--no-progress"]
    assert main(command) == 0
    (out / "config.json").write_bytes(b'{"data": \xff')
    capsys.readouterr()
    assert main(command + ["--resume"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"et-ode: error: {out / 'config.json'} is damaged (not JSON")
        and err.count("\n") == 1
    ), err


def test_graph_study_makes_no_folder_when_its_data_fail(tmp_path, monkeypatch, capsys):
    import et_ode.cli._graph as cli_graph

    def unreadable(config):
        raise ValueError("data/YelpChi.mat does not exist")

    monkeypatch.setattr(cli_graph, "load_node_graph", unreadable)
    out = tmp_path / "study"
    assert main(["graph", "study", "convergence", "--quick", "--out", str(out)]) == 2
    assert "YelpChi.mat does not exist" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["frames", "--seed", str(2**63)],
            "argument --seed: must be an integer >= 0 and "
            "<= 4294967295 (got '9223372036854775808')",
        ),
        (
            ["frames", "--max-steps", "99999999999999999999"],
            "argument --max-steps: must be an "
            "integer >= 1 and <= 2147483647 (got '99999999999999999999')",
        ),
        (
            ["train", "--config", "x.toml", "--stop-after", "0"],
            "argument --stop-after: must be an integer >= 1 (got '0')",
        ),
        (
            ["frames", "--frames", "10001"],
            "argument --frames: must be an integer >= 2 and <= 10000 (got '10001')",
        ),
    ],
)
def test_option_parser_refusals_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv + ["--out", "o"])
    command = " ".join(["et-ode", argv[0]])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"{command}: error: {message} ({command} --help lists the options)\n"
    )
    assert not list(tmp_path.iterdir())


def test_a_tiny_step_is_refused_before_any_folder(tmp_path, capsys):
    out = tmp_path / "frames"
    assert main(["frames", "--dt0", "1e-300", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(
            "et-ode: error: dt0 = 1e-300 from t0 = 0 to t1 = 4.8 is 4.8e+300 "
            "constant steps, above the limit of 2147483647"
        )
        and err.count("\n") == 1
    ), err
    assert not out.exists()


def test_a_failed_job_removes_the_empty_folders_it_made(tmp_path):
    """`--out a/b/c` with none of them there: a job that fails removes all three (they are
    empty); a folder that was there before, or that holds a file, is kept."""
    from et_ode.cli._runs import job_folder

    (tmp_path / "kept").mkdir()
    for out in (tmp_path / "a" / "b" / "c", tmp_path / "kept" / "new"):
        with pytest.raises(RuntimeError):
            with job_folder(out, prefix="frames"):
                raise RuntimeError("the job failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert not any((tmp_path / "kept").iterdir())
    with pytest.raises(RuntimeError):
        with job_folder(tmp_path / "x" / "y", prefix="frames") as folder:
            (folder / "frame-000.png").write_bytes(b"")
            raise RuntimeError("failed after writing a frame")
    assert (tmp_path / "x" / "y" / "frame-000.png").exists()
