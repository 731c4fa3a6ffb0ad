"""The shipped models, loadable by name."""

from importlib import resources
from pathlib import Path

SHIPPED = {
    "paper": "the paper's setting: euler dt 0.1, 12 steps (t1 = 1.2), native flow, "
             "checkpoint adjoint",
    "ode": "a fixed-point model: projected flow to RMS G < tol with the data in the energy "
           "(see the README for how it was trained)",
}


def shipped_path(name: str) -> Path:
    return Path(str(resources.files("et_ode") / "models" / f"{name}.eqx"))


def load_model(name_or_path):
    """A `MaskedImageET` by shipped name or checkpoint path."""
    from ._train import load_model_file

    shipped = isinstance(name_or_path, str) and name_or_path in SHIPPED
    path = shipped_path(name_or_path) if shipped else Path(name_or_path)
    if not path.exists():
        if shipped:
            raise ValueError(
                f"the shipped model {name_or_path!r} is missing from this installation "
                f"({path}); reinstall et-ode or pass a checkpoint path."
            )
        raise ValueError(
            f"no shipped model or file named {str(name_or_path)!r}; shipped models: "
            f"{', '.join(SHIPPED)}."
        )
    return load_model_file(path)
