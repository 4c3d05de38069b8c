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
Prints each time, divergences, max R-hat (and the sampler's tries where fit() ran it more
than once: a longer try is in the time), and the ratios. Targets: >= 10x faster than the
baseline, < 10 s warm, < 30 s cold, no divergences, R-hat <= 1.01, fast mode < 1 s.

--long instead runs long runs alone: 4 recipes x 2 seeds x 3000 points (--long-points), a fast fit
without the last evaluation of one run (cold: compile included), then refit() when it arrives;
each with its time and peak memory (the process's max RSS; the refit's peak traced by tracemalloc
in a second refit, as tracing slows it). Then the reweighting likelihood of those draws on the
grown table as refit() takes it (rows in blocks) and with all rows in one block (what it held
before 2026-12-05, less the filtered path it also kept), with the time, traced peak and largest
difference of each; and a run's own forecast (predict kind="run"), time and traced peak.

    python benchmarks/fit_speed.py                  # 2-3 min on 2 cores (the baseline about 1 min of it)
    python benchmarks/fit_speed.py --skip-baseline  # quick: ours alone, 1-2 min
    python benchmarks/fit_speed.py --long           # long runs alone: 3-5 min
    python benchmarks/fit_speed.py --long --long-points 300   # quick look at --long
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import arviz as az  # noqa: E402
import pymc as pm  # noqa: E402

from benchmarks.provenance import print_provenance  # noqa: E402
from forecast import ScalingForecaster  # noqa: E402
from forecast.data import validate_runs  # noqa: E402
from forecast.model import prepare_data  # noqa: E402
from forecast.reweight import PARAMETERS, log_likelihood  # noqa: E402
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


def tries_note(fc) -> str:
    """The sampler's tries on their own line when fit() ran it more than once: a longer try or a
    retry is part of the time printed beside it, and the timings below assume one try."""
    tries = fc.sampling_tries()
    return f"\n            tries: {tries}" if tries else ""


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


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def traced(call):
    """(result, seconds, peak MB traced by tracemalloc) of call()."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = call()
        return result, time.perf_counter() - start, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def long_runs(n_points: int):
    """A fast fit and a refit of runs with many evaluations; the reweighting likelihood in blocks
    of rows against all rows at once."""
    recipes = load_table1().rename(columns={"run": "recipe"}).iloc[:4]
    runs = validate_runs(simulate_sweep(recipes, n_seeds=2, n_points=n_points, rng=0))
    last = runs.groupby("run_id").cumcount(ascending=False) == 0
    one_short = runs[~(last & (runs["run_id"] == runs["run_id"].iloc[0]))]
    print(f"data: {runs['recipe'].nunique()} recipes, {runs['run_id'].nunique()} runs, {len(runs)} points")

    start = time.perf_counter()
    fc = ScalingForecaster(mode="fast").fit(one_short, random_seed=0, progress=False)
    print(f"fast fit (cold): {time.perf_counter() - start:6.1f} s  (compile {fc.fit_info_['compile_seconds']:.1f} s, "
          f"sampling {fc.fit_info_['sample_seconds']:.1f} s)  max RSS {max_rss_mb():.0f} MB  {fc.diagnostics()}")
    base = fc._base  # the sampled fit that refit() reweights, kept for the comparison below
    start = time.perf_counter()
    fc.refit(runs, random_seed=1)
    print(f"refit, 1 new evaluation: {time.perf_counter() - start:5.2f} s  reweighted={fc.fit_info_['reweighted']}  "
          f"max RSS {max_rss_mb():.0f} MB")
    base.update(params=None, loglik=None)  # refit() works out the sampled draws' likelihood again, as the first did
    _, _, peak = traced(lambda: fc.refit(runs, random_seed=1))
    print(f"refit, 1 new evaluation, traced: peak {peak:.0f} MB")

    post = base["idata"].posterior
    params = {v: post[v].values.reshape((-1,) + post[v].shape[2:]) for v in PARAMETERS}
    data = prepare_data(runs, pad_to=len(base["data"].y), frame=base["data"].frame())
    n_draws = len(params["sigma_extra"])
    blocks = ("in blocks", {}), ("all rows at once", {"block_elements": n_draws * data.n_obs})
    results = {}
    for label, options in blocks:
        start = time.perf_counter()
        results[label] = log_likelihood(params, data, **options)
        seconds = time.perf_counter() - start
        _, _, peak = traced(lambda options=options: log_likelihood(params, data, **options))
        print(f"reweighting likelihood, {n_draws} draws x {data.n_obs} rows, {label}: {seconds:5.2f} s, traced peak {peak:6.1f} MB")
    difference = np.max(np.abs(results["in blocks"] - results["all rows at once"]))
    print(f"largest difference between the two: {difference:.3g}")

    run = fc.run_ids[-1]
    fc.predict([4 * runs["compute"].max()], run_id=run, kind="run")  # the draws' cache filled first
    _, seconds, peak = traced(lambda: fc.predict([4 * runs["compute"].max()], run_id=run, kind="run"))
    print(f"predict(kind='run') for a run of {n_points} evaluations: {seconds:.2f} s (traced), traced peak {peak:.1f} MB")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-baseline", action="store_true", help="ours alone, without the plain PyMC model")
    parser.add_argument("--long", action="store_true", help="long runs alone (4 recipes x 2 seeds x --long-points)")
    parser.add_argument("--long-points", type=int, default=3000, help="evaluations per run with --long (default 3000)")
    args = parser.parse_args(argv)
    print_provenance("benchmarks/fit_speed.py", vars(args))
    if args.long:
        long_runs(args.long_points)
        return
    runs = benchmark_sweep()
    print(f"data: {runs['recipe'].nunique()} recipes, {runs['run_id'].nunique()} runs, {len(runs)} points")
    results = {}

    start = time.perf_counter()
    fc = ScalingForecaster().fit(runs, random_seed=1, progress=False)
    results["ours cold"] = time.perf_counter() - start
    report = fc.diagnostics()
    print(f"ours cold:  {results['ours cold']:6.1f} s  (compile {fc.fit_info_['compile_seconds']:.1f} s)  {report}"
          f"{tries_note(fc)}")

    start = time.perf_counter()
    fc = ScalingForecaster().fit(runs, random_seed=2, progress=False)
    results["ours warm"] = time.perf_counter() - start
    report = fc.diagnostics()
    print(f"ours warm:  {results['ours warm']:6.1f} s  (compiled model reused={fc.fit_info_['compiled_model_reused']})  {report}"
          f"{tries_note(fc)}")

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
