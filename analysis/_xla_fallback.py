"""Compiling a kernel that XLA refuses on an accelerator.

With JAX 0.11.2 on NVIDIA GPUs, XLA's algebraic simplifier (the `algsimp` pass) refused
to compile continuation's bordered GMRES solve (`INVALID_ARGUMENT: Reshape input and
output shapes must be the same`), which compiles on the CPU and, on the GPU, with that
pass off (docs/how-to/devices.md). `compiled` is `eqx.filter_jit` that, where a compile
is refused that way, compiles the kernel once more with the pass off for that kernel's
programs alone, rather than for every program of the process as
`XLA_FLAGS=--xla_disable_hlo_passes=algsimp` would.
"""

import warnings

import equinox as eqx
import jax

# The pass to turn off where a kernel is refused.
REJECTING_PASS = "algsimp"
WITHOUT_PASS = {"xla_disable_hlo_passes": REJECTING_PASS}


# Every `compiled` kernel, so that the studies can record which run without the pass.
_KERNELS: list["compiled"] = []


def rescued_kernels() -> list[str]:
    """The names of the kernels that run with `REJECTING_PASS` off in this process."""
    return sorted(kernel.__name__ for kernel in _KERNELS if kernel.rescued)


class XlaRefusedError(RuntimeError):
    """XLA refused to compile a kernel on an accelerator, with `REJECTING_PASS` on and
    off."""


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
    (`INVALID_ARGUMENT`), a `RuntimeWarning`, and the kernel compiled again with
    `REJECTING_PASS` off (`jax.jit`'s per-program `compiler_options`; arrays traced,
    everything else static, as `filter_jit` splits them). Once that has worked, the
    kernel's later calls in the process take the same road (`rescued`); where it fails
    too, `XlaRefusedError` says what was tried and the way round."""

    def __init__(self, kernel):
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__
        self.__wrapped__ = kernel
        self.default = eqx.filter_jit(kernel)
        self.traces = 0  # compilations of the rescued kernel (one per static signature)

        def run(static, arrays):
            self.traces += 1
            a, kw = _Split.join(static, arrays)
            return kernel(*a, **kw)

        self._without_pass = jax.jit(run, static_argnums=0, compiler_options=WITHOUT_PASS)
        self.rescued = False
        _KERNELS.append(self)

    def without_pass(self, *args, **kwargs):
        """The kernel compiled with `REJECTING_PASS` off."""
        split = _Split(args, kwargs)
        return self._without_pass(split.static, split.arrays)

    def __call__(self, *args, **kwargs):
        if self.rescued:
            return self.without_pass(*args, **kwargs)
        try:
            return self.default(*args, **kwargs)
        except jax.errors.JaxRuntimeError as error:
            leaves = jax.tree.leaves((args, kwargs))
            if not _refusal(error, leaves):
                raise
            said = str(error).strip().splitlines()[0][:300]
            platform = _platform(leaves)
        warnings.warn(
            f"XLA refused to compile {self.__name__} on the {platform} ({said}); "
            f"compiling it again with XLA's {REJECTING_PASS} pass off for this kernel "
            "(docs/how-to/devices.md).",
            RuntimeWarning,
            stacklevel=2,
        )
        try:
            out = self.without_pass(*args, **kwargs)
        except jax.errors.JaxRuntimeError as again:
            raise XlaRefusedError(
                f"XLA refused to compile {self.__name__} (a kernel of continuation and "
                f"steady_states) on the {platform}, with its {REJECTING_PASS} pass on "
                f"({said}) and off ({str(again).strip().splitlines()[0][:300]}). Run "
                "the study on the CPU: JAX_PLATFORMS=cpu, or inside "
                "`with jax.default_device(jax.devices('cpu')[0]):`."
            ) from again
        self.rescued = True
        return out
