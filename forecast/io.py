"""Atomic writes: a result file is either the old one or the complete new one, never half."""

from __future__ import annotations

import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files owner-only; results are meant to be shared
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path, obj) -> None:
    atomic_write_text(path, dumps_json(obj) + "\n")


def dumps_json(obj, indent: int | None = 2) -> str:
    """Strict JSON (no NaN or Infinity, which JSON.parse and jq reject or misread): see json_safe."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)


def json_safe(value):
    """Plain JSON types, with inf/NaN as null: strict JSON parsers reject Infinity and NaN, and
    'never reaches the target' is better said by null plus p_reach than by a non-standard token."""
    import numpy as np
    import pandas as pd

    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return json_safe(value.item())
    if isinstance(value, (list, tuple, set, frozenset, np.ndarray)):
        return [json_safe(v) for v in (sorted(value, key=str) if isinstance(value, (set, frozenset)) else value)]
    if value is pd.NA or value is pd.NaT:  # pandas' missing values (nullable columns, e.g. from Parquet)
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)
