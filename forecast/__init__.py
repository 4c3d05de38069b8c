"""scaling-forecast: Bayesian forecasts of RL compute scaling (the ScaleRL sigmoid).

    from forecast import load_runs, ScalingForecaster
    runs = load_runs("examples/trainer_sweep/runs.csv")
    fc = ScalingForecaster().fit(runs, random_seed=0)
    fc.predict(compute=[2e12, 4e12], recipe="cispo")
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scaling-forecast")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.1.0"

import sys  # noqa: E402

from ._arviz_stamp import settle_arviz_daily_stamp  # noqa: E402

if "arviz" not in sys.modules:  # once ArviZ is imported, its daily check has run
    settle_arviz_daily_stamp()  # before pymc imports arviz: see forecast/_arviz_stamp.py

# The model's names load PyMC (about 4 s), so they are imported when first asked for: `forecast
# --help`, a mistyped flag or a bad table are answered without waiting for it. The run table's names
# load pandas (0.4-0.9 s): every trainer_minimal run imports forecast.io (atomic writes) and
# forecast.cli at its start, and needs pandas only when its advisor is on.
_LAZY_NAMES = {
    "FarFromDataWarning": ".data",
    "RunDataError": ".data",
    "load_runs": ".data",
    "validate_runs": ".data",
    "ScalingForecaster": ".forecaster",
    "ConvergenceWarning": ".forecaster",
    "NotFittedError": ".forecaster",
    "NotASavedFitError": ".forecaster",
    "SamplerSettings": ".inference",
    "Priors": ".model",
    "cross_validate": ".cross_validation",
    "performance_metrics": ".cross_validation",
    "describe_cross_validation": ".cross_validation",
}


def __getattr__(name):
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module 'forecast' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY_NAMES[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_LAZY_NAMES})


__all__ = [
    "__version__",
    "load_runs",
    "validate_runs",
    "RunDataError",
    "FarFromDataWarning",
    "ScalingForecaster",
    "SamplerSettings",
    "Priors",
    "ConvergenceWarning",
    "NotFittedError",
    "NotASavedFitError",
    "cross_validate",
    "performance_metrics",
    "describe_cross_validation",
]
