"""Sampling: nutpie's NUTS on a compiled model reused across refits, PyMC's NUTS as fallback.

Compiling the model (numba) costs seconds; sampling a sweep costs about one. So compiled models
are cached per process by their structure (numbers of recipes, runs and padded observations),
and a refit with new data of the same structure only swaps the data in. The cache keeps the
MAX_COMPILED_MODELS used last: each compiled model holds about 100 MB, and a long-lived process
whose table grows (`forecast watch` over a sweep, a trainer asking the advisor) makes a new
structure whenever a run joins or the rows pass a padding size, and never goes back to an old one.
"""

from __future__ import annotations

import atexit
import contextlib
import decimal
import math
import numbers
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .formatting import pretty_as_str, shown_against_limit, shown_so_it_reads_true
from .thread_warnings import this_threads_warnings_dropped

__all__ = ["SamplerSettings", "sample_model", "convergence_report", "ConvergenceReport"]

_COMPILED_CACHE: dict = {}  # structure key -> (compiled, model), least recently used first
# Compiled models kept per process. A `forecast watch` of 8 runs joining one after another held all
# 9 it made (RSS 370 MB -> 1.3 GB, about 100 MB each). Each new compile still keeps some memory for
# good (numba's code), but with old models dropped it was 30-60 MB instead of about 100 MB. A
# backtest or benchmark uses one or a few structures per sweep, one sweep after another.
MAX_COMPILED_MODELS = 8
_GENERATED_SOURCE_DIR: str | None = None
# the compiles inside _generated_source_in_own_folder now, and the tempfile.tempdir the first one found
_tempdir_swap: dict = {"compiles": 0}
_TEMPDIR_LOCK = threading.Lock()
_COMPILE_LOCK = threading.Lock()  # PyTensor's fast-math flag is set for one compile at a time


# the fewest kept draws per chain that split-chain R-hat and ESS (convergence_report) can be taken on
MIN_DRAWS = 10


def check_bool(name: str, value, *, none_ok: bool = False) -> bool | None:
    """A switch as a bool; ValueError naming it for anything else. "False" and "no" are true in an
    if, so a string (or 0/1, a list) silently turned a switch on: refused as robust= is refused."""
    if value is None and none_ok:
        return None
    if not isinstance(value, (bool, np.bool_)):
        allowed = "True, False or None" if none_ok else "True or False"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return bool(value)


def is_whole_number(value) -> bool:
    """A count given in Python: an integer, or a float with an integer value (4.0, as a config file or a
    division gives it); not a bool (True is 1 to Python, never meant as a count), a fraction, inf or text."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) or (math.isfinite(value) and float(value).is_integer())


def as_real(value):
    """A Decimal (a number from a database's numeric column) or a 0-d numeric array (a reduction in
    numpy) as the float it holds; anything else as given. Neither is a numbers.Real, so a budget of
    Decimal('8E+11') was refused as "budget must be finite and > 0", which it is."""
    if isinstance(value, decimal.Decimal) and not value.is_snan():  # float() raises on a signalling NaN
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return float(value)
    return value


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
    # nuts mode: a fit still flagged (R-hat, ESS, divergences) after its retries gets further tries
    # (centred starts, every level non-centred, twice the draws and warm-up: ScalingForecaster's
    # docstring says when each runs); False: none of them, the flags reported as they are
    extend_if_flagged: bool = True

    def __post_init__(self):
        # refused here, not as a reshape error or an integer overflow inside the sampler; draws
        # below MIN_DRAWS sampled, then failed in the diagnostics ("attempt to get argmax of an
        # empty sequence"): R-hat and ESS split each chain in half and need pairs of lags in each
        for name, least in (("draws", MIN_DRAWS), ("tune", 0), ("chains", 1), ("cores", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
                raise ValueError(f"SamplerSettings.{name} must be an integer >= {least}, got {value!r}")
        if isinstance(self.target_accept, bool) or not isinstance(self.target_accept, numbers.Real) \
                or not 0 < self.target_accept < 1:
            raise ValueError(f"SamplerSettings.target_accept must lie strictly between 0 and 1, got {self.target_accept!r}")
        for name in ("low_rank_mass_matrix", "extend_if_flagged"):
            setattr(self, name, check_bool(f"SamplerSettings.{name}", getattr(self, name)))
        self.progress = check_bool("SamplerSettings.progress", self.progress, none_ok=True)
        if self.sampler not in ("auto", "nutpie", "pymc"):
            raise ValueError(f"SamplerSettings.sampler must be 'auto', 'nutpie' or 'pymc', got {self.sampler!r}")

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


@contextlib.contextmanager
def _generated_source_in_own_folder():
    """Temporary files made inside this block go into one folder of this process's own, removed at exit.

    PyTensor's numba backend writes the source of every function it generates for a model to a
    temporary file that it never deletes: about 35 files per compiled model, so each `forecast fit`
    left them in /tmp for good (a sweep's worth of calls, thousands). They are read again only to
    show source lines in a traceback, so they live as long as the process and no longer. Numba's
    on-disk cache does not need them: PyTensor keys it by a hash of the source, not the file.

    The folder is the process's (tempfile.tempdir), so compiles in two threads at once share one
    swap: the first in saves the user's setting and the last out puts it back. Each saving its own,
    the first out put back the user's while the other compiled, and the last out then left every
    later temporary file of the process in this folder, removed at exit.
    """
    global _GENERATED_SOURCE_DIR
    with _TEMPDIR_LOCK:
        if _GENERATED_SOURCE_DIR is None:
            _GENERATED_SOURCE_DIR = tempfile.mkdtemp(prefix="scaling-forecast-generated-")
            atexit.register(shutil.rmtree, _GENERATED_SOURCE_DIR, ignore_errors=True)
        os.makedirs(_GENERATED_SOURCE_DIR, exist_ok=True)  # a /tmp cleaner may have taken it from a long `watch`
        if not _tempdir_swap["compiles"]:
            _tempdir_swap["saved"] = tempfile.tempdir
            tempfile.tempdir = _GENERATED_SOURCE_DIR
        _tempdir_swap["compiles"] += 1
    try:
        yield
    finally:
        with _TEMPDIR_LOCK:
            _tempdir_swap["compiles"] -= 1
            if not _tempdir_swap["compiles"]:
                tempfile.tempdir = _tempdir_swap.pop("saved")


@contextlib.contextmanager
def _exact_float_arithmetic():
    """PyTensor's numba code compiled without its fast-math flags, so that one seed gives the same draws
    whether the model was compiled afresh or loaded from numba's disk cache.

    PyTensor compiles every Op with fast-math by default (reassociation, contraction into fused
    multiply-adds), and LLVM then rounds a sum one way when it optimises the whole graph at once, on
    a first compile, and another way when each Op's cached machine code is linked back in. The
    gradient differed in its last bit, NUTS's trajectories drew apart from there, and the first fit
    of a model structure on a machine (a fresh checkout's `make demo`, an official CI) gave other
    draws, and other decisions, than every later fit of it with the same seed. Held over the whole
    compile, as the flag is PyTensor's global setting: compiles in two threads take turns."""
    import pytensor

    with _COMPILE_LOCK, pytensor.config.change_flags(numba__fastmath=False):
        yield


def _compiled(build_model, key, data_values):
    """The compiled model for `key` with `data_values` swapped in (no PyMC model is built then),
    or a freshly built and compiled one. Returns (compiled, reused).

    The data go into the PyMC model it was compiled from as well: nutpie starts its chains from
    that model's initial point (the priors' centres, some of them data), and a reused model left
    with the first sweep's data started every later sweep from that sweep's point. With short
    fast-mode chains the start shows in the draws, so a backtest of one sweep gave other
    decisions after another sweep of the same shape had been fitted in the process.
    """
    import nutpie
    import pymc as pm

    if key is not None and key in _COMPILED_CACHE:
        compiled, model = _COMPILED_CACHE.pop(key)
        _COMPILED_CACHE[key] = (compiled, model)  # now the most recently used
        pm.set_data(data_values, model=model)
        return compiled.with_data(**data_values), True
    model = build_model()
    with this_threads_warnings_dropped(), _generated_source_in_own_folder(), _exact_float_arithmetic():
        compiled = nutpie.compile_pymc_model(model)
    if key is not None:
        _COMPILED_CACHE[key] = (compiled, model)
        while len(_COMPILED_CACHE) > max(MAX_COMPILED_MODELS, 1):  # drop the least recently used
            del _COMPILED_CACHE[next(iter(_COMPILED_CACHE))]
    return compiled, False


def sample_model(build_model, settings: SamplerSettings, *, random_seed=None, cache_key=None, data_values=None,
                 coords=None):
    """Sample the model that `build_model()` returns; returns (InferenceData, info dict with
    sampler name and timings).

    With nutpie, a model compiled earlier under the same `cache_key` is reused with
    `data_values` (the values of its pm.Data nodes) and build_model is not even called.
    coords: the coordinates of these data (run and recipe names) for the draws; a reused model
    knows only those of the data it was compiled with.
    """
    progress = settings.progress if settings.progress is not None else sys.stderr.isatty()
    use_nutpie = settings.sampler == "nutpie" or (settings.sampler == "auto" and _nutpie_available())
    info = {"sampler": "nutpie" if use_nutpie else "pymc"}
    start = time.perf_counter()
    if use_nutpie:
        import nutpie

        compiled, reused = _compiled(build_model, cache_key if data_values is not None else None, data_values)
        info["compile_seconds"] = time.perf_counter() - start
        info["compiled_model_reused"] = reused
        start = time.perf_counter()
        seed = int(np.random.SeedSequence(random_seed).generate_state(1)[0]) if random_seed is not None else None
        raw = nutpie.sample(
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
            return_raw_trace=True,
        )
        draw_batches, stat_batches = raw.get_arrow_trace()
        _require_every_draw(len(stat_batches), [_kept_rows(stat).sum() for stat in stat_batches], settings)
        idata = _trace_to_idata(draw_batches, stat_batches, coords={**(compiled.coords or {}), **(coords or {})})
    else:
        import pymc as pm

        with build_model():
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
        _require_every_draw(idata.posterior.sizes["chain"], [idata.posterior.sizes["draw"]], settings)
        info["compile_seconds"] = 0.0
        info["compiled_model_reused"] = False
    info["sample_seconds"] = time.perf_counter() - start
    return idata, info


def _require_every_draw(n_chains: int, kept_per_chain, settings: SamplerSettings) -> None:
    """Raise KeyboardInterrupt where the sampler returned fewer chains or draws than asked for.
    nutpie (and PyMC) catch a Ctrl-C and return the draws so far instead of raising: chains of
    different lengths then failed as 'ValueError: all input arrays must have the same shape' (a
    traceback, where the CLI says 'interrupted', exit 130), and equal ones made a fit, saved or
    advised on, from a fraction of its posterior, without a word."""
    if n_chains != settings.chains or any(int(n) != settings.draws for n in kept_per_chain):
        raise KeyboardInterrupt(f"sampling was interrupted: {n_chains} chain(s) of {[int(n) for n in kept_per_chain]} draws, "
                                f"not {settings.chains} of {settings.draws}")


def _kept_rows(stat_batch) -> np.ndarray:
    """The rows of one chain's nutpie statistics that are draws (not warm-up: the raw trace keeps those)."""
    import pyarrow

    return ~pyarrow.array(stat_batch.column("tuning")).to_numpy(zero_copy_only=False).astype(bool)


# sampler statistics nutpie records that are only needed for debugging the sampler itself
_SKIPPED_STATS = ("chain", "draw", "gradient", "unconstrained_draw", "mass_matrix_inv", "mass_matrix_eigvals", "mass_matrix_stds",
                  "divergence_start", "divergence_end", "divergence_momentum", "divergence_start_gradient")


def _arrow_columns(batches, kept_rows, skip=()) -> dict:
    """{name: (dims, array (chain, draw, ...))} of the kept rows of nutpie's Arrow batches."""
    import pyarrow

    out = {}
    for batch, keep in zip(batches, kept_rows, strict=True):
        for name in batch.column_names:
            if name in skip:
                continue
            column = batch.column(name)
            meta = column.field.metadata or {}
            shape = [int(n) for n in meta.get(b"shape", b"").decode().split(",") if n]
            dims = [d for d in meta.get(b"dims", b"").decode().split(",") if d] or [f"{name}_dim_{i}" for i in range(len(shape))]
            values = pyarrow.array(column)
            if hasattr(values, "flatten"):  # list-typed column of a vector-valued variable
                values = values.flatten()
            values = values.to_numpy(zero_copy_only=False).reshape([batch.num_rows, *shape])[keep]
            out.setdefault(name, (dims, []))[1].append(values)
    return {name: (dims, np.stack(chains)) for name, (dims, chains) in out.items()}


def _trace_to_idata(draw_batches, stat_batches, *, coords):
    """InferenceData (posterior, sample_stats) from nutpie's raw Arrow trace, built directly with
    xarray: ArviZ's generic from_dict costs more than a short fast-mode run's sampling does."""
    import arviz as az
    import xarray as xr

    def dataset(columns):
        variables = {name: (["chain", "draw", *dims], values) for name, (dims, values) in columns.items()}
        used = {d for dims, _ in columns.values() for d in dims}
        n_chain, n_draw = next(iter(columns.values()))[1].shape[:2]
        extra = {name: np.asarray(values) for name, values in coords.items() if name in used}
        return xr.Dataset(variables, coords={"chain": np.arange(n_chain), "draw": np.arange(n_draw), **extra})

    # nutpie keeps the warm-up rows in the raw trace; they are marked by the "tuning" statistic
    kept = [_kept_rows(stat) for stat in stat_batches]
    return az.InferenceData(
        posterior=dataset(_arrow_columns(draw_batches, kept)),
        sample_stats=dataset(_arrow_columns(stat_batches, kept, _SKIPPED_STATS)),
    )


@dataclass
class ConvergenceReport:
    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int | None  # None: unknown, the draws came without the sampler's statistics (no converged fit)
    n_draws: int
    rhat_limit: float = 1.01
    ess_limit: float = 400.0
    # set when the posterior was reweighted from an earlier fit (forecast.reweight): the Pareto k
    # of the smoothed importance weights and the share of draws that kept their information
    pareto_k: float | None = None
    reweight_efficiency: float | None = None
    pareto_k_limit: float = 0.7
    # the variables with a NaN or infinite draw: a sampler that failed there (their R-hat and ESS are NaN)
    nonfinite_draws: list[str] = field(default_factory=list)
    # {"R-hat" / "bulk ESS" / "tail ESS": the variables with finite draws that vary whose value of it came out
    # NaN}: 0 / 0 for another reason than too few draws (and R-hat of every variable where none moved at all).
    # Their convergence is unknown, said so by name rather than as "too few draws". Draws at two values, one each
    # side of the median, are not among them: their folded R-hat is 0 / 0, and R-hat is the bulk one, as ArviZ's
    uncomputed: dict[str, list[str]] = field(default_factory=dict)
    # the variables whose draws never moved within any chain, each chain at a value of its own (their R-hat is
    # 0 / 0, NaN: without them named, the report said "too few draws" of a sampler that did not move)
    stuck_chains: list[str] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        reweight_ok = self.pareto_k is None or self.pareto_k <= self.pareto_k_limit
        ess_ok = self.min_ess_bulk >= self.ess_limit and self.min_ess_tail >= self.ess_limit
        return (self.max_rhat <= self.rhat_limit and self.divergences == 0 and ess_ok and reweight_ok
                and not self.nonfinite_draws and not self.uncomputed and not self.stuck_chains)

    def rhat_shown(self) -> str:
        """max R-hat as every line shows it: '1.0104' against 1.01, not '1.010' (shown_against_limit)."""
        return shown_against_limit(self.max_rhat, self.rhat_limit, 3, bad_above=True)

    def ess_shown(self, ess: float) -> str:
        """An ESS as every line shows it: '149.6' against 150, not '150' (shown_against_limit)."""
        return shown_against_limit(ess, self.ess_limit, 0, bad_above=False)

    def divergences_shown(self) -> str:
        return "unknown" if self.divergences is None else str(self.divergences)

    def problems(self) -> list[str]:
        out = []
        if self.nonfinite_draws:
            out.append(f"NaN or infinite draws in {', '.join(self.nonfinite_draws)}: the sampler failed there, so this "
                       "fit's numbers cannot be trusted")
        if self.stuck_chains:
            out.append(f"{', '.join(self.stuck_chains)} did not move within any chain, each chain at a value of its own: "
                       "the sampler failed there, so this fit's numbers cannot be trusted")
        for names, stats in _stats_by_variables(self.uncomputed).items():
            out.append(f"{' and '.join(stats)} could not be computed for {', '.join(names)}: whether it converged is unknown")
        # too few draws a chain (fewer than 4) for R-hat or ESS: NaN, which no limit below catches. NaN for
        # another reason is said above: every variable with NaN or infinite draws, stuck, or left uncomputed
        missing = [name for name, value in (("R-hat", self.max_rhat), ("bulk ESS", self.min_ess_bulk),
                                            ("tail ESS", self.min_ess_tail)) if np.isnan(value)]
        if missing and not self.nonfinite_draws and not self.uncomputed and not self.stuck_chains:
            out.append(f"{' and '.join(missing)} could not be computed from {self.n_draws} draws: too few to judge convergence")
        if self.max_rhat > self.rhat_limit:
            out.append(f"R-hat up to {self.rhat_shown()} (> {self.rhat_limit}): chains disagree")
        if self.divergences is None:
            out.append("divergences unknown: the draws came without the sampler's statistics (sample_stats' diverging), "
                       "so whether it explored the posterior reliably cannot be told")
        elif self.divergences:
            transitions = "transition" if self.divergences == 1 else "transitions"
            out.append(f"{self.divergences} divergent {transitions}: the posterior geometry was not explored reliably")
        if self.min_ess_bulk < self.ess_limit:
            out.append(f"bulk ESS as low as {self.ess_shown(self.min_ess_bulk)} (< {self.ess_limit:.0f}): intervals are noisy")
        if self.min_ess_tail < self.ess_limit:  # the 5% and 95% quantiles are what every interval reports
            out.append(f"tail ESS as low as {self.ess_shown(self.min_ess_tail)} (< {self.ess_limit:.0f}): the 5% and 95% quantiles are noisy")
        if self.pareto_k is not None and self.pareto_k > self.pareto_k_limit:
            k = shown_so_it_reads_true(self.pareto_k, lambda shown: shown > self.pareto_k_limit, 2)
            out.append(f"Pareto k {k} (> {self.pareto_k_limit}): the new data moved the posterior too far to reweight")
        elif self.pareto_k is not None and np.isnan(self.pareto_k):  # not converged (NaN <= limit is False), so said
            out.append("Pareto k could not be computed: whether the reweighted draws stand for the new data is unknown")
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
            f"{status}: max R-hat {self.rhat_shown()}, min bulk ESS {self.ess_shown(self.min_ess_bulk)}, "
            f"min tail ESS {self.ess_shown(self.min_ess_tail)}, divergences {self.divergences_shown()} ({self.n_draws} draws)"
        )
        if self.pareto_k is not None:
            head += f"; reweighted: Pareto k {self.pareto_k:.2f}, efficiency {self.reweight_efficiency:.0%}"
        return "\n  ".join([head, *self.problems()])

    _repr_pretty_ = pretty_as_str


def _stats_by_variables(uncomputed: dict[str, list[str]]) -> dict[tuple[str, ...], list[str]]:
    """{("A", "B"): ["R-hat", "tail ESS"]} from {"R-hat": ["A", "B"], "tail ESS": ["A", "B"]}: one line per set of
    variables, naming every diagnostic it lacks."""
    grouped: dict[tuple[str, ...], list[str]] = {}
    for stat, names in uncomputed.items():
        grouped.setdefault(tuple(names), []).append(stat)
    return grouped


# every sampled quantity a forecast reads: R0 (the pooled start) and r0_sd feed each new-run
# forecast (decide, the report), wander_scale each run's own; left out, a fit could be called
# converged while the draws behind those forecasts mixed poorly (r0_sd at R-hat 1.10, bulk ESS 19)
SUMMARY_VARS = ("A", "B", "log_C_mid", "A_run", "R0_run", "R0", "a_run_sd", "r0_sd", "sigma_extra", "wander_sd", "wander_scale")


def _split_chains(x: np.ndarray) -> np.ndarray:
    """(chain, draw, p) -> (2 chain, draw // 2, p): each chain's halves as separate chains."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, -half:]], axis=0)


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Rank-normalise each column over all chains and draws (Blom's offset c = 3/8)."""
    from scipy import stats  # here, not with the module: reading a saved fit needs no diagnostics

    flat = x.reshape(-1, x.shape[-1])
    ranks = stats.rankdata(flat, method="average", axis=0)
    return stats.norm.ppf((ranks - 3 / 8) / (len(flat) + 1 / 4)).reshape(x.shape)


# a variance of rank-normalised draws (order 1 where they vary) this small is rounding of a variance of 0: the
# draws of every (half-)chain at one value each, whose R-hat is infinite, not 1e15 or 1e7 as the rounding has it
ROUNDING_VARIANCE = 1e-20


def _split_rhat(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), axis=0, ddof=1)
    within = np.var(x, axis=1, ddof=1).mean(axis=0)
    between, within = (np.where(v < ROUNDING_VARIANCE, 0.0, v) for v in (between, within))
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 within: infinite; 0 / 0 (no draw moved): NaN
        return np.sqrt((between / within + n - 1) / n)


def _ess(x: np.ndarray) -> np.ndarray:
    """ESS of each column of (chain, draw, p), with Geyer's initial monotone sequence, as
    ArviZ computes it for one parameter at a time, here for all parameters at once."""
    n_chain, n, p = x.shape
    centred = x - x.mean(axis=1, keepdims=True)
    size = 2 * n
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    acov = np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :n] / n
    mean_var = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n + (np.var(x.mean(axis=1), axis=0, ddof=1) if n_chain > 1 else 0.0)
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (n, p) autocorrelation by lag
    rho[0] = 1.0
    n_pairs = (n - 2 + 1) // 2  # pairs (rho[2k], rho[2k+1]) that ArviZ's loop can reach
    pairs = rho[: 2 * n_pairs : 2] + rho[1 : 2 * n_pairs : 2]  # (n_pairs, p)
    positive = pairs > 0
    # K: first pair k >= 1 whose sum is not positive (0 when even the first is not), else the last
    first_bad = np.where((~positive[1:]).any(axis=0), (~positive[1:]).argmax(axis=0) + 1, n_pairs - 1)
    K = np.where(positive[0], first_bad, 0)
    monotone = np.minimum.accumulate(pairs, axis=0)
    keep = np.arange(n_pairs)[:, None] < K[None, :]
    rho_2k = rho[np.minimum(2 * K, n - 1), np.arange(p)]
    kept_pair_k = pairs[np.minimum(K, n_pairs - 1), np.arange(p)] >= 0
    last = np.where((rho_2k > 0) | ((K > 0) & kept_pair_k), rho_2k, 0.0)
    last = np.where(K == 0, 1.0, last)
    tau = -1.0 + 2.0 * np.where(keep, monotone, 0.0).sum(axis=0) + last
    total = n_chain * n
    ess = total / np.maximum(tau, 1.0 / np.log10(total))
    constant = np.ptp(x.reshape(-1, p), axis=0) < np.finfo(float).resolution
    return np.where(constant, float(total), ess)


# Geyer's sequence above needs two autocorrelation pairs per split chain: with fewer draws per
# chain (SamplerSettings(draws=5), a smoke test) its argmax met an empty sequence and fit() failed
# after sampling with "attempt to get argmax of an empty sequence"
MIN_VECTORISED_DRAWS = 10
ARVIZ_MIN_DRAWS = 4  # ArviZ's least: its R-hat and ESS are NaN below it


def _few_draws_diagnostics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """diagnostics_arrays for chains too short for the vectorised ESS: ArviZ's, column by column
    (NaN below ARVIZ_MIN_DRAWS draws a chain, as ArviZ gives; ConvergenceReport flags NaN)."""
    p = x.shape[-1]
    if x.shape[1] < ARVIZ_MIN_DRAWS:
        return tuple(np.full(p, np.nan) for _ in range(3))
    import arviz as az

    columns = [x[:, :, j] for j in range(p)]
    return (np.array([float(az.rhat(c)) for c in columns]), np.array([float(az.ess(c, method="bulk")) for c in columns]),
            np.array([float(az.ess(c, method="tail")) for c in columns]))


def _rank_rhat(bulk: np.ndarray, folded: np.ndarray) -> np.ndarray:
    """The larger of the bulk and folded R-hat, as ArviZ's rank R-hat takes it: Python's max(bulk, folded), which
    keeps the bulk value where the folded one is NaN (NaN > bulk is False). The folded R-hat is 0 / 0 only where
    every draw lies as far from the median as every other (two values, one each side of it): no chain can differ
    from another in scale there, and the bulk R-hat says all there is (np.maximum made it NaN: 'not computed').
    The bulk R-hat is NaN only where every draw is the same, and NaN stays."""
    return np.where(np.isnan(folded), bulk, np.maximum(bulk, folded))


def diagnostics_arrays(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank-normalised split R-hat, bulk ESS and tail ESS of each column of x (chain, draw, p)
    (Vehtari et al. 2021, the definitions ArviZ uses), vectorised over the columns."""
    if x.shape[1] < MIN_VECTORISED_DRAWS:
        return _few_draws_diagnostics(x)
    split = _split_chains(x)
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[-1]), axis=0))
    z_split = _z_scale(split)  # ranked once: R-hat and bulk ESS read the same values
    rhat = _rank_rhat(_split_rhat(z_split), _split_rhat(_z_scale(folded)))
    ess_bulk = _ess(z_split)
    flat = x.reshape(-1, x.shape[-1])
    tails = [_ess(_split_chains((x <= np.quantile(flat, q, axis=0)).astype(float))) for q in (0.05, 0.95)]
    return rhat, ess_bulk, np.minimum(*tails)


def default_ess_limit(n_chain: int, n_draws: int) -> float:
    """The least bulk and tail ESS of a converged fit: 100 effective draws per chain (Vehtari et al.
    2021), lowered to a quarter of the draws for fast mode's short chains (2 x 300 draws: 150), but
    never below 100: a 5% quantile from fewer effective draws rests on about five of them."""
    return min(100.0 * n_chain, max(0.25 * n_draws, 100.0))


def convergence_report(idata, var_names=SUMMARY_VARS, *, ess_limit: float | None = None) -> ConvergenceReport:
    post = idata.posterior
    names = [v for v in var_names if v in post]
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    columns = np.concatenate([post[v].values.reshape(n_chain, n_draw, -1) for v in names], axis=2)
    variable_of = [v for v in names for _ in range(post[v].values[0, 0].size)]  # the variable of each column
    finite = np.isfinite(columns).all(axis=(0, 1))
    # below ARVIZ_MIN_DRAWS draws a chain every value is NaN: ConvergenceReport says "too few draws" for that
    few_draws = n_draw < ARVIZ_MIN_DRAWS

    def variables_where(mask) -> list[str]:
        return list(dict.fromkeys(v for v, flagged in zip(variable_of, mask, strict=True) if flagged))

    with np.errstate(divide="ignore", invalid="ignore"):
        rhat, ess_bulk, ess_tail = diagnostics_arrays(columns)
        # a variable the same in every draw has no R-hat (0 / 0) and says nothing about the chains: left out.
        # Every other column counts: one with a NaN or infinite draw is named in nonfinite_draws (else the fit
        # read as converged on the others' numbers), one stuck in stuck_chains, one whose diagnostic is NaN in uncomputed
        constant = finite & (np.ptp(columns, axis=(0, 1)) < np.finfo(float).resolution)
        # every chain at a value of its own, never moving: R-hat 0 / 0, named in stuck_chains (not "too few draws",
        # which is what chains shorter than ARVIZ_MIN_DRAWS are, moving or not)
        stuck = (finite & ~constant & (np.ptp(columns, axis=1) < np.finfo(float).resolution).all(axis=0)
                 & (not few_draws))
    judged = finite & ~constant & ~stuck
    uncomputed = {} if few_draws else {stat: variables_where(judged & np.isnan(values))
                                       for stat, values in (("R-hat", rhat), ("bulk ESS", ess_bulk), ("tail ESS", ess_tail))}
    if not few_draws and not judged.any() and finite.all() and not stuck.any():  # no variable moved at all
        uncomputed["R-hat"] = list(names)

    def _extreme(values, fn):
        # NaN of a variable in `uncomputed` is named there; the others' values still judge the fit (inf counts)
        values = values[judged & ~np.isnan(values)]
        return float(fn(values)) if len(values) else float("nan")

    n_draws = int(n_chain * n_draw)
    # draws without the sampler's statistics (a hand-made or foreign posterior) crashed here (AttributeError),
    # and statistics without `diverging` counted 0 divergences: unknown either way, said as a problem
    stats = getattr(idata, "sample_stats", None)
    divergences = int(stats["diverging"].sum()) if stats is not None and "diverging" in stats else None
    return ConvergenceReport(
        max_rhat=_extreme(rhat, np.max),
        min_ess_bulk=_extreme(ess_bulk, np.min),
        min_ess_tail=_extreme(ess_tail, np.min),
        divergences=divergences,
        n_draws=n_draws,
        ess_limit=ess_limit if ess_limit is not None else default_ess_limit(n_chain, n_draws),
        nonfinite_draws=variables_where(~finite),
        uncomputed={stat: variables for stat, variables in uncomputed.items() if variables},
        stuck_chains=variables_where(stuck),
    )
