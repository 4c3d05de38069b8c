"""Sampling: nutpie's NUTS on a compiled model reused across refits, PyMC's NUTS as fallback.

Compiling the model (numba) costs seconds; sampling a sweep costs about one. So compiled models
are cached per process by their structure (numbers of recipes, runs and padded observations),
and a refit with new data of the same structure only swaps the data in.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import asdict, dataclass

import arviz as az
import numpy as np
import pymc as pm

__all__ = ["SamplerSettings", "sample_model", "convergence_report", "ConvergenceReport"]

_COMPILED_CACHE: dict = {}


@dataclass
class SamplerSettings:
    """How to sample. `mode="fast"` keeps NUTS but with short chains, for frequent refits."""

    draws: int = 1000  # kept draws per chain
    tune: int = 1000  # warm-up draws per chain
    chains: int = 2
    cores: int = 2
    target_accept: float = 0.9  # higher than the usual 0.8: fewer divergences on curved posteriors
    sampler: str = "auto"  # "auto" (nutpie if installed), "nutpie" or "pymc"
    low_rank_mass_matrix: bool = True  # nutpie: learns the A-C_mid correlation of unfinished curves
    progress: bool | None = None  # None: a progress bar only when stderr is a terminal

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def fast(cls, **overrides) -> SamplerSettings:
        base = dict(draws=300, tune=300, chains=2)
        base.update(overrides)
        return cls(**base)


def _nutpie_available() -> bool:
    try:
        import nutpie  # noqa: F401
    except ImportError:
        return False
    return True


def _compiled(model, key):
    import nutpie

    if key is not None and key in _COMPILED_CACHE:
        compiled = _COMPILED_CACHE[key]
        data = {name: var.get_value() for name, var in _shared_data(model).items()}
        return compiled.with_data(**data), True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = nutpie.compile_pymc_model(model)
    if key is not None:
        _COMPILED_CACHE[key] = compiled
    return compiled, False


def _shared_data(model) -> dict:
    return {name: var for name, var in model.named_vars.items() if hasattr(var, "get_value")}


def sample_model(model, settings: SamplerSettings, *, random_seed=None, cache_key=None):
    """Sample `model`; returns (InferenceData, info dict with sampler name and timings)."""
    progress = settings.progress if settings.progress is not None else sys.stderr.isatty()
    use_nutpie = settings.sampler == "nutpie" or (settings.sampler == "auto" and _nutpie_available())
    info = {"sampler": "nutpie" if use_nutpie else "pymc"}
    start = time.perf_counter()
    if use_nutpie:
        import nutpie

        compiled, reused = _compiled(model, cache_key)
        info["compile_seconds"] = time.perf_counter() - start
        info["compiled_model_reused"] = reused
        start = time.perf_counter()
        seed = int(np.random.SeedSequence(random_seed).generate_state(1)[0]) if random_seed is not None else None
        idata = nutpie.sample(
            compiled,
            draws=settings.draws,
            tune=settings.tune,
            chains=settings.chains,
            cores=settings.cores,
            seed=seed,
            progress_bar=progress,
            save_warmup=False,
            target_accept=settings.target_accept,
            low_rank_modified_mass_matrix=settings.low_rank_mass_matrix,
        )
    else:
        with model:
            idata = pm.sample(
                draws=settings.draws,
                tune=settings.tune,
                chains=settings.chains,
                cores=settings.cores,
                target_accept=settings.target_accept,
                random_seed=random_seed,
                progressbar=progress,
                compute_convergence_checks=False,
            )
        info["compile_seconds"] = 0.0
        info["compiled_model_reused"] = False
    info["sample_seconds"] = time.perf_counter() - start
    return idata, info


@dataclass
class ConvergenceReport:
    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    n_draws: int
    rhat_limit: float = 1.01
    ess_limit: float = 400.0
    # set when the posterior was reweighted from an earlier fit (forecast.reweight): the Pareto k
    # of the smoothed importance weights and the share of draws that kept their information
    pareto_k: float | None = None
    reweight_efficiency: float | None = None
    pareto_k_limit: float = 0.7

    @property
    def converged(self) -> bool:
        reweight_ok = self.pareto_k is None or self.pareto_k <= self.pareto_k_limit
        return self.max_rhat <= self.rhat_limit and self.divergences == 0 and self.min_ess_bulk >= self.ess_limit and reweight_ok

    def problems(self) -> list[str]:
        out = []
        if self.max_rhat > self.rhat_limit:
            out.append(f"R-hat up to {self.max_rhat:.3f} (> {self.rhat_limit}): chains disagree")
        if self.divergences:
            out.append(f"{self.divergences} divergent transitions: the posterior geometry was not explored reliably")
        if self.min_ess_bulk < self.ess_limit:
            out.append(f"bulk ESS as low as {self.min_ess_bulk:.0f} (< {self.ess_limit:.0f}): intervals are noisy")
        if self.pareto_k is not None and self.pareto_k > self.pareto_k_limit:
            out.append(f"Pareto k {self.pareto_k:.2f} (> {self.pareto_k_limit}): the new data moved the posterior too far to reweight")
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["converged"] = self.converged
        d["problems"] = self.problems()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ConvergenceReport:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def __str__(self) -> str:
        status = "converged" if self.converged else "NOT CONVERGED"
        head = (
            f"{status}: max R-hat {self.max_rhat:.3f}, min bulk ESS {self.min_ess_bulk:.0f}, "
            f"min tail ESS {self.min_ess_tail:.0f}, divergences {self.divergences} ({self.n_draws} draws)"
        )
        if self.pareto_k is not None:
            head += f"; reweighted: Pareto k {self.pareto_k:.2f}, efficiency {self.reweight_efficiency:.0%}"
        return "\n  ".join([head, *self.problems()])


SUMMARY_VARS = ("A", "B", "log_C_mid", "A_run", "R0_run", "a_run_sd", "sigma_extra", "wander_sd")


def convergence_report(idata, var_names=SUMMARY_VARS, *, ess_limit: float | None = None) -> ConvergenceReport:
    names = [v for v in var_names if v in idata.posterior]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = az.rhat(idata, var_names=names)
        ess_bulk = az.ess(idata, var_names=names, method="bulk")
        ess_tail = az.ess(idata, var_names=names, method="tail")

    def _extreme(ds, fn):
        values = np.concatenate([np.ravel(ds[v].values) for v in ds.data_vars])
        values = values[np.isfinite(values)]
        return float(fn(values)) if len(values) else float("nan")

    n_draws = int(idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"])
    divergences = int(idata.sample_stats["diverging"].sum()) if "diverging" in idata.sample_stats else 0
    return ConvergenceReport(
        max_rhat=_extreme(rhat, np.max),
        min_ess_bulk=_extreme(ess_bulk, np.min),
        min_ess_tail=_extreme(ess_tail, np.min),
        divergences=divergences,
        n_draws=n_draws,
        # 100 effective draws per chain (Vehtari et al. 2021), capped for very short fast-mode chains
        ess_limit=ess_limit if ess_limit is not None else min(100.0 * idata.posterior.sizes["chain"], 0.25 * n_draws),
    )
