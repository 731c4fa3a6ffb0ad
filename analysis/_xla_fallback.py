"""Compiling a kernel that XLA refuses on an accelerator.

With JAX 0.11.2 on an NVIDIA H100, XLA refused continuation's Newton corrector on the
shipped core (`INVALID_ARGUMENT: Reshape input and output shapes must be the same, got
-> 64`): its Triton emitter could not emit a fusion that the Triton softmax rewriter had
formed (a normalisation over the tokens, with a scalar operand). The same program
compiles on the CPU, and on the GPU with that rewriter off, or with the algebraic
simplifier off, which changes the fusions it is given (docs/how-to/devices.md, "Compile
for a GPU without one", where this was found). `compiled` is `eqx.filter_jit` that, where
a compile is refused that way, compiles the kernel again with the passes of `RESCUES`
off, for that kernel's programs alone (`jax.jit`'s `compiler_options`), rather than for
every program of the process as `XLA_FLAGS=--xla_disable_hlo_passes=...` would.
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
    """The kernels that run with XLA passes off in this process, each with those
    passes (`{}` where every kernel compiled as it is)."""
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
    return str(error).strip().splitlines()[0][:300]


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


class compiled:
    """`eqx.filter_jit(kernel)`; where XLA refuses to compile it on an accelerator
    (`INVALID_ARGUMENT`), a `RuntimeWarning`, and the kernel compiled again with each
    set of passes of `RESCUES` off in turn (`jax.jit`'s per-program `compiler_options`;
    arrays traced, everything else static, as `filter_jit` splits them) until one
    compiles. The kernel's later calls in the process take that road (`rescue`, its
    index in `RESCUES`); where every set fails, `XlaRefusedError` says what was tried
    and the way round."""

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

    def __call__(self, *args, **kwargs):
        if self.rescue is not None:
            return self.with_passes_off(self.rescue, *args, **kwargs)
        try:
            return self.default(*args, **kwargs)
        except jax.errors.JaxRuntimeError as error:
            leaves = jax.tree.leaves((args, kwargs))
            if not _refusal(error, leaves):
                raise
            first = _first_line(error)
            platform = _platform(leaves)
        warnings.warn(
            f"XLA refused to compile {self.__name__} on the {platform} ({first}); "
            f"compiling it again with XLA's {' and '.join(RESCUES[0])} pass off for this "
            "kernel (docs/how-to/devices.md).",
            RuntimeWarning,
            stacklevel=2,
        )
        said, last = [f"as it is ({first})"], None
        for rescue, passes in enumerate(RESCUES):
            try:
                out = self.with_passes_off(rescue, *args, **kwargs)
            except jax.errors.JaxRuntimeError as again:
                said.append(f"with {' and '.join(passes)} off ({_first_line(again)})")
                last = again
                continue
            self.rescue = rescue
            return out
        raise XlaRefusedError(
            f"XLA refused to compile {self.__name__} (a kernel of continuation and "
            f"steady_states) on the {platform}: {'; '.join(said)}. Run the study on the "
            "CPU: JAX_PLATFORMS=cpu, or inside "
            "`with jax.default_device(jax.devices('cpu')[0]):`."
        ) from last
