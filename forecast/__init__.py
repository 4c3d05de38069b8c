"""scaling-forecast: Bayesian forecasts of RL compute scaling (the ScaleRL sigmoid).

    from forecast import load_runs, ScalingForecaster
    runs = load_runs("runs.csv")
    fc = ScalingForecaster().fit(runs, random_seed=0)
    fc.predict(compute=[1e3, 1e4], recipe="cispo")
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

from .data import RunDataError, load_runs, validate_runs  # noqa: E402
from .forecaster import ConvergenceWarning, NotFittedError, ScalingForecaster  # noqa: E402
from .inference import SamplerSettings  # noqa: E402
from .model import Priors  # noqa: E402

__all__ = [
    "__version__",
    "load_runs",
    "validate_runs",
    "RunDataError",
    "ScalingForecaster",
    "SamplerSettings",
    "Priors",
    "ConvergenceWarning",
    "NotFittedError",
]
