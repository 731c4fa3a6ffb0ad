"""The shipped models: their names and files."""

from importlib import resources
from pathlib import Path

SHIPPED = {
    "paper": "the paper's setting: euler dt 0.1, 12 steps (t1 = 1.2), native flow, "
    "checkpoint adjoint",
    "ode": "a fixed-point model: projected flow to RMS G < tol with the data in the energy "
    "(docs: how-to/train-evaluate, for how it was trained)",
}
SHIPPED_GRAPH = {
    "graph_anomaly": "node anomaly detection on the generated benchmark (configs/"
    "graph_anomaly.toml: 1,000 nodes, training ratio 0.4, split 0)",
}


def shipped_path(name: str) -> Path:
    """The file of the shipped model `name` inside the installed package."""
    return Path(str(resources.files("et_ode") / "models" / f"{name}.eqx"))


def resolve_model_path(name_or_path, names: dict = SHIPPED) -> Path:
    """The file of a shipped model name (one of `names`: the image models by default,
    `SHIPPED_GRAPH` for graph models), or the path given; an error that names the
    shipped models when neither exists."""
    shipped = isinstance(name_or_path, str) and name_or_path in names
    path = shipped_path(name_or_path) if shipped else Path(name_or_path)
    if path.exists():
        return path
    if shipped:
        raise ValueError(
            f"the shipped model {name_or_path!r} is missing from this installation "
            f"({path}); reinstall et-ode or pass a checkpoint path."
        )
    raise ValueError(
        f"no shipped model or file named {str(name_or_path)!r}; shipped models: {', '.join(names)}."
    )
