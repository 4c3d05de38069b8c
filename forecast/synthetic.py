"""Synthetic sweeps shaped like ScaleRL's Table 1, for tests, benchmarks and the example data.

Every table made here is labelled synthetic (`source` column) so it is never mistaken for real
runs. Noise has three parts, as in real sweeps: binomial evaluation noise from a finite
validation set, seed-to-seed differences in the asymptote, and slow autocorrelated wander
(real curves are not smooth sigmoids). Optional "messy" behaviour adds the things real curves
do that a sigmoid cannot: an early plateau or a late decline.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

import numpy as np
import pandas as pd

from .curves import sigmoid_curve
from .inference import is_whole_number

TABLE1_PATHS = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "scalerl_table1.csv",
    Path(__file__).resolve().parent / "data" / "scalerl_table1.csv",
)


def load_table1() -> pd.DataFrame:
    """The paper's fitted (A, B, C_mid) per run: the shared copy if present, else the packaged one."""
    for path in TABLE1_PATHS:
        if path.exists():
            return pd.read_csv(path)
    raise FileNotFoundError("scalerl_table1.csv not found in shared/data or forecast/data")


def simulate_sweep(
    recipes: pd.DataFrame | None = None,
    *,
    n_seeds: int = 3,
    n_points: int = 40,
    r0: float = 0.30,
    compute_span: tuple[float, float] = (0.15, 16.0),
    seed_sd_A: float = 0.008,
    n_eval: int = 16_000,
    wander_sd: float = 0.006,
    wander_corr: float = 0.8,
    messy_fraction: float = 0.0,
    rng: int | np.random.Generator = 0,
    compute_unit: str = "gpu_hours",
) -> pd.DataFrame:
    """Simulate a sweep: one row per evaluation, in the run format.

    recipes: rows with columns recipe (or run), A, B, C_mid; defaults to Table 1.
    compute_span: (first, last) evaluation as multiples of the smallest C_mid, the last stretched
        4x further (0.1, 2.5 with C_mid 1000: 100 to 10,000), so every recipe shares one compute
        grid as a real sweep does.
    messy_fraction: share of runs that flatten early or decline late (half each).
    Truth is kept in columns true_A, true_B, true_C_mid, true_R0, true_metric.
    An argument out of range, or a recipes table without a name and A, B, C_mid per row, is a
    ValueError naming it (and the row), before anything is drawn.
    """
    if recipes is None:
        recipes = load_table1().rename(columns={"run": "recipe"})
    check_recipes(recipes)
    check_arguments(n_seeds=n_seeds, n_points=n_points, r0=r0, compute_span=compute_span, seed_sd_A=seed_sd_A,
                    n_eval=n_eval, wander_sd=wander_sd, wander_corr=wander_corr, messy_fraction=messy_fraction)
    rng = np.random.default_rng(rng)
    recipes = recipes.rename(columns={"run": "recipe"})
    c_ref = float(recipes["C_mid"].min())
    compute = np.geomspace(compute_span[0] * c_ref, compute_span[1] * c_ref * 4, n_points)
    rows = []
    for _, rec in recipes.iterrows():
        for s in range(n_seeds):
            A = float(np.clip(rec["A"] + rng.normal(0, seed_sd_A), 0.02, 0.99))
            R0 = float(np.clip(r0 + rng.normal(0, 0.01), 0.0, A - 0.01))
            truth = sigmoid_curve(compute, A, rec["B"], rec["C_mid"], R0)
            kind = "clean"
            if rng.random() < messy_fraction:
                kind = "plateau" if rng.random() < 0.5 else "decline"
                if kind == "plateau":
                    # learning stalls: the curve bends over to a lower ceiling after the midpoint
                    ceiling = R0 + (A - R0) * rng.uniform(0.6, 0.85)
                    truth = np.minimum(truth, ceiling + 0.3 * (truth - ceiling).clip(0))
                else:
                    # late decline: from some point on, the pass rate erodes with log-compute
                    start = rng.uniform(0.55, 0.85) * np.log(compute[-1] / compute[0])
                    excess = np.clip(np.log(compute / compute[0]) - start, 0, None)
                    truth = truth - rng.uniform(0.02, 0.06) * excess
            wander = np.zeros(n_points)
            for i in range(1, n_points):
                wander[i] = wander_corr * wander[i - 1] + rng.normal(0, wander_sd * np.sqrt(1 - wander_corr**2))
            p = np.clip(truth + wander, 0.001, 0.999)
            metric = rng.binomial(n_eval, p) / n_eval
            for i in range(n_points):
                rows.append(
                    {
                        "run_id": f"{rec['recipe']}-s{s}",
                        "recipe": rec["recipe"],
                        "seed": s,
                        "compute": compute[i],
                        "compute_unit": compute_unit,
                        "metric": metric[i],
                        "n_eval": n_eval,
                        "step": (i + 1) * 100,
                        "true_A": A,
                        "true_B": float(rec["B"]),
                        "true_C_mid": float(rec["C_mid"]),
                        "true_R0": R0,
                        "true_metric": truth[i],
                        "shape": kind,
                        "source": "synthetic (ScaleRL Table 1 shapes)",
                    }
                )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- checking the arguments
# Without these, a bad argument failed deep inside numpy ("scale < 0", "p < 0, p > 1 or p is NaN",
# KeyError: 'C_mid') or quietly made another sweep than the one asked for (a compute grid run
# backwards, messy_fraction 1.5 taken as 1, no runs at all for n_seeds=0).

CURVE_COLUMNS = ("A", "B", "C_mid")


def refused(message: str) -> ValueError:
    return ValueError(f"simulate_sweep: {message}")


def is_finite_number(value) -> bool:
    """A real number that is not a bool, NaN or infinite (numpy's scalars included)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value)


def shown(value) -> str:
    return f"{value:g}" if is_finite_number(value) else repr(value)


def check_recipes(recipes) -> None:
    """A table naming each recipe (a recipe or, as Table 1 has it, a run column) with a finite A, B and
    C_mid > 0 on every row (C_mid sets the compute grid and is taken in logs)."""
    if not isinstance(recipes, pd.DataFrame):
        raise refused(f"recipes must be a DataFrame with columns recipe (or run), A, B, C_mid, got {type(recipes).__name__}")
    missing = [column for column in CURVE_COLUMNS if column not in recipes.columns]
    if missing:
        raise refused(f"recipes has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)} (it needs A, B, "
                      f"C_mid per recipe; its columns: {', '.join(map(str, recipes.columns))})")
    names = [column for column in ("recipe", "run") if column in recipes.columns]
    if not names:
        raise refused("recipes has no column recipe (or run) to name the recipes")
    if len(names) > 1:
        raise refused("recipes has both a recipe and a run column: which names the recipes is not known")
    if recipes.empty:
        raise refused("recipes has no rows")
    for row, recipe in recipes.iterrows():
        for column in CURVE_COLUMNS:
            value = recipe[column]
            where = f"recipes row {row} ({names[0]} {recipe[names[0]]})"
            if not is_finite_number(value):
                raise refused(f"{where}: {column} must be a finite number, got {shown(value)}")
            if column == "C_mid" and value <= 0:
                raise refused(f"{where}: C_mid must be > 0, got {shown(value)}")


def check_arguments(*, n_seeds, n_points, r0, compute_span, seed_sd_A, n_eval, wander_sd, wander_corr,
                    messy_fraction) -> None:
    """Each of simulate_sweep's numbers in its range; ValueError naming the first that is not."""
    for name, count in (("n_seeds", n_seeds), ("n_points", n_points), ("n_eval", n_eval)):
        if not is_whole_number(count) or count < 1:
            raise refused(f"{name} must be a whole number >= 1, got {count!r}")
    if not is_finite_number(r0):
        raise refused(f"r0 must be a finite number, got {r0!r}")
    span_ok = (isinstance(compute_span, (tuple, list)) and len(compute_span) == 2
               and all(map(is_finite_number, compute_span)) and 0 < compute_span[0] < compute_span[1])
    if not span_ok:
        raise refused(f"compute_span must be (first, last) with 0 < first < last, got {compute_span!r}")
    for name, spread in (("seed_sd_A", seed_sd_A), ("wander_sd", wander_sd)):
        if not is_finite_number(spread) or spread < 0:
            raise refused(f"{name} must be a finite number >= 0, got {spread!r}")
    if not is_finite_number(wander_corr) or not -1 <= wander_corr <= 1:
        raise refused(f"wander_corr must lie in [-1, 1], got {wander_corr!r}")
    if not is_finite_number(messy_fraction) or not 0 <= messy_fraction <= 1:
        raise refused(f"messy_fraction must lie in [0, 1], got {messy_fraction!r}")
