"""Cross-validation speed: each cut's fit padded to the whole table's rows, sharing compiled models,
against each cut fitted on its own rows (what forecast.cross_validate did before 2026-12-07).

Data: the shipped trainer sweep (7 recipes x 3 seeds x 40 evaluations) and the synthetic Table 1
sweep (10 recipes x 3 seeds x 24), cuts 0.25 and 0.5 (the defaults of `forecast cross-validate`),
fast mode unless --nuts. One process, with a numba cache of its own that starts empty (--warm-cache:
the usual one), and two untimed fits of small tables first, one in each parametrization, so that what
every model of a form shares is compiled before either path and each path compiles only its own
structures. The compiled models held in the process are dropped before each path. Two cases, each
path timed in both:
  alone:       cross-validating the table (`forecast cross-validate RUNS`);
  after a fit: a fit of the whole table first, then the cross-validation (the quickstart notebook,
               a session that fits and then checks its intervals); the fit's own time is not counted.
  ours:     forecast.cross_validate as shipped (cut_padding, SHARED_PADDING_MAX_ROWS);
  baseline: the same fits, each cut's on its own rows (ScalingForecaster.fit without pad_to).
A cut's fit compiles a model of its own where its structure differs: its rows, and its parametrization
(a cut that leaves a run fewer than 8 evaluations is fitted non-centred, as the trainer sweep's 0.25 is).
Prints each path's seconds and numba compiles, the ratio, and the largest difference between the two
paths' forecasts (padding rows weigh nothing: it should be 0 or a rounding error). Target: fewer
compiles and less time after a fit; alone, no more compiles.

    python benchmarks/cross_validation_speed.py          # 6-8 min on 2 cores
    python benchmarks/cross_validation_speed.py --nuts   # default-length chains: 10-15 min
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import print_provenance  # noqa: E402

SWEEPS = [ROOT / "examples" / "trainer_sweep" / "runs.csv", ROOT / "examples" / "synthetic_table1" / "runs.csv"]
CUTS = (0.25, 0.5)
COMPARED = ["forecast", "lower", "upper"]


def cold_numba_cache() -> None:
    """Point PyTensor (and its numba cache) at an empty folder; before PyTensor is imported."""
    folder = tempfile.mkdtemp(prefix="cv_speed_compiledir_")
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    os.environ["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, f"base_compiledir={folder}") if f)


def counting_compiles():
    """Wrap forecast.inference._compiled so each call says whether it compiled; returns the list it fills."""
    from forecast import inference

    original = inference._compiled
    said = []

    def compiled(build_model, key, data_values):
        result = original(build_model, key, data_values)
        said.append(not result[1])  # True: compiled here
        return result

    inference._compiled = compiled
    return said


def each_cut_on_its_own_rows(runs, template, cuts, seed):
    """The baseline: cross_validate's fits and forecasts, each cut's fit on its own rows."""
    import pandas as pd

    from forecast.cross_validation import forecast_hidden, fresh_like, splits_at

    horizon = float(runs["compute"].max())
    tables = []
    for cut, (seen, hidden, _) in zip(cuts, splits_at(runs, cuts), strict=True):
        fc = fresh_like(template).fit(seen, random_seed=seed, progress=False, horizon=horizon)
        tables.append(forecast_hidden(fc, seen, hidden, cut=cut, level=0.9))
    return pd.concat(tables, ignore_index=True)


def timed(path, compiles):
    """(seconds, numba compiles, table) of path()."""
    before = len(compiles)
    start = time.perf_counter()
    table = path()
    return time.perf_counter() - start, sum(compiles[before:]), table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nuts", action="store_true", help="default-length NUTS chains instead of fast mode")
    parser.add_argument("--warm-cache", action="store_true", help="use the usual numba cache, not an empty one")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print_provenance("benchmarks/cross_validation_speed.py", vars(args))
    if not args.warm_cache:
        cold_numba_cache()
    warnings.filterwarnings("ignore")

    from forecast import ScalingForecaster, load_runs
    from forecast.synthetic import simulate_sweep

    compiles = counting_compiles()
    mode = "nuts" if args.nuts else "fast"
    for points in (6, 10):  # both parametrizations' shared kernels: runs under 8 evaluations are fitted non-centred
        ScalingForecaster(mode=mode).fit(simulate_sweep(n_seeds=1, n_points=points, rng=0), random_seed=0, progress=False)
    sweeps = [compared(load_runs(path), path, mode, args.seed, compiles) for path in SWEEPS]
    fewer = all(r["after a fit", "ours"][1] < r["after a fit", "baseline"][1] for r in sweeps)
    faster = all(r["after a fit", "ours"][0] < r["after a fit", "baseline"][0] for r in sweeps)
    alone = all(r["alone", "ours"][1] <= r["alone", "baseline"][1] for r in sweeps)
    print(f"target (after a fit fewer compiles: {fewer}, less time: {faster}; alone no more compiles: {alone}): "
          f"{'met' if fewer and faster and alone else 'NOT met'}")
    return 0


def compared(runs, path, mode, seed, compiles) -> dict:
    """{(case, path name): (seconds, compiles, table)} for one sweep, with the lines printed."""
    from forecast import ScalingForecaster, cross_validate, inference
    from forecast.cross_validation import cut_padding, splits_at

    template = ScalingForecaster(mode=mode)
    padding = [cut_padding(template, runs, seen, left_out) for seen, _, left_out in splits_at(runs, CUTS)]
    print(f"{path.relative_to(ROOT)}: {runs['run_id'].nunique()} runs, {len(runs)} evaluations; {mode} mode; "
          + "; ".join(f"cut {cut} padded to {rows or 'its own'} rows" for cut, rows in zip(CUTS, padding, strict=True)),
          flush=True)

    def ours():
        return cross_validate(runs, cuts=CUTS, forecaster=template, random_seed=seed)

    def baseline():
        return each_cut_on_its_own_rows(runs, template, CUTS, seed)

    results = {}
    for case in ("alone", "after a fit"):
        for name, run in (("ours", ours), ("baseline", baseline)):
            inference._COMPILED_CACHE.clear()  # the other path's compiled models are not this one's
            if case == "after a fit":
                ScalingForecaster(mode=mode).fit(runs, random_seed=seed, progress=False)
            seconds, compiled, table = timed(run, compiles)
            results[case, name] = (seconds, compiled, table)
            print(f"  {case:12s} {name:9s} {seconds:7.1f} s  {compiled} numba compile{'s' if compiled != 1 else ''}",
                  flush=True)
        ours_table, base_table = results[case, "ours"][2], results[case, "baseline"][2]
        difference = ours_table[COMPARED].to_numpy() - base_table[COMPARED].to_numpy()
        print(f"  {case:12s} speed-up {results[case, 'baseline'][0] / results[case, 'ours'][0]:.2f}x; largest "
              f"difference between the two paths' forecasts {abs(difference).max():.2e} "
              f"({len(ours_table)} hidden evaluations)", flush=True)
    return results


if __name__ == "__main__":
    sys.exit(main())
