"""Synthetic sweeps shaped like ScaleRL's Table 1, for tests, benchmarks and the example data.

Every table made here is labelled synthetic (`source` column) so it is never mistaken for real
runs. Noise has three parts, as in real sweeps: binomial evaluation noise from a finite
validation set, seed-to-seed differences in the asymptote, and slow autocorrelated wander
(real curves are not smooth sigmoids). Optional "messy" behaviour adds the things real curves
do that a sigmoid cannot: an early plateau or a late decline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .curves import sigmoid_curve

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
    """
    rng = np.random.default_rng(rng)
    if recipes is None:
        recipes = load_table1().rename(columns={"run": "recipe"})
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
