"""The README's Python snippets are what a new user pastes first: each name a line starts with must
be imported or assigned in one of them (or be a builtin), so a snippet run as written does not stop
at a NameError. And the flags and NAME=VALUE settings the README shows still exist, so a renamed
flag fails here rather than as exit 2 at a reader's terminal. The numbers it states in prose (defaults,
limits, waits), the make targets it names and the shipped sweep it describes are read back from the
code, the Makefile and the table."""

import builtins
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_every_name_a_readme_snippet_starts_a_line_with_is_imported_or_assigned():
    blocks = python_blocks((REPO / "README.md").read_text())
    assert blocks, "the README has no ```python blocks"
    code = "\n".join(blocks)
    defined = set(dir(builtins))
    for names in re.findall(r"^\s*from\s+\S+\s+import\s+(.+)$", code, flags=re.M):
        defined |= {name.strip() for name in names.split("#")[0].split(",")}
    defined |= set(re.findall(r"^\s*([A-Za-z_]\w*)\s*=[^=]", code, flags=re.M))
    undefined = []
    for line in code.splitlines():
        statement = line.split("#")[0].strip()
        if not statement or statement.startswith(("from ", "import ")):
            continue
        first = re.match(r"[A-Za-z_]\w*", statement)
        if first and first.group(0) not in defined:
            undefined.append(line.strip())
    # names a reader supplies (their own newer table, their runs so far) are the snippets' placeholders
    undefined = [line for line in undefined if not re.match(r"(runs_with_new_evals|runs_so_far)\b", line)]
    assert not undefined, f"README snippets use names no snippet imports: {undefined}"


def test_a_readme_snippet_that_opens_with_imports_runs_on_its_own():
    """A snippet that starts with its imports reads as one to paste alone (in a fresh interpreter,
    under a section far from the four lines): every name it uses, anywhere in a line, is imported or
    assigned in it. The cross-validation snippet once passed `runs`, defined only in the notebook
    snippet sections above it, and stopped at a NameError when pasted alone."""
    import ast

    standalone = [b for b in python_blocks((REPO / "README.md").read_text()) if b.lstrip().startswith(("from ", "import "))]
    assert len(standalone) >= 2
    for block in standalone:
        tree = ast.parse(block)
        defined = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
        assert not used - defined, f"the README snippet starting {block.splitlines()[0]!r} uses {sorted(used - defined)}, defined in none of its lines"


# Flags a README command line gives to another program than ours (torchrun's own).
OTHER_PROGRAMS_FLAGS = {"--standalone", "--nproc_per_node"}
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def option_strings(parser) -> dict[str, set[str]]:
    """{subcommand: its flags} of a parser with subcommands."""
    import argparse

    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: {o for a in sub._actions for o in a.option_strings} for name, sub in subparsers.choices.items()}


def command_snippets(text: str) -> list[str]:
    """Every command a reader may copy: each line of a ```bash block (a line ending in '\\' joined
    with the next) and each inline `code` span (a span wrapped over two lines read whole)."""
    snippets = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        snippets += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    snippets += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    return snippets


def flags_given_to(program: str, commands: set[str], snippets: list[str]) -> list[tuple[str, str, list[str]]]:
    """(snippet, subcommand, flags) for each snippet that runs `program SUBCOMMAND ...`: the flags
    after the subcommand, up to a '#' comment."""
    found = []
    for snippet in snippets:
        match = re.search(rf"(?:^|[\s(]){program}\s+([a-z-]+)\b(.*)", snippet.split(" #")[0])
        if match and match.group(1) in commands:
            found.append((snippet.strip(), match.group(1), FLAG.findall(match.group(2))))
    return found


def test_every_flag_a_readme_command_gives_is_one_that_command_takes():
    """A renamed or misplaced flag in the README's `forecast ...` and `trainer-minimal ...` commands
    (code blocks and inline) fails here, not at the reader's terminal with exit 2."""
    from forecast.cli import build_parser
    from trainer_minimal.cli import build_parser as build_trainer_parser

    snippets = command_snippets((REPO / "README.md").read_text())
    checked = 0
    for program, parser in (("forecast", build_parser()), (r"(?:trainer-minimal|-m trainer_minimal)", build_trainer_parser())):
        takes = option_strings(parser)
        for snippet, command, flags in flags_given_to(program, set(takes), snippets):
            unknown = [flag for flag in flags if flag not in takes[command]]
            assert not unknown, f"the README's `{snippet}` gives {command} flags it does not take: {unknown}"
            checked += len(flags)
    assert checked >= 40, "the README's commands were not found"


def benchmark_flags(monkeypatch, capsys) -> set[str]:
    """The flags every benchmark script's --help shows."""
    import sys

    import pytest
    from conftest import benchmark_module
    from test_benchmark_provenance import SCRIPTS

    shown = set()
    for script in SCRIPTS:
        monkeypatch.setattr(sys, "argv", [script, "--help"])  # trainer_default_run reads sys.argv
        with benchmark_module(script) as module, pytest.raises(SystemExit):
            module.main() if script == "trainer_default_run.py" else module.main(["--help"])
        shown |= set(FLAG.findall(capsys.readouterr().out))
    return shown


def test_every_flag_the_readme_names_exists(monkeypatch, capsys):
    """The prose names flags outside any command line (`--max-stop-share`, `--unknown-budget`, the
    early-stop benchmark's comment lines): each must still be a flag of forecast, trainer-minimal or
    a benchmark script."""
    from forecast.cli import build_parser
    from trainer_minimal.cli import build_parser as build_trainer_parser

    known = set(OTHER_PROGRAMS_FLAGS) | benchmark_flags(monkeypatch, capsys)
    for parser in (build_parser(), build_trainer_parser()):
        known |= set().union(*option_strings(parser).values())
    named = set(FLAG.findall((REPO / "README.md").read_text()))
    assert len(named) > 50
    assert not named - known, f"the README names flags nothing takes: {sorted(named - known)}"


def test_the_readmes_name_value_examples_name_real_settings():
    """`--prior b_mu=0.5`, `--rule keep_leader=false`, `--advisor-rules target=0.5,margin=0.02`:
    each NAME=VALUE the README shows parses as a field of Priors or EarlyStopConfig."""
    from forecast.early_stop import EarlyStopConfig
    from forecast.model import Priors
    from forecast.settings import parse_settings

    text = " ".join(command_snippets((REPO / "README.md").read_text()))
    kinds = {"--prior": Priors, "--advisor-priors": Priors, "--rule": EarlyStopConfig, "--advisor-rules": EarlyStopConfig}
    examples = re.findall(r"(--prior|--advisor-priors|--rule|--advisor-rules)[ =]([a-z_]+=[^\s`,]+(?:,[a-z_]+=[^\s`,]+)*)", text)
    assert len(examples) >= 6
    for flag, items in examples:
        parse_settings(items, kinds[flag], flag)  # ValueError naming the item, if it is not a field


def test_the_files_links_and_modules_the_readme_names_exist():
    """A moved file, a renamed heading or module would leave the README pointing at nothing: its
    repository paths (`forecast/reweight.py`, `notebooks/01_quickstart`), its links (files and
    #anchors) and its dotted names (`forecast.early_stop.EarlyStopConfig`) are each looked up."""
    import importlib

    text = (REPO / "README.md").read_text()
    paths = set(re.findall(r"(?<![\w/.-])((?:forecast|trainer_minimal|benchmarks|tests|docs|examples|notebooks)/[\w./-]*\w)", text))
    assert len(paths) > 15
    missing = [p for p in paths if not (REPO / p).exists() and not (REPO / f"{p}.ipynb").exists()]
    assert not missing, f"the README names paths that do not exist: {sorted(missing)}"

    anchors = {re.sub(r"[^\w -]", "", h).strip().lower().replace(" ", "-") for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        assert (target[1:] in anchors) if target.startswith("#") else (REPO / target).exists(), f"broken link ({target})"

    for name in set(re.findall(r"(?<![\w/.])((?:forecast|trainer_minimal)(?:\.\w+)+)", text)):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                found = importlib.import_module(".".join(parts[:cut]))
                break
            except ModuleNotFoundError:
                continue
        for attribute in parts[cut:]:
            assert hasattr(found, attribute), f"the README names {name}, which does not exist"
            found = getattr(found, attribute)


def test_the_stop_rules_the_readme_states_are_the_defaults():
    """The README's one-paragraph statement of the early-stop rules gives each default threshold; a
    retuned EarlyStopConfig default would leave it describing rules that no longer run."""
    from forecast.early_stop import EarlyStopConfig

    text = " ".join((REPO / "README.md").read_text().split())
    rules = text[text.index("The rules (`forecast.early_stop`):"):]
    stated = re.search(
        r"P\(beats the best alternative by ([\d.]+)\) < ([\d.]+); expected gain to the sweep's best per typical "
        r"run's budget of compute left < ([\d.]+) .*?P\(reaching a target\) < ([\d.]+); gain per doubling of "
        r"compute < ([\d.]+) \(flattened\).*?Over any ([\d.]+)x of compute at most half of the runs in flight", rules)
    assert stated, "the README's statement of the stop rules was not found"
    defaults = EarlyStopConfig()
    assert [float(x) for x in stated.groups()] == [
        defaults.margin, defaults.p_beat_threshold, defaults.min_gain_per_compute, defaults.p_target_threshold,
        defaults.saturation_epsilon, defaults.stop_cap_window]
    assert defaults.max_stop_share == 0.5 and defaults.keep_leader and defaults.keep_runner_up
    assert defaults.protect_top_percent is None  # "(off by default)"


def _tracker_exports(folder: Path) -> dict[str, tuple[set, int]]:
    """The exports docs/run_format.md converts, as the trackers write them, each with the runs and the
    number of evaluations its run table must hold: W&B's run history (a row per logged step, the pass
    rate on evaluation steps only, the first at step 0 before training), a W&B chart's CSV (a column per
    run with its __MIN and __MAX, the shorter run's end blank) and TensorBoard scalars in a long table."""
    import pandas as pd

    runs = ("dapo-s0", "dapo-s1", "grpo-s0")
    history = []
    for name in runs:
        for step in range(0, 61, 5):
            evaluates = step % 10 == 0
            history.append({"Step": step, "Name": name, "Group": name[:4], "_runtime": 30.0 * step,
                            "eval/pass_rate": 0.1 + 0.004 * step if evaluates else None, "train/loss": 1 / (1 + step),
                            "_timestamp": 1.7e9 + step})
    pd.DataFrame(history).to_csv(folder / "wandb_export.csv", index=False)
    chart = pd.DataFrame({"Step": [10, 20, 30, 40]})
    for name in runs:
        values = [0.1, 0.2, 0.3, None if name == "grpo-s0" else 0.35]
        chart[f"{name} - eval/pass_rate"] = values
        chart[f"{name} - eval/pass_rate__MIN"] = values
        chart[f"{name} - eval/pass_rate__MAX"] = values
    chart.to_csv(folder / "wandb_chart.csv", index=False)
    scalars = [{"run": name, "tag": tag, "step": step, "value": 0.1 + 0.001 * step}
               for name in runs for step in (10, 20, 30) for tag in ("eval/pass_rate", "train/loss")]
    pd.DataFrame(scalars).to_csv(folder / "scalars.csv", index=False)
    return {"wandb_export.csv": (set(runs), 3 * 6), "wandb_chart.csv": (set(runs), 3 * 4 - 1),
            "scalars.csv": (set(runs), 3 * 3)}


def test_the_run_formats_conversions_of_tracker_exports_give_run_tables(tmp_path, monkeypatch):
    """docs/run_format.md answers "my runs are in W&B or TensorBoard" with pandas snippets instead of a
    column-mapping option: each, run as written on its export, must give a table validate_runs takes,
    with every run and evaluation of the export and nothing else (no step without an evaluation, no
    evaluation before training)."""
    from forecast import validate_runs

    expected = _tracker_exports(tmp_path)
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks((REPO / "docs" / "run_format.md").read_text())
    converted = set()
    for block in blocks:
        (export,) = re.findall(r'read_csv\("([^"]+)"\)', block)
        namespace = {}
        exec(compile(block, f"docs/run_format.md ({export})", "exec"), namespace)
        runs = validate_runs(namespace["runs"])
        names, evaluations = expected[export]
        assert set(runs["run_id"]) == names and len(runs) == evaluations, export
        assert set(runs["recipe"]) == {"dapo", "grpo"} and runs["compute"].min() > 0, export
        converted.add(export)
    assert converted == set(expected)


def makefile_targets() -> tuple[set[str], set[str], set[str]]:
    """(every target the Makefile defines, those `make help` lists, those only other targets depend on)."""
    text = (REPO / "Makefile").read_text()
    rules = re.findall(r"^([a-z][\w-]*):(?!=)([^\n]*)", text, flags=re.M)  # `PY := ...` is a variable, not a rule
    listed = set(re.findall(r'^\t@echo "make ([a-z][\w-]*)', text, flags=re.M))
    prerequisites = {name for _, after in rules for name in after.split()}
    return {target for target, _ in rules}, listed, prerequisites


def test_every_make_target_the_readme_names_exists_and_make_help_lists_it():
    """The README names `make demo`, `make lab`, `make bench`, ... and says `make help` lists the other
    targets: a target renamed in the Makefile would leave the README sending readers to 'No rule to
    make target', and one added without a help line would be one the README's pointer misses."""
    text = (REPO / "README.md").read_text()
    named = set(re.findall(r"(?<![\w-])make ([a-z][\w-]*)", " ".join(command_snippets(text))))
    defined, listed, prerequisites = makefile_targets()
    assert {"demo", "test", "help", "setup", "lab", "bench"} <= named, "the README's make targets were not found"
    assert not named - defined, f"the README names make targets the Makefile does not have: {sorted(named - defined)}"
    # every target a reader runs is listed; `help` itself and a step of another (chromium, under setup) need not be
    unlisted = defined - listed - prerequisites - {"help"}
    assert not unlisted, f"`make help` does not list {sorted(unlisted)}"
    assert not listed - defined, f"`make help` lists targets the Makefile lacks: {sorted(listed - defined)}"


def test_make_bench_runs_every_benchmark_the_readme_lists_but_the_gpu_ones():
    """"`make bench` runs all of them that need no GPU": the scripts of the README's benchmark block
    whose comment does not say they need a GPU are the ones `make bench` runs."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("## Benchmarks"):]
    block = re.search(r"```bash\n(.*?)```", block, flags=re.S).group(1)
    listed = {script for script, comment in re.findall(r"^(?:python|bash) benchmarks/(\S+)\s+#(.*)$", block, flags=re.M)
              if not re.search(r"\bGPU\b|needs one", comment)}
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^bench:[^\n]*\n((?:\t[^\n]*\n)+)", makefile, flags=re.M).group(1)
    run = set(re.findall(r"benchmarks/(\S+\.py)", recipe))
    assert len(listed) >= 8, "the README's benchmark block was not found"
    assert listed == run, f"README lists but make bench skips {sorted(listed - run)}; runs unlisted {sorted(run - listed)}"


def source_constant(path: str, name: str):
    """A module-level constant as its source assigns it, whatever a test session has set it to since."""
    import ast

    tree = ast.parse((REPO / path).read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]
    return ast.literal_eval(value)


def readme_numbers() -> list[tuple[str, str, object]]:
    """(what, the README's words with the number as a group, the code's value): numbers the README
    states in prose, away from any --help, each read from where the code keeps it."""
    from forecast import SamplerSettings, ScalingForecaster
    from forecast.backtest import BacktestConfig
    from forecast.cli import FOLDER_WAIT_SECONDS
    from forecast.cross_validation import DEFAULT_CUTS, MIN_POINTS_BEFORE_CUT, chance_range
    from forecast.data import FAR_BEYOND_DATA
    from forecast.decisions import CLEAR_WINNER_P
    from forecast.demo import DEMO_DRAWS, DEMO_TUNE, LIVE_PRESETS, LIVE_SEEDS
    from forecast.early_stop import EarlyStopConfig
    from forecast.forecaster import MIN_REWEIGHT_EFFICIENCY
    from forecast.inference import ConvergenceReport, default_ess_limit
    from forecast.report import BUDGET_MULTIPLE
    from forecast.shape_check import LATE_TREND_Z_LIMIT
    from trainer_minimal.sweep import KILL_GRACE_S, REAP_GRACE_S, STOP_GRACE_S

    backtest, full, fast = BacktestConfig(), SamplerSettings(), SamplerSettings.fast()
    torch_pin = re.search(r"^TORCH_SPEC \?= torch==(\S+)", (REPO / "Makefile").read_text(), flags=re.M).group(1)
    low, high = chance_range(0.9, 21)
    return [
        ("torch pin", r"Set-up installs torch (\S+)'s CPU build", torch_pin),
        ("report's budget", r"without `--budget`: (\d+)x the largest compute observed", BUDGET_MULTIPLE),
        ("cross-validate's cuts", r"forecast cross-validate RUNS \[--cuts ([\d.,]+)\] \[--level", ",".join(map(str, DEFAULT_CUTS))),
        ("runs left out of a cut", r"A run with fewer than (\d+) evaluations before a cut is left out", MIN_POINTS_BEFORE_CUT),
        ("chance range", r"\((\d+)% to (\d+)% of 21 runs at 90%\)", (round(100 * low), round(100 * high))),
        ("halving eta", r"keeps the best 1/N at each rung; default (\d+)\)", backtest.halving_eta),
        ("median percentile", r"at each step; default (\d+), which is `MedianPruner`", backtest.median_percentile),
        ("backtest checkpoints", r"checkpoints G times of compute apart, default ([\d.]+)\)", backtest.check_growth),
        ("watch's wait for its folder", r"is waited for, up to (a minute)", {60: "a minute"}.get(FOLDER_WAIT_SECONDS)),
        ("pruner warm-up", r"which counts reports \((\d+) at least, the rules' `min_evals`\)", EarlyStopConfig().min_evals),
        ("far from the data", r"more than (\d+)x the data's largest compute", FAR_BEYOND_DATA),
        ("clear winner", r"within 2 of them of the ([\d.]+) bar for a clear winner", CLEAR_WINNER_P),
        ("misshapen runs", r"in standard errors; flagged below (-[\d.]+)\)", LATE_TREND_Z_LIMIT),
        ("level wander ratio", r"`level_wander_ratio` \(default (\d+)\)", ScalingForecaster().level_wander_ratio),
        ("default chains", r"with\s+the defaults \((\d+) \+ (\d+) draws per chain\)", (full.tune, full.draws)),
        ("demo's chains", r"the demo's (\d+) chains x (\d+) draws", (full.chains, DEMO_DRAWS)),
        ("demo's warm-up", r"non-centred and (\d+)\s+warm-up draws per chain \(the demo's\)", DEMO_TUNE),
        ("fast fits' limits", r"Fast\s+fits are often flagged \(R-hat above ([\d.]+), bulk or tail ESS below (\d+)",
         (ConvergenceReport.rhat_limit, default_ess_limit(fast.chains, fast.chains * fast.draws))),
        ("full fits' limits", r"converge \(R-hat <= ([\d.]+), bulk and tail ESS >= (\d+), no divergences\)",
         (ConvergenceReport.rhat_limit, default_ess_limit(full.chains, full.chains * full.draws))),
        # as the source sets it: the test session keeps more (conftest.py)
        ("compiled models kept", r"\(the (\d+) used last in a process",
         source_constant("forecast/inference.py", "MAX_COMPILED_MODELS")),
        ("reweighting", r"\(Pareto k <= ([\d.]+)\) and keep at least (half) of the draws' information",
         (ConvergenceReport.pareto_k_limit, {0.5: "half"}.get(MIN_REWEIGHT_EFFICIENCY))),
        ("live demo", r"trains a short sweep with trainer_minimal \((\d+) runs",
         len(LIVE_PRESETS.split(",")) * len(LIVE_SEEDS.split(","))),
        ("sweep's stop", r"its runs: (\d+) s to end on their own, .*? a run\s+still going (\d+) s later, .*? "
                         r"a run that SIGKILL has not ended (\d+) s later", (STOP_GRACE_S, KILL_GRACE_S, REAP_GRACE_S)),
    ]


def as_number(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def test_the_numbers_the_readme_states_are_the_codes():
    """A default retuned, a limit moved or a pin raised in the code leaves the README describing
    another program: each number it states in prose (a default, a limit, a wait) is compared with
    the constant the code keeps it in. The flags' own defaults are checked against --help in
    test_cli.py, and the stop rules' thresholds above."""
    text = " ".join((REPO / "README.md").read_text().split())
    for what, words, value in readme_numbers():
        stated = re.search(words, text)
        assert stated, f"{what}: the README's words {words!r} were not found"
        expected = value if isinstance(value, tuple) else (value,)
        assert [as_number(g) for g in stated.groups()] == [as_number(str(v)) for v in expected], (
            f"{what}: the README says {stated.group(0)!r}, the code has {value!r}")


def test_the_readmes_shipped_sweep_is_the_table_it_describes():
    """"7 recipes x 3 seeds, 40 evaluations each", "its 21 runs all ran their 640 steps", `ended`
    `finished`, "whose recipes start between 6.05e9 and 2.49e10 flops": the shipped table, re-made
    (or a run added) without the prose, would make the README's worked numbers wrong."""
    import pandas as pd

    from forecast.formatting import fmt_compute

    text = " ".join((REPO / "README.md").read_text().split())
    runs = pd.read_csv(REPO / "examples" / "trainer_sweep" / "runs.csv")
    recipes, seeds, evals = map(int, re.search(r"`examples/trainer_sweep/`: (\d+) recipes x (\d+) seeds, (\d+) evaluations each", text).groups())
    n_runs, steps = map(int, re.search(r"The shipped sweep's (\d+) runs all ran their (\d+) steps", text).groups())
    assert (runs["recipe"].nunique(), runs.groupby("recipe")["seed"].nunique().unique().tolist()) == (recipes, [seeds])
    assert runs.groupby("run_id").size().unique().tolist() == [evals] and runs["run_id"].nunique() == n_runs
    assert runs.groupby("run_id")["step"].max().unique().tolist() == [steps]
    assert set(runs["ended"]) == {"finished"}
    first = runs.groupby("recipe")["compute"].min()
    assert re.search(rf"whose recipes start between {fmt_compute(first.min())} and {fmt_compute(first.max())} flops", text)
