"""What the image and graph trainers share: the limits and the warmup rule of every
`[training]` section, and the error that ends a run whose loss or solve diverged."""

# JAX counts steps and keys in 32-bit integers without jax_enable_x64: a step beyond
# 2**31 - 1 overflows; a seed beyond 2**32 - 1 gives the key of a smaller one.
MAX_STEPS = 2**31 - 1
MAX_SEED = 2**32 - 1


def check_warmup(warmup_steps: int, steps: int) -> None:
    """The cross-field rule of every `[training]` section: warmup below the steps."""
    if warmup_steps >= steps:
        raise ValueError(f"warmup_steps ({warmup_steps}) must be below steps ({steps})")


def check_stop_after(stop_after, unit: str) -> None:
    """`stop_after` of a trainer: None, or a positive integer counted in `unit` (the
    steps of a run, the runs of a benchmark call)."""
    if stop_after is not None and (
        isinstance(stop_after, bool) or not isinstance(stop_after, int) or stop_after < 1
    ):
        raise ValueError(f"stop_after must be a positive integer, the {unit} (got {stop_after!r}).")


def diverged(what: str, step: int, learning_rate: float, kept: str) -> FloatingPointError:
    """The error that ends a training run whose loss became NaN or inf, or whose solve
    failed (a non-finite state), at `step`: what to change, and `kept` (what is still
    good). The command line prints it as one line, exit code 1."""
    return FloatingPointError(
        f"{what} at step {step}; lower [training] learning_rate (now {learning_rate:g}) or "
        "[dynamics] dt0, or use adaptive steps (rtol, atol), and start again in a new "
        f"--out ({kept})."
    )


def what_failed(loss) -> str:
    """What went wrong in a training step: its solve failed (`loss` None) or its loss
    became `loss` (NaN or inf); the start of the message of `diverged`."""
    return (
        "the solve of the training step failed (its state became non-finite)"
        if loss is None
        else f"the training loss became {loss}"
    )
