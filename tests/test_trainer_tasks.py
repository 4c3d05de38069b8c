"""trainer_minimal's tasks and reward against their definitions (tasks.py's docstring), worked from the
prompt text alone: every answer is recomputed here from what the prompt says, not by the generator's code.
A wrong answer key, or a reward that passes a wrong completion, moves every pass rate the forecaster fits."""

import re
from collections import Counter

import pytest

from trainer_minimal import make_config
from trainer_minimal.config import TASK_NAMES
from trainer_minimal.tasks import (
    build_datasets,
    distinct_prompts,
    every_draw,
    make_problems,
    reward,
    write_problem,
)

MAX_SIZE = 3
N = 600  # problems per family: every size, and one-digit operands of every value, come up many times


def answer_from_the_prompt(task, prompt):
    """(answer, size) of a prompt by tasks.py's definitions, read from its text."""
    body = prompt.removesuffix("=")
    if task == "add":
        a, b = body.split("+")
        assert len(a) == len(b)
        return str(int(a) + int(b)), len(a)
    if task == "mul":
        a, b = body.split("*")
        assert len(b) == 1 and 2 <= int(b) <= 9
        return str(int(a) * int(b)), len(a)
    digits = body[1:]
    if task == "sort":
        return "".join(sorted(digits)), len(digits) - 2
    if task == "rev":
        return digits[::-1], len(digits) - 2
    if task == "max":
        return str(max(int(d) for d in digits)), (len(digits) - 1) // 2
    if task == "count":
        target, digits = digits.split(":")
        assert set(digits) <= set("0123") and target in "0123"
        return str(digits.count(target)), (len(digits) - 2) // 2
    raise AssertionError(task)


@pytest.mark.parametrize("task", TASK_NAMES)
def test_every_family_s_answer_and_size_are_its_definition(task):
    """Kills the mutants answering a reversal with the digits as given, a sort descending, a sum off by
    one, a count off by one for one digit, sizes that never reach max_size, and one-digit operands without 0."""
    problems = make_problems(7, N, [task], MAX_SIZE)
    prefix = {"sort": "s", "rev": "r", "max": "m", "count": "c"}.get(task, "")
    for p in problems:
        assert p["prompt"].startswith(prefix) and p["prompt"].endswith("=")
        answer, size = answer_from_the_prompt(task, p["prompt"])
        assert (p["answer"], p["size"]) == (answer, size), p
    assert set(Counter(p["size"] for p in problems)) == set(range(1, MAX_SIZE + 1))  # 1 to max_size, the hardest too
    if task in ("add", "mul"):  # a one-digit number is 0 to 9, as a size-digit number is 10^(size-1) to 10^size - 1
        operands = {int(n) for p in problems if p["size"] == 1 for n in re.findall(r"\d+", p["prompt"])[:1]}
        assert operands == set(range(10))


def test_a_completion_passes_only_when_it_is_the_answer_exactly():
    """Exact match: a completion that starts or ends with the answer, or is a part of it, is wrong (kills the
    mutant passing a completion that merely begins with the answer)."""
    assert reward("432", "432") == 1.0
    assert [reward(text, "432") for text in ("4321", "43", "0432", "", " 432")] == [0.0] * 5


def test_validation_prompts_are_unique_and_never_in_the_training_pool():
    """The metric measures generalisation to unseen prompts (build_datasets): a validation set with repeats
    weighs those prompts twice, and one that overlaps the pool measures memorised prompts (kills the
    mutants dropping uniqueness and the pool's exclusion). Small problem sizes, where prompts collide often."""
    cfg = make_config("scalerl", tasks="rev,max", max_size=1, train_size=2000, val_size=300, out="unused")
    pool, val = build_datasets(cfg)
    val_prompts = [p["prompt"] for p in val]
    assert len(val) == 300 and len(set(val_prompts)) == 300
    assert not set(val_prompts) & {p["prompt"] for p in pool}
    assert len(pool) == 2000 and len({p["prompt"] for p in pool}) < 2000  # the pool may repeat easy prompts


@pytest.mark.parametrize("tasks, max_size", [*(([task], 1) for task in TASK_NAMES), (["mul"], 2),
                                              (["rev", "add", "mul"], 1)])
def test_the_count_of_distinct_prompts_is_every_prompt_the_generator_writes(tasks, max_size):
    """validate() refuses a val_size past it (its generation drew 50 * val_size problems before it failed):
    asked for more unique prompts than there are, the generator writes every one, and no more."""
    count = distinct_prompts(tasks, max_size, more_than=10**6)
    with pytest.raises(ValueError, match=f"could only generate {count} of {count + 1} problems"):
        make_problems(3, count + 1, tasks, max_size, unique=True)


def test_the_count_of_distinct_prompts_stops_once_past_what_is_asked():
    """max_size may be 2**31 - 1 for sort, whose prompts at that size have billions of digits."""
    assert distinct_prompts(["sort"], 2**31 - 1, more_than=2**31 - 1) == 10**3 + 10**4 + 10**5 + 10**6 + 10**7 + 10**8 \
        + 10**9 + 10**10


@pytest.mark.parametrize("tasks, max_size", [("rev", 1), ("add,mul", 1), ("count", 1), ("sort", 2)])
def test_a_validation_set_that_leaves_one_prompt_leaves_a_training_pool_of_it(tasks, max_size):
    """validate() lets a val_size leave a single prompt for the pool (which may repeat a prompt); the pool drew 50 *
    train_size problems for it and failed ("could only generate 6 of 4000 problems" for sort at max_size 2, where
    the prompt left is 1 in 20000 draws), or passed, as validation's draws happened to fall."""
    count = distinct_prompts(tasks.split(","), max_size, more_than=10**6)
    cfg = make_config("scalerl", tasks=tasks, max_size=max_size, val_size=count - 1, out="unused")
    pool, val = build_datasets(cfg)
    val_prompts = {p["prompt"] for p in val}
    assert len(val_prompts) == count - 1 and len(pool) == cfg.train_size
    assert len({p["prompt"] for p in pool} - val_prompts) == 1  # the one prompt left, every time


def test_a_pool_of_the_prompts_few_draws_reach_takes_each_at_the_odds_of_a_draw():
    """Past its 50 * n draws, make_problems takes what is left at the odds its draws give each prompt: the family
    (and size) first, then a prompt of it. Left: one of add's 100 prompts at size 1 and two of sort's 1000, so a
    draw not skipped is add's 1/100 against 2/1000 (5 in 6), not 1 in 3 (each prompt left alike) nor 1 in 2 (each
    family alike). 0.6% of draws reach them: 30% of the pool is drawn, 70% taken from what is left."""
    every = {task: make_problems(0, count, [task], 1, unique=True) for task, count in (("add", 100), ("sort", 1000))}
    left = [every["add"][0], *every["sort"][:2]]
    exclude = frozenset(p["prompt"] for p in every["add"] + every["sort"]) - {p["prompt"] for p in left}
    pool = make_problems(5, 4000, ["add", "sort"], 1, exclude=exclude)
    assert {p["prompt"] for p in pool} == {p["prompt"] for p in left}
    assert all(p in left for p in pool)  # each with its answer, family and size
    share_of_add = sum(p["task"] == "add" for p in pool) / len(pool)
    assert share_of_add == pytest.approx(5 / 6, abs=0.03)


@pytest.mark.parametrize("task", TASK_NAMES)
def test_every_draw_of_a_family_is_each_prompt_it_may_write_once(task):
    """What make_problems takes the prompts left from, past its draws: as many as distinct_prompts counts, every
    one distinct, and every prompt the draws write among them, with the same answer."""
    for size in (1, 2):
        written = dict(write_problem(task, drawn) for drawn in every_draw(task, size))
        others = distinct_prompts([task], size - 1, more_than=10**9) if size > 1 else 0
        assert len(written) == distinct_prompts([task], size, more_than=10**9) - others
        drawn = make_problems(2, 300, [task], 1 if size == 1 else 2)
        assert all(written.get(p["prompt"]) == p["answer"] for p in drawn if p["size"] == size)
