"""Benchmark: early-stop policies replayed on finished sweeps — compute saved vs regret.

    .venv/bin/python benchmarks/early_stop.py            # every sweep below (15-25 min on 2 cores)
    .venv/bin/python benchmarks/early_stop.py --quick    # trainer sweep (if present) + two synthetic (6-10 min)
    .venv/bin/python benchmarks/early_stop.py --quick --no-synthetic   # the shipped trainer sweep alone (about 1 min)
    .venv/bin/python benchmarks/early_stop.py --json results.json
    .venv/bin/python benchmarks/early_stop.py --runs path/to/other_sweep.csv   # add a sweep
    .venv/bin/python benchmarks/early_stop.py --trainer-sweep examples/trainer_sweep_heldout/runs.csv --no-synthetic
                                                         # the trainer figures on the held-out seeds 5-7
                                                         # (runs_seeds_8_10.csv: seeds 8-10, runs_seeds_11_13.csv: 11-13,
                                                         # runs_seeds_17_19.csv: 17-19, runs_seeds_20_22.csv: 20-22,
                                                         # runs_seeds_23_25.csv: 23-25, runs_seeds_26_28.csv: 26-28,
                                                         # runs_seeds_29_31.csv: 29-31, runs_seeds_32_34.csv: 32-34;
                                                         # examples/trainer_sweep_tuning:
                                                         # 14-16, the sweep level_wander_ratio was tuned on)
    .venv/bin/python benchmarks/early_stop.py --trainer-sweep F --no-synthetic --prior b_mu=0.5 --prior m_mu=0.5
                                                         # the same with other priors for ours (forecast.model.Priors)
    .venv/bin/python benchmarks/early_stop.py --trainer-sweep F --no-synthetic --subsets 24 --singles 0
                                                         # a trainer family on the full sweep and 24 2-seed subsets
                                                         # (the first 4 are the default ones; 5-12 min): a
                                                         # narrower error on ours minus each baseline
    .venv/bin/python benchmarks/early_stop.py --no-synthetic --resample-noise 8
                                                         # the trainer family on 8 replicas with a known
                                                         # truth (evaluation noise drawn again around each
                                                         # run's smoothed trajectory; regret scored on the
                                                         # truth); 9-15 min

Sweeps:
  trainer_sweep     examples/trainer_sweep/runs.csv, made by trainer_minimal (skipped with a
                    message when absent)
  table1            synthetic, the 10 recipes of ScaleRL's Table 1, 2 seeds, 32 evaluations on a
                    log-compute grid (forecast.synthetic.simulate_sweep)
  table1_no_scout   the same without the Scout MoE, so the winners (32k generation length, batch
                    2048) are slow starters whose curves cross the fast-saturating recipes late
  *_messy           the same with 30% of runs that plateau early or decline late (messy_fraction)
  trainer_subset_k  k = 1..--subsets: the trainer sweep with 2 of the 3 seeds of every recipe
                    (drawn at random, fixed seed). One sweep is one draw of seed luck; subsets show
                    how much each policy's regret depends on it.
  trainer_single_k  k = 1..--singles: one seed of every recipe (7 runs), the commonest sweep shape.
                    Successive halving and the median rule are cheap enough to replay on all 3^7
                    such sweeps, and on all 3^7 2-seed subsets, too; those lines show how typical
                    the drawn ones are.

Per family it also prints ours minus each baseline sweep by sweep, with the standard error of the
mean difference: both replay the same sweeps, so the difference cancels each sweep's own luck, and
a gap smaller than about two standard errors is the draw of sweeps, not the policy. The subsets
reuse the same runs, so this speaks for sweeps drawn from these runs; new seeds vary more (the
held-out sweeps). With few sweeps (the default 4 subsets) the error is wide; --subsets 24 narrows it.

The hindsight ceiling of a sweep (forecast.backtest.hindsight_ceiling) is what a policy that
knows the answer saves: it finishes the true best run and stops every other run at the first
checkpoint. A policy that saves more than that has bought the difference with regret.

Per family of sweeps it also replays successive halving at eta 2, 3, 4, 6 and 8 and the median
rule as Optuna's PercentilePruner at percentile 75, 50 (MedianPruner), 40, 30, 20 and 10 (one
setting is one point of a baseline's saved-vs-regret trade-off; eta 4 and percentile 50 are the
default lines above) and says whether ours saves more than the best of those at equal or lower
mean regret (within 0.0005): the issue's "more saved at equal or lower regret", read off each
baseline's own trade-off. That setting is
chosen per family after seeing the results, so it knows whether a sweep has an early, clear winner
(eta 8 there) or slow starters (a small eta). A user sets it once, before the sweep, as we set our
thresholds; so it also asks, for each setting used on every family alike, in which families its
regret stays at ours' level and whether it saves more there.

On the trainer sweep it also checks how honest ours' forecasts are where the decisions are made:
at checkpoints 1, 3, 5, 7 and 9 it refits as the policy does and compares each unfinished run's
forecast of its final with the true final, split by how far out the forecast reaches (within 2x,
2-4x, beyond 4x): how often the 90% interval covers it, the mean error (is the forecast biased?)
and the sd of the standardised error (are the intervals as wide as the errors?).

For each sweep and policy (forecast.backtest): compute used as a fraction of running every run
to the end, compute saved (1 - that), regret (true best final - final of the run the policy
chooses; final = mean of the last 3 evaluations), and ratios of ours to each baseline. Then means
per family of sweeps (synthetic, trainer-derived), with the share of sweeps whose regret exceeds
the 0.01 target, and the noise floor of regret on the trainer sweep: the sd of a final that is the
mean of 3 evaluations of n_eval graded samples. Regret differences below it are seed and
evaluation luck, not skill. Per trainer family, "noise alone" is the regret that this noise gives
even a policy that finishes only the best run (oracle_noise_regret): the part of the 0.01 target
spent before any wrong decision; only finishing more runs buys it back.

With --resample-noise K the trainer sweeps are replaced by K replicas each (forecast.backtest.
resample_evaluation_noise): every run's trajectory smoothed over 5 evaluations is its true pass
rate, and every evaluation is drawn again around it with the binomial noise of its n_eval graded
samples. The policies see only the redrawn evaluations; regret is scored on the truth, so a policy
is no longer rewarded or punished for which of two near-tied runs' finals was measured luckier,
and the standard errors over replicas count the evaluation noise that one real sweep draws once.
The regret on the replicas' measured finals is printed beside it.

The stop-rule defaults (forecast.early_stop.EarlyStopConfig) were tuned on synthetic sweeps made
with other seeds (101-104) than the ones reported here (11-14).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import print_provenance  # noqa: E402
from forecast.backtest import (  # noqa: E402
    MIN_CHECK_GROWTH,
    POLICIES,
    TRUTH_COLUMN,
    BacktestConfig,
    backtest,
    make_policy,
    repeated_policies,
    replay,
    resample_evaluation_noise,
    smoothed_final,
)
from forecast.cli import BadInput, _check_output_file, prior_overrides  # noqa: E402
from forecast.data import load_runs  # noqa: E402
from forecast.early_stop import EarlyStopConfig  # noqa: E402
from forecast.formatting import did_you_mean  # noqa: E402
from forecast.io import atomic_write_text  # noqa: E402
from forecast.model import Priors  # noqa: E402
from forecast.synthetic import load_table1, simulate_sweep  # noqa: E402

TRAINER_SWEEP = ROOT / "examples" / "trainer_sweep" / "runs.csv"
TARGET_SAVED, TARGET_REGRET = 0.50, 0.01
SYNTHETIC_NAMES = ("table1", "table1_no_scout", "table1_messy", "table1_no_scout_messy")  # synthetic_sweeps' names


def synthetic_sweeps(quick: bool, seeds=(11, 12, 13, 14)) -> dict:
    table1 = load_table1().rename(columns={"run": "recipe"})
    no_scout = table1[table1["recipe"] != "scalerl_scout_moe"]
    specs = {
        "table1": (table1, 0.0, seeds[0]),
        "table1_no_scout": (no_scout, 0.0, seeds[1]),
        "table1_messy": (table1, 0.3, seeds[2]),
        "table1_no_scout_messy": (no_scout, 0.3, seeds[3]),
    }
    if quick:
        specs = {k: specs[k] for k in ("table1_no_scout", "table1_messy")}
    return {
        name: simulate_sweep(recipes, n_seeds=2, n_points=32, messy_fraction=messy, rng=seed)
        for name, (recipes, messy, seed) in specs.items()
    }


def runs_sweep_name(path, taken: set) -> str:
    """The name a --runs sweep is replayed and printed under: its file's stem (a folder: its name),
    with its folder in front where that name is taken, then a number. Every example sweep is a
    runs.csv, and a second sweep of a name replaced the first without a word."""
    path = Path(path)
    name = path.stem if path.is_file() else path.name
    if name in taken:
        name = f"{path.parent.name}/{name}"
    unique, k = name, 2
    while unique in taken:
        unique, k = f"{name}_{k}", k + 1
    return unique


def seed_subsets(runs, n: int, *, keep: int = 2, rng: int = 0, prefix: str = "trainer_subset") -> dict:
    """`n` sub-sweeps keeping `keep` random runs of every recipe (recipes with fewer keep all)."""
    rng = np.random.default_rng(rng)
    by_recipe = runs.groupby("recipe")["run_id"].unique()
    out, seen = {}, set()
    for _ in range(50 * n):  # distinct subsets only
        if len(out) == n:
            break
        chosen = tuple(sorted(r for ids in by_recipe for r in (rng.choice(sorted(ids), keep, replace=False) if len(ids) > keep else ids)))
        if chosen in seen:
            continue
        seen.add(chosen)
        out[f"{prefix}_{len(out) + 1}"] = runs[runs["run_id"].isin(chosen)].reset_index(drop=True)
    return out


def every_seed_subset(runs, keep: int = 1):
    """Every sweep with `keep` runs of each recipe (recipes with fewer keep all): the product over
    recipes of the ways to choose `keep` of its seeds."""
    by_recipe = [sorted(ids) for ids in runs.groupby("recipe")["run_id"].unique()]
    choices = [list(itertools.combinations(ids, keep)) if len(ids) > keep else [tuple(ids)] for ids in by_recipe]
    for chosen in itertools.product(*choices):
        kept = [run for group in chosen for run in group]
        yield runs[runs["run_id"].isin(kept)].reset_index(drop=True)


def count_seed_subsets(runs, keep: int = 1) -> int:
    """How many sweeps every_seed_subset yields."""
    return int(np.prod([math.comb(n, keep) if n > keep else 1 for n in runs.groupby("recipe")["run_id"].nunique()]))


def cheap_baselines_on_every_subset(runs, policies, keep: int = 1, limit: int = 5000,
                                    base: BacktestConfig | None = None) -> dict:
    """Compute saved / regret of the instant baselines on every sweep with `keep` runs per recipe
    (none when there are more than `limit` such sweeps: the product of seeds grows fast). Shows how
    typical the subsets drawn for ours are for the baselines."""
    if count_seed_subsets(runs, keep) > limit:
        return {}
    cheap = [p for p in policies if p in ("median", "successive_halving")]
    scores = {p: [] for p in cheap}
    config = base or BacktestConfig()  # the checkpoints the main lines use (--check-growth)
    for sweep in every_seed_subset(runs, keep):
        for policy in cheap:
            result = replay(sweep, make_policy(policy, config), config)
            scores[policy].append((result.compute_saved, result.regret))
    return {p: np.array(v) for p, v in scores.items()}


def paired_differences(everything: dict, names: list[str], baseline: str) -> dict | None:
    """Ours minus `baseline`, sweep by sweep over `names`: mean and standard error of the
    difference in compute saved and in regret. Both policies replay the same sweeps, so the
    difference cancels each sweep's own luck (how early its winner shows) and its standard error
    says whether a gap in the family means is more than the draw of sweeps. None with < 2 sweeps."""
    if len(names) < 2:
        return None
    ours = [everything[s]["policies"]["forecast"] for s in names]
    other = [everything[s]["policies"][baseline] for s in names]
    out = {"n": len(names)}
    for key in ("compute_saved", "regret"):
        diff = np.array([o[key] - b[key] for o, b in zip(ours, other, strict=True)])
        out[key] = (float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff))))
    return out


def paired_difference_lines(everything: dict, names: list[str], policies: list[str]) -> list[str]:
    """paired_differences against successive halving and the median rule, one line each."""
    lines = []
    for baseline in ("successive_halving", "median"):
        if baseline not in policies or "forecast" not in policies:
            continue
        d = paired_differences(everything, names, baseline)
        if d is None:
            continue
        (saved, saved_se), (regret, regret_se) = d["compute_saved"], d["regret"]
        lines.append(f"  ours - {baseline}, sweep by sweep ({d['n']}): saved {100 * saved:+.1f} +- {100 * saved_se:.1f} "
                     f"points, regret {regret:+.4f} +- {regret_se:.4f} (mean +- standard error)")
    return lines


def has_n_eval(runs) -> bool:
    """Whether the sweep records n_eval, the graded samples behind each metric (the noise of a final)."""
    return "n_eval" in runs and not runs["n_eval"].isna().all()


def measured_finals(runs, last: int = 3):
    """Each run's measured final, the mean of its `last` evaluations (as the replay scores it)."""
    return runs.sort_values("compute").groupby("run_id")["metric"].apply(lambda m: smoothed_final(m, last))


def regret_noise_floor(runs, last: int = 3) -> float | None:
    """sd of a 'true final' (mean of `last` evaluations of n_eval graded samples) at the median final."""
    if not has_n_eval(runs):
        return None
    finals = measured_finals(runs, last)
    p, n = float(finals.median()), float(runs["n_eval"].median())
    return float(np.sqrt(p * (1 - p) / n / last))


def oracle_noise_regret(runs, *, last: int = 3, draws: int = 4000, rng: int = 0) -> float | None:
    """Regret that evaluation noise alone gives a policy that finishes only the best run.

    The benchmark's best is the highest *measured* final (a mean of `last` evaluations, sd as in
    regret_noise_floor), so a policy that keeps exactly the truly best run still shows regret
    whenever another run's final is measured luckier. Taking the finals seen as the truth, draw
    measured finals around them and average max(measured) - measured[best]. The true finals lie
    closer together than the measured ones, so the real figure is, if anything, higher.
    None without n_eval."""
    if not has_n_eval(runs):
        return None
    finals = measured_finals(runs, last).to_numpy()
    sd = np.sqrt(finals * (1 - finals) / float(runs["n_eval"].median()) / last)
    measured = finals + sd * np.random.default_rng(rng).standard_normal((draws, len(finals)))
    return float(np.mean(measured.max(axis=1) - measured[:, finals.argmax()]))


# how far out a forecast reaches: planned budget / compute so far
REACH_BANDS = (("<= 2x", 2.0), ("2-4x", 4.0), ("> 4x", np.inf))
CALIBRATION_CHECKS = (0, 2, 4, 6, 8)  # checkpoint indices (0 = the first) at which advice_calibration refits


def advice_calibration(runs, *, checks=CALIBRATION_CHECKS, level: float = 0.9, forecaster_kwargs=None,
                       planned: bool = False, config: BacktestConfig | None = None) -> dict | None:
    """How honest the early-stop forecasts are: at a few checkpoints, refit as the policy does and
    compare each unfinished run's forecast of its final (its draws at the planned budget plus the
    evaluation noise of a mean of 3 evaluations) with the true final. Split by how far out the
    forecast reaches (REACH_BANDS). Per band: how often the central `level` interval covers the
    final, the mean error (true final - forecast mean: positive = forecasts too low) and the sd of
    the standardised error (1 for honest spreads; above 1 = intervals too narrow). Coverage alone
    hides a bias paid for by wide intervals. Needs n_eval (the noise of a final); None without it.
    planned: each fit is told the sweep's largest planned budget (fit(horizon=...)). config: the
    main lines' BacktestConfig, whose checkpoints (--check-growth) the refits are made at."""
    from forecast.backtest import checkpoint_schedule
    from forecast.early_stop import fit_for_advice, run_draws

    if not has_n_eval(runs):
        return None
    runs = runs.sort_values(["run_id", "compute"]).reset_index(drop=True)
    config = config or BacktestConfig()
    schedule = checkpoint_schedule(runs, min_evals=config.min_evals, growth=config.check_growth)
    budgets = runs.groupby("run_id")["compute"].max()
    finals = measured_finals(runs, config.smooth_last)
    n_eval = float(runs["n_eval"].median())
    rng = np.random.default_rng(0)
    tail = (1 - level) / 2
    seen = {band: [] for band, _ in REACH_BANDS}  # (covered, error, standardised error)
    for index in [i for i in checks if i < len(schedule)]:
        revealed = runs[runs["compute"] <= schedule[index]]
        fc, _ = fit_for_advice(revealed, random_seed=index, pad_to=len(runs), horizon=float(budgets.max()) if planned else None,
                               **(forecaster_kwargs or {}))
        last = revealed.groupby("run_id")["compute"].max()
        for run, budget in budgets.items():
            if last[run] >= budget:
                continue
            draws = run_draws(fc, run, budget)[:, 0]
            final = finals[run]
            draws = draws + np.sqrt(final * (1 - final) / n_eval / config.smooth_last) * rng.standard_normal(len(draws))
            lo, hi = np.quantile(draws, [tail, 1 - tail])
            error = final - draws.mean()
            band = next(name for name, upper in REACH_BANDS if budget / last[run] <= upper)
            seen[band].append((lo <= final <= hi, error, error / max(draws.std(), 1e-9)))
    return {band: {"n": len(v), "coverage": float(np.mean([c for c, _, _ in v])),
                   "bias": float(np.mean([e for _, e, _ in v])), "z_sd": float(np.std([z for _, _, z in v]))}
            for band, v in seen.items() if v}


def calibration_lines(calibration: dict, level: float = 0.9) -> list[str]:
    """advice_calibration's figures, one line per band."""
    return [f"  final {band:>5} ahead: {level:.0%} interval covers {c['coverage']:4.0%} of {c['n']:3d}; mean error "
            f"(final - forecast) {c['bias']:+.4f}; sd of standardised error {c['z_sd']:.2f}"
            for band, c in calibration.items()]


def family_summary(everything: dict, names: list[str], policies: list[str]) -> list[str]:
    """Per policy over a family of sweeps: mean saved, mean and worst regret, share over target
    (and, where regret was scored on a known truth, the mean regret on the measured finals)."""
    lines = []
    for policy in policies:
        results = [everything[s]["policies"][policy] for s in names]
        saved = np.array([r["compute_saved"] for r in results])
        regret = np.array([r["regret"] for r in results])
        measured = [r["notes"]["measured_regret"] for r in results if "measured_regret" in r["notes"]]
        on_measured = f"  (on measured finals {np.mean(measured):.4f})" if len(measured) == len(results) else ""
        lines.append(
            f"  {policy:<19} saved {saved.mean():6.1%}   regret mean {regret.mean():.4f}  worst {regret.max():.4f}  "
            f"regret > {TARGET_REGRET}: {np.mean(regret > TARGET_REGRET + 1e-12):4.0%} of sweeps{on_measured}"
        )
    return lines


def flagged_stops_line(everything: dict, names: list[str]) -> str | None:
    """Ours' stops made on advice fits that did not converge over a family of sweeps, and on how many
    each chain's draws alone said stop too (noting_what_each_chain_says): whether the flag mattered
    to the stops. None without the forecast policy."""
    notes = [everything[s]["policies"]["forecast"]["notes"] for s in names if "forecast" in everything[s]["policies"]]
    if not notes:
        return None
    fits = sum(n.get("unconverged_fits", 0) for n in notes)
    stops = sum(n.get("stops_on_unconverged_fits", 0) for n in notes)
    agreed = sum(n.get("of_which_every_chain_agreed", 0) for n in notes)
    share = f" ({agreed / stops:.0%})" if stops else ""
    return (f"  ours' refits flagged as not converged: {fits}; stops made on them: {stops}, each chain alone said stop "
            f"too on {agreed}{share}")


# Each baseline's one knob and the settings replayed: one setting is one point of its
# saved-vs-regret trade-off; "more saved at equal or lower regret" is read off these points.
# policy: (title, knob, BacktestConfig field, settings)
BASELINE_KNOBS = {
    "successive_halving": ("successive halving", "eta", "halving_eta", (2, 3, 4, 6, 8)),
    # Optuna's PercentilePruner: keep the top p% at each step (50 = MedianPruner; smaller stops more)
    "median": ("the median rule (PercentilePruner)", "percentile", "median_percentile", (75, 50, 40, 30, 20, 10)),
}


def baseline_frontier(sweeps: dict, names: list[str], policy: str, truths: dict | None = None,
                      base: BacktestConfig | None = None) -> dict:
    """`policy` at each setting of its knob: mean (saved, regret) over the sweeps `names`
    (`truths`: sweep -> the column of true pass rates its regret is scored on, if any; `base`:
    the rest of the configuration, so the frontier is replayed at the main lines' checkpoints)."""
    *_, field_name, settings = BASELINE_KNOBS[policy]
    truths = truths or {}
    out = {}
    for setting in settings:
        config = dataclasses.replace(base or BacktestConfig(), **{field_name: setting})
        scores = [replay(sweeps[s], make_policy(policy, config), config, truth=truths.get(s)) for s in names]
        out[setting] = (float(np.mean([r.compute_saved for r in scores])), float(np.mean([r.regret for r in scores])))
    return out


def ours_means(everything: dict, names: list[str]) -> tuple[float, float]:
    """Ours' mean compute saved and mean regret over the sweeps `names`."""
    results = [everything[s]["policies"]["forecast"] for s in names]
    return float(np.mean([r["compute_saved"] for r in results])), float(np.mean([r["regret"] for r in results]))


def frontier_lines(everything: dict, names: list[str], policy: str, frontier: dict) -> list[str]:
    """Ours against the baseline setting that saves most at ours' mean regret or lower."""
    title, knob, *_ = BASELINE_KNOBS[policy]
    saved, regret = ours_means(everything, names)
    lines = [f"  {title} {knob} {k:g}: saved {v[0]:6.1%}   regret mean {v[1]:.4f}" for k, v in frontier.items()]
    # regrets within 0.0005 count as equal: below any evaluation's resolution
    fair = {k: v for k, v in frontier.items() if v[1] <= regret + 5e-4}
    if not fair:
        lines.append(f"  ours: saved {saved:.1%} at regret mean {regret:.4f}; no {knob} of {title} reaches regret that low")
    else:
        k, (b_saved, b_regret) = max(fair.items(), key=lambda kv: kv[1][0])
        word = "more" if saved > b_saved else "LESS"
        lines.append(f"  ours: saved {saved:.1%} at regret mean {regret:.4f}: {word} than {title}'s best at equal "
                     f"or lower regret ({knob} {k:g}: {b_saved:.1%} at {b_regret:.4f})")
    return lines


def one_setting_lines(everything: dict, families: dict[str, list[str]], policy: str, frontiers: dict[str, dict]) -> list[str]:
    """The baseline with one setting for every family, as a user who sets it before seeing the
    sweep would run it. For each setting: the families where its mean regret is within ours'
    (+0.0005) and, there, whether it saves more. A setting chosen per family after seeing the
    results (the frontier lines) knows which kind of sweep it faces; one for all does not, and
    neither do we."""
    title, knob, *_ = BASELINE_KNOBS[policy]
    ours = {f: ours_means(everything, names) for f, names in families.items()}
    lines, matching = [], []
    for k in next(iter(frontiers.values())):
        worse_regret = [f for f in families if frontiers[f][k][1] > ours[f][1] + 5e-4]
        saves_more = [f for f in families if f not in worse_regret and frontiers[f][k][0] > ours[f][0]]
        parts = ", ".join(f"{frontiers[f][k][0]:.1%}/{frontiers[f][k][1]:.4f}" for f in families)
        lines.append(f"  {knob} {k:g}: saved/regret by family {parts}; regret above ours in {len(worse_regret)} of "
                     f"{len(families)} families; saves more than ours at equal or lower regret in {len(saves_more)}")
        if not worse_regret:
            matching.append((k, saves_more))
    if not matching:
        lines.append(f"  ours: no single {knob} keeps regret at ours' level in every family; ours is not matched by any "
                     f"one setting of {title}")
    else:
        for k, more in matching:
            word = f"saves more than ours in {', '.join(more)}" if more else "saves less than ours in every family"
            lines.append(f"  ours: {knob} {k:g} keeps regret at ours' level in every family and {word}")
    return lines


def ratios(results: dict) -> list[str]:
    """Ours against each baseline: compute used ratio and regret difference, in words."""
    ours = results["forecast"]
    lines = []
    for name, other in results.items():
        if name == "forecast":
            continue
        ratio = ours["compute_fraction"] / other["compute_fraction"]
        lines.append(
            f"    vs {name:<19} compute used x{ratio:.2f} ({ours['compute_saved']:.1%} vs {other['compute_saved']:.1%} saved), "
            f"regret {ours['regret']:+.4f} vs {other['regret']:+.4f}"
        )
    return lines


def verdict(results: dict) -> str:
    ours = results["forecast"]
    met = ours["compute_saved"] >= TARGET_SAVED and ours["regret"] <= TARGET_REGRET
    compared = [b for b in ("median", "successive_halving") if b in results]
    # with neither baseline replayed (--policies forecast) there is nothing to be better than
    better = bool(compared) and all(
        ours["compute_saved"] > results[b]["compute_saved"] or ours["regret"] < results[b]["regret"] - 1e-9
        for b in compared
    )
    dominated_by = [
        b for b in ("median", "successive_halving")
        if b in results and results[b]["compute_saved"] >= ours["compute_saved"] and results[b]["regret"] <= ours["regret"]
    ]
    text = f"  target (>= {TARGET_SAVED:.0%} saved, regret <= {TARGET_REGRET}): {'met' if met else 'NOT met'}"
    if dominated_by:
        text += f"; matched or beaten on both counts by {', '.join(dominated_by)}"
    elif better:
        text += f"; better than {' and '.join(b.replace('_', ' ') for b in compared)} on compute or regret, not worse on both"
    return text


def base_name(sweep: str) -> str:
    """A sweep's name without its replica suffix ('trainer_subset_2@r3' -> 'trainer_subset_2')."""
    return sweep.split("@")[0]


def with_replicas(sweeps: dict, n: int, window: int = 5) -> tuple[dict, dict]:
    """Every trainer sweep (the full one, its subsets, its one-seed sweeps) replaced by `n`
    replicas: replica k redraws the evaluation noise of the full sweep once (seed k) and each
    subset keeps its runs from it. Returns (sweeps, truths: replica name -> truth column)."""
    trainer = [s for s in sweeps if s == "trainer_sweep" or s.startswith(("trainer_subset", "trainer_single"))]
    out = {s: runs for s, runs in sweeps.items() if s not in trainer}
    truths = {}
    for k in range(1, n + 1):
        replica = resample_evaluation_noise(sweeps["trainer_sweep"], rng=k, window=window)
        for s in trainer:
            kept = replica[replica["run_id"].isin(set(sweeps[s]["run_id"]))].reset_index(drop=True)
            out[f"{s}@r{k}"] = kept
            truths[f"{s}@r{k}"] = TRUTH_COLUMN
    return out, truths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="the trainer sweep (if present) and two synthetic sweeps only: no seed subsets unless "
                             "--subsets or --singles asks for them, and no noise floor, forecast honesty or "
                             "every-subset lines")
    parser.add_argument("--json", default=None, help="write all results to this JSON file")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--runs", action="append", default=[], help="another finished sweep to replay (repeatable)")
    parser.add_argument("--subsets", type=int, default=None,
                        help="2-seed subsets of the trainer sweep to replay too (default 4; with --quick 0)")
    parser.add_argument("--singles", type=int, default=None,
                        help="one-seed-per-recipe sweeps drawn from the trainer sweep (default 16; with --quick 0)")
    parser.add_argument("--trainer-sweep", default=str(TRAINER_SWEEP),
                        help="the trainer sweep whose subsets are replayed (default: the shipped one); e.g. one made "
                             "with other seeds, to check the trainer figures out of sample")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the synthetic Table-1 sweeps")
    parser.add_argument("--synthetic-seeds", default="11,12,13,14",
                        help="seeds of the 4 synthetic sweeps (default 11,12,13,14; the defaults were tuned on 101,102,103,104)")
    parser.add_argument("--level-wander-ratio", type=float, default=None,
                        help="the forecaster's level_wander_ratio for ours (default: the forecaster's, 2)")
    parser.add_argument("--max-stop-share", type=float, default=None,
                        help="ours' max_stop_share (default: EarlyStopConfig's, 0.5; 1 = no cap)")
    parser.add_argument("--p-beat-threshold", type=float, default=None,
                        help="ours' p_beat_threshold: stop when P(beats the best alternative by the margin) is below "
                             "this (default: EarlyStopConfig's, 0.1)")
    parser.add_argument("--min-gain-per-compute", type=float, default=None,
                        help="ours' min_gain_per_compute (default: EarlyStopConfig's; 0 = the rule off)")
    parser.add_argument("--protect-top-percent", type=float, default=None,
                        help="ours' protect_top_percent: no comparison stop for a run in the top this-%% at its step "
                             "(default: EarlyStopConfig's, off)")
    parser.add_argument("--prior", action="append", default=[], metavar="NAME=VALUE",
                        help="a prior setting of ours' forecaster (forecast.model.Priors), repeatable; e.g. "
                             "--prior b_mu=0.5 --prior m_mu=0.5 --prior a_mu_offset=1.0 (default: Priors())")
    parser.add_argument("--resample-noise", type=int, default=0, metavar="K",
                        help="replace the trainer sweeps by K replicas each with a known truth (evaluation noise drawn "
                             "again around each run's smoothed trajectory) and score regret on the truth (default 0: off)")
    parser.add_argument("--resample-window", type=int, default=5,
                        help="evaluations each run's trajectory is smoothed over to make a replica's truth (default 5)")
    parser.add_argument("--planned-horizon", action="store_true",
                        help="ours' fits told the sweep's largest planned budget (BacktestConfig.planned_horizon; "
                             "default off)")
    parser.add_argument("--check-growth", type=float, default=None,
                        help="checkpoints this many times of compute apart (BacktestConfig.check_growth; default "
                             "1.25); 1.1 is closer to live advice after every evaluation")
    parser.add_argument("--keep-runner-up", action=argparse.BooleanOptionalAction, default=None,
                        help="ours' keep_runner_up: while the run the others are compared with is in flight, the "
                             "strongest other run goes on (default: EarlyStopConfig's, on)")
    args = parser.parse_args(argv)
    # --quick leaves the subsets out by default, not when they are asked for: `--quick --subsets 4` replayed none
    if args.subsets is None:
        args.subsets = 0 if args.quick else 4
    if args.singles is None:
        args.singles = 0 if args.quick else 16
    for flag, count, least in (("--subsets", args.subsets, 0), ("--singles", args.singles, 0),
                               ("--resample-noise", args.resample_noise, 0), ("--resample-window", args.resample_window, 1)):
        if count < least:  # a negative count drew nothing, as 0 does, and said nothing
            parser.error(f"{flag} must be at least {least}, got {count}")
    if args.check_growth is not None and not args.check_growth >= MIN_CHECK_GROWTH:
        parser.error(f"--check-growth must be at least {MIN_CHECK_GROWTH:g}, got {args.check_growth:g}")
    unknown = [p.strip() for p in args.policies.split(",") if p.strip() not in POLICIES]
    if unknown:  # worded as `forecast backtest --policies` words it, with its guess at the name meant
        guessed = [repr(p) + (f" ({hint})" if (hint := did_you_mean(p, POLICIES)) else "") for p in unknown]
        parser.error(f"--policies: unknown {', '.join(guessed)}; known: {', '.join(POLICIES)}")
    named = [p.strip() for p in args.policies.split(",")]
    if repeated := repeated_policies(named):
        parser.error(f"--policies: {', '.join(repeated)} given more than once")
    synthetic_seeds = tuple(int(x) for x in args.synthetic_seeds.split(","))
    if len(synthetic_seeds) != 4:
        parser.error(f"--synthetic-seeds needs 4 seeds, got {args.synthetic_seeds!r}")
    if args.resample_noise < 0 or args.resample_window < 1:
        parser.error("--resample-noise must be >= 0 and --resample-window >= 1")
    forecaster_kwargs = {} if args.level_wander_ratio is None else {"level_wander_ratio": args.level_wander_ratio}
    if args.prior:
        try:
            forecaster_kwargs["priors"] = Priors(**prior_overrides(args.prior))
        except ValueError as error:
            parser.error(str(error))
    fields = ("p_beat_threshold", "max_stop_share", "min_gain_per_compute", "protect_top_percent", "keep_runner_up")
    early_stop_overrides = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    if early_stop_overrides.get("min_gain_per_compute") == 0:
        early_stop_overrides["min_gain_per_compute"] = None  # 0 = the rule off, which EarlyStopConfig spells None
    try:  # EarlyStopConfig holds the valid ranges; the refusal names the flag
        early_stop = EarlyStopConfig(**early_stop_overrides)
    except ValueError as error:
        field = str(error).split()[0]
        parser.error(f"--{field.replace('_', '-')}: {error}")
    warnings.simplefilter("ignore")
    policies = [p.strip() for p in args.policies.split(",")]

    sweeps = {}
    trainer_sweep = Path(args.trainer_sweep)
    if not trainer_sweep.exists() and args.trainer_sweep != str(TRAINER_SWEEP):
        parser.error(f"--trainer-sweep {args.trainer_sweep}: no such file or folder")
    try:  # a --json that cannot be written, or would overwrite a sweep read here, is refused before the replays
        _check_output_file(args.json, "--json", "early_stop.json", source=(trainer_sweep, *args.runs))
    except BadInput as error:
        parser.error(str(error))
    print_provenance("benchmarks/early_stop.py", vars(args))
    if trainer_sweep.exists():
        sweeps["trainer_sweep"] = load_runs(trainer_sweep)
        sweeps.update(seed_subsets(sweeps["trainer_sweep"], args.subsets))
        sweeps.update(seed_subsets(sweeps["trainer_sweep"], args.singles, keep=1, prefix="trainer_single"))
    else:
        print(f"trainer sweep: {trainer_sweep} not found, skipped (trainer_minimal writes it)")
    truths = {}
    if args.resample_noise and "trainer_sweep" in sweeps:
        try:
            sweeps, truths = with_replicas(sweeps, args.resample_noise, args.resample_window)
        except ValueError as error:
            parser.error(f"--resample-noise: {error}")
    for path in args.runs:
        sweeps[runs_sweep_name(path, set(sweeps) | set(SYNTHETIC_NAMES))] = load_runs(path)
    if not args.no_synthetic:
        sweeps.update(synthetic_sweeps(args.quick, synthetic_seeds))

    base_config = BacktestConfig(early_stop=early_stop, forecaster_kwargs=forecaster_kwargs, planned_horizon=args.planned_horizon)
    if args.check_growth is not None:
        base_config.check_growth = args.check_growth
    everything = {}
    for name, runs in sweeps.items():
        start = time.perf_counter()
        config = dataclasses.replace(base_config)
        result = backtest(runs, policies, config,
                          truth=truths.get(name))
        payload = result.to_dict()
        everything[name] = payload
        n_runs = runs["run_id"].nunique()
        print(f"\n== {name}: {n_runs} runs, {runs['recipe'].nunique()} recipes, {len(runs)} evaluations "
              f"({time.perf_counter() - start:.0f} s)")
        print(result)
        if "forecast" in payload["policies"]:
            print("  ours (forecast):")
            print("\n".join(ratios(payload["policies"])))
            print(verdict(payload["policies"]))

    families = {
        "synthetic Table-1 sweeps": [s for s in everything if s.startswith("table1")],
        "trainer sweep and its seed subsets": [s for s in everything if base_name(s) == "trainer_sweep"
                                               or s.startswith("trainer_subset")],
        "one-seed-per-recipe trainer sweeps": [s for s in everything if s.startswith("trainer_single")],
        "every sweep": list(everything),
    }
    frontiers = {policy: {} for policy in BASELINE_KNOBS}
    for family, names in families.items():
        if not names:
            continue
        print(f"\n== {family} ({len(names)}): means over sweeps")
        print("\n".join(family_summary(everything, names, policies)))
        if (flagged := flagged_stops_line(everything, names)) is not None:
            print(flagged)
        if family != "every sweep":
            print("\n".join(paired_difference_lines(everything, names, policies)))
        ceiling = np.mean([everything[s]["hindsight_ceiling"] for s in names])
        print(f"  hindsight ceiling   saved {ceiling:6.1%}   regret 0: saving more than this costs regret")
        if any(s in truths for s in names):
            print(f"  regret scored on the replicas' true pass rates ({len(names)} sweeps: "
                  f"{len({s.split('@')[1] for s in names if '@' in s})} replicas); no_stopping's is what choosing "
                  "by measured finals alone costs")
        noise = [r for r in (oracle_noise_regret(sweeps[s]) for s in names if s not in truths) if r is not None]
        if noise and len(noise) == len(names):
            print(f"  noise alone         regret about {np.mean(noise):.4f} for a policy that finishes only the best run: "
                  "finals are measured with evaluation noise, and another run's luckier final counts as the best")
        if "forecast" in policies and family != "every sweep":
            for policy in BASELINE_KNOBS:
                frontiers[policy][family] = baseline_frontier(sweeps, names, policy, truths, base=base_config)
                print("\n".join(frontier_lines(everything, names, policy, frontiers[policy][family])))
    for policy, by_family in frontiers.items():
        if len(by_family) > 1:
            title, knob, *_ = BASELINE_KNOBS[policy]
            print(f"\n== {title} with one {knob} for every family (set before seeing the sweep): "
                  f"saved/regret in {', '.join(by_family)}")
            print("\n".join(one_setting_lines(everything, {f: families[f] for f in by_family}, policy, by_family)))
    if "trainer_sweep" in sweeps and not args.quick:
        floor = regret_noise_floor(sweeps["trainer_sweep"])
        if floor is not None:
            print(f"\nnoise floor of regret on the trainer sweep: a final (mean of 3 evaluations) has sd {floor:.4f}; "
                  "regrets closer than that are luck")
        calibration = advice_calibration(sweeps["trainer_sweep"], forecaster_kwargs=forecaster_kwargs,
                                         planned=args.planned_horizon, config=base_config)
        if calibration:
            at = ", ".join(str(i + 1) for i in CALIBRATION_CHECKS)
            print(f"honesty of ours' forecasts of unfinished runs' finals on the trainer sweep (refits at checkpoints "
                  f"{at}; how far ahead = planned budget / compute so far):")
            print("\n".join(calibration_lines(calibration)))
        for keep, drawn, what in ((2, args.subsets, "2-seed subsets"), (1, args.singles, "one-seed-per-recipe sweeps")):
            if not drawn:
                continue
            every = cheap_baselines_on_every_subset(sweeps["trainer_sweep"], policies, keep=keep, base=base_config)
            for policy, v in every.items():
                print(f"  {policy:<19} on all {len(v)} {what}: saved {v[:, 0].mean():6.1%}   regret mean "
                      f"{v[:, 1].mean():.4f}  regret > {TARGET_REGRET}: {np.mean(v[:, 1] > TARGET_REGRET + 1e-12):4.0%} of sweeps")
    print("\ncompute saved = 1 - compute used / running every run to its end; regret = true best final - final "
          "of the chosen run (final = mean of the last 3 evaluations; a stopped run counts where it stopped)")
    if args.json:
        atomic_write_text(args.json, json.dumps(everything, indent=2, default=str) + "\n")  # never half a file
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
