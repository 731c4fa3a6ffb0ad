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

import contextlib
import dataclasses
import hashlib
import importlib.util
import os
import re
from typing import Any

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
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from et_ode.analysis.landscape import _xla_fallback  # noqa: E402

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


def compile_for(mesh, function, args, kwargs=None, *, passes_off=(), split=()):
    """`function(*args, **kwargs)` compiled for the devices of `mesh` as one program
    (arrays abstract, every other leaf static, as `eqx.filter_jit` splits them), with
    the XLA passes `passes_off` disabled. The arrays of the positional arguments whose
    indices are in `split` are split over the mesh along their leading (batch) axis, as
    `solvers.shard_batch` places a batch; every other array is replicated. Of what
    `function` returns only the arrays are kept (a model's functions and other static
    leaves are not a program's outputs).

    Returns `("compiled", compiled)` or `(XLA's refusal: its first line, None)`."""
    arguments = _xla_fallback._Split(tuple(args), kwargs or {})
    in_batch = [  # per array, in the order `_Split` flattens `(args, kwargs)`
        index in split
        for index, part in enumerate((*args, kwargs or {}))  # keyword arguments last
        for leaf in jax.tree.leaves(part)
        if eqx.is_array(leaf)
    ]

    def run(static, arrays):
        a, kw = _xla_fallback._Split.join(static, arrays)
        return eqx.filter(function(*a, **kw), eqx.is_array)  # a model's arrays only

    def placed(array, batched):
        spec = PartitionSpec(BATCH, *[None] * (array.ndim - 1)) if batched else PartitionSpec()
        return jax.ShapeDtypeStruct(array.shape, array.dtype, sharding=NamedSharding(mesh, spec))

    options = {"xla_disable_hlo_passes": ",".join(passes_off)} if passes_off else None
    lowered = jax.jit(run, static_argnums=0, compiler_options=options).lower(
        arguments.static, [placed(a, b) for a, b in zip(arguments.arrays, in_batch, strict=True)]
    )
    try:
        return "compiled", lowered.compile()
    except jax.errors.JaxRuntimeError as error:
        return str(error).strip().splitlines()[0], None


# ------------------------------------------------- every program a run compiles


@dataclasses.dataclass(frozen=True)
class Program:
    """One program that JAX lowered: the name of the function jitted, its closed jaxpr
    (the computation itself, independent of any platform) and its compiler options."""

    name: str
    jaxpr: Any
    options: tuple

    def key(self) -> tuple:
        """Equal for the same computation on the same shapes with the same constants
        and options (a program lowered again after `jax.clear_caches()`, say): the
        printed jaxpr leaves out the values of its constants, so a digest of them is
        part of the key."""
        constants = hashlib.sha1()
        for constant in self.jaxpr.consts:
            value = np.asarray(constant)
            constants.update(f"{value.dtype}{value.shape}".encode() + value.tobytes())
        return (
            self.name,
            str(self.jaxpr),
            tuple(map(str, self.jaxpr.in_avals)),
            constants.hexdigest(),
            tuple(map(str, self.options)),
        )


@contextlib.contextmanager
def programs_lowered():
    """Records every program that JAX lowers inside the block (to run it here, on the
    CPU), in order: yields the list of `Program`s, filled as the block runs. JAX's
    caches are cleared on entry, so that a program compiled before the block is lowered
    (and recorded) again when the block runs it; inside the block a program JAX reuses
    from its cache is not lowered again, so not recorded twice.

    It wraps JAX's internal `pxla.lower_sharding_computation`, through which every
    `jax.jit` lowering passes (JAX 0.10); should a JAX version move it, this says so."""
    from jax._src.interpreters import pxla

    lower = getattr(pxla, "lower_sharding_computation", None)
    if lower is None:
        raise RuntimeError(
            f"JAX {jax.__version__} has no pxla.lower_sharding_computation: "
            "tests/_deviceless.py cannot record the programs it lowers."
        )
    found: list[Program] = []

    def recording(closed_jaxpr, api_name, fun_name, *args, **kwargs):
        found.append(Program(fun_name, closed_jaxpr, kwargs.get("compiler_options_kvs") or ()))
        return lower(closed_jaxpr, api_name, fun_name, *args, **kwargs)

    jax.clear_caches()
    pxla.lower_sharding_computation = recording
    try:
        yield found
    finally:
        pxla.lower_sharding_computation = lower


def distinct(programs) -> list[Program]:
    """`programs` without repeats (`Program.key`), in their first order."""
    seen: dict[tuple, Program] = {}
    for program in programs:
        seen.setdefault(program.key(), program)
    return list(seen.values())


def compile_program(mesh, program: Program, passes_off=()) -> str:
    """`"compiled"`, or XLA's refusal (its first line): a recorded program compiled for
    the devices of `mesh` (its inputs replicated), with the options it was lowered
    with and the XLA passes `passes_off` disabled."""
    from jax.extend.core import jaxpr_as_fun

    options = dict(program.options)
    if passes_off:
        options["xla_disable_hlo_passes"] = ",".join(passes_off)
    inputs = [
        jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, PartitionSpec()))
        for a in program.jaxpr.in_avals
    ]
    try:
        jax.jit(jaxpr_as_fun(program.jaxpr), compiler_options=options or None).lower(
            *inputs
        ).compile()
    except jax.errors.JaxRuntimeError as error:
        return str(error).strip().splitlines()[0]
    return "compiled"


# --------------------------------------------------------------- collectives in HLO

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{$")
_CALLED = re.compile(
    r"\b(?:body|condition|calls|to_apply|true_computation|false_computation)=%?([\w.\-]+)"
)
_CALLED_SETS = re.compile(r"\b(?:branch_computations|called_computations)=\{([^}]*)\}")
_LOOP = re.compile(r"\b(?:body|condition)=%?([\w.\-]+)")
COLLECTIVE_OPS = (
    "all-reduce",
    "all-gather",
    "all-to-all",
    "ragged-all-to-all",
    "collective-permute",
    "collective-broadcast",
    "reduce-scatter",
    "send",
    "recv",
)
# `= TYPE op(` for a synchronous collective, or the `-done` of an asynchronous one (its
# type is the result; the `-start` holds operands and context as well); point-to-point
# `send` and `recv` have no `-start`, and are read as `collectives` says.
_COLLECTIVE = re.compile(
    r"= (.*?) (" + "|".join(sorted(COLLECTIVE_OPS, key=len, reverse=True)) + r")(-done)?\("
)
_ARRAY = re.compile(r"\b(pred|token|[a-z]+\d+[a-z0-9]*)\[([^\]]*)\]")


def _bits(dtype: str) -> int:
    """Bits of one element of an HLO element type: `pred` 8, `token` 0, otherwise the
    number after the leading letters (`f32`, `bf16`, `s4`, `c64`, `f8e4m3fn`)."""
    if dtype == "pred":
        return 8
    digits = re.match(r"[a-z]+(\d+)", dtype)
    return int(digits.group(1)) if digits else 0


def arrays_of(hlo_type: str) -> list[tuple[str, tuple[int, ...]]]:
    """The arrays of an HLO type (`f32[24641]{0}`, or a tuple of such, bounded dims
    `<=8` taken at their bound): `[(element type, shape)]`."""
    found = []
    for dtype, dims in _ARRAY.findall(hlo_type):
        shape = tuple(  # `?` (a dynamic size, unknown when compiled) counted as 0
            int(d.removeprefix("<=")) if d != "?" else 0 for d in filter(None, dims.split(","))
        )
        found.append((dtype, shape))
    return found


def _bytes(arrays) -> int:
    total = 0
    for dtype, shape in arrays:
        size = _bits(dtype)
        for d in shape:
            size *= d
        total += -(-size // 8)
    return total


def collectives(hlo: str) -> list[dict]:
    """Every cross-device operation of a compiled program's HLO text (`compiled.as_text()`):
    `{"op", "arrays", "bytes", "in_loop"}`. `arrays` lists its results' `(element type,
    shape)`, `bytes` their size; `in_loop` when it sits in a while loop's body or
    condition, or in a computation those call (fusions, branches, nested loops), so runs
    at least once per iteration."""
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
        for group in _CALLED_SETS.findall(line):
            called += [name.strip().lstrip("%") for name in group.split(",")]
        calls[current].update(called)
        if " while(" in line:
            loop_bodies.update(_LOOP.findall(line))
        op = _COLLECTIVE.search(line)
        if not op:
            continue
        name, done, arrays = op.group(2), bool(op.group(3)), arrays_of(op.group(1))
        if name in ("send", "recv"):
            # send(T) -> (T, u32[], token[]), its -done a token; recv -> (T, u32[],
            # token[]), its -done (T, token[]): the data counted once, at the send and
            # at the recv's -done
            if done != (name == "recv"):
                continue
            arrays = arrays[:1]
        found.append({"op": name, "arrays": arrays, "bytes": _bytes(arrays), "in": current})
    in_loop = set()
    stack = list(loop_bodies)
    while stack:
        name = stack.pop()
        if name not in in_loop:
            in_loop.add(name)
            stack.extend(calls.get(name, ()))
    for c in found:
        c["in_loop"] = c.pop("in") in in_loop
    return found


def is_flag(collective: dict) -> bool:
    """A collective that exchanges one boolean (`pred[]`): whether any device's samples
    still run, say."""
    return collective["arrays"] == [("pred", ())]
