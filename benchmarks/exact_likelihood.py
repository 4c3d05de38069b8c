"""The model's residual likelihood against the exact one, side by side, on run asymptotes.

The model (forecast/model.py) scores each residual given the previous *noisy* residual of its
run. With white evaluation noise on top of the OU wander that is an approximation, and it makes
each run's asymptote interval too narrow (benchmarks/RESULTS.md, "Each run's own asymptote").
The exact Gaussian likelihood of wander + white noise is a Kalman filter over each run. Written
as a sequential loop it is slow to sample; here it is a parallel prefix scan: the filter's
variance update is a Moebius map and its mean update an affine map, both composable, so every
observation's filtered state comes out of log2(longest run) doubling steps of elementwise
operations over all observations at once. A run's first observation forgets the previous run
(its wander correlation is 0), so runs need no separate handling.

This script is the evidence for moving that likelihood into the model, which has not been done:
it fits synthetic sweeps (whole curves, true asymptotes known) both ways in one process and
prints coverage of the runs' 90% asymptote intervals, RMS z, error, the fitted wander sd (true
0.006), and the seconds to compile and to sample.

    python benchmarks/exact_likelihood.py               # sweeps rng 11 and 21
    python benchmarks/exact_likelihood.py --rngs 11
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import forecast.forecaster as forecaster_module  # noqa: E402
import forecast.inference as inference_module  # noqa: E402
from forecast import ScalingForecaster  # noqa: E402
from forecast.curves import sigmoid_curve_pt  # noqa: E402
from forecast.model import build_model  # noqa: E402
from forecast.synthetic import simulate_sweep  # noqa: E402

warnings.filterwarnings("ignore")


def shifted(values, k: int, fill: float, pt):
    """values moved k places later, the first k filled: value[t - k] at t."""
    return pt.concatenate([pt.full((k,), fill), values[:-k]])


def exact_residual_loglik(pt, resid, x, x_prev, has_prev, white_var, wander_sd, wander_scale, weight, span: int):
    """Log-likelihood of residuals = OU wander (sd wander_sd, correlation exp(-dx / wander_scale))
    + white noise (variance white_var), exactly, by a Kalman filter as a prefix scan.

    Observations are sorted by run then compute; has_prev is 0 at each run's first observation.
    span: at least the longest run (the scan looks back 2^steps >= span observations).
    `pt` is pytensor.tensor or a numpy-like module offering concatenate, full and exp.
    """
    phi = pt.exp(-(x - x_prev) / wander_scale) * has_prev  # wander correlation with the previous one
    innovation_var = wander_sd**2 * (1 - phi**2)
    white = white_var
    # filtered variance P_t = (w phi^2 P + w c) / (phi^2 P + c + w), w = white, c = innovation_var:
    # the 2x2 matrix [[w phi^2, w c], [phi^2, c + w]], kept divided by its lower-right entry (> 0;
    # every entry is >= 0, so products never cancel)
    lower_right = innovation_var + white
    m11, m12, m21 = white * phi**2 / lower_right, white * innovation_var / lower_right, phi**2 / lower_right
    k = 1
    while k < span:
        p11, p12, p21 = (shifted(m, k, fill, pt) for m, fill in ((m11, 1.0), (m12, 0.0), (m21, 0.0)))
        scale = m21 * p12 + 1
        m11, m12, m21 = (m11 * p11 + m12 * p21) / scale, (m11 * p12 + m12) / scale, (m21 * p11 + p21) / scale
        k *= 2
    filtered_var = (m11 + m12) / (m21 + 1)  # the composed map at any start: a run's first map forgets it
    predicted_var = phi**2 * shifted(filtered_var, 1, 1.0, pt) + innovation_var
    total_var = predicted_var + white
    gain = predicted_var / total_var
    # filtered mean m_t = (1 - gain) phi m_{t-1} + gain r_t: affine maps, composed the same way
    slope, offset = (1 - gain) * phi, gain * resid
    k = 1
    while k < span:
        slope, offset = slope * shifted(slope, k, 1.0, pt), slope * shifted(offset, k, 0.0, pt) + offset
        k *= 2
    innovation = resid - phi * shifted(offset, 1, 0.0, pt)
    logp = -0.5 * (np.log(2 * np.pi) + pt.log(total_var) + innovation**2 / total_var)
    return (weight * logp).sum()


def build_exact_model(data, priors=None, **kwargs):
    """build_model with its residual likelihood replaced by the exact one (normal only). The
    longest run is a constant of the graph: in the model proper it would join the structure key."""
    import pymc as pm
    import pytensor.tensor as pt

    model = build_model(data, priors, **kwargs)
    longest_run = int(np.bincount(data.obs_run[data.weight > 0]).max())
    with model:
        approximate = next(p for p in model.potentials if p.name == "metric_loglik")
        model.potentials.remove(approximate)
        del model.named_vars["metric_loglik"]
        x, scale, loc, obs_run, run_recipe = (model[n] for n in ("x", "scale", "loc", "obs_run", "run_recipe"))
        b = model["B"] * scale
        m = (model["log_C_mid"] - loc) / scale
        mu = sigmoid_curve_pt(x, model["A_run"][obs_run], b[run_recipe][obs_run], m[run_recipe][obs_run],
                              model["R0_run"][obs_run])
        mu_c = pt.clip(mu, 1e-4, 1 - 1e-4)
        binomial = mu_c * (1 - mu_c) / model["n_eval"] if data.has_n_eval else 0.0
        white = binomial + model["sigma_extra"] ** 2
        pm.Potential("metric_loglik", exact_residual_loglik(
            pt, model["y"] - mu, x, x[model["prev"]], model["has_prev"], white * pt.ones_like(mu),
            model["wander_sd"], model["wander_scale"], model["weight"], longest_run))
    return model


def score(runs, exact: bool, seed: int = 0) -> dict:
    # compiled models are cached by shape, which both likelihoods share (and the exact one bakes in
    # the longest run): every fit here compiles its own, so both pay the compile they would pay alone
    inference_module._COMPILED_CACHE.clear()
    forecaster_module.build_model = build_exact_model if exact else build_model
    try:
        start = time.perf_counter()
        fc = ScalingForecaster().fit(runs.drop(columns=["true_A"]), random_seed=seed, progress=False)
        seconds = time.perf_counter() - start
    finally:
        forecaster_module.build_model = build_model
    a = fc.asymptote().query("level == 'run'").merge(runs.drop_duplicates("run_id")[["run_id", "true_A"]])
    z = (a["mean"] - a["true_A"]) / a["sd"]
    report = fc.diagnostics()
    return {
        "coverage": float(((a["q05"] <= a["true_A"]) & (a["true_A"] <= a["q95"])).mean()),
        "rms_z": float(np.sqrt((z**2).mean())),
        "error": float((a["q50"] - a["true_A"]).abs().mean()),
        "sd": float(a["sd"].mean()),
        "wander_sd": float(fc.posterior["wander_sd"].mean()),
        "seconds": seconds,
        "max_rhat": report.max_rhat,
        "divergences": report.divergences,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rngs", default="11,21", help="simulate_sweep seeds (30 runs, 40 points each)")
    args = parser.parse_args(argv)
    print(f"{'sweep':>6} {'likelihood':>12} {'covers':>7} {'RMS z':>6} {'A error':>8} {'A sd':>7} "
          f"{'wander sd':>10} {'R-hat':>6} {'diverg.':>7} {'seconds':>8}")
    for rng in (int(r) for r in args.rngs.split(",")):
        runs = simulate_sweep(n_seeds=3, n_points=40, rng=rng)
        results = {name: score(runs, exact) for name, exact in (("one-lag", False), ("exact", True))}
        for name, r in results.items():
            print(f"{rng:>6} {name:>12} {r['coverage']:>7.0%} {r['rms_z']:>6.2f} {r['error']:>8.4f} {r['sd']:>7.4f} "
                  f"{r['wander_sd']:>10.4f} {r['max_rhat']:>6.3f} {r['divergences']:>7} {r['seconds']:>8.0f}")
        ratio = results["exact"]["seconds"] / results["one-lag"]["seconds"]
        print(f"{rng:>6} exact/one-lag: fit time {ratio:.1f}x, interval sd "
              f"{results['exact']['sd'] / results['one-lag']['sd']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
