"""Known answers for the numbers and names users read (forecast.formatting): each test kills a mutant
of the rule that every other fast test let pass."""

from __future__ import annotations

import pytest

from forecast.formatting import (
    fmt_compute,
    fmt_p_reach,
    name_of,
    names_shown,
    said_together,
    shown_against_limit,
    shown_so_it_reads_true,
)


@pytest.mark.parametrize(("value", "text"), [
    (999_999.0, "999,999"), (123_456.0, "123,456"), (10.0, "10"), (1e6, "1e6"), (9.99, "9.99"), (1e-5, "1e-5"),
    (-3.2e15, "-3.2e15"),
])
def test_fmt_compute_writes_thousands_up_to_a_million(value, text):
    """Mutant that survived: the thousands form ending at 1e5, so a compute of 123,456 read 1.23e5."""
    assert fmt_compute(value) == text


def test_a_probability_beside_never_reads_on_the_side_of_one_half_it_lies_on():
    """Mutant that survived: fmt_p_reach without its own rule, so 297 draws in 600 (0.495) beside a
    median compute of 'never' read '0.50', as if half of the draws reached the target."""
    assert fmt_p_reach(0.495) == "0.495"
    assert fmt_p_reach(0.4999) == "0.4999"
    assert fmt_p_reach(0.4949) == "0.49" and fmt_p_reach(0.5) == "0.50" and fmt_p_reach(0.003) == "<0.01"


def test_a_diagnostic_against_its_limit_takes_the_fewest_digits_that_read_true():
    """Mutant that survived: only the decimals asked for tried before six significant digits, so a
    bulk ESS of 149.63 against a limit of 150 read '149.63' where '149.6' already reads below it."""
    assert shown_so_it_reads_true(149.63, lambda shown: shown < 150, 0) == "149.6"
    assert shown_against_limit(149.63, 150, 0, bad_above=False) == "149.6"
    assert shown_against_limit(1.00996, 1.01, 3, bad_above=True) == "1.010"  # not beyond 1.01, and 1.010 is not
    assert shown_against_limit(151.0, 150, 0, bad_above=False) == "151"


def test_lists_of_names_read_as_a_sentence():
    """Mutants that survived: names_shown saying 'a, b' for three names with room for two (the third
    dropped without 'and 1 more'), and said_together's 'and' lost ('a, b, c')."""
    assert names_shown(["a", "b", "c"], 2) == "a, b and 1 more"
    assert names_shown(["a", "b"], 2) == "a, b"
    assert said_together(["a", "b", "c"]) == "a, b and c" and said_together(["a"]) == "a"


def test_a_whole_number_float_is_named_as_its_number():
    """Mutant that survived: name_of returning str(3.0), so run 3 of a run_id column read as floats
    was named '3.0' in every table and message."""
    assert (name_of(3.0), name_of("3.0"), name_of(2.5), name_of(7)) == ("3", "3.0", "2.5", "7")
