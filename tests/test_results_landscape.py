"""Typed results of the landscape room beside `continuation`'s (tests/test_results.py):
`steady_states`, `basins` (its `Attractor`s), `basin_entropy`, `basin_continuation` (its
`Track`s), `lyapunov_spectrum` and `hessian_eigenvalues` each return a frozen dataclass
that reads by key as its dict did (exactly the keys it had: the command line's JSON
keeps them), by attribute alike, and comes back from its JSON typed, arrays as arrays
(complex where complex) and nested records as their own type. Each on the cheapest
case of its own tests: Lorenz's steady states at rho = 2, the double well's basins on a
4 x 4 grid, the Curie-Weiss pitchfork at two values of beta, Lorenz's spectrum over a
short run, the double well's Hessian at a minimum."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
from test_basin_continuation import Hopfield, plane, set_beta
from test_lyapunov_spectrum import lorenz
from test_verdicts import OMEGA, DoubleWell

from et_ode import analysis
from et_ode.analysis import landscape

# Each type's keys: those of the dict its study returned before it was typed (optional
# keys: only where the result has them).
KEYS = {
    landscape.SteadyStates: (
        "states residual_rms eigenvalues unstable stable start_index tries capped dense metadata"
    ),
    landscape.Basins: (
        "labels attractors fractions not_converged entropy batched_iterations "
        "one_by_one_iterations stop_reasons x_final token_structure metadata"
    ),
    landscape.Attractor: (
        "x polished residual_rms energy count fraction gradient asymmetry morse_index "
        "smallest_eigenvalues flow_eigenvalues stable start"
    ),
    landscape.BasinEntropy: "S_b S_bb boxes boundary_boxes box",
    landscape.BasinContinuation: "p counts labels fractions entropy tracks events steps metadata",
    landscape.Track: ("id index p jump energy fraction stable morse_index smallest_eigenvalues x"),
    landscape.LyapunovSpectrum: (
        "exponents history times volume_rate neutral measure k size t1 transient "
        "renormalise solver rtol atol steps growth_spread flow dtype x_final metadata"
    ),
    landscape.HessianSpectrum: (
        "smallest largest all asymmetry method dimension morse_index_is_lower_bound "
        "coordinates zero_tol morse_index n_near_zero n_normal_excluded geometry clock "
        "clock_range"
    ),
}
OPTIONAL = {landscape.Basins: ("labels_grid", "basin_entropy")}


def lorenz_steady(u, rho, args):
    x, y, z = u
    return jnp.stack([10.0 * (y - x), x * (rho - z) - y, x * y - 8.0 / 3.0 * z])


def starts():
    points, _, _ = analysis.grid_starts(
        np.zeros((1, 2)), np.array([[1.5, 0.0]]), np.array([[0.0, 1.0]]), resolution=4
    )
    return points


@pytest.fixture(scope="module")
def results():
    """One result of each study (module docstring)."""
    curie_weiss = Hopfield(jnp.array([[1.0, 0.0], [-1.0, 0.0]]), jnp.asarray(1.0))
    return dict(
        steady=analysis.steady_states(lorenz_steady, np.ones((1, 3)), 2.0),
        basins=analysis.basins(
            DoubleWell(),
            starts(),
            grid_shape=(4, 4),
            options=analysis.BASIN_OPTIONS.replace(flow="native"),
            settings=analysis.BasinSettings(box=2),
        ),
        continued=analysis.basin_continuation(
            curie_weiss,
            plane(resolution=4),
            [0.5, 1.5],
            parameter=set_beta,
            grid_shape=(4, 4),
            options=analysis.BASIN_OPTIONS.replace(flow="native"),
            settings=analysis.BasinContinuationSettings(basins=analysis.BasinSettings(k=2, box=2)),
        ),
        spectrum=analysis.lyapunov_spectrum(
            lorenz, jnp.ones(3), t1=2.0, settings=analysis.LyapunovSpectrumSettings(renormalise=0.5)
        ),
        hessian=analysis.hessian_eigenvalues(DoubleWell(), jnp.array([[1.0, 0.0]]), k=2),
    )


def round_trip(result):
    """`from_json` of the result's JSON text, checked to be the mapping's own JSON."""
    data = json.loads(json.dumps(result.to_json()))
    assert data == analysis.to_json(dict(result))
    return type(result).from_json(data)


def check_keys(record, keys=None):
    """The record's keys are its type's (module's `KEYS`), its optional ones aside, and
    each reads by key as by attribute; the record is read-only."""
    kind = type(record)
    optional = [key for key in OPTIONAL.get(kind, ()) if getattr(record, key) is not None]
    assert list(record) == KEYS[kind].split() + optional
    for key in record:
        assert record[key] is getattr(record, key)
    with pytest.raises(TypeError):
        record["metadata"] = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.metadata = None


def test_steady_states(results):
    found = results["steady"]
    assert isinstance(found, landscape.SteadyStates) and found.capped is False
    check_keys(found)
    back = round_trip(found)
    assert isinstance(back, landscape.SteadyStates) and back.tries == found.tries
    np.testing.assert_array_equal(back.states, found.states)
    np.testing.assert_array_equal(back.eigenvalues, found.eigenvalues)
    assert back.eigenvalues.dtype.kind == "c"  # complex again
    np.testing.assert_array_equal(back.stable, found.stable)


def test_basins_and_their_attractors(results):
    result = results["basins"]
    assert isinstance(result, landscape.Basins)
    check_keys(result)
    assert result["labels_grid"].shape == (4, 4)
    entropy = result.basin_entropy
    assert (
        isinstance(entropy, landscape.BasinEntropy)
        and list(entropy) == KEYS[landscape.BasinEntropy].split()
    )
    assert entropy == entropy and entropy["S_b"] is entropy.S_b  # compared by identity
    for attractor in result.attractors:
        assert isinstance(attractor, landscape.Attractor)
        assert list(attractor) == KEYS[landscape.Attractor].split()
        assert attractor["morse_index"] == 0 and attractor.stable is True
        assert attractor.flow_eigenvalues is None  # a gradient: no flow's eigenvalues
    back = round_trip(result)
    assert isinstance(back, landscape.Basins) and isinstance(
        back.basin_entropy, landscape.BasinEntropy
    )
    assert back.basin_entropy.S_b == entropy.S_b and back.stop_reasons == result.stop_reasons
    np.testing.assert_array_equal(back.labels_grid, result.labels_grid)
    np.testing.assert_array_equal(back.x_final, result.x_final)
    for again, attractor in zip(back.attractors, result.attractors, strict=True):
        assert isinstance(again, landscape.Attractor) and again.flow_eigenvalues is None
        np.testing.assert_array_equal(again.x, attractor.x)
        np.testing.assert_array_equal(again.smallest_eigenvalues, attractor.smallest_eigenvalues)
    # a plain entropy of a label grid too
    alone = analysis.basin_entropy(np.array([[0, 1], [1, 1]]), box=1)
    assert isinstance(alone, landscape.BasinEntropy) and alone.boundary_boxes == 0
    assert round_trip(alone).boxes == 4


def test_an_attractor_with_complex_flow_eigenvalues_reads_back_complex():
    """The damped oscillator's well (no gradient): its flow's eigenvalues, complex."""
    values = np.array([-0.15 + 1.4j, -0.15 - 1.4j])
    well = landscape.Attractor(
        x=np.ones((1, 2)),
        polished=True,
        residual_rms=0.0,
        energy=0.0,
        count=1,
        fraction=1.0,
        gradient=False,
        asymmetry=0.5,
        morse_index=None,
        smallest_eigenvalues=None,
        flow_eigenvalues=values,
        stable=True,
        start=0,
    )
    back = round_trip(well)
    assert back.flow_eigenvalues.dtype.kind == "c" and back.morse_index is None
    np.testing.assert_array_equal(back.flow_eigenvalues, values)


def test_basin_continuation_and_its_tracks(results):
    result = results["continued"]
    assert isinstance(result, landscape.BasinContinuation)
    check_keys(result)
    np.testing.assert_array_equal(result.counts, [1, 2])
    for track in result.tracks:
        assert isinstance(track, landscape.Track) and list(track) == KEYS[landscape.Track].split()
        assert track["p"] is track.p
    assert isinstance(result.steps[0]["basin_entropy"], landscape.BasinEntropy)
    back = round_trip(result)
    assert isinstance(back, landscape.BasinContinuation) and len(back.tracks) == 2
    np.testing.assert_array_equal(back.fractions, result.fractions)
    for again, track in zip(back.tracks, result.tracks, strict=True):
        assert isinstance(again, landscape.Track) and again.id == track.id
        np.testing.assert_array_equal(again.p, track.p)
        np.testing.assert_array_equal(again.x, np.asarray(track.x))  # [n, 1, 2] again
    # nan where a track appears (JSON's null), then the distance moved
    np.testing.assert_array_equal(back.tracks[0].jump, result.tracks[0].jump)
    assert back.events[0]["between"] == pytest.approx(result.events[0]["between"])


def test_lyapunov_spectrum(results):
    out = results["spectrum"]
    assert isinstance(out, landscape.LyapunovSpectrum) and out.neutral is None
    check_keys(out)
    assert out["history"].shape == (len(out.times), 3)
    back = round_trip(out)
    assert isinstance(back, landscape.LyapunovSpectrum) and back.flow is None
    np.testing.assert_array_equal(back.history, out.history)
    np.testing.assert_array_equal(back.x_final, out.x_final)
    assert back.volume_rate == out.volume_rate and back.steps == out.steps


def test_hessian_spectrum(results):
    spectrum = results["hessian"]
    assert isinstance(spectrum, landscape.HessianSpectrum) and spectrum.method == "dense"
    check_keys_without_metadata(spectrum)
    np.testing.assert_allclose(spectrum.all, sorted([OMEGA, 8.0]), rtol=1e-12)
    back = round_trip(spectrum)
    assert isinstance(back, landscape.HessianSpectrum) and back.morse_index == 0
    np.testing.assert_array_equal(back.smallest, spectrum.smallest)
    np.testing.assert_array_equal(back.all, spectrum.all)
    np.testing.assert_array_equal(back.clock_range, spectrum.clock_range)
    # a study that adds its entries to the spectrum's builds a dict of them
    assert dict(spectrum, extra=1)["extra"] == 1


def check_keys_without_metadata(record):
    """`check_keys` for a record that has no `metadata`."""
    assert list(record) == KEYS[type(record)].split()
    for key in record:
        assert record[key] is getattr(record, key)
    with pytest.raises(TypeError):
        record["smallest"] = None
