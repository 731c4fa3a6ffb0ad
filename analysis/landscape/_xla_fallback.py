"""Compiling a kernel that XLA refuses on an accelerator.

With JAX 0.11.2 on an NVIDIA H100 and an H200, XLA refused continuation's corrector and
tangent as they then were (GMRES on one concatenated vector `[df/dy; border]`) on the
shipped core: `INVALID_ARGUMENT: Reshape input and output shapes must be the same, got
-> 64`; with `XLA_FLAGS=--xla_disable_hlo_passes=algsimp` they compiled there. Compiled
for an H100 on a machine without one (XLA's deviceless compile, `make gpu-compile`:
docs/how-to/devices.md, "Compile for a GPU without one"), that form is refused with the
same message, and so is today's corrector; the cause shows there: XLA's Triton code
generator cannot emit a fusion that its Triton softmax rewriter formed. With that pass
off every kernel compiles (with the algebraic simplifier off, other fusions form, and
the corrector compiles too). `compiled` is `eqx.filter_jit` that, where a compile is
refused that way, compiles the kernel again with the passes of `RESCUES` off, for that
kernel's programs alone (`jax.jit`'s `compiler_options`), rather than for every program
of the process as `XLA_FLAGS` would.
"""

import warnings

import equinox as eqx
import jax

# The XLA passes turned off for a refused kernel, one set after the other until one
# compiles: the rewriter whose fusions were refused (on the CPU no pass has that name,
# so the option changes nothing there); then also the algebraic simplifier, which
# rescued the same programs on an H100 before the rewriter was found, at the cost of
# every simplification in the kernel.
RESCUES = (("triton-softmax-rewriter",), ("triton-softmax-rewriter", "algsimp"))


# Every `compiled` kernel, so that the studies can record which run with passes off.
_KERNELS: list["compiled"] = []


def rescued_kernels() -> dict[str, list[str]]:
    """The kernels that XLA refused on an accelerator in this process, each with the
    passes it runs without there (`{}` where every kernel compiled as it is)."""
    return {
        kernel.__name__: list(RESCUES[kernel.rescue])
        for kernel in sorted(_KERNELS, key=lambda kernel: kernel.__name__)
        if kernel.rescue is not None
    }


class XlaRefusedError(RuntimeError):
    """XLA refused to compile a kernel on an accelerator, as it is and with each set of
    `RESCUES` off."""


def _platform(leaves) -> str:
    """Where the arguments live: the first array's platform, else the default."""
    for leaf in leaves:
        if isinstance(leaf, jax.Array):
            try:
                return next(iter(leaf.devices())).platform
            except Exception:  # noqa: BLE001 (a tracer: no device of its own)
                break
    return jax.default_backend()


def _refusal(error, leaves) -> bool:
    """A compile refused on an accelerator: an `INVALID_ARGUMENT` from XLA, not on the
    CPU (where the same programs compile: there it is a bug to report)."""
    return str(error).lstrip().startswith("INVALID_ARGUMENT") and _platform(leaves) != "cpu"


def _first_line(error) -> str:
    return (str(error).strip().splitlines() or [""])[0][:300]


class _Split:
    """A call's arguments as `filter_jit` splits them: the arrays (traced) and the rest
    (static: the tree's structure and every other leaf, arrays replaced by `TRACED`)."""

    TRACED = object()

    def __init__(self, args, kwargs):
        leaves, treedef = jax.tree.flatten((args, kwargs))
        traced = [eqx.is_array(leaf) for leaf in leaves]
        others = tuple(self.TRACED if t else leaf for t, leaf in zip(traced, leaves))
        self.static = (treedef, others)
        self.arrays = [leaf for t, leaf in zip(traced, leaves) if t]

    @classmethod
    def join(cls, static, arrays):
        treedef, others = static
        it = iter(arrays)
        leaves = [next(it) if leaf is cls.TRACED else leaf for leaf in others]
        return jax.tree.unflatten(treedef, leaves)


def _attempt(rung: int) -> str:
    """What rung `rung` of `compiled`'s ladder compiles: 0 the kernel as it is, `r` with
    the passes of `RESCUES[r - 1]` off."""
    return "as it is" if rung == 0 else f"with {' and '.join(RESCUES[rung - 1])} off"


class compiled:
    """`eqx.filter_jit(kernel)`; where XLA refuses to compile it on an accelerator
    (`INVALID_ARGUMENT`), the kernel compiled again with each set of passes of `RESCUES`
    off in turn (`jax.jit`'s per-program `compiler_options`, which replace any
    `--xla_disable_hlo_passes` of `XLA_FLAGS` for that program; arrays traced,
    everything else static, as `filter_jit` splits them) until one compiles, with a
    `RuntimeWarning` naming it. The kernel's later calls on an accelerator start from
    that set (`rescue`, its index in `RESCUES`), and a call it does not rescue goes on
    to the next; calls on the CPU always compile the kernel as it is. Where every set is
    refused, `XlaRefusedError` says what was tried and the way round; any other error
    is XLA's own, untouched."""

    def __init__(self, kernel):
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__
        self.__wrapped__ = kernel
        self.default = eqx.filter_jit(kernel)
        self.traces = 0  # compilations with passes off (one per static signature and set)

        def run(static, arrays):
            self.traces += 1
            a, kw = _Split.join(static, arrays)
            return kernel(*a, **kw)

        self._rescues = [
            jax.jit(run, static_argnums=0, compiler_options={"xla_disable_hlo_passes": ",".join(p)})
            for p in RESCUES
        ]
        self.rescue: int | None = None
        _KERNELS.append(self)

    def with_passes_off(self, rescue: int, *args, **kwargs):
        """The kernel compiled with the passes of `RESCUES[rescue]` off."""
        split = _Split(args, kwargs)
        return self._rescues[rescue](split.static, split.arrays)

    def _compile_and_call(self, rung: int, args, kwargs):
        if rung == 0:
            return self.default(*args, **kwargs)
        return self.with_passes_off(rung - 1, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        start = 0
        if self.rescue is not None and _platform(jax.tree.leaves((args, kwargs))) != "cpu":
            start = self.rescue + 1
        refused, last = [], None
        for rung in range(start, len(RESCUES) + 1):
            try:
                out = self._compile_and_call(rung, args, kwargs)
            except jax.errors.JaxRuntimeError as error:
                leaves = jax.tree.leaves((args, kwargs))
                if not _refusal(error, leaves):
                    raise
                refused.append(f"{_attempt(rung)} ({_first_line(error)})")
                last = error
                continue
            if refused:
                self.rescue = rung - 1
                warnings.warn(
                    f"XLA refused to compile {self.__name__} on the {_platform(leaves)} "
                    f"{'; '.join(refused)}; compiled it {_attempt(rung)} for this kernel, "
                    "and so from now on in this process (docs/how-to/devices.md).",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return out
        raise XlaRefusedError(
            f"XLA refused to compile {self.__name__} (a kernel of continuation and "
            f"steady_states) on the {_platform(leaves)}: {'; '.join(refused)}. Run the "
            "study on the CPU: JAX_PLATFORMS=cpu, or inside "
            "`with jax.default_device(jax.devices('cpu')[0]):`."
        ) from last
