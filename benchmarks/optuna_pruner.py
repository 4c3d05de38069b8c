"""Benchmark: ForecastPruner against Optuna's own pruners in the same studies — compute used vs regret.

    .venv/bin/python benchmarks/optuna_pruner.py                      # 8 studies x 16 trials (4-6 min on 2 cores)
    .venv/bin/python benchmarks/optuna_pruner.py --studies 3 --trials 12   # a quick look (1.5-3 min)
    .venv/bin/python benchmarks/optuna_pruner.py --sampler tpe        # TPE instead of random sampling (see below)
    .venv/bin/python benchmarks/optuna_pruner.py --pruners nop,median,successive_halving   # the cheap ones only
    .venv/bin/python benchmarks/optuna_pruner.py --json results.json

The objective is a synthetic RL run. Its hyperparameters fix a true ScaleRL curve
R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B):
  recipe     categorical over the 10 recipes of ScaleRL's Table 1 (forecast.synthetic.load_table1):
             the recipe's A, B and C_mid; R0 = 0.30 as in forecast.synthetic.simulate_sweep.
  lr_factor  log-uniform in [0.25, 4]: the midpoint moves to C_mid / lr_factor^0.75 (a higher rate
             learns sooner) and the headroom A - R0 shrinks by 1 - 0.1 log2(lr_factor)^2 (too high or
             too low a rate plateaus lower), so a high rate is a fast starter with a lower ceiling
             and a low rate a slow starter: curves cross, as learning-rate sweeps' do.
A trial reports a measured pass rate (binomial noise of n_eval=800 graded samples around the true
curve) at 10 geometric steps up to max_step=8000 training steps (1 step = 4 GPU hours, so the
budget is 32000 GPU hours: the Table 1 midpoints lie inside it) and returns its last measured
value. The noise is fixed by the trial's parameters and the study seed, so a trial with the same
parameters measures the same curve under every pruner.

Each study seed runs one study per pruner, same objective, same sampler and sampler seed:
  forecast            ForecastPruner(max_step, step_to_compute=steps -> GPU hours, n_eval=800);
                      its other settings as shipped (4 reports of warm-up, a check at every report:
                      a fit of about a second each). --no-n-eval leaves n_eval out.
  median              MedianPruner() with its defaults (5 startup trials, no warm-up)
  median_warmup       MedianPruner(n_warmup_steps=the step of ForecastPruner's first check), so both
                      wait for the same reports before they can prune
  successive_halving  SuccessiveHalvingPruner() with its defaults (reduction factor 4, min_resource
                      estimated from the first completed trial)
  nop                 NopPruner(): every trial runs to max_step (the reference)
With the default random sampler every study of a seed draws the same parameters whatever its
pruner prunes, so the pruners decide on the same trials and regret >= 0. With --sampler tpe the
sampler learns from the pruned trials' reports, each pruner sees other trials after the first
ten, and regret can be negative (a pruned study found a better trial than no pruning did).

Per pruner and study (forecast.* is not used for the bookkeeping; the functions below are unit
tested in tests/test_optuna_benchmark_helpers.py):
  compute used  sum over trials of the compute (GPU hours) of their last reported step, over the
                same sum in the study without pruning of that seed
  best true     the true final (curve at max_step, no noise) of the study's best_trial, which
                Optuna picks by its measured final
  regret        the best true final among all trials the no-pruning study ran minus best true;
                no pruning's own regret is what picking by noisy measured finals costs
  pruned        the number of pruned trials
Printed: every study, then means over studies per pruner with wall time, then ratios of ours to
each baseline (compute used, regret: < 1 is ours better), and ours minus each baseline study by
study with its standard error (the same seeds, so each study's luck cancels). ForecastPruner's advice
at each check is kept out of the table: a study's line counts its stops on fits that did not converge,
and --verbose shows every check's advice on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import sys
import time
import warnings
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import optuna  # noqa: E402

from benchmarks.provenance import print_provenance  # noqa: E402
from forecast.cli import BadInput, _check_output_file  # noqa: E402
from forecast.curves import sigmoid_curve  # noqa: E402
from forecast.formatting import did_you_mean  # noqa: E402
from forecast.io import atomic_write_text  # noqa: E402
from forecast.optuna_pruner import ForecastPruner  # noqa: E402
from forecast.synthetic import load_table1  # noqa: E402

R0 = 0.30
LR_RANGE = (0.25, 4.0)
PRUNERS = ("forecast", "median", "median_warmup", "successive_halving", "nop")
OURS, REFERENCE = "forecast", "nop"


# ----------------------------------------------------------------------------- the objective


@dataclass(frozen=True)
class Setup:
    """The synthetic runs: when they report and what a step costs."""

    max_step: int = 8000
    n_steps: int = 10
    gpu_hours_per_step: float = 4.0
    n_eval: int = 800

    def steps(self) -> list[int]:
        """n_steps report steps, geometric (factor sqrt 2) up to and including max_step."""
        exponents = np.arange(self.n_steps - 1, -1, -1) / 2.0
        return sorted({int(round(self.max_step / 2.0**e)) for e in exponents})

    def step_to_compute(self, step: float) -> float:
        return float(step) * self.gpu_hours_per_step


def true_curve(recipe: dict, lr_factor: float, compute) -> np.ndarray:
    """The true pass rate of a recipe (a Table 1 row: A, B, C_mid) trained at lr_factor."""
    log_lr = math.log2(lr_factor)
    headroom = max(1.0 - 0.1 * log_lr**2, 0.0)
    a = R0 + (recipe["A"] - R0) * headroom
    c_mid = recipe["C_mid"] / lr_factor**0.75
    return sigmoid_curve(compute, a, recipe["B"], c_mid, R0)


def measured_curve(recipe_name: str, recipe: dict, lr_factor: float, setup: Setup, seed: int) -> np.ndarray:
    """Measured pass rates at setup.steps(): binomial(n_eval) around the truth, fixed by the
    parameters and the seed (every step drawn at once, so a pruned trial saw the same values)."""
    compute = [setup.step_to_compute(s) for s in setup.steps()]
    truth = true_curve(recipe, lr_factor, compute)
    rng = np.random.default_rng([seed, zlib.crc32(recipe_name.encode()), int(round(lr_factor * 1e9))])
    return rng.binomial(setup.n_eval, truth) / setup.n_eval


def make_objective(recipes: dict, setup: Setup, seed: int):
    names = sorted(recipes)
    steps = setup.steps()

    def objective(trial):
        name = trial.suggest_categorical("recipe", names)
        lr_factor = trial.suggest_float("lr_factor", *LR_RANGE, log=True)
        trial.set_user_attr("true_final", float(true_curve(recipes[name], lr_factor, setup.step_to_compute(setup.max_step))))
        value = None
        for step, value in zip(steps, measured_curve(name, recipes[name], lr_factor, setup, seed), strict=True):
            trial.report(float(value), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return float(value)

    return objective


PRUNER_LOGGER = "forecast.optuna_pruner"  # forecast.optuna_pruner's logger, where it says its advice


def make_pruner(name: str, setup: Setup, *, n_eval: bool = True):
    if name == "forecast":
        return ForecastPruner(setup.max_step, step_to_compute=setup.step_to_compute, n_eval=setup.n_eval if n_eval else None)
    if name == "median":
        return optuna.pruners.MedianPruner()
    if name == "median_warmup":
        return optuna.pruners.MedianPruner(n_warmup_steps=median_warmup_step(setup))
    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "nop":
        return optuna.pruners.NopPruner()
    raise ValueError(f"unknown pruner {name!r}")


def median_warmup_step(setup: Setup) -> int:
    """The step of ForecastPruner's first possible check: its n_warmup_steps counts reports, and it
    can prune at the n_warmup_steps-th; MedianPruner can prune at steps >= its n_warmup_steps."""
    reports = ForecastPruner(setup.max_step).n_warmup_steps
    return setup.steps()[min(reports, setup.n_steps) - 1]


def make_sampler(name: str, seed: int):
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}")


# ----------------------------------------------------------------------------- bookkeeping


@dataclass(frozen=True)
class TrialOutcome:
    """What the benchmark keeps of a trial: its state, its last reported step and its true final."""

    number: int
    state: str  # "COMPLETE", "PRUNED", ...
    last_step: float | None  # None: it reported nothing
    true_final: float


def outcomes_from_study(study) -> list[TrialOutcome]:
    return [
        TrialOutcome(t.number, t.state.name, max(t.intermediate_values) if t.intermediate_values else None,
                     float(t.user_attrs.get("true_final", math.nan)))
        for t in study.trials
    ]


def compute_spent(outcomes: list[TrialOutcome], step_to_compute) -> float:
    """Sum over trials of the compute of their last reported step (a trial that reported nothing: 0)."""
    return float(sum(step_to_compute(o.last_step) for o in outcomes if o.last_step is not None))


def compute_used(outcomes: list[TrialOutcome], reference: list[TrialOutcome], step_to_compute) -> float:
    """compute_spent of a study over that of the reference study (no pruning)."""
    total = compute_spent(reference, step_to_compute)
    if total <= 0:
        raise ValueError("the reference study spent no compute")
    return compute_spent(outcomes, step_to_compute) / total


def regret(chosen_true_final: float, reference: list[TrialOutcome]) -> float:
    """The best true final among the reference study's trials minus the chosen trial's true final."""
    finals = [o.true_final for o in reference if np.isfinite(o.true_final)]
    if not finals:
        raise ValueError("the reference study has no trial with a true final")
    return float(max(finals) - chosen_true_final)


def study_row(pruner: str, seed: int, outcomes: list[TrialOutcome], best_number: int | None,
              reference: list[TrialOutcome], step_to_compute, wall_s: float) -> dict:
    """One study's figures. best_number: the study's best_trial (None if no trial completed:
    best true and regret are then NaN)."""
    by_number = {o.number: o for o in outcomes}
    best_true = by_number[best_number].true_final if best_number is not None else math.nan
    return {
        "pruner": pruner,
        "seed": seed,
        "compute_used": compute_used(outcomes, reference, step_to_compute),
        "best_true": best_true,
        "regret": regret(best_true, reference) if best_number is not None else math.nan,
        "pruned": sum(o.state == "PRUNED" for o in outcomes),
        "trials": len(outcomes),
        "wall_s": wall_s,
    }


MEAN_KEYS = ("compute_used", "best_true", "regret", "pruned")


def means_by_pruner(rows: list[dict]) -> dict[str, dict]:
    """Means over studies of each pruner's figures (in the order pruners first appear); wall_s is
    summed and studies counted."""
    out: dict[str, dict] = {}
    for pruner in dict.fromkeys(r["pruner"] for r in rows):
        mine = [r for r in rows if r["pruner"] == pruner]
        out[pruner] = {k: float(np.mean([r[k] for r in mine])) for k in MEAN_KEYS}
        out[pruner]["wall_s"] = float(sum(r["wall_s"] for r in mine))
        out[pruner]["studies"] = len(mine)
    return out


def ratio(ours: float, baseline: float) -> float:
    """ours / baseline; 1 when both are 0 (a tie), inf when only the baseline is 0."""
    if baseline == 0:
        return 1.0 if ours == 0 else math.inf
    return ours / baseline


def ratio_lines(means: dict[str, dict], ours: str = OURS) -> list[str]:
    """Ours against each other pruner: compute used and regret as ratios (< 1: ours better) and
    the regret difference."""
    if ours not in means:
        return []
    mine = means[ours]
    lines = []
    for name, other in means.items():
        if name == ours:
            continue
        lines.append(f"  {ours} / {name:<19} compute used {ratio(mine['compute_used'], other['compute_used']):5.2f}x   "
                     f"regret {ratio(mine['regret'], other['regret']):5.2f}x   "
                     f"(regret {mine['regret']:.4f} vs {other['regret']:.4f}, difference {mine['regret'] - other['regret']:+.4f})")
    return lines


def paired_difference(rows: list[dict], key: str, ours: str, baseline: str) -> tuple[float, float, int]:
    """Mean and standard error over study seeds of ours minus the baseline in `key` (both ran the
    same seeds, so each seed's own luck cancels), and how many seeds both ran."""
    by_seed = {(r["pruner"], r["seed"]): r[key] for r in rows}
    seeds = sorted({r["seed"] for r in rows if (ours, r["seed"]) in by_seed and (baseline, r["seed"]) in by_seed})
    diffs = np.array([by_seed[(ours, seed)] - by_seed[(baseline, seed)] for seed in seeds], dtype=float)
    if len(diffs) == 0:
        return math.nan, math.nan, 0
    se = float(diffs.std(ddof=1) / math.sqrt(len(diffs))) if len(diffs) > 1 else math.nan
    return float(diffs.mean()), se, len(diffs)


def paired_lines(rows: list[dict], ours: str = OURS) -> list[str]:
    """Ours minus each baseline, seed by seed: compute used (points) and regret, mean +- standard error."""
    pruners = list(dict.fromkeys(r["pruner"] for r in rows))
    if ours not in pruners:
        return []
    lines = []
    for name in pruners:
        if name == ours:
            continue
        dc, se_c, n = paired_difference(rows, "compute_used", ours, name)
        dr, se_r, _ = paired_difference(rows, "regret", ours, name)
        lines.append(f"  {ours} - {name:<19} compute used {100 * dc:+6.1f} +- {100 * se_c:4.1f} points   "
                     f"regret {dr:+.4f} +- {se_r:.4f}   ({n} studies)")
    return lines


def table_lines(means: dict[str, dict]) -> list[str]:
    lines = [f"  {'pruner':<19} {'compute used':>12} {'best true':>9} {'regret':>7} {'pruned':>6} {'wall s':>7}"]
    for name, m in means.items():
        lines.append(f"  {name:<19} {m['compute_used']:12.1%} {m['best_true']:9.4f} {m['regret']:7.4f} "
                     f"{m['pruned']:6.1f} {m['wall_s']:7.1f}")
    return lines


# ----------------------------------------------------------------------------- running


def unconverged_stops(pruner) -> int | None:
    """How many of ForecastPruner's stops rest on a fit that did not converge (None for another
    pruner): each is said on its logger at warning level; the table says how many."""
    advice = getattr(pruner, "advice", None)
    if advice is None:
        return None
    return sum(rec.stop and not rec.details.get("converged", True) for rec in advice.values())


class PrunerAdviceLog(logging.Handler):
    """ForecastPruner's advice at each check, said on its logger: a stop on a fit that did not converge
    at warning level, which Python prints to stderr where nothing is set up, one long line per trial
    in among the table. Printed here with --verbose alone (then every check's advice, continue too)."""

    def __init__(self, verbose: bool):
        super().__init__(logging.INFO if verbose else logging.CRITICAL + 1)
        self.verbose = verbose

    def emit(self, record):
        if self.verbose:
            print(f"    {self.format(record)}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def pruner_advice_log(verbose: bool):
    """ForecastPruner's logger, its lines kept out of the table unless `verbose`; as it was after.
    The library is untouched: a user's script that sets up no logging still sees its warnings."""
    logger = logging.getLogger(PRUNER_LOGGER)
    handler, level, propagate = PrunerAdviceLog(verbose), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.propagate = False  # nor to a handler above it (Python's last resort prints when there is none)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def run_study(pruner_name: str, seed: int, *, recipes: dict, setup: Setup, sampler: str, n_trials: int, n_eval: bool):
    pruner = make_pruner(pruner_name, setup, n_eval=n_eval)
    study = optuna.create_study(direction="maximize", pruner=pruner, sampler=make_sampler(sampler, seed))
    start = time.perf_counter()
    study.optimize(make_objective(recipes, setup, seed), n_trials=n_trials)
    wall = time.perf_counter() - start
    try:
        best = study.best_trial.number
    except ValueError:  # no completed trial
        best = None
    return outcomes_from_study(study), best, wall, getattr(pruner, "n_fits", None), unconverged_stops(pruner)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=8, help="study seeds (seed, seed+1, ...)")
    parser.add_argument("--trials", type=int, default=16, help="trials per study")
    parser.add_argument("--seed", type=int, default=0, help="first study seed (sampler and noise)")
    parser.add_argument("--sampler", choices=("random", "tpe"), default="random")
    parser.add_argument("--pruners", default=",".join(PRUNERS), help=f"comma-separated, from {','.join(PRUNERS)}")
    parser.add_argument("--no-n-eval", action="store_true", help="do not tell ForecastPruner n_eval")
    parser.add_argument("--json", help="write every study's figures and the means here")
    parser.add_argument("--verbose", action="store_true",
                        help="show ForecastPruner's advice at each check (its stops on fits that did not converge "
                             "are counted in the table either way)")
    args = parser.parse_args(argv)
    pruners = [p for p in args.pruners.split(",") if p]
    unknown = [p for p in pruners if p not in PRUNERS]
    if unknown:  # worded as the forecast CLI words an unknown name, with its guess at the name meant
        guessed = [repr(p) + (f" ({hint})" if (hint := did_you_mean(p, PRUNERS)) else "") for p in unknown]
        parser.error(f"--pruners: unknown {', '.join(guessed)}; known: {', '.join(PRUNERS)}")
    if args.studies < 1 or args.trials < 1:
        parser.error("--studies and --trials must be >= 1")
    try:  # a --json that cannot be written is refused before the studies, not after them
        _check_output_file(args.json, "--json", "optuna_pruner.json")
    except BadInput as error:
        parser.error(str(error))
    print_provenance("benchmarks/optuna_pruner.py", vars(args))
    pruners = [REFERENCE] + [p for p in pruners if p != REFERENCE]  # the reference runs first in every seed

    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    setup = Setup()
    table = load_table1()
    recipes = {row["run"]: {"A": row["A"], "B": row["B"], "C_mid": row["C_mid"]} for _, row in table.iterrows()}
    print(f"objective: {len(recipes)} Table 1 recipes x lr_factor in {LR_RANGE}; reports at steps {setup.steps()} "
          f"(1 step = {setup.gpu_hours_per_step:g} GPU hours), n_eval {setup.n_eval}; {args.studies} studies x "
          f"{args.trials} trials, {args.sampler} sampler; median_warmup: n_warmup_steps={median_warmup_step(setup)}")

    rows, n_fits = [], {}
    for seed in range(args.seed, args.seed + args.studies):
        print(f"\n== study seed {seed}")
        reference = None
        for name in pruners:
            with pruner_advice_log(args.verbose):
                outcomes, best, wall, fits, unconverged = run_study(
                    name, seed, recipes=recipes, setup=setup, sampler=args.sampler, n_trials=args.trials,
                    n_eval=not args.no_n_eval)
            if name == REFERENCE:
                reference = outcomes
            row = study_row(name, seed, outcomes, best, reference, setup.step_to_compute, wall)
            rows.append(row)
            if fits is not None:
                n_fits[name] = n_fits.get(name, 0) + fits
            fits_note = f"  fits {fits}" if fits is not None else ""
            if unconverged:  # said, not hidden: the table's figures rest on them
                fits_note += (f", {unconverged} stop{' on a fit' if unconverged == 1 else 's on fits'} that did not converge"
                              + ("" if args.verbose else " (--verbose: each)"))
            print(f"  {name:<19} compute used {row['compute_used']:6.1%}  best trial #{best} true {row['best_true']:.4f}  "
                  f"regret {row['regret']:.4f}  pruned {row['pruned']:2d}/{row['trials']}  {wall:6.1f} s{fits_note}", flush=True)

    means = means_by_pruner(rows)
    print(f"\n== means over {args.studies} studies x {args.trials} trials (wall s: summed)")
    print("\n".join(table_lines(means)))
    if OURS in means:
        print(f"\nratios, ours ({OURS}) / baseline (< 1: ours better):")
        print("\n".join(ratio_lines(means)))
        print("\nours - baseline, study by study (mean +- standard error; < 0: ours better):")
        print("\n".join(paired_lines(rows)))
        if n_fits.get(OURS):
            print(f"  ours: {n_fits[OURS]} fits, {means[OURS]['wall_s'] / n_fits[OURS]:.2f} s of wall time per fit")
    print("\ncompute used = GPU hours of every trial's last reported step / the same with no pruning; best true = true "
          "final (no noise) of the study's best_trial; regret = best true final among no pruning's trials - best true")
    if args.json:
        atomic_write_text(args.json, json.dumps({"setup": asdict(setup), "rows": rows, "means": means}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
