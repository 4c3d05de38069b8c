"""Numbers for people, one way everywhere (the report, `forecast decide`, the demo), so a budget
reads the same in a headline and in the table under it."""

from __future__ import annotations

import difflib
import math
import numbers
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

__all__ = ["fmt_compute", "fmt_prob", "fmt_p_reach", "fixed", "prob_is", "shown_so_it_reads_true", "shown_against_limit", "pretty_as_str",
           "names_shown", "unknown_name_message", "did_you_mean", "name_of"]


# how forecast.early_stop's reasons cite the gain-per-compute rule's unit, and what the report looks for in a
# reason to explain that unit beside it: one string, so the two cannot drift apart
GAIN_PER_COMPUTE_WORDS = "typical budgets of compute left"


# what a fast fit's output says of itself: `forecast fit --fast` and `forecast report --fast` (page and
# terminal) in the same words, followed by how to ask for a full fit
FAST_FIT_QUICK_LOOK = "fast fit (short chains): a quick look, not a decision; plan on a full fit"


@dataclass(frozen=True)
class SettingNames:
    """How output names the settings its reader may change: a command's flags (`forecast report`'s page,
    `forecast watch`'s advice) where the command wrote it, the keyword arguments (write_report(), watch())
    where Python did (a caller who read "--budget sets one" looked for a flag a function has not)."""

    budget: str
    target: str
    full_fit: str  # how to ask for a full fit after a fast one
    robust: str


COMMAND_SETTINGS = SettingNames(budget="--budget", target="--target", full_fit="without --fast", robust="--robust")
PYTHON_SETTINGS = SettingNames(budget="budget=", target="target=", full_fit="ScalingForecaster(mode='nuts')",
                               robust="ScalingForecaster(robust=True)")


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


def fmt_compute_digits(value: float, digits: int) -> str:
    """Compute as fmt_compute writes it, with `digits` significant digits instead of 3 (1.064e12;
    1,666.7), for two computes that 3 digits would write alike."""
    if digits <= 3 or not math.isfinite(value):
        return fmt_compute(value)
    if 10 <= abs(value) < 1e6:
        return f"{value:,.{max(digits - len(str(int(abs(value)))), 0)}f}"
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", f"{value:.{digits}g}")


def computes_told_apart(first: float, second: float) -> tuple[str, str]:
    """Two different computes with the digits it takes to read apart (told_apart): a budget of 6.05e9
    below data from 6.0512e9 is '6.05e9' against '6.051e9', not '6.05e9' against '6.05e9'."""
    return told_apart(float(first), float(second), fmt_compute_digits, range(3, 18))


def fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals, a tie rounded up as the number is written (its shortest repr):
    a share of 129 draws in 600 is 0.215, which a table prints so and f"{0.215:.2f}" gives as '0.21'
    (the float lies just below 0.215); here it is '0.22', as a reader of the table rounds it. One
    rule for every probability shown in decimals, so a sentence and the table beside it agree."""
    value = float(value)
    if not math.isfinite(value):
        return f"{value:.{digits}f}"
    try:
        exact = Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=Context(prec=60))
    except InvalidOperation:  # more digits than 60 (a huge value): the float's own rounding
        return f"{value:.{digits}f}"
    return format(exact, "f")


def fmt_prob(p) -> str:
    """A probability in two decimals, where two decimals would round a small share of draws to 0.00
    or a large one to 1.00: '<0.01' and '>0.99'. Only a share of exactly none or all of the
    draws prints as 0.00 or 1.00."""
    if p is None or not math.isfinite(p):
        return "–"
    if 0 < p < 0.005:
        return "<0.01"
    if 0.995 <= p < 1:  # 0.995 rounds up to 1.00, which is all of the draws
        return ">0.99"
    return fixed(p, 2)


def fmt_p_reach(p) -> str:
    """P(the curve ever reaches the target) as fmt_prob writes it, on the side of one half it lies on:
    the median compute to the target is 'never' exactly when fewer than half of the draws reach it,
    and beside that 'never' 297 draws in 600 read '0.50'; it is '0.495', as many digits as it takes."""
    text = fmt_prob(p)
    if text[0].isdigit() and p < 0.5 <= float(text):
        return shown_so_it_reads_true(p, lambda shown: shown < 0.5, 2)
    return text


def prob_is(p, text: str | None = None) -> str:
    """The comparison that completes 'P(best) ...' in a sentence: '= 0.46', '< 0.01', '> 0.99', so
    the recommendation and the table under it print the same probability the same way. `text`: the
    probability as written already (fmt_p_reach's), else fmt_prob's."""
    text = fmt_prob(p) if text is None else text
    if text[0] in "<>":
        return f"{text[0]} {text[1:]}"
    return f"= {text}"


def told_apart(first: float, second: float, render, digit_counts) -> tuple[str, str]:
    """Two different values written by render(value, digits) with the first of digit_counts that
    makes them read differently, so a sentence never says "falls from 1e+18 to 1e+18" or "0.12
    against 0.12"; the last count's text where none does."""
    for digits in digit_counts:
        a, b = render(first, digits), render(second, digits)
        if a != b:
            break
    return a, b


def shown_so_it_reads_true(value: float, reads_true, digits: int) -> str:
    """`value` with `digits` decimals, or as many more as it takes for the comparison printed beside
    it to read true: reads_true(the printed number). R-hat 1.0104 against a limit of 1.01 is
    '1.0104 (> 1.01)', not '1.010 (> 1.01)'; a probability 0.097 against 0.1 is '0.097 < 0.1'."""
    for more in range(4):
        text = fixed(value, digits + more)
        if reads_true(float(text)):
            return text
    # a value a rounding error from its threshold (0.0019999999999999996 against 0.002): 6
    # significant digits round it back onto the threshold ("0.002 < 0.002"), so as many as it takes,
    # up to the 17 that give the number itself back
    for significant in range(6, 18):
        text = f"{value:.{significant}g}"
        if reads_true(float(text)):
            return text
    return f"{value:.6g}"


def shown_against_limit(value: float, limit: float, digits: int, *, bad_above: bool) -> str:
    """A diagnostic (R-hat, ESS) with `digits` decimals, or as many more as it takes to read on the
    side of `limit` it lies on: R-hat 1.0104 against 1.01 is '1.0104', not '1.010', and bulk ESS
    149.6 against 150 is '149.6', not '150'. The one rendering for the status line, the report's
    diagnostics table and the problems listed under them, which said two values for one number."""
    value = float(value)
    if not math.isfinite(value):
        return f"{value:.{digits}f}"

    def beyond(number):
        return number > limit if bad_above else number < limit

    flagged = beyond(value)
    return shown_so_it_reads_true(value, lambda shown: beyond(shown) == flagged, digits)


def pretty_as_str(self, printer, cycle) -> None:
    """IPython's display of a result object (`_repr_pretty_ = pretty_as_str`): its str(), the summary
    it is printed as. A notebook cell ending in `fc.diagnostics()` or `decide(fc, budget)` showed the
    dataclass repr instead: raw fields, without "converged" or the recommendation's sentence, and the
    decision's table cut to "..." columns. repr() itself stays the dataclass's, for debugging."""
    printer.text(str(self))


def name_of(value) -> str:
    """A run's or recipe's name as text: a whole-number float is named as the number it holds, '3' for
    3.0 (a run_id column read as floats, because of a NaN elsewhere or another tool's float dtype,
    named run 3 '3.0' in every table and message); anything else is its str(), so a name written as
    text stays exactly as written ('3.0' in a CSV is '3.0'). Beyond 2**53 a float's digits are not
    the ones written, and it keeps its short form."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        number = float(value)
        if math.isfinite(number) and number.is_integer() and abs(number) < 2**53:
            return str(int(number))
    return str(value)


def names_shown(names, most: int) -> str:
    """'a, b, c and 4 more': the first `most` names of a list a message would make too long."""
    names = list(names)
    rest = len(names) - most
    return ", ".join(map(str, names[:most])) + (f" and {rest} more" if rest > 0 else "")


def said_together(items) -> str:
    """'a', 'a and b', 'a, b and c': a list as a sentence says it, every item."""
    items = [str(item) for item in items]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def close_names(name: str, known) -> list[str]:
    """The known names a mistyped one was likely meant as: the same but for case and spaces ('DAPO' for
    'dapo', 'g4' for a table's ' g4 ', which difflib finds too far apart and an unquoted list of known
    names shows as if the same), else up to three of difflib's close matches, ignoring case ('dap', 'dapo-s9')."""
    known = [str(k) for k in known]

    def plain(text: str) -> str:
        return " ".join(text.split()).casefold()

    same_but_case = [k for k in known if plain(k) == plain(name)]
    if same_but_case:
        return same_but_case
    by_folded = {k.casefold(): k for k in known}
    return [by_folded[m] for m in difflib.get_close_matches(name.casefold(), list(by_folded), n=3, cutoff=0.6)]


def did_you_mean(name: str, known) -> str | None:
    """"did you mean 'dapo'?" for a mistyped name (close_names' guesses), None where none is close: the
    one wording of the guess, for a recipe or run and for every flag that takes a name from a fixed set."""
    close = close_names(name, known)
    return f"did you mean {' or '.join(map(repr, close))}?" if close else None


def unknown_name_message(what: str, name: str, known, *, hint: str | None = None) -> str:
    """"unknown recipe 'dap' (did you mean 'dapo'?); known: cispo, dapo, ...": the names the fit has,
    and first the likely one, which a sweep of many runs otherwise buries in the list. `hint`
    replaces the guess where the caller knows better (a run's name given as a recipe)."""
    if hint is None:
        hint = did_you_mean(name, known)
    return f"unknown {what} '{name}'{f' ({hint})' if hint else ''}; known: {', '.join(map(str, known))}"
