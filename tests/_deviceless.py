"""Compiling for NVIDIA H100s on a machine without a GPU (XLA's deviceless ahead-of-time
compile: JAX's CUDA plugin compiles for described devices and runs nothing), for the
tests that `make gpu-compile` runs (tests/test_gpu_compile*.py; docs/how-to/devices.md,
"Compile for a GPU without one").

Those tests run only with `ET_ODE_GPU_COMPILE=1` (`make gpu-compile` sets it, in the
venv `.venv-cuda` that has the plugin): `requested` skips them elsewhere, and importing
this module with that variable set but no plugin, or without `EQX_ON_ERROR=nan`, is an
error. Why `EQX_ON_ERROR=nan`: equinox raises a run-time error (`eqx.error_if`, which
diffrax uses for a failed solve) through a host callback, and a callback cannot be
lowered for a device that is not there; with `nan` the same checks fill the outputs
with NaN instead, so the programs compiled here are the ones a user runs, less that
callback.
"""

import importlib.util
import os
import re

import pytest

PLUGINS = ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12")
PLUGIN = (
    next((name for name in PLUGINS if importlib.util.find_spec(name)), None)
    if importlib.util.find_spec("jax_plugins")
    else None
)
REQUESTED = bool(os.environ.get("ET_ODE_GPU_COMPILE"))
if REQUESTED and PLUGIN is None:
    raise RuntimeError(
        "ET_ODE_GPU_COMPILE is set but no JAX CUDA plugin is installed: run "
        "`make gpu-compile`, which installs one in .venv-cuda."
    )
if REQUESTED and os.environ.get("EQX_ON_ERROR") != "nan":
    raise RuntimeError(
        "ET_ODE_GPU_COMPILE needs EQX_ON_ERROR=nan (equinox's run-time errors are host "
        "callbacks, which cannot be compiled for an absent device): run `make gpu-compile`, "
        "which sets it."
    )
requested = pytest.mark.skipif(
    not REQUESTED, reason="compiles for a GPU in `make gpu-compile` only (ET_ODE_GPU_COMPILE)"
)

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from et_ode.analysis import _xla_fallback  # noqa: E402

BATCH = "batch"  # the mesh axis a batch is split over

# XLA's GpuTargetConfig (a text proto) for the H100 SXM 80 GB (compute capability 9.0),
# from NVIDIA's published figures; XLA takes its cost model and code generation target
# from it. The CUDA runtime's major version is the plugin's.
H100_SXM = """
gpu_device_info {
  cuda_compute_capability { major: 9 minor: 0 }
  core_count: 132
  fpus_per_core: 128
  clock_rate_ghz: 1.98
  memory_bandwidth: 3352320000000
  l2_cache_size: 52428800
  device_memory_size: 84929347584
  threads_per_block_limit: 1024
  threads_per_warp: 32
  threads_per_core_limit: 2048
  shared_memory_per_block: 49152
  shared_memory_per_block_optin: 232448
  shared_memory_per_core: 233472
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 8 }
runtime_version { major: %s minor: 0 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""


def h100_mesh(devices: int = 1) -> jax.sharding.Mesh:
    """A 1-D mesh (axis `BATCH`) over `devices` described H100s of one host (XLA's
    topology `1x1x<devices>`: one slice, one host, `devices` GPUs)."""
    from jax.experimental import topologies

    assert PLUGIN is not None, "no JAX CUDA plugin (make gpu-compile installs one)"
    major = PLUGIN.removeprefix("jax_plugins.xla_cuda")
    topology = topologies.get_topology_desc(
        platform="cuda", target_config=H100_SXM % major, topology=f"1x1x{devices}"
    )
    return topologies.make_mesh(topology, (devices,), (BATCH,))


def compile_for(mesh, function, args, kwargs=None, *, passes_off=(), batch=None):
    """`function(*args, **kwargs)` compiled for the devices of `mesh` as one program
    (arrays abstract, every other leaf static, as `eqx.filter_jit` splits them), with
    the XLA passes `passes_off` disabled. Arrays whose leading axis has length `batch`
    are split over the mesh along it (as `solvers.shard_batch` places them); the rest
    are replicated. Of what `function` returns only the arrays are kept (a model's
    functions and other static leaves are not a program's outputs).

    Returns `("compiled", compiled)` or `(XLA's refusal: its first line, None)`."""
    split = _xla_fallback._Split(tuple(args), kwargs or {})

    def run(static, arrays):
        a, kw = _xla_fallback._Split.join(static, arrays)
        return eqx.filter(function(*a, **kw), eqx.is_array)  # a model's arrays only

    def placed(array):
        split_it = batch is not None and array.ndim > 0 and array.shape[0] == batch
        spec = PartitionSpec(BATCH, *[None] * (array.ndim - 1)) if split_it else PartitionSpec()
        return jax.ShapeDtypeStruct(array.shape, array.dtype, sharding=NamedSharding(mesh, spec))

    options = {"xla_disable_hlo_passes": ",".join(passes_off)} if passes_off else None
    lowered = jax.jit(run, static_argnums=0, compiler_options=options).lower(
        split.static, [placed(a) for a in split.arrays]
    )
    try:
        return "compiled", lowered.compile()
    except jax.errors.JaxRuntimeError as error:
        return str(error).strip().splitlines()[0], None


# --------------------------------------------------------------- collectives in HLO

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{$")
_CALLED = re.compile(
    r"(?:body|condition|calls|to_apply|true_computation|false_computation)=%?([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_COLLECTIVE = re.compile(
    r"= (\(?[^=]*?\)?) (all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter)"
    r"(?:-start)?\("
)
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16)\[([\d,]*)\]")
_BYTES = {"pred": 1, "bf16": 2}


def _bytes(shape: str) -> int:
    """Bytes of an HLO result type (`f32[24641]{0}`), or of the largest array of a tuple
    (an asynchronous collective's start holds its operand and its result)."""
    largest = 0
    for kind, dims in _ARRAY.findall(shape):
        size = _BYTES.get(kind) or int(kind[1:]) // 8
        for d in filter(None, dims.split(",")):
            size *= int(d)
        largest = max(largest, size)
    return largest


def collectives(hlo: str) -> list[dict]:
    """Every cross-device operation of a compiled program's HLO text (`compiled.as_text()`):
    `{"op", "bytes", "in_loop"}`, `in_loop` when it runs in a while loop's body or
    condition (or a computation those call), so once per iteration."""
    loop_bodies: set[str] = set()  # the body and condition of every while loop
    calls: dict[str, set[str]] = {}  # computation -> the computations it calls
    found: list[dict] = []
    current = None
    for line in hlo.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            current = header.group(1)
            calls[current] = set()
            continue
        if current is None:
            continue
        called = _CALLED.findall(line)
        for group in _BRANCHES.findall(line):
            called += [name.strip().lstrip("%") for name in group.split(",")]
        calls[current].update(called)
        if " while(" in line:
            loop_bodies.update(re.findall(r"(?:body|condition)=%?([\w.\-]+)", line))
        op = _COLLECTIVE.search(line)
        if op:
            found.append({"op": op.group(2), "bytes": _bytes(op.group(1)), "in": current})
    in_loop = set()
    stack = list(loop_bodies)
    while stack:
        name = stack.pop()
        if name not in in_loop:
            in_loop.add(name)
            stack.extend(calls.get(name, ()))
    return [{"op": c["op"], "bytes": c["bytes"], "in_loop": c["in"] in in_loop} for c in found]
