"""Argument parsing of benchmarks/early_stop.py that the README's commands rely on."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from early_stop import prior_overrides  # noqa: E402


def test_prior_overrides_reads_name_value_pairs():
    assert prior_overrides(["b_mu=0.5", "a_mu_offset=1"]) == {"b_mu": 0.5, "a_mu_offset": 1.0}
    assert prior_overrides([]) == {}


@pytest.mark.parametrize("item, words", [("bogus=1", "NAME one of"), ("b_mu", "NAME=VALUE"), ("b_mu=x", "'x' is not a number")])
def test_prior_overrides_names_the_bad_item(item, words):
    with pytest.raises(ValueError, match=words) as caught:
        prior_overrides([item])
    assert repr(item) in str(caught.value)
