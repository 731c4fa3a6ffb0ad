"""Fault injection: `et-ode train` killed with SIGKILL at random moments (no chance to
save or clean up), then resumed with `--resume`, ends with the same checkpoint, byte for
byte, as an uninterrupted run, and `metrics.jsonl` holds each step once with the same
losses. The killed runs are separate processes (as a cluster's kill would leave them);
the uninterrupted reference and the final resume run here."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

import et_ode

CONFIG = """
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
steps = 40
batch_size = 2
warmup_steps = 1
eval_every = 10
checkpoint_every = 2
learning_rate = 3e-3
"""
KILLS = 2


def _start(config_path, out, resume: bool):
    command = [sys.executable, "-m", "et_ode.cli", "train", "--config", str(config_path),
               "--out", str(out)] + (["--resume"] if resume else [])
    # the test session's numerics (float64 enabled), no run-time type checks
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


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
    config_path.write_text(CONFIG)
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

    assert checkpoint.read_bytes() == (reference / "checkpoint.eqx").read_bytes()
    steps, losses = _steps_and_losses(out / "metrics.jsonl")
    want_steps, want_losses = _steps_and_losses(reference / "metrics.jsonl")
    assert steps == want_steps == list(range(1, 41))
    assert losses == want_losses
