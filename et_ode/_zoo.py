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


def model_path(name_or_path) -> Path:
    """The file of a shipped model name, or the path given."""
    shipped = isinstance(name_or_path, str) and name_or_path in SHIPPED
    return shipped_path(name_or_path) if shipped else Path(name_or_path)


def load_model(name_or_path):
    """A `MaskedImageET` by shipped name or checkpoint path."""
    from ._train import load_model_file

    shipped = isinstance(name_or_path, str) and name_or_path in SHIPPED
    path = model_path(name_or_path)
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


def load_model_and_config(name_or_path):
    """`(model, train_config, header)` of a shipped model name (`paper`, `ode`) or a
    checkpoint file written by `et-ode train` / `et-ode export`."""
    from ._checkpoint import read_checkpoint
    from ._train import config_from_header

    model = load_model(name_or_path)
    path = model_path(name_or_path)
    header = read_checkpoint(path)[0]
    return model, config_from_header(header, path), header
