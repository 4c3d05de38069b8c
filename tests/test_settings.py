"""NAME=VALUE settings (forecast.settings) and the range checks of EarlyStopConfig and Priors."""

import math
import re

import numpy as np
import pytest

from forecast.early_stop import EarlyStopConfig
from forecast.model import Priors
from forecast.settings import parse_settings


def test_values_are_typed_from_the_dataclass():
    parsed = parse_settings("target=0.5, min_evals=3,keep_runner_up=off,max_stop_share=none", EarlyStopConfig, "rules")
    assert parsed == {"target": 0.5, "min_evals": 3, "keep_runner_up": False, "max_stop_share": None}
    assert type(parsed["min_evals"]) is int
    assert parse_settings(["b_mu=0.5", "m_mu=-1,a_sd=1"], Priors, "--prior") == {"b_mu": 0.5, "m_mu": -1.0, "a_sd": 1.0}
    assert parse_settings("", Priors, "--prior") == {} and parse_settings([], Priors, "--prior") == {}
    assert EarlyStopConfig(**parsed).max_stop_share is None  # a rule that may be off is switched off with none



def test_every_word_for_true_false_and_off_is_taken_in_any_case_and_spaces_around_names_are_ignored():
    """The words the docs promise (true/yes/on/1, false/no/off/0, none/null) in any case, and a
    NAME = VALUE written with spaces, as a config file or a shell line may have them."""
    for word in ("true", "yes", "on", "1", "TRUE", "Yes", "On"):
        assert parse_settings(f"keep_leader={word}", EarlyStopConfig, "rules") == {"keep_leader": True}, word
    for word in ("false", "no", "off", "0", "False", "NO", "Off"):
        assert parse_settings(f"keep_leader={word}", EarlyStopConfig, "rules") == {"keep_leader": False}, word
    for word in ("none", "null", "None", "NULL"):
        assert parse_settings(f"target={word}", EarlyStopConfig, "rules") == {"target": None}, word
    assert parse_settings("target = 0.5, min_evals =3", EarlyStopConfig, "rules") == {"target": 0.5, "min_evals": 3}

@pytest.mark.parametrize("text, message", [
    ("nope=1", "rules 'nope=1': unknown name 'nope'; expected NAME=VALUE with NAME one of keep_leader"),
    # a typo is pointed at its likely name, as a recipe's is (formatting.close_names), not left to the list
    ("keep_leadr=false", "rules 'keep_leadr=false': unknown name 'keep_leadr' (did you mean 'keep_leader'?); "
                         "expected NAME=VALUE with NAME one of keep_leader"),
    ("Target=0.5", "unknown name 'Target' (did you mean 'target'?)"),
    ("keep_leadr", "rules 'keep_leadr': unknown name 'keep_leadr' (did you mean 'keep_leader'?); expected NAME=VALUE"),
    ("=1", "rules '=1': expected NAME=VALUE"),
    ("target", "rules 'target': expected NAME=VALUE"),
    ("min_evals=2.5", "rules 'min_evals=2.5': '2.5' is not a whole number"),
    ("keep_runner_up=maybe", "rules 'keep_runner_up=maybe': 'maybe' is not true or false"),
    ("margin=none", "rules 'margin=none': 'none' is not a number"),  # margin cannot be off
    ("target=abc", "rules 'target=abc': 'abc' is not a number (or none, for off)"),
    # the last one was kept in silence: `--rule margin=0.05 --rule margin=0.02` judged at 0.02
    ("margin=0.05, margin=0.02", "rules 'margin=0.02': margin is set twice (also 'margin=0.05'); give it once"),
    (["target=0.5", "min_evals=3,target = 0.6"], "rules 'target = 0.6': target is set twice (also 'target=0.5')"),
])
def test_bad_items_are_refused_naming_the_item(text, message):
    with pytest.raises(ValueError) as err:
        parse_settings(text, EarlyStopConfig, "rules")
    assert message in str(err.value)


@pytest.mark.parametrize("settings, message", [
    ({"p_beat_threshold": 2.0}, "p_beat_threshold must lie in (0, 1), got 2.0"),
    ({"p_target_threshold": 0.0}, "p_target_threshold must lie in (0, 1)"),
    ({"target": 1.5}, "target must lie in (0, 1)"),
    ({"margin": -0.01}, "margin must be >= 0"),
    ({"min_gain_per_compute": math.nan}, "min_gain_per_compute must be >= 0, got nan"),
    ({"min_evals": 1}, "min_evals must be >= 2"),
    ({"max_extrapolation": 1.0}, "max_extrapolation must be > 1"),
    ({"max_stop_share": 0.0}, "max_stop_share must lie in (0, 1]"),
    ({"protect_top_percent": 101.0}, "protect_top_percent must lie in (0, 100]"),
])
def test_early_stop_settings_out_of_range_are_refused(settings, message):
    with pytest.raises(ValueError) as err:
        EarlyStopConfig(**settings)
    assert message in str(err.value)


@pytest.mark.parametrize("settings, message", [
    # in Python (a notebook, a config file read as text) these were "'<' not supported between instances
    # of 'str' and 'int'", and min_evals=2.5 was taken, its warm-up ending between evaluations
    ({"margin": "0.01"}, "margin must be a number, got '0.01'"),
    ({"p_beat_threshold": "0.1"}, "p_beat_threshold must be a number, got '0.1'"),
    ({"target": "0.6"}, "target must be a number, or None (off), got '0.6'"),
    ({"max_extrapolation": "8"}, "max_extrapolation must be a number, or None (off), got '8'"),
    ({"min_evals": "4"}, "min_evals must be >= 2 (a whole number), got '4'"),
    ({"min_evals": 2.5}, "min_evals must be >= 2 (a whole number), got 2.5"),
    ({"margin": True}, "margin must be a number, got True"),
    # an infinite margin or gain floor fired on every run, held back only by the stop cap and the guards
    ({"margin": math.inf}, "margin must be finite and >= 0, got inf"),
    ({"min_gain_per_compute": math.inf}, "min_gain_per_compute must be finite and >= 0, got inf"),
])
def test_early_stop_settings_of_the_wrong_type_are_refused_naming_them(settings, message):
    with pytest.raises(ValueError) as err:
        EarlyStopConfig(**settings)
    assert message in str(err.value)


def test_early_stop_settings_take_numpy_numbers_and_a_whole_float_count():
    config = EarlyStopConfig(margin=np.float64(0.02), min_evals=4.0, target=np.float32(0.6))
    assert config.min_evals == 4 and isinstance(config.min_evals, int)


def test_rules_that_may_be_off_accept_none_and_the_defaults_are_valid():
    EarlyStopConfig()
    EarlyStopConfig(target=None, saturation_epsilon=None, min_gain_per_compute=None, max_extrapolation=None,
                    max_stop_share=None, protect_top_percent=None)


def test_priors_scales_must_be_positive_and_centres_may_be_negative_but_neither_absurd():
    Priors(a_mu_offset=-2.0, b_mu=-1.0, m_mu=-0.5, student_nu=1000.0)
    for name in ("a_sd", "noise_sd", "student_nu", "wander_scale"):
        with pytest.raises(ValueError, match=f"{name} must be > 0"):
            Priors(**{name: 0.0})
    with pytest.raises(ValueError, match="a_run_sd must be > 0 and at most 20, got nan"):
        Priors(a_run_sd=math.nan)
    # these overflowed inside the sampler, after a minute of compiling: a segfault, or "All
    # initialization points failed"
    for name, value in (("b_mu", math.nan), ("b_mu", 1e300), ("m_mu", -math.inf)):
        with pytest.raises(ValueError, match=rf"{name} must lie in \[-20, 20\] \(a logit, log or normalised-axis centre\), got"):
            Priors(**{name: value})
    with pytest.raises(ValueError, match="a_sd must be > 0 and at most 20, got inf"):
        Priors(a_sd=math.inf)


def early_stop_number_fields() -> dict[str, bool]:
    """{field: None allowed} for every EarlyStopConfig field annotated as a float (or float | None), read from the
    dataclass itself rather than from a list kept beside it."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(EarlyStopConfig)
    out = {}
    for field in dataclasses.fields(EarlyStopConfig):
        kinds = set(typing.get_args(hints[field.name])) or {hints[field.name]}
        if float in kinds:
            out[field.name] = type(None) in kinds
    return out


def test_every_number_rule_is_type_checked_and_only_those_annotated_optional_may_be_off():
    """NUMBER_RULES and RULES_THAT_MAY_BE_OFF are kept by hand beside the fields: a new float field left out of
    NUMBER_RULES took text ("'<' not supported between 'str' and 'int'", or kept silently where no range check
    compares it), and one left out of RULES_THAT_MAY_BE_OFF could not be switched off with None though its
    annotation says it may. Each field annotated float is refused as text, naming it, and takes None exactly when
    it is annotated float | None."""
    from forecast.early_stop import NUMBER_RULES, RULES_THAT_MAY_BE_OFF

    numbers_ = early_stop_number_fields()
    assert len(numbers_) >= 10  # the reading of the annotations found the rules (10 in 2026-12)
    assert sorted(NUMBER_RULES) == sorted(numbers_)
    assert sorted(RULES_THAT_MAY_BE_OFF) == sorted(name for name, optional in numbers_.items() if optional)
    for name, optional in numbers_.items():
        off = ", or None (off)" if optional else ""
        with pytest.raises(ValueError, match=rf"^{name} must be a number{re.escape(off)}, got '0\.5'$"):
            EarlyStopConfig(**{name: "0.5"})
        if optional:
            assert getattr(EarlyStopConfig(**{name: None}), name) is None
        else:
            with pytest.raises(ValueError, match=rf"^{name} must be a number, got None$"):
                EarlyStopConfig(**{name: None})
