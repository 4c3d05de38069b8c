"""Numbers for people, one way everywhere (the report, `forecast decide`, the demo), so a budget
reads the same in a headline and in the table under it."""

from __future__ import annotations

import math
import re

__all__ = ["fmt_compute"]


def fmt_compute(x) -> str:
    """Compute for people: 38,400 or 3.2e15; inf is 'never' (the target is not reached)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    x = float(x)
    if math.isinf(x):
        return "never"
    if x == 0:
        return "0"
    if 10 <= abs(x) < 1e6:
        return f"{x:,.0f}"
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", f"{x:.3g}")  # 3 digits: a budget of 1.25e7 keeps its 5
