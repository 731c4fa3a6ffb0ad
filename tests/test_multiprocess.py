"""Several processes: two local processes joined by `jax.distributed.initialize` (gloo
CPU collectives) solve one global batch sharded over both processes' devices, through
the benchmark's own entry point (`benchmarks._distributed`). The gathered result must
equal a single-process solve (a third process, without the distributed runtime) to
1e-6."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import suite_xla_flags

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `benchmarks` is not installed: it lives in the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks import _distributed  # noqa: E402

available, why = _distributed.gloo_available()
pytestmark = pytest.mark.skipif(not available, reason=f"no gloo CPU collectives: {why}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def test_two_processes_equal_one(tmp_path):
    port = _free_port()
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = suite_xla_flags(inherit=False)  # one CPU device per process
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))

    def launch(*extra):
        return subprocess.Popen(
            [sys.executable, "-m", "benchmarks._distributed", "--out", str(tmp_path), *extra],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    procs = [
        launch("--coordinator", f"localhost:{port}", "--num-processes", "2", "--process-id", str(i))
        for i in range(2)
    ]
    procs.append(launch("--single"))  # the reference: one process, no distributed runtime
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=180)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, out in zip(procs, outputs):
        assert proc.returncode == 0, out[-4000:]

    info = json.loads((tmp_path / "info.json").read_text())
    assert info["process_count"] == 2
    assert info["device_count"] == 2 and info["local_device_count"] == 1
    gathered = np.load(tmp_path / "gathered.npy")
    assert gathered.dtype == np.float32

    single = np.load(tmp_path / "single.npy")
    assert gathered.shape == single.shape == (6, 8, 16)
    assert np.max(np.abs(gathered - single)) <= 1e-6
    # and the solve did something (not the initial state)
    assert np.max(np.abs(single - np.load(tmp_path / "x0.npy"))) > 1e-2
