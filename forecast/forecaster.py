"""Layer 3: the front door. A tidy run table goes in, fit() returns the forecaster, predict()
returns a tidy table with a point forecast and interval columns, plot() draws the fan chart.

    from forecast import load_runs, ScalingForecaster
    runs = load_runs("examples/trainer_sweep/runs.csv")
    fc = ScalingForecaster().fit(runs, random_seed=0)
    fc.predict(compute=[2e12, 4e12], recipe="cispo")

Posterior draws live in `fc.idata` (ArviZ InferenceData, dims recipe/run); every table here is
derived from it. Three kinds of prediction:
  kind="run"     this run's own future: its parameters, its current deviation from its curve
                 (which fades with compute), evaluation noise, and extrapolation uncertainty;
  kind="new_run" a fresh seed of the recipe: seed-to-seed spread of A and R0 on top;
  kind="mean"    the recipe's typical curve, without noise (what the recipe "is").
The default kind is "run" when a run_id is given and "new_run" otherwise, as on the command line.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import io
import json
import numbers
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import expit, ndtr, ndtri

from . import __version__
from .curves import compute_to_target as _compute_to_target
from .curves import sigmoid_curve_log
from .data import (
    LEFT_OUT_RUNS,
    UNSPECIFIED_UNIT,
    FarFromDataWarning,
    compute_unit_of,
    data_warnings_of,
    load_runs,
    validate_runs,
    warn_if_far_from_data,
)
from .decisions import predict_below_data_texts
from .formatting import fmt_compute, name_of, unknown_name_message
from .inference import (
    ConvergenceReport,
    SamplerSettings,
    as_real,
    check_bool,
    convergence_report,
    sample_model,
)
from .io import atomic_path
from .model import Priors, build_model, data_values, prepare_data, white_variance
from .thread_warnings import this_threads_warnings_dropped
from .wander_filter import filter_in_blocks, wander_correlation

__all__ = ["ScalingForecaster", "ConvergenceWarning", "FarFromDataWarning", "NotFittedError"]

DEFAULT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
KINDS = ("run", "new_run", "mean")


def as_name(name, what: str = "name"):
    """A recipe or run name as the run table holds it: validate_runs reads every name as text, so a
    table built with recipe 1 or run_id 7 (numbers) has recipe "1", and predict(recipe=1) asks for it
    (as predict(recipe=1.0) does: a whole-number float is named as validate_runs names it, formatting.name_of).
    TypeError for several names (`what`: the argument's name): recipe=["dapo", "grpo"] was read as
    the one name "['dapo', 'grpo']" and refused as an unknown recipe, whose name was not the problem."""
    if isinstance(name, (list, tuple, set, frozenset, np.ndarray, pd.Series, pd.Index)):
        raise TypeError(f"{what}= takes one name, got {list(name)!r}: ask once per name, or leave {what}= out of "
                        "predict() for all of them")
    return name if name is None or isinstance(name, str) else name_of(name)  # run 3.0 is the table's '3'


def resolve_kind(kind, run_id):
    """kind=None: "run" when a run_id is given (that run's own future, which is what naming a run
    asks for), else "new_run". An explicit kind is checked against KINDS."""
    if kind is None:
        return "run" if run_id is not None else "new_run"
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return kind
RETRY_TARGET_ACCEPT = 0.97
# a nuts fit still flagged after its tries is sampled once more with this many times the draws and warm-up
LONGER_CHAINS = 2
# a nuts fit still flagged is sampled once more with the runs' starts centred when its posterior pins each
# run's start to under this share of the starts' spread (start_uncertainty_ratio): data that inform each
# start that well put the non-centred starts' z-scores on a ridge with the spread, and the centred form off it
CENTRE_STARTS_BELOW = 1.0
# refit() reweights the last sampled fit only while the weights keep at least this share of its
# draws' information; below it the new data carry enough news to be worth a sampler run
MIN_REWEIGHT_EFFICIENCY = 0.5
# a saved reweighted fit's attribute: its sampled fit's R-hat and bulk ESS per parameter (parameters())
SAMPLED_DIAGNOSTICS_ATTR = "sampled_diagnostics"


class ConvergenceWarning(UserWarning):
    """The sampler did not converge: intervals from this fit should not be trusted."""


# True where the caller reads a fit's convergence off the fit and says it itself (forecast.early_stop's
# fit_for_advice): fits made there give no ConvergenceWarning. A context variable, so that it holds in
# the thread (or task) that set it alone: Optuna's n_jobs runs trials' checks in threads beside other code.
CONVERGENCE_SAID_BY_CALLER = contextvars.ContextVar("convergence_said_by_caller", default=False)
# True where the caller reads the data's warnings off the fit (data_warnings_, details['data_warnings']) and
# drops what the fit says (fit_for_advice): the check of its table records them and says none after it, where
# a filter 'error' (the process's, every thread's) raised one and failed an Optuna trial's should_prune.
DATA_WARNINGS_SAID_BY_CALLER = contextvars.ContextVar("data_warnings_said_by_caller", default=False)


class NotFittedError(RuntimeError):
    pass


class NotASavedFitError(ValueError):
    """A file given to load() that is not a fit save() wrote (another netCDF file, or no netCDF at all)."""


class _FitGroups:
    """The groups of a fit (posterior, sample_stats, run_table) as plain xarray Datasets.

    What predictions, decisions and reports read. A saved fit is read into this straight with
    xarray, because ArviZ takes 3 s to import and `forecast predict` on a saved fit took 5.6 s,
    most of it imports; `ScalingForecaster.idata` makes an ArviZ InferenceData of it when asked.
    """

    def __init__(self, groups: dict, attrs: dict | None = None):
        self._groups = dict(groups)
        self.attrs = dict(attrs or {})

    def groups(self) -> list[str]:
        return list(self._groups)

    def __getattr__(self, name):  # .posterior, .sample_stats, .run_table, as on an InferenceData
        groups = self.__dict__.get("_groups", {})
        if name in groups:
            return groups[name]
        raise AttributeError(name)

    def to_inference_data(self):
        import arviz as az

        return az.InferenceData(attrs=self.attrs, **self._groups)


def _read_fit_groups(path: Path) -> _FitGroups:
    """Every group of a netCDF file written by InferenceData.to_netcdf, read into memory."""
    import h5netcdf
    import h5py

    # every object header and attribute read with h5py first: on a damaged file h5netcdf's File fails
    # half-made, and Python then printed a second traceback from its close() at exit
    with h5py.File(path, mode="r") as probe:
        probe.visititems(lambda name, item: dict(item.attrs))
        dict(probe.attrs)
    with h5netcdf.File(path, mode="r") as handle:
        names = list(handle.groups)
    groups = {}
    for name in names:
        with xr.open_dataset(path, group=name, engine="h5netcdf") as dataset:
            groups[name] = dataset.load()
    with xr.open_dataset(path, engine="h5netcdf") as root:
        attrs = dict(root.attrs)
    return _FitGroups(groups, attrs)


def _resampled(idata, indices) -> _FitGroups:
    """The groups of idata with the posterior's stacked draws at `indices`, in the same
    (chain, draw) shape; sample_stats stay those of the sampler run."""
    post = idata.posterior
    n_chain, n_draw = post.sizes["chain"], post.sizes["draw"]
    data_vars = {}
    for name, var in post.data_vars.items():
        flat = var.values.reshape((n_chain * n_draw,) + var.shape[2:])
        data_vars[name] = (var.dims, flat[indices].reshape(var.shape))
    posterior = xr.Dataset(data_vars, coords=post.coords, attrs=dict(post.attrs))
    groups = {"posterior": posterior}
    if "sample_stats" in idata.groups():
        groups["sample_stats"] = idata.sample_stats
    return _FitGroups(groups)


def chain_of_each_draw(posterior) -> np.ndarray:
    """The chain of each draw, in the order draws() stacks them (chain by chain)."""
    return np.repeat(np.arange(posterior.sizes["chain"]), posterior.sizes["draw"])


def _normals_keyed_by_compute(rng: np.random.Generator, compute: np.ndarray, n_draws: int) -> np.ndarray:
    """Standard normals (n_draws, len(compute)), each column drawn from a stream keyed by its compute.

    One matrix drawn from `rng` would give a compute different noise depending on what else was
    asked beside it: sample_curves([c]) and sample_curves([c, 2c]) disagreed at c by Monte Carlo
    error (about 0.005 on a 95% quantile). Keyed columns make every answer at c the same.
    """
    base = int(rng.integers(2**63))
    keys = np.ascontiguousarray(compute, dtype=np.float64).view(np.uint64)
    return np.column_stack([np.random.default_rng([base, int(key)]).standard_normal(n_draws) for key in keys])


@functools.cache
def _netcdf_to_memory_works() -> bool:
    """Whether this xarray writes netCDF-4 groups (h5netcdf) to a file object: from 2025.07 on. Before,
    only netCDF-3 (scipy, no groups) went to a file object, and a fit is written to a file as it always was."""
    try:
        xr.Dataset().to_netcdf(io.BytesIO(), engine="h5netcdf", group="probe")
    except (ValueError, TypeError):
        return False
    return True


def netcdf_image(groups: dict, attrs: dict | None = None) -> bytes | None:
    """The netCDF file that InferenceData.to_netcdf writes of `groups` ({name: Dataset}) and root `attrs`
    (numbers zlib-compressed, each group a netCDF group), rendered in memory; None where this xarray cannot
    (_netcdf_to_memory_works), for the caller to write the file directly.

    Why in memory: HDF5 failing a write part way (a full disk, `ulimit -f`) left its library broken, and
    Python crashed (segmentation fault, exit 139, after pages of HDF5 tracebacks), so the one line naming
    the file never came. A file written from these bytes fails as any Python write does (forecast.io)."""
    if not _netcdf_to_memory_works():
        return None
    buffer = io.BytesIO()
    xr.Dataset(attrs=dict(attrs or {})).to_netcdf(buffer, mode="w", engine="h5netcdf")
    for name, dataset in groups.items():
        compressed = {var: {"zlib": True} for var, values in dataset.variables.items() if values.dtype.kind in "biufcS"}
        dataset.to_netcdf(buffer, mode="a", engine="h5netcdf", group=name, encoding=compressed)
    return buffer.getvalue()


def _broken(report: ConvergenceReport) -> bool:
    """A try whose draws the sampler failed on (NaN or infinite draws, chains that never moved, an R-hat that
    could not be computed): its divergences and R-hat are the other variables', so they cannot rank it."""
    return bool(report.nonfinite_draws or report.stuck_chains or report.uncomputed)


def _fewer_problems(new: ConvergenceReport, old: ConvergenceReport) -> bool:
    """Whether try `new` is kept over `old`: not broken where `old` is, then fewer divergences, then a lower max
    R-hat. Ranked on divergences and R-hat alone, a broken try with no divergence beat a clean one with some."""
    return (_broken(new), new.divergences, new.max_rhat) < (_broken(old), old.divergences, old.max_rhat)


def start_uncertainty_ratio(posterior) -> float:
    """How loosely the data pin each run's start (logit R0) down, against the spread of the starts: the
    median over runs of a start's posterior sd, over the posterior mean of r0_sd. Well under 1, each run's
    evaluations say more about its start than the other runs do (the synthetic Table-1 sweep: about 0.6;
    16,000 graded samples an evaluation, flat at first), which is where a centred level samples better.
    Over 1, the spread says more (the shipped trainer sweep: about 2.7; 1,200 samples an evaluation)."""
    start_sd = posterior["logit_R0_run"].std(("chain", "draw")).values
    return float(np.median(start_sd) / posterior["r0_sd"].mean())


def run_table_dataset(runs: pd.DataFrame) -> xr.Dataset:
    """The run table as the Dataset save() writes into a fit's netCDF file. netCDF holds neither
    pandas' categorical and nullable columns nor a "/" in a variable name, all ordinary in a run
    table's knob columns (a parquet file gives categoricals back; "eval/pass@1"): such columns are
    written as text or floats, and renamed names are kept in the attribute `column_names`."""
    table = runs.drop(columns=[c for c in runs.columns if str(c).startswith("_")]).reset_index(drop=True)
    for column in table.columns:
        dtype = table[column].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            table[column] = table[column].astype(object)
            dtype = table[column].dtype
        if pd.api.types.is_extension_array_dtype(dtype) and pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            table[column] = table[column].astype("float64")  # Int64, UInt8, Float64: <NA> becomes NaN
        elif pd.api.types.is_object_dtype(dtype) or pd.api.types.is_extension_array_dtype(dtype):
            table[column] = table[column].astype(str)  # text, and nullable booleans as "True"/"False"/"<NA>"
    # a name netCDF refuses: a "/", an empty name, a number or a tuple (from a DataFrame built in Python)
    renamed = {c: str(c).replace("/", "\u2215") or "(unnamed)" for c in table.columns
               if not isinstance(c, str) or "/" in c or not c}
    table = table.rename(columns=renamed)
    # the rows' dimension: a knob column called "row" became it, and load() drops the dimension
    # (its values are only row numbers), so that column was lost; "_" columns are never saved
    dataset = xr.Dataset.from_dataframe(table.rename_axis("row" if "row" not in table.columns else "_row"))
    if renamed:
        dataset.attrs["column_names"] = json.dumps({safe: str(name) for name, safe in renamed.items()})
    return dataset


def _wander_paths(rng, x, x_start, start, wander_sd, wander_scale) -> np.ndarray:
    """Ornstein-Uhlenbeck paths (n_draws, len(x)) in normalised log-compute x (1, n): sd wander_sd,
    correlation exp(-dx / wander_scale) (forecast.wander_filter), one path per draw (n_draws, 1
    parameters). From its stationary law, or from `start` = (mean, variance) at x_start."""
    order = np.argsort(x[0], kind="stable")
    n_draws = wander_sd.shape[0]
    paths = np.empty((n_draws, x.shape[1]))
    if start is None:
        previous_x, level = None, wander_sd[:, 0] * rng.standard_normal(n_draws)
    else:
        mean, var = start
        previous_x, level = x_start, mean[:, 0] + np.sqrt(np.maximum(var[:, 0], 0)) * rng.standard_normal(n_draws)
    for j in order:
        if previous_x is not None:
            corr = np.exp(-(x[0, j] - previous_x) / wander_scale[:, 0])
            level = corr * level + wander_sd[:, 0] * np.sqrt(1 - corr**2) * rng.standard_normal(n_draws)
        paths[:, j] = level
        previous_x = x[0, j]
    return paths


def _qname(q: float) -> str:
    """q05, q50, q95; a quantile between whole percents keeps its digits: q2_5, q97_5."""
    percent = round(q * 100, 6)
    if percent == int(percent):
        return f"q{int(percent):02d}"
    return "q" + f"{percent:g}".replace(".", "_")


def _compute_values(compute) -> np.ndarray:
    """compute (a number or a flat list of numbers) as a 1-D float array. ValueError saying what
    is wrong, rather than numpy's own error several calls further in."""
    # numpy reads None as nan, True as 1.0 and "1e5" as 100000.0: say what was given instead
    if compute is None or isinstance(compute, (bool, np.bool_, str, bytes)):
        raise ValueError(f"compute must be a number or a list of numbers, got {compute!r}")
    if isinstance(compute, pd.DataFrame):  # a table of future points, as Prophet's predict takes
        raise ValueError(f"compute takes the computes themselves, not a table (columns: {', '.join(map(str, compute.columns))}); "
                         "give one column, e.g. compute=table['compute']")
    try:
        given = np.asarray(compute)
        # the same for the items of a list: ["1e12"] or [True] were read as numbers where "1e12" was refused
        if given.dtype.kind in "bUS" or (given.dtype.kind == "O" and any(
                item is None or isinstance(item, (bool, np.bool_, str, bytes)) for item in given.ravel())):
            raise ValueError
        values = np.asarray(compute, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"compute must be a number or a list of numbers, got {compute!r}") from None
    if values.ndim > 1:
        raise ValueError(f"compute must be a number or a flat list of numbers, got an array of shape {values.shape}")
    values = np.atleast_1d(values)
    if values.size == 0:
        raise ValueError("compute is empty: give at least one compute value")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"compute must be finite and > 0, got {', '.join(f'{c:g}' for c in values)}")
    return values


def _optional_horizon(horizon) -> float | None:
    """fit(horizon=...) as a float, or None; ValueError for anything but a finite compute > 0."""
    if horizon is None:
        return None
    horizon = as_real(horizon)
    if isinstance(horizon, bool) or not isinstance(horizon, numbers.Real) or not (np.isfinite(horizon) and horizon > 0):
        raise ValueError(f"horizon must be a compute > 0 (a number), got {horizon!r}")
    return float(horizon)


def _check_random_seed(random_seed) -> None:
    if random_seed is not None and (isinstance(random_seed, bool) or not isinstance(random_seed, numbers.Integral)
                                    or random_seed < 0):
        raise ValueError(f"random_seed must be an integer >= 0 or None, got {random_seed!r}")


def _check_pad_to(pad_to) -> None:
    """pad_to: None or a whole number of rows; "256" failed as a TypeError comparing it with a row
    count, and 2.5 deep in numpy after the table was read."""
    if pad_to is not None and (isinstance(pad_to, bool) or not isinstance(pad_to, numbers.Integral) or pad_to < 0):
        raise ValueError(f"pad_to must be a whole number of rows >= 0 or None, got {pad_to!r}")


def _non_negative(name: str, value) -> float:
    """A predictive-spread setting as a float; ValueError for a negative, infinite or non-number.
    float() read "0.01" and True (as 1.0: bands a hundred times wider) as numbers: refused as fit's
    horizon refuses them."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    number = float(value)
    if not (np.isfinite(number) and number >= 0):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return number


def _checked_quantiles(quantiles) -> tuple[float, ...]:
    """Quantiles as a tuple of distinct levels in (0, 1); a scalar is one level. ValueError for
    percents (5, 95) or levels whose column names would collide."""
    levels = tuple(float(q) for q in np.atleast_1d(np.asarray(quantiles, dtype=float)))
    if not levels or any(not 0 < q < 1 for q in levels):
        raise ValueError(f"quantiles must lie in (0, 1), e.g. (0.05, 0.95), got {list(levels)}")
    names = [_qname(q) for q in levels]
    if len(set(names)) != len(names):
        raise ValueError(f"quantiles {list(levels)} give repeated column names {names}")
    return levels


def _saved_attr(attrs, name: str, path, kind: type, default: str | None = None):
    """A JSON attribute of a saved fit, of the kind save() writes. A damaged one (cut, edited by hand,
    another tool's) was a bare JSONDecodeError out of load(), or, for a string where a list belongs,
    a report banner of one bullet per character."""
    if name not in attrs and default is not None:
        return json.loads(default)
    try:
        value = json.loads(attrs[name])
    except (KeyError, TypeError, json.JSONDecodeError):
        value = None
    if not isinstance(value, kind) or (kind is list and not all(isinstance(item, str) for item in value)):
        raise NotASavedFitError(f"{path} cannot be read as a saved fit: its '{name}' attribute is damaged "
                                "(not what save() writes): copy it again, or refit")
    return value


class ScalingForecaster:
    """Hierarchical Bayesian ScaleRL forecaster (see forecast.model for the model).

        runs = load_runs("examples/trainer_sweep/runs.csv")
        fc = ScalingForecaster().fit(runs, random_seed=0)   # mode="fast" for short chains
        fc.predict(compute=[2e12, 4e12], recipe="dapo")     # mean, q05 ... q95, ahead per compute
        fig = fc.plot(budget=4e12, target=0.6)              # fan chart (a matplotlib Figure)
        fc.diagnostics(); fc.asymptote(); fc.compute_to_target(0.6)
        fc.save("fit.nc"); ScalingForecaster.load("fit.nc")

    Parameters
    ----------
    priors : Priors, optional. Prior settings; `Priors(a_sd=0.3)` overrides one.
    robust : Student-t likelihood instead of normal, for outlying evaluations.
    parametrization : "auto", "centered" or "noncentered". Auto picks centred when every run has
        at least 8 evaluations (data pin each run down) and non-centred otherwise. In "nuts"
        mode a centred fit whose first try diverged is sampled next with every level non-centred at
        the same settings, kept if it has fewer divergences or a lower R-hat (fit_info_["noncentred"],
        its "after_first_try"). A fit that still diverges is retried at target acceptance 0.97 in the
        kept form; a centred one that diverges there too is sampled once more with the recipe level
        non-centred, and the try with the fewest divergences is kept (fit_info_["retry"],
        fit_info_["recipe_centered"]). A fit still flagged
        then (R-hat, ESS or divergences) whose posterior pins each run's start (R0) down more tightly
        than the starts spread (start_uncertainty_ratio under CENTRE_STARTS_BELOW) is sampled with
        the runs' starts centred, kept only if it converges (fit_info_["centred_starts"],
        fit_info_["starts_centered"]); the starts are non-centred otherwise, and under "noncentered".
        A fit still flagged then is sampled once more with twice the draws and warm-up, in the kept
        try's form (the recipe level non-centred if a centred try diverged), kept unless it diverges
        more (fit_info_["longer"]). A centred fit that never diverged and is still flagged after
        them is sampled with every level non-centred, the last resort. SamplerSettings(
        extend_if_flagged=False) turns off every level non-centred, the centred starts and the longer
        chains.
        sampling_tries() says in words what each try found.
    mode : "nuts" (default: 1000 draws x 2 chains) or "fast" (short chains, for frequent refits).
    sampler : SamplerSettings, optional: the chains to sample, in place of those `mode` gives. `mode`
        still decides the rest: whether a flagged fit is sampled again ("nuts": the tries above)
        and whether outputs call it a quick look ("fast": `forecast report`'s header, `forecast fit`).
    horizon_sd : extra predictive sd per doubling of compute beyond a run's last evaluation.
        Curves bend, plateau or decline in ways the sigmoid cannot see coming; this widens
        extrapolation bands with the horizon. Default chosen by benchmarks/extrapolation.py.
    level_sd : sd of late moves of a run's level that its data so far cannot show (RL runs that
        collapse or climb late), added ahead of a run's last evaluation as level_sd**2 * (1 -
        2**-doublings) of variance. A fixed amount, off (0.0) by default: see level_wander_ratio.
    level_wander_ratio : the same late moves, with an sd of this many times the run wander the fit
        learnt (`wander_sd`, draw by draw), so that a sweep whose runs wander around their curves
        gets wider forecasts ahead of the data and one whose runs follow their curves closely
        (the synthetic Table-1 sweeps: wander 0.002-0.003 against 0.005-0.010 in the trainer's)
        stays narrow. Default 2, chosen on a tuning trainer sweep (seeds 14-16,
        examples/trainer_sweep_tuning) and synthetic sweeps with seeds 101-104: without it the early-stop replays of that trainer sweep had
        mean regret 0.011 (2-seed subsets) where 2 gave 0.0044; 3 gave the same regret and saved
        less (67.8% against 71.6%). On those synthetic sweeps 3 cost 1.2 points of compute saved
        (78.5% against 79.7%), a fixed level_sd=0.025 4.9 points.
    """

    def __init__(
        self,
        *,
        priors: Priors | None = None,
        robust: bool = False,
        parametrization: str = "auto",
        mode: str = "nuts",
        sampler: SamplerSettings | None = None,
        horizon_sd: float = 0.005,
        level_sd: float = 0.0,
        level_wander_ratio: float = 2.0,
    ):
        if parametrization not in ("auto", "centered", "noncentered"):
            raise ValueError("parametrization must be 'auto', 'centered' or 'noncentered'")
        if mode not in ("nuts", "fast"):
            raise ValueError("mode must be 'nuts' or 'fast'")
        check_bool("robust", robust)  # robust="False" is true: a Student-t fit nobody asked for
        # a wrong type here failed only inside fit(), as an AttributeError, after the data were read
        if priors is not None and not isinstance(priors, Priors):
            raise TypeError(f"priors must be a Priors (e.g. Priors(a_sd=0.3)), got {type(priors).__name__}")
        if sampler is not None and not isinstance(sampler, SamplerSettings):
            raise TypeError(f"sampler must be a SamplerSettings (e.g. SamplerSettings.fast()); for short chains "
                            f"give mode='fast'; got {sampler!r}")
        self.priors = priors or Priors()
        self.robust = bool(robust)
        self.parametrization = parametrization
        self.mode = mode
        self.sampler = sampler or (SamplerSettings.fast() if mode == "fast" else SamplerSettings())
        self.horizon_sd = _non_negative("horizon_sd", horizon_sd)
        self.level_sd = _non_negative("level_sd", level_sd)
        self.level_wander_ratio = _non_negative("level_wander_ratio", level_wander_ratio)
        self._idata = None  # an InferenceData, or _FitGroups until someone asks for `idata`
        self.runs_ = None
        self.data_ = None
        self.fit_info_ = {}
        self.data_warnings_ = []  # the data's warnings said when the fitted table was read (validate_runs)
        # runs the check of the fitted table left out ({run_id: {"recipe", "reason"}}: a run in flight with one
        # evaluation), so that a question about one says why it has no answer, not "unknown run_id"
        self.left_out_runs_ = {}
        self._draw_cache = {}
        self._report = None
        self._base = None  # the last sampled fit, which refit() reweights
        self._saved_sampled_diagnostics = None  # a loaded reweighted fit's sampled fit's R-hat and ESS (save())

    # ------------------------------------------------------------------ fitting

    def _centered_for(self, runs: pd.DataFrame) -> bool:
        if self.parametrization != "auto":
            return self.parametrization == "centered"
        return int(runs.groupby("run_id").size().min()) >= 8

    def settings(self) -> dict:
        """Everything that determines a fit, saved with it."""
        return {
            "priors": self.priors.to_dict(),
            "robust": self.robust,
            "parametrization": self.parametrization,
            "mode": self.mode,
            "sampler": self.sampler.to_dict(),
            "horizon_sd": self.horizon_sd,
            "level_sd": self.level_sd,
            "level_wander_ratio": self.level_wander_ratio,
        }

    def fit(
        self, runs, *, random_seed=None, progress: bool | None = None, pad_to: int | None = None,
        horizon: float | None = None,
    ) -> ScalingForecaster:
        """Fit to a run table (DataFrame, or a path that load_runs reads). Returns self.

        pad_to: pad observations to at least this many rows, so a sequence of refits on a growing
        table (a backtest, a live sweep) keeps one structure and reuses one compiled model.
        horizon: the compute the runs are planned to reach (the largest planned budget), for fits of
        sweeps in flight. The priors on each recipe's midpoint and steepness are set on the compute
        range from the first evaluation to here instead of to the last evaluation, so a fit at a
        tenth of the budget has the prior the finished sweep's fit will have. Without it, a fit
        early in a sweep expects the curves to bend within the range seen so far, and its
        forecasts far ahead run low (model.prepare_data). A horizon more than 100x the runs' largest
        compute (or below their smallest) gives a FarFromDataWarning: likely another unit than theirs.
        """
        runs = self._validated(runs)
        horizon = _optional_horizon(horizon)
        _check_random_seed(random_seed)
        _check_pad_to(pad_to)
        progress = check_bool("progress", progress, none_ok=True)
        data = prepare_data(runs, pad_to=pad_to, horizon=horizon)
        if horizon is not None:
            # in another unit than the runs (1e15 FLOPs for GPU-hours) it reshapes the priors silently
            warn_if_far_from_data([horizon], runs["compute"], unit=compute_unit_of(runs), name="horizon")
        if horizon is not None and horizon <= runs["compute"].max():
            # said before sampling, which takes minutes; the fit is the same as without it
            warnings.warn(f"horizon={horizon:g} has no effect: the runs already reach {fmt_compute(runs['compute'].max())}, "
                          "and the priors are set on the compute range seen when it is within it", UserWarning, stacklevel=2)
        centered = self._centered_for(runs)
        values = data_values(data, self.priors)

        settings = self.sampler if progress is None else SamplerSettings(**{**self.sampler.to_dict(), "progress": progress})

        def sample(recipe_centered, sampler_settings, runs_centred=centered, starts=False):
            # starts: the runs' starts (logit R0) centred, for the try below alone
            def model():  # built only when no compiled model of this structure exists yet
                return build_model(data, self.priors, robust=self.robust, centered=runs_centred, recipe_centered=recipe_centered,
                                   starts_centered=starts)

            key = (data.structure_key(), runs_centred, recipe_centered, starts, self.robust,
                   json.dumps(self.priors.to_dict(), sort_keys=True))
            return sample_model(model, sampler_settings, random_seed=random_seed, cache_key=key, data_values=values,
                                coords=data.coords())

        idata, info = sample(None, settings)

        def add_try_seconds(try_info):
            """A later try's sampling and compile time, counted in the fit's."""
            info["sample_seconds"] += try_info["sample_seconds"]
            info["compile_seconds"] = info.get("compile_seconds", 0.0) + try_info.get("compile_seconds", 0.0)

        report = convergence_report(idata)
        recipes_centred = centered  # the recipe level's form in the fit that is kept
        first_diverged = report.divergences > 0
        kept_settings = settings  # how the kept fit was sampled

        def every_level_noncentred(idata, report, *, after_first_try):
            """Every level non-centred at the kept try's settings, kept if it has fewer problems: straight
            after a centred first try that diverged, or as the last resort after longer chains."""
            other, other_info = sample(None, kept_settings, runs_centred=False)
            other_report = convergence_report(other)
            info["noncentred"] = {"problems_before": report.problems(), "problems_after": other_report.problems(),
                                  "sample_seconds": other_info["sample_seconds"],
                                  "compile_seconds": other_info.get("compile_seconds", 0.0),
                                  # before_longer: what fits of 2026-12-06 said of the same order
                                  "before_longer": after_first_try, "kept": _fewer_problems(other_report, report)}
            if after_first_try:  # said with the divergences of each try (sampling_tries)
                info["noncentred"].update(after_first_try=True, divergences_before=report.divergences,
                                          divergences_after=other_report.divergences,
                                          target_accept=kept_settings.target_accept)
            add_try_seconds(other_info)
            return (other, other_report, True) if info["noncentred"]["kept"] else (idata, report, False)

        if first_diverged and centered and self.mode == "nuts" and settings.extend_if_flagged:
            # A centred first try that diverged sits in a funnel, which a new form leaves and smaller steps
            # or longer chains do not: every level non-centred comes next, before the retry at a higher
            # target acceptance (which then samples in the kept form). The shipped trainer sweep (40
            # evaluations a run, so centred by the rule above) diverged centred on every random seed
            # tried, went through the retry, the recipe level non-centred and this form, and converged
            # only in this form; sampled in it from the start, it converged on 3 of 3 seeds in a fraction
            # of the time. (Before, this try came after those two, and before that after longer chains,
            # which diverged again.) The synthetic Table-1 sweeps, which sample better centred, do not
            # diverge there and are not affected (benchmarks/convergence.py, RESULTS.md).
            idata, report, kept = every_level_noncentred(idata, report, after_first_try=True)
            if kept:
                centered, recipes_centred = False, False
        if report.divergences and self.mode == "nuts" and settings.target_accept < RETRY_TARGET_ACCEPT:
            # Divergences usually mean step sizes too large for a curved region (a funnel of a
            # small recipe spread). Smaller steps cost only sampling time: the compiled model is
            # reused. Keep whichever run has fewer problems, and say that we retried.
            retry_settings = SamplerSettings(**{**settings.to_dict(), "target_accept": RETRY_TARGET_ACCEPT})
            retry, retry_info = sample(None, retry_settings, runs_centred=centered)
            retry_report = convergence_report(retry)
            info["retry"] = {"target_accept": RETRY_TARGET_ACCEPT, "divergences_before": report.divergences,
                             "divergences_after": retry_report.divergences, "runs_centered": centered}
            info["sample_seconds"] += retry_info["sample_seconds"]
            if _fewer_problems(retry_report, report):
                idata, report, kept_settings = retry, retry_report, retry_settings
            if report.divergences and centered and len(data.recipes) > 1:
                # Still divergent with the recipe level centred: recipes so alike that their
                # spreads' funnel is where the posterior sits (the shipped trainer sweep). The
                # non-centred recipe level enters it; it is not the first choice because where
                # recipes differ clearly it samples several times slower (benchmarks/fit_speed.py).
                other, other_info = sample(False, retry_settings)
                other_report = convergence_report(other)
                info["retry"]["recipe_noncentred_divergences"] = other_report.divergences
                add_try_seconds(other_info)
                if _fewer_problems(other_report, report):
                    idata, report, recipes_centred = other, other_report, False
                    kept_settings = retry_settings

        if (not report.converged and self.mode == "nuts" and settings.extend_if_flagged and self.parametrization != "noncentered"
                and not _broken(report) and (ratio := start_uncertainty_ratio(idata.posterior)) < CENTRE_STARTS_BELOW):
            # Flagged, and each run's start is pinned down by its own evaluations more tightly than the
            # starts spread: the non-centred starts sit on a ridge (the spread's tail ESS lowest; the
            # synthetic Table-1 sweep, flagged on 4 of 6 random seeds after every other try). Centred, its
            # first tries converged on random seeds 0-2, where the shipped trainer sweep's (ratio about
            # 2.7) sampled worse centred, so this is a try for flagged fits, not the first form. Kept only
            # if it converges: one kept for fewer problems alone led the longer chains into its form,
            # where they stayed flagged on a fit (benchmarks/extrapolation.py, synthetic-clean at 1/8)
            # whose longer chains converged with the starts non-centred. Not kept, the tries below run
            # as if it had not been made.
            other, other_info = sample(None if recipes_centred == centered else recipes_centred, kept_settings,
                                       runs_centred=centered, starts=True)
            other_report = convergence_report(other)
            kept = other_report.converged
            info["centred_starts"] = {"ratio": ratio, "problems_before": report.problems(),
                                      "problems_after": other_report.problems(),
                                      "sample_seconds": other_info["sample_seconds"],
                                      "compile_seconds": other_info.get("compile_seconds", 0.0), "kept": kept}
            add_try_seconds(other_info)
            if kept:
                idata, report = other, other_report

        if not report.converged and self.mode == "nuts" and settings.extend_if_flagged:
            # Still flagged (R-hat, ESS, or a divergence the tries above left): longer chains. On the
            # shipped trainer sweep a default fit was flagged for 3 of 6 random seeds (R-hat
            # 1.011-1.018, bulk ESS down to 176, one divergence): 1000 warm-up draws left the step
            # size unsettled, and twice the warm-up and draws converged on all 6. In the kept try's
            # form, except that a centred fit that diverged at all sits in the recipe spreads' funnel:
            # its longer chains diverged centred (2 and 744 divergences on two seeds) and converged
            # with the recipe level non-centred; one that never diverged is mixing slowly, and
            # non-centred there, on synthetic sweeps whose recipes differ clearly, they diverged (4-59).
            # At least the retry's target acceptance when the first try diverged, whether or not a retry
            # ran: every level non-centred can leave the divergences behind at 0.9 and keep a flag, and
            # the shipped sweep's longer chains from there diverged again at 0.9 (random seed 5, where
            # at 0.97 they converged).
            funnel = centered and len(data.recipes) > 1 and first_diverged
            accept = max(kept_settings.target_accept, RETRY_TARGET_ACCEPT) if first_diverged else kept_settings.target_accept
            longer_settings = SamplerSettings(**{**kept_settings.to_dict(), "draws": LONGER_CHAINS * kept_settings.draws,
                                                 "tune": LONGER_CHAINS * kept_settings.tune, "target_accept": accept})
            longer, longer_info = sample(False if funnel else None, longer_settings, runs_centred=centered)
            longer_report = convergence_report(longer)
            info["longer"] = {"draws": longer_settings.draws, "tune": longer_settings.tune,
                              "runs_centered": centered, "recipe_centered": centered and not funnel,
                              "sample_seconds": longer_info["sample_seconds"],
                              "compile_seconds": longer_info.get("compile_seconds", 0.0),
                              "problems_before": report.problems(), "problems_after": longer_report.problems()}
            add_try_seconds(longer_info)
            # more draws estimate R-hat and ESS better, so they are kept unless they diverge more (or broke)
            info["longer"]["kept"] = (_broken(longer_report), longer_report.divergences) <= (_broken(report), report.divergences)
            if info["longer"]["kept"]:
                idata, report, recipes_centred = longer, longer_report, info["longer"]["recipe_centered"]
        if not report.converged and self.mode == "nuts" and settings.extend_if_flagged and centered and "noncentred" not in info:
            # Last resort for a centred fit that never diverged and is still flagged after longer
            # chains: every level non-centred, which took the shipped trainer sweep from flagged
            # after every other try (R-hat 1.021, 170 s) to converged at once (R-hat 1.006, 39 s;
            # 2026-12-04, when this try came last whether or not a try had diverged).
            idata, report, kept = every_level_noncentred(idata, report, after_first_try=False)
            if kept:
                centered, recipes_centred = False, False
        info["centered"] = centered
        info["recipe_centered"] = recipes_centred
        info["starts_centered"] = info.get("centred_starts", {}).get("kept", False)
        info["random_seed"] = random_seed
        info["horizon"] = horizon
        info["reweighted"] = False
        self._set_fit(runs, data, idata, info, report)
        self._base = {"data": data, "idata": idata, "report": report, "params": None, "loglik": None}
        self._warn_if_unconverged()
        return self

    def refit(
        self, runs, *, random_seed=None, progress: bool | None = None, pad_to: int | None = None, reweight: bool = True,
        horizon: float | None = None,
    ) -> ScalingForecaster:
        """Refit on a grown run table (new evaluations of the same runs), fast when it can be.

        When the runs are the same as in the last sampled fit, that fit's draws are reweighted
        to the new data by Pareto-smoothed importance sampling (forecast.reweight): a fraction
        of a second instead of a sampler run. The reweighted posterior is used when it is
        reliable (Pareto k <= 0.7) and keeps at least half of the draws' information
        (MIN_REWEIGHT_EFFICIENCY); otherwise, or with new runs or recipes, a `horizon` other than
        the sampled fit's, or reweight=False, this is fit(). Its diagnostics are the sampled fit's R-hat and divergences, its ESS
        scaled by the weights' efficiency, and Pareto k, so a reweighted fit is flagged exactly
        when it should be. `fit_info_["reweighted"]` says which happened. A reweighted fit keeps
        the sampled fit's compute axis and priors. When it samples, it keeps the last fit's
        `horizon` unless another is given (or the runs have grown past it), so a forecast does not
        change with which of the two paths ran. Returns self.
        """
        runs = self._validated(runs)
        horizon = _optional_horizon(horizon)
        _check_random_seed(random_seed)  # as fit() does: the reweighting path took True or -1 as seeds
        _check_pad_to(pad_to)
        progress = check_bool("progress", progress, none_ok=True)
        reweight = check_bool("reweight", reweight)
        kept = self.fit_info_.get("horizon")  # the last sampled fit's (a reweighted fit keeps it)
        # a horizon other than the sampled fit's sets other priors, which reweighting its draws cannot
        # give: it samples. It used to reweight and drop the horizon given, recorded as the old one.
        new_horizon = horizon is not None and horizon != kept
        if horizon is None:
            horizon = kept if kept is not None and kept > runs["compute"].max() else None
        base = self._base
        if reweight and base is not None and not new_horizon and self._same_runs(runs, base["data"]):
            if self._try_reweight(runs, base, pad_to=pad_to, random_seed=random_seed):
                self._warn_if_unconverged()
                return self
        return self.fit(runs, random_seed=random_seed, progress=progress, pad_to=pad_to, horizon=horizon)

    @staticmethod
    def _same_runs(runs: pd.DataFrame, data) -> bool:
        pairs = runs.drop_duplicates("run_id").set_index("run_id")["recipe"]
        return sorted(pairs.index) == sorted(data.runs) and all(
            data.recipes[data.run_recipe[i]] == pairs[run] for i, run in enumerate(data.runs)
        )

    def _try_reweight(self, runs, base, *, pad_to, random_seed) -> bool:
        """Reweight the base fit's draws to `runs` and set that as the fit; False (and the
        current fit left alone) when the weights are unreliable or too uneven."""
        import time

        from .reweight import PARAMETERS, importance_update, log_likelihood

        start = time.perf_counter()
        base_data, base_idata = base["data"], base["idata"]
        if base["params"] is None:
            post = base_idata.posterior
            base["params"] = {v: post[v].values.reshape((-1,) + post[v].shape[2:]) for v in PARAMETERS}
            base["loglik"] = log_likelihood(base["params"], base_data, robust=self.robust, nu=self.priors.student_nu)
        data = prepare_data(runs, pad_to=pad_to or len(base_data.y), frame=base_data.frame())
        update = importance_update(
            base["params"], base["loglik"], data, robust=self.robust, nu=self.priors.student_nu, rng=random_seed
        )
        sampled = base["report"]  # the sampler's R-hat and divergences stand; ESS shrinks with the weights
        report = dataclasses.replace(
            sampled,
            min_ess_bulk=sampled.min_ess_bulk * update.efficiency,
            min_ess_tail=sampled.min_ess_tail * update.efficiency,
            pareto_k=update.pareto_k,
            reweight_efficiency=update.efficiency,
        )
        # written so that NaN fails: PSIS may not fit the weights' tail, and `k > limit` is False for NaN
        if not (update.pareto_k <= report.pareto_k_limit and update.efficiency >= MIN_REWEIGHT_EFFICIENCY):
            return False
        idata = _resampled(base_idata, update.indices)
        info = {
            # the base fit's tries are not this fit's: sampling_tries() told of the last resort alone
            **{k: v for k, v in self.fit_info_.items() if k not in ("retry", "longer", "noncentred")},
            "reweighted": True,
            "base_n_obs": base_data.n_obs,
            "reweight_seconds": time.perf_counter() - start,
            "random_seed": random_seed,
        }
        self._set_fit(runs, data, idata, info, report)
        # a resampled draw belongs to the chain it was drawn from, not to the slot it fills
        self._chain_of_draw = chain_of_each_draw(base_idata.posterior)[update.indices]
        return True

    def _validated(self, runs) -> pd.DataFrame:
        if isinstance(runs, (str, Path)):
            return load_runs(runs)
        if DATA_WARNINGS_SAID_BY_CALLER.get():
            return data_warnings_of(validate_runs, runs)[0]  # kept in the table's attrs, as validate_runs keeps them
        return validate_runs(runs)

    def _warn_if_unconverged(self):
        if CONVERGENCE_SAID_BY_CALLER.get():
            return
        report = self.diagnostics()
        if not report.converged:
            message = f"The fit did not converge; treat its intervals with suspicion.\n  {report}"
            warnings.warn(message, ConvergenceWarning, stacklevel=3)

    def _set_fit(self, runs, data, idata, info, report=None):
        self._report = report if report is not None else convergence_report(idata)
        info = {**info, "frame": data.frame(), "diagnostics": self._report.to_dict()}
        self.runs_, self.data_, self._idata, self.fit_info_ = runs, data, idata, info
        # the table's own (validate_runs keeps them), also when it was read and said before fit() saw it
        self.data_warnings_ = list(runs.attrs.get("data_warnings", []))
        self.left_out_runs_ = dict(runs.attrs.get(LEFT_OUT_RUNS, {}))
        self._draw_cache = {}
        self._saved_sampled_diagnostics = None  # load() sets a reweighted fit's
        self._chain_of_draw = chain_of_each_draw(idata.posterior)  # a reweighted fit then sets its own
        attrs = {
            "forecast_version": __version__,
            "settings": json.dumps(self.settings()),
            "fit_info": json.dumps(info, default=str),
            "compute_unit": self.compute_unit,
            "data_warnings": json.dumps(self.data_warnings_),  # `forecast report FIT` shows them, days later
            # those of them said reading the files (validate_runs keeps them apart): a filter of the loaded
            # fit's runs_, checked again before its refit, cannot say them again
            "read_warnings": json.dumps(list(runs.attrs.get("read_warnings", []))),
            "left_out_runs": json.dumps(self.left_out_runs_),  # `forecast predict FIT --run-id` says why a run is not in it
        }
        self._idata.posterior.attrs.update(attrs)

    @property
    def idata(self):
        """Posterior draws and sampler statistics as an ArviZ InferenceData (None before a fit)."""
        if isinstance(self._idata, _FitGroups):
            self._idata = self._idata.to_inference_data()
        return self._idata

    @property
    def posterior(self):
        """The posterior draws as an xarray Dataset (chain, draw, ...), without ArviZ."""
        self._require_fit("posterior")
        return self._idata.posterior

    def _require_fit(self, what: str = "this"):
        if self._idata is None:
            raise NotFittedError(f"fit() has not been called: call fit(runs) before {what}")

    @property
    def compute_unit(self) -> str:
        return compute_unit_of(self.runs_) if self.runs_ is not None else UNSPECIFIED_UNIT

    @property
    def recipes(self) -> list[str]:
        self._require_fit("recipes")
        return list(self.data_.recipes)

    @property
    def run_ids(self) -> list[str]:
        self._require_fit("run_ids")
        return list(self.data_.runs)

    def diagnostics(self):
        """R-hat, ESS and divergences of this fit (a ConvergenceReport; str() it to read it)."""
        self._require_fit("diagnostics()")
        return self._report

    def misshapen_runs(self) -> list[dict]:
        """The runs whose last third falls away from their fitted curve by more than the wander the
        fit learnt explains (a late decline, or a flattening the sigmoid cannot follow), worst first:
        dicts of run_id, recipe, late_trend_z. Their forecasts are likely too high and their intervals
        too narrow. Catches about half of late declines and few plateaus (forecast.shape_check)."""
        self._require_fit("misshapen_runs()")
        from .shape_check import misshapen_runs

        return misshapen_runs(self)

    def sampling_tries(self) -> str | None:
        """What each try of the sampler found when it was run more than once (fit()'s retries and
        longer chains), naming the try that was kept; None when one try was enough."""
        self._require_fit("sampling_tries()")
        retry, longer, noncentred, starts = (self.fit_info_.get(name) for name in ("retry", "longer", "noncentred",
                                                                                "centred_starts"))
        parts = []
        # every level non-centred straight after a centred first try that diverged (fits since 2026-12-07)
        first_switch = bool(noncentred and noncentred.get("after_first_try"))
        if retry or first_switch:
            if first_switch:
                accept = noncentred["target_accept"]
                tries = [f"{noncentred['divergences_before']} at target acceptance {accept}",
                         f"{noncentred['divergences_after']} at {accept} with every level non-centred"
                         + ("" if noncentred["kept"] else " (not kept)")]
            else:
                tries = [f"{retry['divergences_before']} at target acceptance {self.sampler.target_accept}"]
            if retry:
                # named where the form changed after the first try (a fit non-centred throughout says none)
                form = " with every level non-centred" if first_switch and retry.get("runs_centered") is False else ""
                tries.append(f"{retry['divergences_after']} at {retry['target_accept']}{form}")
            if retry and "recipe_noncentred_divergences" in retry:
                kept = (" (kept)" if self.fit_info_.get("recipe_centered") is False and not (longer or {}).get("kept")
                        and not (noncentred or {}).get("kept") else "")
                tries.append(f"{retry['recipe_noncentred_divergences']} at {retry['target_accept']} with the recipe level "
                             f"non-centred{kept}")
            parts.append("divergences by try: " + "; ".join(tries))
        if starts:
            after = "; ".join(starts["problems_after"]) or "converged"
            kept = "kept" if starts["kept"] else "not kept: still flagged"
            parts.append(f"still flagged ({'; '.join(starts['problems_before'])}), with each run's start pinned down by its "
                         f"own evaluations (posterior sd {starts['ratio']:.2f} times the starts' spread), so sampled again "
                         f"with the runs' starts centred: {after} ({kept})")
        longer_part = noncentred_part = None
        # before_longer: every level non-centred came first after a divergence (fits before 2026-12-06 lack the key)
        noncentred_first = bool(noncentred and noncentred.get("before_longer"))
        if longer:
            after = "; ".join(longer["problems_after"]) or "converged"
            kept = "not kept: it diverged more" if not longer["kept"] else (
                "not kept: the next try did better" if (noncentred or {}).get("kept") and not noncentred_first else "kept")
            runs_centred = longer.get("runs_centered", self.fit_info_["centered"] or noncentred is not None)
            form = (" with every level non-centred" if not runs_centred else
                    " with the recipe level non-centred" if longer["recipe_centered"] is False else "")
            longer_part = (f"still flagged ({'; '.join(longer['problems_before'])}), so sampled again with "
                           f"{longer['draws']} draws and {longer['tune']} warm-up per chain{form}: {after} ({kept})")
        if noncentred and not first_switch:
            after = "; ".join(noncentred["problems_after"]) or "converged"
            kept = ("not kept: no better" if not noncentred["kept"] else
                    "not kept: the next try did better" if noncentred_first and (longer or {}).get("kept") else "kept")
            noncentred_part = (f"still flagged ({'; '.join(noncentred['problems_before'])}), so sampled again with every "
                               f"level non-centred: {after} ({kept})")
        later = [noncentred_part, longer_part] if noncentred_first else [longer_part, noncentred_part]
        parts += [part for part in later if part]
        if not parts:
            return None
        # a sentence after the first starts with a capital: joined as they were, the report's diagnostics and
        # `forecast fit` read "... with the recipe level non-centred. still flagged (...)"; the first stays as
        # it is, since callers print it after a label ("tries: divergences by try: ...")
        return ". ".join([parts[0], *(part[0].upper() + part[1:] for part in parts[1:])])

    # ------------------------------------------------------------------ posterior draws

    def draws(self, name: str) -> np.ndarray:
        """Posterior draws of a variable as (n_draws, ...) with chains stacked."""
        self._require_fit("draws()")
        if name not in self._draw_cache:
            values = self._idata.posterior[name].values
            self._draw_cache[name] = values.reshape((-1,) + values.shape[2:])
        return self._draw_cache[name]

    @property
    def chain_of_draw(self) -> np.ndarray:
        """The sampler's chain (0, 1, ...) behind each stacked draw of draws() and sample_curves(): a
        refit's reweighted draws keep the chain they were resampled from. Loaded from a file, a
        reweighted fit's chains are the slots its draws were saved in."""
        self._require_fit("chain_of_draw")
        return self._chain_of_draw

    @property
    def n_draws(self) -> int:
        return len(self.draws("A"))

    def _recipe_index(self, recipe: str) -> int:
        recipe = as_name(recipe, "recipe")
        try:
            return self.data_.recipes.index(recipe)
        except ValueError:
            hint = f"it is a run: give run_id='{recipe}'" if recipe in self.data_.runs else None
            left_out = [run for run, why in self.left_out_runs_.items() if why.get("recipe") == recipe]
            if hint is None and left_out:  # every run of it was left out of the fit: say why, not "unknown"
                raise KeyError(f"recipe '{recipe}' is not in the fit: its run{'' if len(left_out) == 1 else 's'} "
                               f"{', '.join(map(repr, left_out))} {'was' if len(left_out) == 1 else 'were'} left out "
                               f"({self.left_out_runs_[left_out[0]]['reason']}); the fit's recipes: "
                               f"{', '.join(self.data_.recipes)}") from None
            raise KeyError(unknown_name_message("recipe", recipe, self.data_.recipes, hint=hint)) from None

    def _run_index(self, run_id: str) -> int:
        run_id = as_name(run_id, "run_id")
        try:
            return self.data_.runs.index(run_id)
        except ValueError:
            hint = f"it is a recipe: give recipe='{run_id}'" if run_id in self.data_.recipes else None
            if hint is None and run_id in self.left_out_runs_:  # said as a warning at the fit, long scrolled away
                raise KeyError(f"run '{run_id}' was left out of the fit: {self.left_out_runs_[run_id]['reason']}; "
                               f"the fit's runs: {', '.join(self.data_.runs)}") from None
            raise KeyError(unknown_name_message("run_id", run_id, self.data_.runs, hint=hint)) from None

    def _recipe_of(self, run_id: str) -> str:
        return self.data_.recipes[int(self.data_.run_recipe[self._run_index(run_id)])]

    def _filtered_wander_at_last(self, run: int, curve_params: dict, sigma_extra, wander_sd, wander_scale):
        """(mean, variance) of the run's wander at its last evaluation, per draw (each (n_draws, 1)):
        the Kalman filter over all its evaluations (forecast.wander_filter), as the model's
        likelihood has it, so that white noise in the last evaluation is not taken for wander."""
        d = self.data_
        obs = np.flatnonzero((d.obs_run == run) & (d.weight > 0))  # in compute order (prepare_data)
        p = {name: values[:, None] for name, values in curve_params.items()}
        has_n_eval = d.has_n_eval

        def block_terms(rows):  # the run's evaluations `rows` (positions in obs), per draw
            x = d.x[obs[rows]][None, :]
            mu = sigmoid_curve_log(d.loc + d.scale * x, p["A"], p["B"], p["log_C_mid"], p["R0"])
            white = white_variance(mu, d.n_eval[obs[rows]] if has_n_eval else 0.0, sigma_extra)
            has_prev = (rows > 0).astype(float)  # the run's first evaluation has none
            phi = wander_correlation(x, d.x[obs[np.maximum(rows - 1, 0)]][None, :], has_prev, wander_scale)
            return d.y[obs[rows]] - mu, white, phi

        # in blocks of its evaluations, keeping only the filter's state: a run of 3000 evaluations
        # held ten arrays of draws x evaluations (83 MB with 600 draws, 3000 evaluations) for two numbers per draw
        mean, var, _ = filter_in_blocks(block_terms, len(obs), (wander_sd**2)[:, 0], score=False)
        return mean[:, None], var[:, None]

    def _typical_n_eval(self, run: int | None = None) -> float:
        """Median n_eval of the run's (or all) evaluations; 0 (no binomial term) when the model
        was fitted without n_eval: its white noise then holds the evaluation noise already."""
        d = self.data_
        if not d.has_n_eval:
            return 0.0
        real = (d.weight > 0) & (d.n_eval > 0)
        if run is not None:
            real &= d.obs_run == run
        return float(np.median(d.n_eval[real])) if real.any() else 0.0

    def recipe_stream(self, recipe: str) -> int:
        """The random stream of a recipe's new-run draws: every forecast of one recipe uses it
        (compute_to_target, decide, the report, and predict and the fan chart, which add one
        evaluation's noise to the same draws), so they answer one question with one number, and two
        recipes' new seeds get independent seed luck."""
        self._require_fit("recipe_stream()")
        return 1000 + self._recipe_index(recipe)

    def run_stream(self, run_id: str) -> int:
        """The random stream of one run's own forecast as the stop advice draws it (early_stop.run_draws)
        and predict()'s mean reads it; each run its own, so comparisons between runs keep their
        independent noise."""
        self._require_fit("run_stream()")
        return 5000 + self._run_index(run_id)

    def _expected_metric(self, compute, *, recipe, run_id, kind) -> np.ndarray:
        """The mean pass rate of a run (kind "run") or a new run at each compute, from the draws the
        decisions read: decide's and the report's (recipe_draws_at) for a new run, the stop advice's
        (early_stop.run_draws) for a run. An evaluation's noise has mean zero, so this is the mean of an
        evaluation too; the mean of predict()'s own evaluation draws differed from decide's expected by
        that noise's Monte Carlo average, and one question got two numbers."""
        if kind == "run":
            rng, shared_noise = self.run_stream(run_id), False
        else:
            rng, shared_noise = self.recipe_stream(recipe), True
        truth = self.sample_curves(compute, recipe=recipe, run_id=run_id, kind=kind, rng=rng, eval_noise=False,
                                   shared_noise=shared_noise)
        # column by column, as decide() averages its one column: mean(axis=0) sums in another order,
        # and the last digit then depended on how many computes were asked together
        return np.array([truth[:, j].mean() for j in range(truth.shape[1])])

    def _check_recipe_of_run(self, recipe, run_id) -> None:
        """A recipe given must be known (KeyError naming the known ones) and, beside a run_id, be that run's:
        curve_parameters and sample_curves used one of the two and dropped the other without a word, where
        predict refused the pair."""
        if recipe is not None:
            self._recipe_index(recipe)
            if run_id is not None and self._recipe_of(run_id) != recipe:
                raise ValueError(f"run '{run_id}' is a run of '{self._recipe_of(run_id)}', not of '{recipe}'")

    def curve_parameters(self, *, recipe=None, run_id=None, kind=None, rng=None) -> dict:
        """Per-draw curve parameters (A, B, log_C_mid, R0) for one recipe or run, by kind
        (default: "run" with a run_id, else "new_run")."""
        self._require_fit("curve_parameters()")
        recipe, run_id = as_name(recipe, "recipe"), as_name(run_id, "run_id")
        kind = resolve_kind(kind, run_id)
        self._check_recipe_of_run(recipe, run_id)
        if kind == "run":
            if run_id is None:
                raise ValueError("kind='run' needs run_id")
            r = self._run_index(run_id)
            k = int(self.data_.run_recipe[r])
            return {
                "A": self.draws("A_run")[:, r],
                "B": self.draws("B")[:, k],
                "log_C_mid": self.draws("log_C_mid")[:, k],
                "R0": self.draws("R0_run")[:, r],
            }
        if recipe is None:
            if run_id is None:
                raise ValueError("give recipe= (or run_id=)")
            recipe = self._recipe_of(run_id)
        k = self._recipe_index(recipe)
        logit_A = self.draws("logit_A_recipe")[:, k]
        r0 = self.draws("r0_mu")
        if kind == "new_run":
            rng = np.random.default_rng(rng if rng is not None else 12345)
            logit_A = logit_A + self.draws("a_run_sd") * rng.standard_normal(len(logit_A))
            r0 = r0 + self.draws("r0_sd") * rng.standard_normal(len(r0))
        return {
            "A": expit(logit_A),
            "B": self.draws("B")[:, k],
            "log_C_mid": self.draws("log_C_mid")[:, k],
            "R0": expit(r0),
        }

    def sample_curves(self, compute, *, recipe=None, run_id=None, kind=None, noise=True, rng=None, eval_noise=True,
                      shared_noise=False, paths=False) -> np.ndarray:
        """Posterior predictive draws of the metric at `compute`: array (n_draws, len(compute)).
        kind: as predict()'s (default "run" with a run_id, else "new_run").

        noise=True predicts an evaluation (with evaluation noise, wander and extrapolation
        uncertainty); noise=False gives the underlying curve only. eval_noise=False (with
        noise=True) leaves out the white evaluation noise of the predicted points: the true
        pass rate of the checkpoint there, which is what decisions between runs are about.
        The noise of each compute is drawn from a stream keyed by that compute, independent
        across computes. shared_noise=True uses one standard normal per draw at every compute
        instead: each compute's distribution is the same, but draw i is not a path (for
        marginal summaries, as predict() makes: its quantile curves are then smooth in compute).

        paths=True makes draw i one run's evaluation history across `compute` (to simulate a run
        that has not been made, or the rest of one in flight): the wander is one Ornstein-Uhlenbeck
        path in log-compute, as the model has it, and the extrapolation terms are one level move
        per draw that grows with the distance beyond the data; only the white evaluation noise is
        independent across computes. Each compute's distribution is the same as without it. For
        kind="run" the path starts from the run's last evaluation, so every compute must lie beyond it.

        rng: a seed or Generator; by default a new run's draws come from its recipe's own stream
        (recipe_stream), the draws decide() ranks recipes on, so predict() is that forecast with one
        evaluation's noise added.
        """
        # before fit() it failed as AttributeError: 'NoneType' object has no attribute 'recipes'
        self._require_fit("sample_curves()")
        compute = _compute_values(compute)
        recipe, run_id = as_name(recipe, "recipe"), as_name(run_id, "run_id")
        kind = resolve_kind(kind, run_id)
        noise, eval_noise = check_bool("noise", noise), check_bool("eval_noise", eval_noise)
        shared_noise, paths = check_bool("shared_noise", shared_noise), check_bool("paths", paths)
        if paths and shared_noise:
            raise ValueError("paths=True draws each run's own noise path; shared_noise=True is for marginal summaries: choose one")
        if rng is None:  # a new run of a recipe from its own stream, as decide() and the report draw it
            named = recipe if recipe is not None else self._recipe_of(run_id) if run_id is not None else None
            rng = self.recipe_stream(named) if kind == "new_run" and named is not None else 2024
        rng = np.random.default_rng(rng)
        p = self.curve_parameters(recipe=recipe, run_id=run_id, kind=kind, rng=rng)
        log_c = np.log(compute)[None, :]
        curve = sigmoid_curve_log(log_c, p["A"][:, None], p["B"][:, None], p["log_C_mid"][:, None], p["R0"][:, None])
        if not noise or kind == "mean":
            return curve
        d = self.data_
        sigma_extra = self.draws("sigma_extra")[:, None]
        wander_sd = self.draws("wander_sd")[:, None]
        wander_scale = self.draws("wander_scale")[:, None]
        x = d.to_x(compute)[None, :]
        if kind == "run":
            r = self._run_index(run_id)
            n_eval = self._typical_n_eval(r)
            last = int(d.run_last_obs[r])
            x_last = d.x[last]
            if paths and np.any(x <= x_last):
                raise ValueError(f"paths=True for run {run_id!r} continues it from its last evaluation at "
                                 f"{fmt_compute(np.exp(d.loc + d.scale * x_last))} {self.compute_unit}: every compute must lie beyond it")
            wander_last = self._filtered_wander_at_last(r, p, sigma_extra, wander_sd, wander_scale)
            white = white_variance(curve, n_eval, sigma_extra) if eval_noise else np.zeros_like(curve)
            # the wander ahead reverts from its filtered value at the last evaluation; computes
            # before it are not conditioned on it (ahead = 0): clipped, far earlier ones do not
            # overflow exp(-(x - x_last) / scale) to inf, and inf * 0 to NaN
            ahead = (x > x_last).astype(float)
            corr = np.exp(-(np.maximum(x, x_last) - x_last) / wander_scale) * ahead
            mean = corr * wander_last[0]
            var = wander_sd**2 - corr**2 * (wander_sd**2 - wander_last[1]) + white
            horizon = np.clip(np.log2(compute / np.exp(d.loc + d.scale * x_last)), 0, None)[None, :]
        else:
            k = self._recipe_index(recipe if recipe is not None else self._recipe_of(run_id))
            n_eval = self._typical_n_eval()
            white = white_variance(curve, n_eval, sigma_extra) if eval_noise else np.zeros_like(curve)
            mean, var = 0.0, white + wander_sd**2
            horizon = np.clip(np.log2(compute / self._recipe_data_end(k)), 0, None)[None, :]
        extrapolation_var = sum(self._extrapolation_variances(horizon, wander_sd))
        if paths:
            wander = _wander_paths(rng, x, x_last if kind == "run" else None, wander_last if kind == "run" else None,
                                   wander_sd, wander_scale)
            white_noise = np.sqrt(np.maximum(white, 0)) * _normals_keyed_by_compute(rng, compute, curve.shape[0])
            level_move = np.sqrt(np.maximum(extrapolation_var, 0)) * rng.standard_normal((curve.shape[0], 1))
            return np.clip(curve + wander + white_noise + level_move, 0.0, 1.0)
        var = var + extrapolation_var
        z = rng.standard_normal((curve.shape[0], 1)) if shared_noise else _normals_keyed_by_compute(rng, compute, curve.shape[0])
        draws = curve + mean + np.sqrt(np.maximum(var, 0)) * z
        return np.clip(draws, 0.0, 1.0)

    def sample_new_seeds(self, compute: float, *, recipe, n_seeds: int) -> np.ndarray:
        """Draws of `n_seeds` fresh runs' true pass rates (no white evaluation noise) for one recipe
        at one compute: array (n_draws, n_seeds), draw i of every column from one posterior draw.

        What a seed owns is drawn for each (its deviation from the recipe's asymptote and start, its
        wander, its late level moves: level_sd, level_wander_ratio); the growing extrapolation error
        beyond the recipe's data (horizon_sd per doubling) is the recipe's, one move per draw shared
        by all its seeds, since seeds of one recipe do not err independently about where its curve
        goes. Independent extrapolation errors would make more seeds look better than they are.
        Column 0 is the draws every decision of this recipe reads (recipe_draws_at)."""
        self._require_fit("sample_new_seeds()")
        recipe = as_name(recipe, "recipe")
        if isinstance(n_seeds, bool) or not isinstance(n_seeds, (int, np.integer)) or n_seeds < 1:
            raise ValueError(f"n_seeds must be a whole number >= 1, got {n_seeds!r}")
        first = self.sample_curves([compute], recipe=recipe, kind="new_run", rng=self.recipe_stream(recipe), eval_noise=False,
                                   shared_noise=True)
        if n_seeds == 1:
            return first
        compute_arr = _compute_values([compute])
        horizon = float(np.clip(np.log2(compute_arr[0] / self._recipe_data_end(self._recipe_index(recipe))), 0, None))
        # the split of sample_curves' new-run variance: a run's own wander and late level moves, and
        # the recipe's extrapolation error
        wander_sd = self.draws("wander_sd")
        shared_var, late_moves_var = self._extrapolation_variances(horizon, wander_sd)
        own_var = wander_sd**2 + late_moves_var
        shared_var = np.broadcast_to(shared_var, own_var.shape)
        # column 0's noise is own + shared in one normal; the shared part is drawn given it, so
        # column 0 stays what decisions read and the columns have the joint law above
        p0 = self.curve_parameters(recipe=recipe, kind="new_run", rng=np.random.default_rng(self.recipe_stream(recipe)))
        log_c = np.log(compute_arr[0])
        curve0 = sigmoid_curve_log(log_c, p0["A"], p0["B"], p0["log_C_mid"], p0["R0"])
        rng = np.random.default_rng([self.recipe_stream(recipe), 1])
        total_var = np.maximum(own_var + shared_var, 1e-300)
        noise0 = self._unclipped_noise(first[:, 0], curve0, total_var, rng)
        shared = shared_var / total_var * noise0 + np.sqrt(shared_var * own_var / total_var) * rng.standard_normal(len(noise0))
        columns = [first[:, 0]]
        for seed in range(1, n_seeds):
            seed_rng = np.random.default_rng([self.recipe_stream(recipe), 1, seed])
            p = self.curve_parameters(recipe=recipe, kind="new_run", rng=seed_rng)
            curve = sigmoid_curve_log(log_c, p["A"], p["B"], p["log_C_mid"], p["R0"])
            columns.append(np.clip(curve + shared + np.sqrt(own_var) * seed_rng.standard_normal(len(curve)), 0.0, 1.0))
        return np.column_stack(columns)

    def _recipe_data_end(self, k: int) -> float:
        """The largest compute any run of recipe k reached: its new runs' forecasts extrapolate from there."""
        d = self.data_
        return max(np.exp(d.loc + d.scale * d.x[d.run_last_obs[r]]) for r in np.flatnonzero(d.run_recipe == k))

    def _extrapolation_variances(self, horizon, wander_sd):
        """The two parts of a forecast's variance `horizon` doublings beyond the data: the growing
        extrapolation error (horizon_sd per doubling) and a run's late level moves (level_sd,
        level_wander_ratio x wander_sd), which approach their full size within a few doublings."""
        level_var = self.level_sd**2 + (self.level_wander_ratio * wander_sd) ** 2
        return (self.horizon_sd * horizon) ** 2, level_var * (1 - 2.0 ** (-horizon))

    @staticmethod
    def _unclipped_noise(clipped, curve, total_var, rng):
        """The noise behind draws clipped to [0, 1]: where a draw sits on a bound, only that it went
        at least that far is known, so it is drawn from the normal's tail beyond it."""
        noise = clipped - curve
        sd = np.sqrt(total_var)
        for bound, side in ((0.0, -1.0), (1.0, 1.0)):
            at = clipped == bound
            if at.any():
                edge = side * (bound - curve[at]) / sd[at]  # how many sd out the bound lies, on its side
                u = rng.uniform(ndtr(edge), 1.0)
                noise[at] = side * sd[at] * ndtri(np.minimum(u, 1 - 1e-16))
        return noise

    # ------------------------------------------------------------------ tidy views

    def predict(self, compute, *, recipe=None, run_id=None, kind=None, noise=True, quantiles=DEFAULT_QUANTILES) -> pd.DataFrame:
        """Tidy forecast: one row per (recipe or run, compute) with mean and quantile columns.

        kind: "run" (default when run_id is given), "new_run" (default otherwise) or "mean".
        With neither recipe nor run_id: every recipe (kind new_run/mean) or every run (kind run);
        kind="run" with recipe= alone: every run of that recipe; kind="new_run" with run_id=: a
        new seed of that run's recipe. quantiles: levels in (0, 1). The last column, ahead, is
        compute / the largest compute evaluated (of the run for kind="run", else of the recipe's
        runs): up to 1 the forecast is within the data, above it an extrapolation that far out; below
        the first evaluation (of the run, or of the recipe's runs) it is an extrapolation backwards.
        mean (noise=True) is the expected pass rate from the draws the decisions read: decide's and
        the report's expected metric of a new run, the stop advice's expected_at_budget of a run, to the
        last digit; the quantiles add one evaluation's noise to those draws.
        A compute more than 100x the data's largest (or below its smallest) gives one
        FarFromDataWarning per call: likely another unit than the run table's. A compute within the
        data but below a recipe's own first evaluation (a run's, for kind="run") gives a
        FarFromDataWarning naming that recipe or run and its smallest compute, once per recipe or run,
        as decide() says it of a budget (`forecast.decisions.forecasts_below_data` marks the rows).
        """
        self._require_fit("predict()")
        compute = _compute_values(compute)
        quantiles = _checked_quantiles(quantiles)
        noise = check_bool("noise", noise)
        recipe, run_id = as_name(recipe, "recipe"), as_name(run_id, "run_id")
        kind = resolve_kind(kind, run_id)
        self._check_recipe_of_run(recipe, run_id)
        warn_if_far_from_data(compute, self.runs_["compute"], unit=self.compute_unit, name="compute")  # once, as --compute
        if kind == "run":
            if run_id is not None:
                targets = [run_id]
            else:
                targets = [t for t in self.run_ids if recipe is None or self._recipe_of(t) == recipe]
            pairs = [(self._recipe_of(t), t) for t in targets]
        else:
            if recipe is None and run_id is not None:
                recipe = self._recipe_of(run_id)
            pairs = [(r, None) for r in ([recipe] if recipe is not None else self.recipes)]
        rows = []
        for rec, run in pairs:
            # quantiles per compute only: one normal per draw keeps them smooth along compute and
            # the same at a compute whatever else is asked (no Monte Carlo jitter between calls)
            draws = self.sample_curves(compute, recipe=rec, run_id=run, kind=kind, noise=noise, shared_noise=True)
            qs = np.quantile(draws, quantiles, axis=0)
            means = (self._expected_metric(compute, recipe=rec, run_id=run, kind=kind) if noise
                     else [draws[:, j].mean() for j in range(len(compute))])
            seen = self._largest_compute_seen(rec, run)
            for j, c in enumerate(compute):
                row = {"recipe": rec, "run_id": run, "kind": kind, "compute": c, "mean": float(means[j])}
                row.update({_qname(q): float(qs[i, j]) for i, q in enumerate(quantiles)})
                row["ahead"] = float(c / seen)  # <= 1: within the data (interpolation); above: extrapolation
                rows.append(row)
        frame = pd.DataFrame(rows)
        frame = frame if kind == "run" else frame.drop(columns="run_id")
        # the far-from-data warning judges the compute against every recipe's data together: a recipe
        # first evaluated later is forecast backwards at a compute that is well within them
        for text in predict_below_data_texts(self, frame):
            warnings.warn(text, FarFromDataWarning, stacklevel=2)
        return frame

    def _largest_compute_seen(self, recipe: str, run_id: str | None) -> float:
        """The largest compute evaluated: of the run, or of any run of the recipe."""
        runs = self.runs_
        rows = runs["run_id"] == run_id if run_id is not None else runs["recipe"] == recipe
        return float(runs.loc[rows, "compute"].max())

    def _summarise(self, draws: np.ndarray, quantiles=(0.05, 0.5, 0.95)) -> dict:
        out = {"mean": float(np.mean(draws)), "sd": float(np.std(draws))}
        out.update({_qname(q): float(np.quantile(draws, q)) for q in quantiles})
        return out

    def asymptote(self) -> pd.DataFrame:
        """Asymptote A with intervals: per recipe (the typical run) and per run."""
        self._require_fit("asymptote()")
        rows = [{"level": "recipe", "recipe": r, "run_id": None, **self._summarise(self.draws("A")[:, k])} for k, r in enumerate(self.recipes)]
        for i, run in enumerate(self.run_ids):
            rec = self._recipe_of(run)
            rows.append({"level": "run", "recipe": rec, "run_id": run, **self._summarise(self.draws("A_run")[:, i])})
        return pd.DataFrame(rows)

    def parameters(self) -> pd.DataFrame:
        """A, B, C_mid and R0 per recipe (and A, R0 per run), with intervals and R-hat/ESS.

        The start level R0 is one for the whole sweep (every recipe starts from the same base
        model; runs vary around it), so its recipe rows repeat it; the run rows differ."""
        self._require_fit("parameters()")
        summary = self._sampled_diagnostics()
        rows = []

        def add(param, recipe, run, draws, label):
            row = {"parameter": param, "recipe": recipe, "run_id": run, **self._summarise(draws)}
            row["r_hat"] = float(summary[label][0]) if label in summary else np.nan
            row["ess_bulk"] = float(summary[label][1]) if label in summary else np.nan
            rows.append(row)

        for k, r in enumerate(self.recipes):
            add("A", r, None, self.draws("A")[:, k], f"A[{r}]")
            add("B", r, None, self.draws("B")[:, k], f"B[{r}]")
            add("C_mid", r, None, np.exp(self.draws("log_C_mid")[:, k]), f"log_C_mid[{r}]")
            add("R0", r, None, self.draws("R0"), "R0")
        for i, run in enumerate(self.run_ids):
            rec = self._recipe_of(run)
            add("A", rec, run, self.draws("A_run")[:, i], f"A_run[{run}]")
            add("R0", rec, run, self.draws("R0_run")[:, i], f"R0_run[{run}]")
        return pd.DataFrame(rows)

    def _sampled_diagnostics(self) -> dict:
        """{parameter label: (R-hat, bulk ESS)} of the draws the sampler made, for parameters(). A reweighted
        fit's draws are the sampled fit's, resampled with repeats: R-hat and ESS on them describe the
        resampling, so they are read off the sampled fit, its ESS scaled by the reweighting's efficiency, as
        diagnostics() does; a reweighted fit loaded from a file (which holds no sampled fit) has them as save()
        wrote them. Loaded, the sampled fit was a _FitGroups, which az.summary refused (a ValueError)."""
        import arviz as az

        efficiency = self._report.reweight_efficiency
        reweighted = bool(self.fit_info_.get("reweighted")) and efficiency is not None
        if reweighted and self._base is None and self._saved_sampled_diagnostics is not None:
            return self._saved_sampled_diagnostics
        sampled, ess_scale = self.idata, 1.0
        if reweighted and self._base is not None:
            sampled, ess_scale = self._base["idata"], efficiency
        if isinstance(sampled, _FitGroups):
            sampled = sampled.to_inference_data()
        with this_threads_warnings_dropped():
            summary = az.summary(sampled, var_names=["A", "B", "log_C_mid", "A_run", "R0_run", "R0"], kind="diagnostics",
                                 round_to="none")  # arviz rounds R-hat to 2 digits, which hides 1.005 against a 1.01 limit
        return {label: (float(row["r_hat"]), float(row["ess_bulk"]) * ess_scale) for label, row in summary.iterrows()}

    def compute_to_target(self, target: float, *, kind="new_run", quantiles=(0.05, 0.5, 0.95)) -> pd.DataFrame:
        """Compute needed to reach `target`, per recipe (or per run with kind='run').

        p_reach is the posterior probability that the curve reaches the target at all
        (target < A, or the curve already starts at or above it: R0 >= target). A draw whose start R0 is already at or above the target needs no compute
        (0). Quantiles are over all draws, counting never-reached as infinite, so q95 is inf
        when p_reach < 0.95: an honest "might never get there".
        """
        self._require_fit("compute_to_target()")
        target = as_real(target)
        if not isinstance(target, (int, float, np.number)) or not 0 < target < 1:
            raise ValueError(f"target must lie in (0, 1), got {target!r}")
        quantiles = _checked_quantiles(quantiles)
        if kind == "run":
            items = [(self._recipe_of(run), run) for run in self.run_ids]
        else:
            items = [(r, None) for r in self.recipes]
        rows = []
        for recipe, run in items:
            p = self.curve_parameters(recipe=recipe, run_id=run, kind=kind, rng=self.recipe_stream(recipe))
            c_star = _compute_to_target(target, p["A"], p["B"], np.exp(p["log_C_mid"]), p["R0"])
            reached = np.isfinite(c_star)
            row = {"recipe": recipe, "run_id": run, "target": target, "p_reach": float(reached.mean())}
            row.update({_qname(q): float(np.quantile(c_star, q, method="inverted_cdf")) for q in quantiles})
            rows.append(row)
        frame = pd.DataFrame(rows)
        return frame if kind == "run" else frame.drop(columns="run_id")

    def plot(self, *, recipes=None, budget=None, kind="new_run", target=None, ax=None, ncols=3, title=None):
        """Fan chart: observed points, fitted curve, 50% and 90% extrapolation bands, one panel per
        recipe (`recipes`: a name or a list; default all), out to `budget` (a dashed line), with
        `target` (a pass rate) as a dash-dot line. kind: "new_run" or "mean"; one run's
        own forecast is `predict(..., run_id=..., kind="run")`. ax: axes to draw in (one per
        recipe), else a figure of its own with `ncols` panels a row and `title` above them.
        Returns the matplotlib Figure, which
        stays open as any pyplot figure does: in a loop, `plt.close(fig)` once it is saved. In a
        notebook, assign it (`fig = fc.plot(...)`): as a cell's last line it is shown twice, once
        drawn and once as the cell's value."""
        self._require_fit("plot()")
        # plot_fan_chart checks recipes, kind and budget, for its direct callers too
        from .plotting import plot_fan_chart

        # named here rather than passed on as **kwargs: help(fc.plot) and a notebook's completion
        # did not show target=, which the README's own example uses, and a misspelt one was
        # refused as plot_fan_chart()'s
        return plot_fan_chart(self, recipes=recipes, budget=budget, kind=kind, ax=ax, ncols=ncols, title=title,
                              target=target)

    # ------------------------------------------------------------------ persistence

    def save(self, path) -> Path:
        """Save posterior, run table, settings and package version to one netCDF file (atomic)."""
        self._require_fit("save()")
        # "~/fit.nc" as pandas and xarray read it: it was written to a folder named "~" under the
        # working directory, and load("~/fit.nc") then looked in the home folder and found nothing
        path = Path(path).expanduser()
        if path.is_dir():  # load() reads a folder's fit.nc; save() refused one with the name of its own temporary file
            raise IsADirectoryError(f"{path} is a folder: save() writes one file, e.g. fc.save('{path / 'fit.nc'}')")
        run_table = run_table_dataset(self.runs_)
        idata = self.idata.copy()
        if "run_table" in idata.groups():
            del idata.run_table
        idata.add_groups({"run_table": run_table})
        if self.fit_info_.get("reweighted") and (self._base is not None or self._saved_sampled_diagnostics is not None):
            # the file holds the resampled draws alone: parameters() of the loaded fit read R-hat and ESS off them
            idata.posterior.attrs[SAMPLED_DIAGNOSTICS_ATTR] = json.dumps(self._sampled_diagnostics())
        image = netcdf_image({name: getattr(idata, name) for name in idata.groups()}, idata.attrs)
        with atomic_path(path) as tmp:
            if image is None:
                idata.to_netcdf(str(tmp))
            else:
                tmp.write_bytes(image)
        return path

    @classmethod
    def load(cls, path, *, allow_version_mismatch: bool = False) -> ScalingForecaster:
        """Load a saved fit: the file save() wrote, or the folder `forecast fit --out DIR` wrote
        (its fit.nc). Refuses a file written by another package version unless allowed."""
        allow_version_mismatch = check_bool("allow_version_mismatch", allow_version_mismatch)
        path = Path(path).expanduser()
        if path.is_dir():  # the CLI's output folder: a notebook is handed the path the CLI printed
            path = path / "fit.nc"
        if not path.exists():
            raise FileNotFoundError(f"no saved fit at {path}")
        try:
            idata = _read_fit_groups(path)
        except OSError as err:  # h5py's "file signature not found" for a file that is no netCDF
            raise NotASavedFitError(f"{path} cannot be read as a saved fit ({type(err).__name__}: not the netCDF "
                             "file save() writes)") from None
        except (KeyError, RuntimeError) as err:
            # what h5py raises on a netCDF file whose internal structure is damaged (a copy cut or corrupted
            # on the way: "incorrect metadata checksum", "address of object past end of allocation"); it
            # was a traceback out of predict, decide and report
            raise NotASavedFitError(f"{path} cannot be read as a saved fit: the file is damaged ({type(err).__name__}: "
                                    f"{str(err).strip(chr(39))}): copy it again") from None
        if "posterior" not in idata.groups() or "run_table" not in idata.groups():
            raise NotASavedFitError(f"{path} is not a scaling-forecast fit (no posterior and run table in it)")
        attrs = idata.posterior.attrs
        version = attrs.get("forecast_version")
        if version is None:
            raise NotASavedFitError(f"{path} is not a scaling-forecast fit (no forecast_version attribute)")
        if version != __version__ and not allow_version_mismatch:
            raise ValueError(
                f"{path} was written by scaling-forecast {version}, this is {__version__}; refit, "
                "or load with allow_version_mismatch=True"
            )
        settings = _saved_attr(attrs, "settings", path, dict)
        fc = cls(
            priors=Priors(**settings["priors"]),
            robust=settings["robust"],
            parametrization=settings["parametrization"],
            mode=settings["mode"],
            sampler=SamplerSettings(**settings["sampler"]),
            horizon_sd=settings["horizon_sd"],
            level_sd=settings.get("level_sd", 0.0),  # fits saved before level_sd existed
            level_wander_ratio=settings.get("level_wander_ratio", 0.0),
        )
        table = idata.run_table.to_dataframe().reset_index(drop=True)
        table = table.rename(columns=_saved_attr(idata.run_table.attrs, "column_names", path, dict, "{}"))
        runs = validate_runs(table, source=path)
        # the warnings said when the runs were read for the fit, naming their file, not those of this
        # re-check (which name the saved fit, and miss the runs in flight it left out); none before they were saved
        runs.attrs["data_warnings"] = _saved_attr(attrs, "data_warnings", path, list, "[]")
        # kept apart, as load_runs keeps them, so a refit of a filter of runs_ keeps them too (none in a fit saved before)
        runs.attrs["read_warnings"] = _saved_attr(attrs, "read_warnings", path, list, "[]")
        runs.attrs[LEFT_OUT_RUNS] = _saved_attr(attrs, "left_out_runs", path, dict, "{}")  # none in a fit saved before
        if not all(isinstance(why, dict) and isinstance(why.get("reason"), str) for why in runs.attrs[LEFT_OUT_RUNS].values()):
            raise NotASavedFitError(f"{path} cannot be read as a saved fit: its 'left_out_runs' attribute is damaged "
                                    "(not what save() writes): copy it again, or refit")
        info = _saved_attr(attrs, "fit_info", path, dict, "{}")
        report = ConvergenceReport.from_dict(info["diagnostics"]) if "diagnostics" in info else None
        data = prepare_data(runs, frame=info.get("frame"))
        fc._set_fit(runs, data, idata, info, report)
        if SAMPLED_DIAGNOSTICS_ATTR in attrs:  # a reweighted fit's sampled fit's, as save() wrote them
            saved = _saved_attr(attrs, SAMPLED_DIAGNOSTICS_ATTR, path, dict, "{}")
            fc._saved_sampled_diagnostics = {label: tuple(pair) for label, pair in saved.items()}
        if not info.get("reweighted", False):
            # a sampled fit is refit()'s base as it was before saving; a reweighted one holds resampled
            # (repeated) draws, too few distinct ones to reweight again, so its refit samples
            fc._base = {"data": data, "idata": idata, "report": fc._report, "params": None, "loglik": None}
        # said on load as on fit: a notebook that loads a flagged fit and predicts or decides from
        # it would otherwise never hear of it (the CLI says it itself, once, after the numbers)
        fc._warn_if_unconverged()
        return fc

    def __repr__(self) -> str:
        if self._idata is None:
            return "ScalingForecaster(unfitted)"
        # the status too: a notebook shows this line for `fc` or a fit cell's last expression, and a
        # flagged fit read "ScalingForecaster(7 recipes, 21 runs, 600 draws)", as a converged one did
        status = "converged" if self._report.converged else "NOT CONVERGED: see diagnostics()"
        return f"ScalingForecaster({len(self.recipes)} recipes, {len(self.run_ids)} runs, {self.n_draws} draws, {status})"
