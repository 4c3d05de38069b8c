"""Cross-validation speed: each cut's fit padded to the whole table's rows, sharing compiled models,
against each cut fitted on its own rows (what forecast.cross_validate did before 2026-12-07).

Data: the shipped trainer sweep (7 recipes x 3 seeds x 40 evaluations) and the synthetic Table 1
sweep (10 recipes x 3 seeds x 24), cuts 0.25 and 0.5 (the defaults of `forecast cross-validate`),
fast mode unless --nuts. Each path runs in a fresh process of its own, started by this one, with a
numba cache of its own that starts empty (--warm-cache: the usual one, for both), as on a fresh machine:
in one process, the path run second loaded from the disk cache what the first had compiled for models
of the same runs (the trainer sweep's baseline took 56 s against ours' 78 s, each compiling twice).
Each process first makes two untimed fits of small tables, one in each parametrization, so that what
every model of a form shares is compiled before the timing. Two cases, in this order in each process,
the compiled models held in it dropped before each:
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

    python benchmarks/cross_validation_speed.py          # 12-14 min on 2 cores
    python benchmarks/cross_validation_speed.py --nuts   # default-length chains: about 20 min (estimated, not timed)
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.provenance import print_provenance  # noqa: E402

SWEEPS = [ROOT / "examples" / "trainer_sweep" / "runs.csv", ROOT / "examples" / "synthetic_table1" / "runs.csv"]
CUTS = (0.25, 0.5)
COMPARED = ["forecast", "lower", "upper"]
PATHS = ("ours", "baseline")
CASES = ("alone", "after a fit")


def cold_numba_cache() -> None:
    """Point PyTensor (and its numba cache) at an empty folder, removed when the process ends; before
    PyTensor is imported."""
    folder = tempfile.mkdtemp(prefix="cv_speed_compiledir_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
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
    parser.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)  # in a process started by this script
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.path:
        return measured_path(args)
    print_provenance("benchmarks/cross_validation_speed.py", vars(args))
    flags = [*(["--nuts"] if args.nuts else []), *(["--warm-cache"] if args.warm_cache else []), "--seed", str(args.seed)]
    with tempfile.TemporaryDirectory() as folder:
        measured = {}
        for name in PATHS:
            out = Path(folder) / f"{name}.json"
            subprocess.run([sys.executable, __file__, *flags, "--path", name, "--out", str(out)], check=True)
            measured[name] = json.loads(out.read_text())
    met = {"fewer": True, "faster": True, "alone": True}
    for sweep in measured["ours"]:
        ours, baseline = measured["ours"][sweep], measured["baseline"][sweep]
        print(f"{sweep}: {ours['said']}")
        for case in CASES:
            for name, result in (("ours", ours[case]), ("baseline", baseline[case])):
                compiles = result["compiles"]
                print(f"  {case:12s} {name:9s} {result['seconds']:7.1f} s  {compiles} numba compile{'s' if compiles != 1 else ''}")
            difference = np.abs(np.array(ours[case]["forecasts"]) - np.array(baseline[case]["forecasts"])).max()
            print(f"  {case:12s} speed-up {baseline[case]['seconds'] / ours[case]['seconds']:.2f}x; largest difference "
                  f"between the two paths' forecasts {difference:.2e} ({ours[case]['hidden']} hidden evaluations)")
        met["fewer"] &= ours["after a fit"]["compiles"] < baseline["after a fit"]["compiles"]
        met["faster"] &= ours["after a fit"]["seconds"] < baseline["after a fit"]["seconds"]
        met["alone"] &= ours["alone"]["compiles"] <= baseline["alone"]["compiles"]
    print(f"target (after a fit fewer compiles: {met['fewer']}, less time: {met['faster']}; alone no more compiles: "
          f"{met['alone']}): {'met' if all(met.values()) else 'NOT met'}")
    return 0


def measured_path(args) -> int:
    """In a process of its own: time one path on every sweep, in both cases; the results as JSON to args.out."""
    if not args.warm_cache:
        cold_numba_cache()
    warnings.filterwarnings("ignore")
    from forecast import ScalingForecaster, load_runs
    from forecast.synthetic import simulate_sweep

    compiles = counting_compiles()
    mode = "nuts" if args.nuts else "fast"
    for points in (6, 10):  # both parametrizations' shared kernels: runs under 8 evaluations are fitted non-centred
        ScalingForecaster(mode=mode).fit(simulate_sweep(n_seeds=1, n_points=points, rng=0), random_seed=0, progress=False)
    measured = {str(path.relative_to(ROOT)): path_on(load_runs(path), args.path, mode, args.seed, compiles) for path in SWEEPS}
    Path(args.out).write_text(json.dumps(measured))
    return 0


def path_on(runs, name, mode, seed, compiles) -> dict:
    """{case: {seconds, compiles, forecasts}} of path `name` on one sweep, and "said": how its cuts are padded."""
    from forecast import ScalingForecaster, cross_validate, inference
    from forecast.cross_validation import cut_padding, splits_at

    template = ScalingForecaster(mode=mode)
    padding = [cut_padding(template, runs, seen, left_out) for seen, _, left_out in splits_at(runs, CUTS)]
    said = (f"{runs['run_id'].nunique()} runs, {len(runs)} evaluations; {mode} mode; "
            + "; ".join(f"cut {cut} padded to {rows or 'its own'} rows" for cut, rows in zip(CUTS, padding, strict=True)))

    def run():
        if name == "ours":
            return cross_validate(runs, cuts=CUTS, forecaster=template, random_seed=seed)
        return each_cut_on_its_own_rows(runs, template, CUTS, seed)

    result = {"said": said}
    for case in CASES:
        inference._COMPILED_CACHE.clear()  # the case before's compiled models are not this one's
        if case == "after a fit":
            ScalingForecaster(mode=mode).fit(runs, random_seed=seed, progress=False)
        seconds, compiled, table = timed(run, compiles)
        result[case] = {"seconds": seconds, "compiles": compiled, "hidden": len(table),
                        "forecasts": table[COMPARED].to_numpy().ravel().tolist()}
    return result

if __name__ == "__main__":
    sys.exit(main())
