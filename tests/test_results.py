"""Typed results (`analysis._results.Result`): a `Branch` and its special points as
continuation returns them, read by attribute and by key, written to JSON with the keys
the dicts had and read back typed, and chained: a special point carries its system, so
that `switch_branch(branch.branch_points[0])` and `fold_continuation(branch.folds[0],
...)` take it alone. Checked on the pitchfork and the fold `x' = p + x^2` (analytic)."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

from et_ode import analysis


def pitchfork(x, p, args):
    return p * x - x**3


def fold_in_two(x, p, args):
    """`x' = p + q x + x^2` (`q = args["q"]`): folds on `p = q^2 / 4` at `x = -q / 2`."""
    return p + args["q"] * x + x**2


@pytest.fixture(scope="module")
def trivial():
    return analysis.continuation(
        pitchfork,
        jnp.array([0.0]),
        -1.0,
        p_span=(-1.0, 1.0),
        settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.2),
    )


def test_a_branch_is_typed_and_reads_as_its_dict_did(trivial):
    assert isinstance(trivial, analysis.Branch)
    assert trivial["p"] is trivial.p and trivial["eigenvalues"] is trivial.eigenvalues
    (point,) = trivial.bifurcations
    assert isinstance(point, analysis.BranchPoint) and point.kind == "branch_point"
    assert trivial.branch_points == [point] and trivial.folds == trivial.hopf_points == []
    assert abs(point.p) < 1e-6 and point["switch_tangent"] is point.switch_tangent
    # a field's branch has no energy-model keys; the context is no key at all
    assert "y" not in trivial and "fixed_point_residual_rms" not in point
    assert "system" not in point and point.system is pitchfork
    with pytest.raises(KeyError):
        trivial["y"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        trivial.p = None
    with pytest.raises(TypeError):
        trivial["p"] = None
    assert "Branch(p=ndarray[" in repr(trivial)


def test_json_keeps_the_keys_and_reads_back_typed(trivial):
    data = json.loads(json.dumps(trivial.to_json()))
    assert data == analysis.to_json(dict(trivial))  # the dict's JSON, key for key
    assert set(data) == set(trivial) and set(data["bifurcations"][0]) == set(
        trivial.bifurcations[0]
    )
    back = analysis.Branch.from_json(data)
    assert isinstance(back, analysis.Branch) and back.stop_reason == trivial.stop_reason
    np.testing.assert_array_equal(back.p, trivial.p)
    np.testing.assert_array_equal(back.eigenvalues, trivial.eigenvalues)  # complex again
    assert back.eigenvalues.dtype.kind == "c"
    (point,) = back.bifurcations
    assert isinstance(point, analysis.BranchPoint) and point.system is None
    np.testing.assert_array_equal(point.switch_tangent, trivial.bifurcations[0].switch_tangent)
    assert point.eigenvalue == trivial.bifurcations[0].eigenvalue


def test_switch_branch_takes_the_branch_point_alone(trivial):
    """The other branch `p = x^2` from the point alone, the same as from the system and
    the record read back from JSON; the record alone is refused in one line."""
    point = trivial.branch_points[0]
    settings = dict(p_span=(-1.0, 1.0), settings=analysis.ContinuationSettings(ds=0.05, ds_max=0.2))
    other = analysis.switch_branch(point, **settings)
    x, p = other.x[1:, 0], other.p[1:]
    assert np.all(x > 0) and other.stop_reason == "p_span"
    np.testing.assert_allclose(np.abs(x) * (p - x**2), 0.0, atol=2e-10)
    record = analysis.BranchPoint.from_json(json.loads(json.dumps(point.to_json())))
    again = analysis.switch_branch(pitchfork, record, **settings)
    np.testing.assert_allclose(again.p, other.p, atol=1e-12)
    with pytest.raises(ValueError, match="carries its system"):
        analysis.switch_branch(record, **settings)


def test_fold_continuation_takes_the_fold_alone():
    """The fold of `x' = p + q x + x^2` at `q = 1` followed in `q` from the fold alone
    (its field and conditions carried): every point on `p = q^2 / 4`, `x = -q / 2`."""
    args = {"q": 1.0}
    branch = analysis.continuation(
        fold_in_two,
        jnp.array([-1.0]),
        0.0,
        p_span=(-1.0, 1.0),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.1),
    )
    (fold,) = branch.folds
    assert fold.p == pytest.approx(0.25, abs=1e-9) and fold.args is args
    curve = analysis.fold_continuation(
        fold,
        1.0,
        second=lambda a, q: {**a, "q": q},
        q_span=(0.5, 1.5),
        settings=analysis.ContinuationSettings(ds=0.1),
    )
    q = np.asarray(curve["q"])
    assert curve["stop_reason"] == "p_span" and q[-1] > 1.5
    np.testing.assert_allclose(curve["p"], q**2 / 4, atol=1e-9)
    np.testing.assert_allclose(np.asarray(curve["x"])[:, 0], -q / 2, atol=1e-9)
    with pytest.raises(TypeError, match="needs q0"):
        analysis.fold_continuation(fold_in_two, fold, second=lambda a, q: a, q_span=(0, 1))


def cubic(x, p, args):
    """`x' = p + q x - x^3` (`q = args["q"]`): folds on `q = 3 x^2`, `p = -2 x^3`, which
    meet at the cusp `p = q = 0` with `c = -1`."""
    return p + args["q"] * x - x**3


def test_a_fold_curve_and_its_cusp_are_typed_and_chain():
    """The fold at `q = 1` followed down through the cusp (typed `FoldCurve`, `Cusp` with
    `c = -1` at the origin, 1e-9), the cusp carrying its system; every point on
    `q = 3 x^2`, `p = -2 x^3` (1e-9); read back from JSON typed."""
    args = {"q": 1.0}
    branch = analysis.continuation(
        cubic,
        jnp.array([-1.3247179572447]),
        -1.0,
        p_span=(-1.0, 1.0),
        args=args,
        settings=analysis.ContinuationSettings(ds=0.1),
    )
    set_q = lambda a, q: {**a, "q": q}  # noqa: E731
    curve = analysis.fold_continuation(
        branch.folds[0],
        1.0,
        second=set_q,
        q_span=(-0.5, 1.5),
        settings=analysis.ContinuationSettings(direction=-1, ds=0.05),
    )
    assert isinstance(curve, analysis.FoldCurve) and curve.tests.shape == (len(curve.q), 1)
    (cusp,) = curve.cusps
    assert isinstance(cusp, analysis.Cusp) and cusp.located and cusp.system is cubic
    assert (cusp.p, cusp.q, cusp.c) == pytest.approx((0.0, 0.0, -1.0), abs=1e-9)
    back = analysis.FoldCurve.from_json(json.loads(json.dumps(curve.to_json())))
    assert isinstance(back.codim2[0], analysis.Cusp) and back.codim2[0].c == cusp.c
    np.testing.assert_array_equal(back.eigenvalues, curve.eigenvalues)
    x = np.asarray(curve.x)[:, 0]
    np.testing.assert_allclose(curve.q, 3 * x**2, atol=1e-9)
    np.testing.assert_allclose(curve.p, -2 * x**3, atol=1e-9)


def test_the_flat_namespace_holds_every_room_name_and_every_result_type():
    """`et_ode.analysis.ROOM_OF` names each public name of a room with its room, and
    every typed result a room exports is in the flat namespace."""
    import importlib

    for room in analysis.ROOMS:
        module = importlib.import_module(f"et_ode.analysis.{room}")
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, analysis.Result):
                assert analysis.ROOM_OF.get(name) == room, name
        for name, where in analysis.ROOM_OF.items():
            if where == room:
                assert name in module.__all__, f"{name} is not exported by {room}"
    assert set(analysis.ROOM_OF) < set(analysis.__all__)
