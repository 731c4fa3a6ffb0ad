"""The public API: one name per thing, and a typed boundary.

- Every name a subpackage exports (`__all__`) exists, and no object is exported by two
  subpackages (the top-level `et_ode` re-exports the everyday names of `core` and
  `tasks`, the same objects, by design: those are allowed).
- Every function that `et_ode.solvers` and `et_ode.analysis` export annotates each of
  its parameters and its return, so that the suite's jaxtyping/beartype hook (see
  pyproject.toml) checks every call of the tests against them.
Imports only; solves nothing.
"""

import importlib
import inspect

import pytest

SUBPACKAGES = ("core", "tasks", "solvers", "analysis", "cli", "records", "vocab")


def _exports(name: str) -> dict[str, object]:
    module = importlib.import_module(name)
    names = getattr(module, "__all__", None)
    assert names is not None, f"{name} has no __all__"
    return {n: getattr(module, n) for n in names}


@pytest.mark.parametrize("package", ("et_ode",) + tuple(f"et_ode.{s}" for s in SUBPACKAGES))
def test_every_exported_name_exists(package):
    module = importlib.import_module(package)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{package}.__all__ names what it does not define: {missing}"


def test_no_object_is_exported_twice():
    owner: dict[int, str] = {}
    twice = []
    for sub in SUBPACKAGES:
        for name, obj in _exports(f"et_ode.{sub}").items():
            if isinstance(obj, (str, int, float, tuple)) or obj is None:
                continue  # plain values compare by identity only by accident
            where = f"et_ode.{sub}.{name}"
            if id(obj) in owner:
                twice.append(f"{owner[id(obj)]} is also {where}")
            owner.setdefault(id(obj), where)
    assert not twice, twice


def test_top_level_reexports_are_the_subpackages_own():
    import et_ode

    for name in et_ode.__all__:
        obj = getattr(et_ode, name)
        if inspect.ismodule(obj):
            continue
        homes = [s for s in ("core", "tasks") if name in _exports(f"et_ode.{s}")]
        assert homes, f"et_ode.{name} is exported by neither et_ode.core nor et_ode.tasks"
        assert getattr(importlib.import_module(f"et_ode.{homes[0]}"), name) is obj


def _unannotated(package: str) -> list[str]:
    missing = []
    for name, obj in _exports(package).items():
        if not inspect.isfunction(obj):
            continue
        signature = inspect.signature(obj)
        for parameter in signature.parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if parameter.annotation is inspect.Parameter.empty:
                missing.append(f"{name}({parameter.name})")
        if signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{name} -> ?")
    return missing


@pytest.mark.parametrize("package", ["et_ode.solvers", "et_ode.analysis"])
def test_the_boundary_is_typed(package):
    missing = _unannotated(package)
    assert not missing, f"{package}: unannotated {missing}"


def test_the_check_sees_a_missing_annotation():
    """The check itself: a planted unannotated export is reported."""
    import types

    planted = types.ModuleType("planted")

    def typed(x: int) -> int:
        return x

    def untyped(x, y: int):
        return x

    planted.typed, planted.untyped = typed, untyped
    planted.__all__ = ["typed", "untyped"]
    import sys

    sys.modules["planted"] = planted
    try:
        assert _unannotated("planted") == ["untyped(x)", "untyped -> ?"]
    finally:
        del sys.modules["planted"]
