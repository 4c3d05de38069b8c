"""Convergence of default full fits: the tries before longer chains against the fit with them.

Data: a run table (default: the shipped trainer sweep, examples/trainer_sweep/runs.csv), fitted by
`ScalingForecaster().fit` (nuts mode, 1000 + 1000 draws per chain, 2 chains) once per random seed.
  before: the fit before the first of the tries SamplerSettings(extend_if_flagged=False) leaves out:
          as its divergence retries leave it, or, where a centred first try diverged and every level
          non-centred came next (fit_info_["noncentred"]["after_first_try"]), that first try alone;
          the later tries change nothing before them, so one fit per seed gives both sides. To
          compare two versions of fit(), run this at each commit and compare their "ours".
  ours:   what fit() returns: a centred fit whose first try diverged is sampled next with every
          level non-centred; a fit still flagged is sampled once more with the runs' starts centred
          when its posterior pins each start down more tightly than the starts spread
          (fit_info_["centred_starts"]), once more with twice the draws and warm-up
          (ScalingForecaster.fit, fit_info_["longer"]) and, if it is centred and never diverged,
          once more with every level non-centred (fit_info_["noncentred"]).
Prints, per seed, each side's verdict (R-hat, bulk ESS, divergences) and time, then the share of
seeds converged on each side and the time the longer tries added. Target: every seed converged.
`--big-sweep` fits a sweep 10-40x the shipped one instead: 25 recipes near ScaleRL's Table 1, 4
seeds, 60 evaluations of 16,000 graded samples each (6,000 rows; synthetic, 20% of runs plateau or
decline; its extra white noise is truly 0, the common case that once made such fits fail).

    python benchmarks/convergence.py                  # 6 default fits, 15-130 s each: 3-6 min on 2 cores
    python benchmarks/convergence.py --seeds 0        # quick: one fit, under 2 min
    python benchmarks/convergence.py --seeds 0,1,2,3,4,5,6,7,8,9,10,11   # the README's row: 8-13 min
    python benchmarks/convergence.py --runs PATH      # another run table
    python benchmarks/convergence.py --big-sweep --seeds 0   # the synthetic 25-recipe sweep: about 2 min
    python benchmarks/convergence.py --demo-chains --seeds 0,1,2,3   # the demo's fit: 2-3 min each
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import print_provenance  # noqa: E402
from forecast import ScalingForecaster, load_runs  # noqa: E402
from forecast.data import validate_runs  # noqa: E402
from forecast.demo import DEMO_DRAWS, DEMO_TUNE  # noqa: E402
from forecast.inference import SamplerSettings  # noqa: E402
from forecast.synthetic import load_table1, simulate_sweep  # noqa: E402

warnings.filterwarnings("ignore")


def verdict(problems: list[str]) -> str:
    return "converged" if not problems else "NOT CONVERGED: " + "; ".join(problems)


def big_sweep(n_recipes: int = 25, rng: int = 42):
    """A lead's sweep: Table-1 recipes cycled, each nudged in A, B and C_mid so no two are alike."""
    gen = np.random.default_rng(rng)
    table = load_table1()
    rows = []
    for i in range(n_recipes):
        base = table.iloc[i % len(table)]
        rows.append({"recipe": f"recipe-{i:02d}", "A": float(np.clip(base.A + gen.normal(0, 0.03), 0.3, 0.9)),
                     "B": float(base.B * gen.uniform(0.8, 1.2)), "C_mid": float(base.C_mid * gen.uniform(0.8, 1.25))})
    return validate_runs(simulate_sweep(pd.DataFrame(rows), n_seeds=4, n_points=60, rng=1, messy_fraction=0.2))


def later_tries_seconds(fit_info: dict) -> float:
    """Seconds fit() spent on the tries that SamplerSettings(extend_if_flagged=False) leaves out:
    the runs' starts centred, the longer chains and every level non-centred, compiles included."""
    return float(sum(fit_info[k]["sample_seconds"] + fit_info[k].get("compile_seconds", 0.0)
                     for k in ("centred_starts", "longer", "noncentred") if k in fit_info))


def first_later_try(fit_info: dict) -> dict | None:
    """The first of the tries extend_if_flagged=False leaves out: every level non-centred right after a centred
    first try that diverged (fit_info["noncentred"]["after_first_try"]; it is also marked before_longer);
    else the runs' starts centred, when it is tried (fit_info["centred_starts"]); every level non-centred came
    before longer chains in fits of 2026-12-06 when a centred try diverged (before_longer), after them otherwise."""
    noncentred, longer = fit_info.get("noncentred"), fit_info.get("longer")
    if noncentred and noncentred.get("after_first_try"):
        return noncentred
    if "centred_starts" in fit_info:
        return fit_info["centred_starts"]
    return noncentred if noncentred and (noncentred.get("before_longer") or not longer) else longer


def fit_once(runs, seed: int, sampler: SamplerSettings) -> dict:
    start = time.perf_counter()
    fc = ScalingForecaster(sampler=sampler).fit(runs, random_seed=seed, progress=False)
    seconds = time.perf_counter() - start
    first_later = first_later_try(fc.fit_info_)
    after = fc.diagnostics()
    before = first_later["problems_before"] if first_later else after.problems()
    extra = later_tries_seconds(fc.fit_info_)
    return {"seed": seed, "before": before, "after": after.problems(), "seconds": seconds,
            "before_seconds": seconds - extra, "report": str(after).splitlines()[0], "tries": fc.sampling_tries()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=str(ROOT / "examples" / "trainer_sweep" / "runs.csv"),
                        help="run table to fit (default: the shipped trainer sweep)")
    parser.add_argument("--big-sweep", action="store_true", help="a synthetic 25-recipe sweep instead of --runs")
    parser.add_argument("--seeds", default="0,1,2,3,4,5", help="random seeds of the fits (comma list)")
    parser.add_argument("--demo-chains", action="store_true",
                        help="sample the chains `make demo` does (forecast.demo: 2000 draws and 2000 warm-up per chain)")
    args = parser.parse_args(argv)
    print_provenance("benchmarks/convergence.py", vars(args))
    runs = big_sweep() if args.big_sweep else load_runs(args.runs)
    if args.big_sweep:
        args.runs = "synthetic big sweep (--big-sweep)"
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"data: {args.runs}: {runs['recipe'].nunique()} recipes, {runs['run_id'].nunique()} runs, {len(runs)} points")
    sampler = SamplerSettings(draws=DEMO_DRAWS, tune=DEMO_TUNE) if args.demo_chains else SamplerSettings()
    print(f"chains: {sampler.chains} x ({sampler.draws} draws + {sampler.tune} warm-up)")
    rows = []
    for seed in seeds:
        row = fit_once(runs, seed, sampler)
        rows.append(row)
        print(f"seed {seed}: before {row['before_seconds']:5.1f} s  {verdict(row['before'])}")
        print(f"        ours   {row['seconds']:5.1f} s  {row['report']}")
        if row["tries"]:
            print(f"        tries: {row['tries']}")
    n = len(rows)
    ok_before = sum(not r["before"] for r in rows)
    ok_after = sum(not r["after"] for r in rows)
    t_before = sum(r["before_seconds"] for r in rows)
    t_after = sum(r["seconds"] for r in rows)
    print(f"converged: before {ok_before}/{n}, ours {ok_after}/{n}")
    print(f"time: before {t_before:.0f} s, ours {t_after:.0f} s ({t_after / t_before:.2f}x; "
          f"slowest fit {max(r['before_seconds'] for r in rows):.0f} s -> {max(r['seconds'] for r in rows):.0f} s)")
    print("target: every seed converged")


if __name__ == "__main__":
    main()
