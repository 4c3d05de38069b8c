"""NAME=VALUE settings for forecast's settings dataclasses (EarlyStopConfig, Priors).

One parser for every front door that takes them as text: `--prior` and `--rule` on the command
line, and the trainer's `advisor_rules` / `advisor_priors` (a comma list in its config). Values are typed from
the dataclass's annotations, so a threshold is a float, `min_evals` an int, `keep_runner_up` a
bool, and a rule that may be off (annotated `... | None`) is switched off with `none`.
"""

from __future__ import annotations

import dataclasses
import types
import typing

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
NONE_WORDS = ("none", "null")


def split_items(items) -> list[str]:
    """'a=1,b=2' or ['a=1', 'b=2,c=3'] -> ['a=1', 'b=2', 'c=3'] (blank items dropped)."""
    if isinstance(items, str):
        items = [items]
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()]


def _field_types(cls) -> dict[str, tuple[type, bool]]:
    """{field: (value type, None allowed)} from the dataclass's annotations."""
    hints = typing.get_type_hints(cls)
    out = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union else ()
        kinds = [a for a in args if a is not type(None)]
        out[field.name] = (kinds[0] if kinds else hint, type(None) in args)
    return out


def _typed(text: str, kind: type, optional: bool):
    word = text.strip().lower()
    if optional and word in NONE_WORDS:
        return None
    if kind is bool:
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"{text!r} is not true or false")
    try:
        return kind(text)  # int() and float() ignore surrounding spaces
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ValueError(f"{text!r} is not {what}" + (" (or none, for off)" if optional else "")) from None


def _unknown_name(name: str, fields) -> str:
    """"unknown name 'taget' (did you mean 'target'?); " for a name the dataclass lacks, its likely one
    first (a typo among 13 rule names was left to the list); "" for a known name or none."""
    if not name or name in fields:
        return ""
    from .formatting import did_you_mean  # the guess a mistyped recipe gets

    hint = did_you_mean(name, sorted(fields))
    return f"unknown name {name!r}{f' ({hint})' if hint else ''}; "


def parse_settings(items, cls, label: str) -> dict:
    """'NAME=VALUE' items (a list, or one comma-separated string) -> {name: typed value} for the
    dataclass `cls`. ValueError naming `label` and the bad item: an unknown name, a missing '=', a
    value of the wrong type, a name given twice. Ranges are the dataclass's to check (its __post_init__)."""
    fields = _field_types(cls)
    overrides, given_as = {}, {}
    for item in split_items(items):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in fields:
            raise ValueError(f"{label} {item!r}: {_unknown_name(name, fields)}expected NAME=VALUE with NAME one of "
                             f"{', '.join(sorted(fields))}")
        if name in given_as:  # the last one was kept in silence (`--rule margin=0.05 --rule margin=0.02`)
            raise ValueError(f"{label} {item!r}: {name} is set twice (also {given_as[name]!r}); give it once")
        given_as[name] = item
        try:
            overrides[name] = _typed(value, *fields[name])
        except ValueError as err:
            raise ValueError(f"{label} {item!r}: {err}") from None
    return overrides
