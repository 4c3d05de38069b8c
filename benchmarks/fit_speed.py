"""Fit speed: our NUTS fit against a plain hierarchical PyMC model with PyMC's default sampler.

Data: 8 recipes x 3 seeds x 40 points (synthetic, ScaleRL Table 1 shapes), one process.
  baseline: a plain hierarchical sigmoid (non-centred recipe effects, R0 fixed at each run's
            first point, normal noise) sampled by pm.sample() with its defaults (1000+1000, 2 chains), except
            cores=2: without psutil PyMC guesses half of os.cpu_count() as cores, so on a
            2-core machine its defaults ran the two chains one after the other while ours ran
            them side by side (before 2026-12-05 the recorded ratios had that up to 2x in them);
  ours:     ScalingForecaster().fit(): cold (numba compile + sampling), warm (the compiled model
            reused, as in every refit of a session), and fast mode warm (median of 5 fits).
  fast refits: the frequent-refit case of fast mode (forecast watch, the trainer's advisor, the
            Optuna pruner): a fast fit of the sweep without the last evaluation of one run, then
            refit() when that evaluation arrives (reweighting, forecast/reweight.py), for 5 runs;
            and once more with a new evaluation of every run at once (too much news to reweight:
            refit() samples).
Prints each time, divergences, max R-hat, and the ratios. Targets: >= 10x faster than the
baseline, < 10 s warm, < 30 s cold, no divergences, R-hat <= 1.01, fast mode < 1 s.

    python benchmarks/fit_speed.py [--skip-baseline]
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

import arviz as az  # noqa: E402
import pymc as pm  # noqa: E402

from forecast import ScalingForecaster  # noqa: E402
from forecast.data import validate_runs  # noqa: E402
from forecast.synthetic import load_table1, simulate_sweep  # noqa: E402

warnings.filterwarnings("ignore")


def benchmark_sweep():
    recipes = load_table1().rename(columns={"run": "recipe"}).iloc[:8]
    return validate_runs(simulate_sweep(recipes, n_seeds=3, n_points=40, rng=0))


def plain_model(runs):
    """What people write first: hierarchical A, B, C_mid per recipe, R0 fixed by hand."""
    recipes = sorted(runs["recipe"].unique())
    run_ids = list(runs.drop_duplicates("run_id")["run_id"])
    r_idx = runs["recipe"].map({r: i for i, r in enumerate(recipes)}).to_numpy()
    first = runs.groupby("run_id")["metric"].transform("first").to_numpy()
    log_c = np.log(runs["compute"].to_numpy())
    with pm.Model(coords={"recipe": recipes, "run": run_ids}) as model:
        a_mu = pm.Normal("a_mu", 0.5, 1.0)
        a_sd = pm.HalfNormal("a_sd", 0.5)
        A = pm.Deterministic("A", pm.math.sigmoid(a_mu + a_sd * pm.Normal("z_a", 0, 1, dims="recipe")), dims="recipe")
        b_mu = pm.Normal("b_mu", 0.5, 0.5)
        b_sd = pm.HalfNormal("b_sd", 0.3)
        B = pm.Deterministic("B", pm.math.exp(b_mu + b_sd * pm.Normal("z_b", 0, 1, dims="recipe")), dims="recipe")
        m_mu = pm.Normal("m_mu", log_c.mean(), 2.0)
        m_sd = pm.HalfNormal("m_sd", 1.0)
        log_c_mid = pm.Deterministic("log_C_mid", m_mu + m_sd * pm.Normal("z_m", 0, 1, dims="recipe"), dims="recipe")
        sigma = pm.HalfNormal("sigma", 0.05)
        mu = first + (A[r_idx] - first) * pm.math.sigmoid(B[r_idx] * (log_c - log_c_mid[r_idx]))
        pm.Normal("y", mu, sigma, observed=runs["metric"].to_numpy())
    return model


def describe(idata, var_names):
    div = int(idata.sample_stats["diverging"].sum())
    rhat = float(max(np.nanmax(az.rhat(idata, var_names=var_names)[v].values) for v in var_names))
    return div, rhat


def fast_refits(runs):
    """refit() after one new evaluation of one run (5 runs in turn), then of every run."""
    last = runs.groupby("run_id").cumcount(ascending=False) == 0
    times, ks = [], []
    for run in runs["run_id"].unique()[::5][:5]:
        fc = ScalingForecaster(mode="fast").fit(runs[~(last & (runs["run_id"] == run))], random_seed=5, progress=False)
        start = time.perf_counter()
        fc.refit(runs, random_seed=6)
        times.append(time.perf_counter() - start)
        ks.append(fc.diagnostics().pareto_k if fc.fit_info_["reweighted"] else float("nan"))
        print(f"fast refit, 1 new evaluation of {run}: {times[-1]:5.2f} s  reweighted={fc.fit_info_['reweighted']}  {fc.diagnostics()}")
    print(f"fast refit, 1 new evaluation of 1 run: median {np.median(times):.2f} s, max {max(times):.2f} s, Pareto k up to {np.nanmax(ks):.2f}")
    fc = ScalingForecaster(mode="fast").fit(runs[~last], random_seed=7, progress=False)
    start = time.perf_counter()
    fc.refit(runs, random_seed=8)
    print(f"fast refit, 1 new evaluation of every run: {time.perf_counter() - start:5.2f} s  reweighted={fc.fit_info_['reweighted']}  {fc.diagnostics()}")
    return times


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args(argv)
    runs = benchmark_sweep()
    print(f"data: {runs['recipe'].nunique()} recipes, {runs['run_id'].nunique()} runs, {len(runs)} points")
    results = {}

    start = time.perf_counter()
    fc = ScalingForecaster().fit(runs, random_seed=1, progress=False)
    results["ours cold"] = time.perf_counter() - start
    report = fc.diagnostics()
    print(f"ours cold:  {results['ours cold']:6.1f} s  (compile {fc.fit_info_['compile_seconds']:.1f} s)  {report}")

    start = time.perf_counter()
    fc = ScalingForecaster().fit(runs, random_seed=2, progress=False)
    results["ours warm"] = time.perf_counter() - start
    report = fc.diagnostics()
    print(f"ours warm:  {results['ours warm']:6.1f} s  (compiled model reused={fc.fit_info_['compiled_model_reused']})  {report}")

    fast_times = []
    for seed in range(3, 8):  # one short fit is a noisy timing: report the median of 5
        start = time.perf_counter()
        fast = ScalingForecaster(mode="fast").fit(runs, random_seed=seed, progress=False)
        fast_times.append(time.perf_counter() - start)
        print(f"ours fast:  {fast_times[-1]:6.2f} s  {fast.diagnostics()}")
    results["ours fast"] = float(np.median(fast_times))
    print(f"ours fast: median of 5 {results['ours fast']:.2f} s (min {min(fast_times):.2f}, max {max(fast_times):.2f})")

    fast_refits(runs)

    if not args.skip_baseline:
        start = time.perf_counter()
        with plain_model(runs):
            idata = pm.sample(random_seed=4, chains=2, cores=2, progressbar=False, compute_convergence_checks=False)
        results["baseline"] = time.perf_counter() - start
        div, rhat = describe(idata, ["A", "B", "log_C_mid"])
        print(f"baseline (plain model, pm.sample defaults, chains side by side): {results['baseline']:6.1f} s  divergences {div}, max R-hat {rhat:.3f}")
        print(f"speed-up warm: {results['baseline'] / results['ours warm']:.1f}x   cold: {results['baseline'] / results['ours cold']:.1f}x")
    print("targets: >= 10x, warm < 10 s, cold < 30 s, fast < 1 s, no divergences, R-hat <= 1.01")


if __name__ == "__main__":
    main()
