"""The verdict on a fixed point: what the Hessian says, checked against the Lyapunov
exponent, and refused when the two disagree or the point is not one.

Inputs are the pieces `stability` measures at a Newton-polished point:

- the residual left (RMS G) and a bound on the distance to the true critical point,
  `|G|_2 / min|lambda(H)|` in the energy's coordinates;
- the tangent Hessian's spectrum, and, where kinks of `E` lie within that distance, the
  spectra of the two one-sided Hessians (`"lower"`: every near kink on the side of the
  smaller Hessian, `"upper"`: the larger). Each kinked term adds a negative
  semi-definite part on one side (a ReLU memory's `-xi xi^T`), so by Weyl's inequalities
  every side's Morse index lies between the upper Hessian's and the lower one's;
- a finite-time Lyapunov exponent of the projected (or flat) flow from the point. The
  linearised flow there is `tau d(dy)/dt = -S dy` with `S = C^(1/2) H C^(1/2)` (`C` the
  clock, `y = C^(1/2) dx`), so the growth rate of `|y|` over any horizon lies in
  `[-lambda_max(S), -lambda_min(S)] / tau`: `stability` measures the exponent in that
  metric, and the range is exact (were it measured in `|dg| = |C dx|`, each end would
  widen by `log(c_max / c_min) / T`). At an unstable point the horizon is capped where
  the state would start to leave it.
"""

from typing import Any

import numpy as np

# Slack on each end of the Lyapunov range: relative to that end's size, and absolute
# (1/tau): the exponent is integrated at rtol 1e-10, the eigenvalues are exact to far
# better than 1 %.
RANGE_SLACK_RELATIVE, RANGE_SLACK_ABSOLUTE = 0.01, 1e-3

# The asymmetry (`|A - A^T|_F / |A|_F`, `hessian_eigenvalues`) of the residual's tangent
# Jacobian above which it is taken for no Hessian: for a gradient system it is near
# rounding (the shipped ET at its polished point: 8e-16; the tiny test ET 2e-16, at RMS
# G 1e-2 as at its fixed point), while a field
# with a rotating part has it of order one (a damped oscillator: 1.9). There the
# energy's second-order test does not apply, and the flow's own eigenvalues decide.
GRADIENT_ASYMMETRY = 1e-5


def linearly_stable(flow_eigenvalues) -> bool:
    """Whether every real part of the flow's eigenvalues is negative, beyond rounding
    (1e-9 of the largest magnitude: a zero one, a neutral direction, is not)."""
    values = np.asarray(flow_eigenvalues)
    neutral = 1e-9 * max(float(np.max(np.abs(values))), 1e-300)
    return bool(np.max(values.real) < -neutral)


VERDICTS = (
    "stable_minimum",
    "saddle",
    "maximum",
    "not_converged",
    "jumped",
    "at_kink",
    "degenerate",
    "inconsistent",
    "not_gradient",
)


def linear_rate_range(smallest, largest, coordinates, clock_range, tau):
    """`[low, high]` of `-lambda(S) / tau` over the spectrum of `S = C^(1/2) H C^(1/2)`,
    from the extreme eigenvalues in `coordinates` (`"x"`: of `S` itself; `"g"`: of `H`,
    bounded by Ostrowski's theorem, `lambda_k(S) = theta_k lambda_k(H)` with
    `theta_k` in `[c_min, c_max]`)."""
    lo, hi = float(smallest), float(largest)
    if coordinates == "g":
        c_min, c_max = clock_range
        lo = lo * (c_max if lo < 0 else c_min)
        hi = hi * (c_max if hi > 0 else c_min)
    return [-hi / tau, -lo / tau]


def lyapunov_consistent(
    exponent, horizon, rates, clock_range, measure="metric"
) -> tuple[bool, list]:
    """Whether an exponent measured over `horizon` lies in the linearised flow's range
    `rates` (see the module docstring); returns the verdict and the widened range.

    Measured in the metric `|C^(1/2) dx|` (`measure="metric"`) the range is exact: each
    end widens by `RANGE_SLACK_RELATIVE` of its own size plus `RANGE_SLACK_ABSOLUTE`
    (the solve's error), so the exponent's sign must agree with the Hessian's at the
    end that decides it. Measured in `g` (`|C dx|`) each end also widens by
    `log(c_max / c_min) / horizon`."""
    c_min, c_max = clock_range
    extra = np.log(c_max / c_min) / horizon if measure == "g" else 0.0
    widened = [
        rates[0] - RANGE_SLACK_RELATIVE * abs(rates[0]) - RANGE_SLACK_ABSOLUTE - extra,
        rates[1] + RANGE_SLACK_RELATIVE * abs(rates[1]) + RANGE_SLACK_ABSOLUTE + extra,
    ]
    return bool(widened[0] <= exponent <= widened[1]), widened


def _index_words(index, lower_bound, dimension):
    if index == 0:
        return "stable minimum"
    if dimension is not None and index == dimension and not lower_bound:
        return "local maximum"
    return f"saddle of index {'>= ' if lower_bound else ''}{index}"


def verdict(
    *,
    converged,
    residual_rms,
    distance,
    index_range,
    index_is_lower_bound,
    n_near_zero,
    dimension,
    smallest,
    kinks,
    lyapunov,
    rates,
    clock_range,
    flow,
    jumped=False,
    newton_displacement=0.0,
    jump_bound=0.0,
    asymmetry=0.0,
    flow_eigenvalues=None,
) -> dict:
    """The verdict (`code` in `VERDICTS`, a `sentence`, `called`: whether a kind was
    named) from the measured pieces (module docstring).

    `jumped`: Newton moved the point further than its starting residual allows
    (`newton_displacement` against `jump_bound`, norms in the energy's coordinates);
    `index_range`: `(fewest, most)` negative eigenvalues over the sides of the kinks in
    reach (equal without kinks); `kinks`: the `stability` kink report; `lyapunov`: a
    `lyapunov_exponent` dict or `None`; `rates`: `linear_rate_range` over the sides;
    `flow`: the flow the exponent was measured on; `asymmetry`: of the residual's
    tangent Jacobian, and above `GRADIENT_ASYMMETRY` the `flow_eigenvalues` (those of
    largest real part of the flow's Jacobian) that decide instead of the Hessian.
    """
    out: dict[str, Any] = dict(lyapunov_range=None, lyapunov_consistent=None)

    def refuse(code, sentence):
        return dict(out, code=code, called=False, sentence=sentence)

    where = f"RMS G {residual_rms:.2g}, within {distance:.2g} of the critical point"
    if not converged:
        return refuse(
            "not_converged",
            (
                f"not converged: Newton left RMS G {residual_rms:.2g}; a Hessian taken away "
                "from a fixed point says nothing about it (give Newton more steps or a start "
                "nearer the fixed point)."
            ),
        )
    if jumped:
        return refuse(
            "jumped",
            (
                f"not called: Newton moved the point {newton_displacement:.2g} from where it "
                f"started, more than its starting residual allows ({jump_bound:.2g}): it may "
                "have reached another critical point than the flow's (start from a point the "
                "flow has taken nearer the fixed point)."
            ),
        )
    if asymmetry > GRADIENT_ASYMMETRY:
        values = np.asarray(flow_eigenvalues)
        rightmost = values[np.argmax(values.real)]
        linear = (
            "linearly stable: every real part is negative"
            if linearly_stable(values)
            else "not linearly stable: a real part is not negative"
        )
        return refuse(
            "not_gradient",
            (
                f"no gradient flow: the residual's Jacobian is not symmetric (relative "
                f"asymmetry {asymmetry:.2g}), so it is no Hessian and a Morse index says "
                f"nothing; the flow's Jacobian has eigenvalues of real part up to "
                f"{rightmost.real:.3g} ({rightmost:.3g}): {linear} ({where})."
            ),
        )
    if n_near_zero:
        return refuse(
            "degenerate",
            (
                f"degenerate: {n_near_zero} tangent Hessian eigenvalue(s) are zero to "
                f"round-off ({where}); the second-order test cannot call it."
            ),
        )
    fewest, most = index_range
    if kinks.get("n_within"):
        kink_words = (
            f"{kinks['n_within']} kink(s) of E (the nearest "
            f"{kinks['nearest']:.2g} away) lie within reach of the residual "
            f"({kinks['within']:.2g})"
        )
        if fewest != most:
            return refuse(
                "at_kink",
                (
                    f"at a kink: {kink_words}, and the one-sided Hessians disagree (Morse "
                    f"index {fewest} to {most} over the sides); not called."
                ),
            )
    kind = _index_words(fewest, index_is_lower_bound, dimension)
    code = "stable_minimum" if fewest == 0 else "maximum" if kind == "local maximum" else "saddle"
    sentence = f"{kind} (smallest tangent Hessian eigenvalue {smallest:.3g}; {where})"
    if kinks.get("n_within"):
        sentence += f"; at a kink: {kink_words}, and every side agrees"
    if lyapunov is not None and flow == "projected":
        ok, widened = lyapunov_consistent(
            lyapunov["exponent"],
            lyapunov["t1"],
            rates,
            clock_range,
            lyapunov.get("coordinates", "g"),
        )
        out.update(lyapunov_range=widened, lyapunov_consistent=ok)
        words = (
            f"FTLE {lyapunov['exponent']:.3g}/tau over {lyapunov['t1']:.3g} tau, "
            f"linearised range [{widened[0]:.3g}, {widened[1]:.3g}]"
        )
        if not ok:
            return refuse(
                "inconsistent",
                (
                    f"not called: the Hessian says {kind} but the {words} excludes the "
                    "exponent (the point or the exponent's solve is off)."
                ),
            )
        sentence += f"; consistent with the {words}"
        if code == "stable_minimum" and lyapunov["exponent"] < 0:
            sentence += ": perturbations decay"
    elif lyapunov is not None:
        sentence += (
            f"; the {flow} flow's FTLE ({lyapunov['exponent']:.3g}/tau) is not "
            "compared (its clock changes along the flow)"
        )
    return dict(out, code=code, called=True, sentence=sentence + ".")
