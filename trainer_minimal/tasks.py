"""Verifiable tasks generated in code, a fixed training pool, a held-out validation set, the reward.

Six families, each with a size from 1 to max_size, so every batch mixes easy and hard problems:
  sort   "s31402="    -> "01234"   sort size+2 digits
  rev    "r31402="    -> "20413"   reverse size+2 digits
  add    "47+385="    -> "432"     add two numbers of `size` digits
  mul    "381*7="     -> "2667"    a `size`-digit number times one digit
  count  "c3:3103="   -> "2"       count one digit in 2*size+2 digits drawn from 0-3
  max    "m31402="    -> "4"       the largest of 2*size+1 digits
The default mix (config.tasks) is sort, rev and add: a tiny model learns sorting and reversal
partly in the warm start and much more under RL, while multi-digit addition stays mostly unsolved,
which keeps the pass-rate asymptote well below 1 (as on real reasoning benchmarks). count and mul
gave flat curves at this model size; max is learnt in the warm start. The reward is exact match.
"""

import itertools

import numpy as np


def make_problem(rng, task, size):
    """One (prompt, answer) pair of the given family and size; rng is a numpy Generator."""
    return write_problem(task, draw(rng, task, size))


def draw(rng, task, size):
    """What a problem of the family and size is made of, drawn: two numbers for add and mul, a digit string for
    sort, rev and max, a digit string and the digit to count for count."""
    if task == "add":
        return tuple(_number(rng, size) for _ in range(2))
    if task == "mul":
        return _number(rng, size), int(rng.integers(2, 10))
    if task in ("sort", "rev"):
        return _digits(rng, 10, size + 2)
    if task == "max":
        return _digits(rng, 10, 2 * size + 1)
    if task == "count":
        return _digits(rng, 4, 2 * size + 2), str(int(rng.integers(0, 4)))
    raise ValueError(f"unknown task {task!r}")


def every_draw(task, size):
    """Every draw(rng, task, size) can make, each once (in order): each writes its own prompt."""
    numbers = range(0 if size == 1 else 10 ** (size - 1), 10**size)  # _number's
    if task == "add":
        return itertools.product(numbers, numbers)
    if task == "mul":
        return itertools.product(numbers, range(2, 10))
    if task in ("sort", "rev"):
        return _every_digit_string(10, size + 2)
    if task == "max":
        return _every_digit_string(10, 2 * size + 1)
    if task == "count":
        return itertools.product(_every_digit_string(4, 2 * size + 2), "0123")
    raise ValueError(f"unknown task {task!r}")


def write_problem(task, drawn):
    """(prompt, answer) of the family from what draw() drew for it."""
    if task == "add":
        a, b = drawn
        return f"{a}+{b}=", str(a + b)
    if task == "mul":
        a, b = drawn
        return f"{a}*{b}=", str(a * b)
    if task == "sort":
        return f"s{drawn}=", "".join(sorted(drawn))
    if task == "rev":
        return f"r{drawn}=", drawn[::-1]
    if task == "max":
        return f"m{drawn}=", max(drawn)
    if task == "count":
        digits, target = drawn
        return f"c{target}:{digits}=", str(digits.count(target))
    raise ValueError(f"unknown task {task!r}")


def distinct_prompts(tasks, max_size, more_than):
    """How many distinct prompts make_problem can write for these families at sizes 1 to max_size, counted
    until the count passes more_than (a max_size of billions has counts of billions of digits). A family's
    prompts never match another's (each has its own letter or operator), nor a size's another size's (their
    lengths differ)."""
    def numbers(size):  # _number's numbers of `size` digits: 0-9 at size 1
        return 10 if size == 1 else 9 * 10 ** (size - 1)

    per_size = {"sort": lambda s: 10 ** (s + 2), "rev": lambda s: 10 ** (s + 2), "max": lambda s: 10 ** (2 * s + 1),
                "count": lambda s: 4 * 4 ** (2 * s + 2), "add": lambda s: numbers(s) ** 2, "mul": lambda s: numbers(s) * 8}
    total = 0
    for size in range(1, max_size + 1):
        total += sum(per_size[task](size) for task in set(tasks))
        if total > more_than:
            break
    return total


def _number(rng, n_digits):
    low = 0 if n_digits == 1 else 10 ** (n_digits - 1)
    return int(rng.integers(low, 10**n_digits))


def _digits(rng, base, length):
    return "".join(str(d) for d in rng.integers(0, base, length))


def _every_digit_string(base, length):
    return ("".join(digits) for digits in itertools.product("0123456789"[:base], repeat=length))


def make_problems(seed, n, tasks, max_size, exclude=frozenset(), unique=False):
    """n problems with family and size uniform; prompts in `exclude` are skipped (past 50 * n draws, the
    problems still missing are taken from the prompts left: draws_left).

    Returns a list of dicts with keys prompt, answer, task, size.
    """
    rng = np.random.default_rng(seed)
    out, seen = [], set(exclude)
    for _ in range(50 * n):  # bounded: a tiny problem space cannot loop forever
        if len(out) == n:
            break
        task = tasks[int(rng.integers(len(tasks)))]
        size = int(rng.integers(1, max_size + 1))
        prompt, answer = make_problem(rng, task, size)
        if prompt in seen:
            continue
        if unique:
            seen.add(prompt)
        out.append(dict(prompt=prompt, answer=answer, task=task, size=size))
    if len(out) < n and exclude and not unique:
        out += draws_left(rng, n - len(out), tasks, max_size, exclude)
    if len(out) < n:
        raise ValueError(f"could only generate {len(out)} of {n} problems for tasks={tasks}, "
                         f"max_size={max_size}; lower train_size/val_size or raise max_size")
    return out


def draws_left(rng, n, tasks, max_size, exclude):
    """n problems whose prompts are not in exclude, each as likely as make_problems's draws make it: a family
    and size 1 in len(tasks) * max_size, then a prompt 1 in its family and size's (the odds of the draws that
    skip the excluded prompts, given that a draw is not skipped).

    For a training pool that make_problems's 50 * n draws did not fill: fewer than 1 in 50 draws missed the
    validation set, which holds nearly all the prompts (validate() refuses only one that holds them all). The
    prompts left are then few and rarely drawn (1 in 300000 draws for one sort prompt at size 3 of max_size 3:
    hours of draws for a pool of 4000), so they are found here, by writing every prompt of the tasks, about as
    many as the validation set holds."""
    left, odds = [], []
    for task in tasks:  # a task named twice is drawn twice as often, and its prompts are listed twice
        for size in range(1, max_size + 1):
            problems = [write_problem(task, drawn) for drawn in every_draw(task, size)]
            for prompt, answer in problems:
                if prompt not in exclude:
                    left.append(dict(prompt=prompt, answer=answer, task=task, size=size))
                    odds.append(1 / len(problems))
    if not left:
        return []
    chosen = rng.choice(len(left), size=n, p=np.array(odds) / sum(odds))
    return [dict(left[i]) for i in chosen]


def build_datasets(cfg):
    """(training pool, validation set), both fixed by data_seed and shared by every run.

    The validation prompts are unique and never appear in the pool, so the metric measures
    generalisation to unseen prompts; the pool may repeat easy prompts, as a real dataset would.
    """
    tasks = [t for t in cfg.tasks.split(",") if t]
    val = make_problems(cfg.data_seed + 1, cfg.val_size, tasks, cfg.max_size, unique=True)
    val_prompts = frozenset(p["prompt"] for p in val)
    pool = make_problems(cfg.data_seed, cfg.train_size, tasks, cfg.max_size, exclude=val_prompts)
    return pool, val


def reward(completion, answer):
    """Exact match of the decoded completion (text before <eos>) with the answer: 1.0 or 0.0."""
    return float(completion == answer)
