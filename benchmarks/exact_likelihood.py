"""The model's exact residual likelihood against the one-lag one it replaced, side by side.

Until 2026-12-04 the model (forecast/model.py) scored each residual given the previous *noisy*
residual of its run ("one-lag"). With white evaluation noise on top of the OU wander that is an
approximation, and it made each run's asymptote interval too narrow (benchmarks/RESULTS.md,
"Each run's own asymptote"). The model now uses the exact Gaussian likelihood of wander + white
noise, a Kalman filter along each run (forecast/wander_filter.py), compiled by Numba with a
hand-written reverse pass. `build_model(residual_likelihood="one-lag")` keeps the old one.

This script fits synthetic sweeps (whole curves, true asymptotes known) both ways in one process
and prints coverage of the runs' 90% asymptote intervals, RMS z, error, the fitted wander sd (true
0.006), convergence and the seconds to fit (compile included).

    python benchmarks/exact_likelihood.py               # sweeps rng 11 and 21: 4 fits, 2-4 min on 2 cores
    python benchmarks/exact_likelihood.py --rngs 11     # quick: one sweep, 1-2 min
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import forecast.forecaster as forecaster_module  # noqa: E402
import forecast.inference as inference_module  # noqa: E402
from benchmarks.provenance import print_provenance  # noqa: E402
from forecast import ScalingForecaster  # noqa: E402
from forecast.model import build_model  # noqa: E402
from forecast.synthetic import simulate_sweep  # noqa: E402

warnings.filterwarnings("ignore")


def score(runs, likelihood: str, seed: int = 0) -> dict:
    # compiled models are cached by shape, which both likelihoods share: every fit here compiles
    # its own, so both pay the compile they would pay alone
    inference_module._COMPILED_CACHE.clear()
    forecaster_module.build_model = functools.partial(build_model, residual_likelihood=likelihood)
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rngs", default="11,21", help="simulate_sweep seeds (30 runs, 40 points each)")
    args = parser.parse_args(argv)
    print_provenance("benchmarks/exact_likelihood.py", vars(args))
    print(f"{'sweep':>6} {'likelihood':>12} {'covers':>7} {'RMS z':>6} {'A error':>8} {'A sd':>7} "
          f"{'wander sd':>10} {'R-hat':>6} {'diverg.':>7} {'seconds':>8}")
    for rng in (int(r) for r in args.rngs.split(",")):
        runs = simulate_sweep(n_seeds=3, n_points=40, rng=rng)
        results = {name: score(runs, name) for name in ("one-lag", "exact")}
        for name, r in results.items():
            print(f"{rng:>6} {name:>12} {r['coverage']:>7.0%} {r['rms_z']:>6.2f} {r['error']:>8.4f} {r['sd']:>7.4f} "
                  f"{r['wander_sd']:>10.4f} {r['max_rhat']:>6.3f} {r['divergences']:>7} {r['seconds']:>8.0f}")
        ratio = results["exact"]["seconds"] / results["one-lag"]["seconds"]
        print(f"{rng:>6} exact/one-lag: fit time {ratio:.1f}x, interval sd "
              f"{results['exact']['sd'] / results['one-lag']['sd']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
