"""Someone reproducing a figure starts from `--help` and from the command RESULTS.md or the README
quotes beside it. So every benchmark's `--help` shows its example commands with how long each
takes, and every command quoted for a benchmark (in README.md, RESULTS.md and the script's own
docstring) still parses: a renamed flag fails here, not after the reader's first minutes of fits.
Nothing is benchmarked: main() is stopped where it prints its provenance line, after its checks."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from conftest import benchmark_module
from test_benchmark_provenance import SCRIPTS, StoppedAtProvenance, settings_printed_by

REPO = Path(__file__).resolve().parents[1]
NAMES = "|".join(re.escape(s[:-3]) for s in SCRIPTS)
# the script's name, then the rest of its line: the flags are read from it below
QUOTED = re.compile(rf"(?<![\w/])(?:benchmarks/)?({NAMES})\.py\b([^\n`]*)")
DURATION = re.compile(r"\b\d+(\.\d+)?(-\d+(\.\d+)?)? ?(s|min)\b|a minute")


def placeholders(tmp_path: Path) -> dict[str, str]:
    """What a reader puts in place of the documents' placeholders."""
    sweep = str(REPO / "examples" / "trainer_sweep_heldout" / "runs_seeds_8_10.csv")
    return {"F": sweep, "PATH": sweep, "NAME=VALUE": "b_mu=0.5", "K": "2", "G": "1.1", "P": "10",
            "DIR": str(tmp_path / "run"), "OUT": str(tmp_path / "out")}


def argv_of(rest: str, substitute: dict[str, str]) -> list[str]:
    """The flags and values quoted after a script's name, up to the first word that is neither
    (a comment, prose, '|' between alternatives, '<...>' or '...' for files to name)."""
    argv = []
    for token in shlex.split(rest.replace("[", " ").replace("]", " "), comments=False, posix=False):
        token = token.rstrip(";,)")
        if token.startswith("--"):
            argv.append(token)
        elif argv and argv[-1].startswith("--") and re.fullmatch(r"[\w.,/=:+-]+", token) and token not in ("or", "and"):
            argv.append(substitute.get(token, token))
        elif argv and argv[-1].startswith("--") and token.startswith("<"):
            argv.append("named-by-the-reader")  # '<the 8 saved fits>': some value, then prose
            break
        else:
            break
    return argv


def quoted_commands(tmp_path: Path) -> list[tuple[str, str, list[str]]]:
    """(where, script, argv) for every command quoted for a benchmark; a command wrapped over two
    lines of Markdown is read whole."""
    substitute = placeholders(tmp_path)
    sources = {name: (REPO / name).read_text() for name in ("README.md", "benchmarks/RESULTS.md")}
    for script in SCRIPTS:
        text = (REPO / "benchmarks" / script).read_text()
        sources[f"benchmarks/{script}"] = text[: text.index('"""', 3)]  # its docstring
    found = []
    for where, text in sources.items():
        if where.endswith(".md"):
            text = re.sub(r"`[^`]*`", lambda m: m.group(0).replace("\n", " "), text)
        for match in QUOTED.finditer(text):
            found.append((where, f"{match.group(1)}.py", argv_of(match.group(2), substitute)))
    return found


def test_the_documents_quote_every_benchmark_with_flags(tmp_path):
    """The extraction below finds what it checks: flags for most scripts, and the README's rows."""
    commands = quoted_commands(tmp_path)
    with_flags = {script for _, script, argv in commands if argv}
    assert {"early_stop.py", "convergence.py", "fit_jitter.py", "fit_speed.py", "extrapolation.py",
            "exact_likelihood.py", "optuna_pruner.py"} <= with_flags
    readme = [argv for where, script, argv in commands if where == "README.md" and script == "early_stop.py"]
    assert ["--no-synthetic", "--resample-noise", "8", "--singles", "0", "--policies",
            "forecast,successive_halving,median,no_stopping"] in readme


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_quoted_command_of_a_benchmark_still_parses(script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # the quoted paths are the repository's; a quoted --json or --save-dir is checked, never written
    commands = [(where, argv) for where, name, argv in quoted_commands(tmp_path) if name == script]
    assert commands
    with benchmark_module(script) as module:
        for where, argv in commands:
            try:
                settings_printed_by(module, argv, monkeypatch)
            except SystemExit:
                pytest.fail(f"{where} quotes `{script} {' '.join(argv)}`, which exits with: {capsys.readouterr().err}")


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_shows_the_example_commands_with_how_long_they_take(script, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [script, "--help"])  # trainer_default_run reads sys.argv
    with benchmark_module(script) as module, pytest.raises(SystemExit) as exit_info:
        module.main() if script == "trainer_default_run.py" else module.main(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    examples = [line.strip() for line in module.__doc__.splitlines() if f"benchmarks/{script}" in line
                and line.strip().startswith(("python", ".venv"))]
    assert examples, f"{script}'s docstring shows no command"
    for line in examples:
        assert line.split("#")[0].strip() in shown
    timed = [line for line in examples if DURATION.search(line)]
    assert timed, f"{script} --help does not say how long a run takes"
    assert len(examples) > 1, f"{script} --help shows no quicker or other option beside the full run"


def test_a_renamed_flag_is_caught(tmp_path, monkeypatch, capsys):
    """The check above would see a flag the script no longer has (here one never spelled so)."""
    with benchmark_module("fit_speed.py") as module, pytest.raises(SystemExit):
        settings_printed_by(module, argv_of("--skip-baselines", {}), monkeypatch)
    assert StoppedAtProvenance  # the stop the parsing commands reach


def test_every_row_of_the_readmes_results_table_cites_the_script_that_measured_it():
    text = (REPO / "README.md").read_text()
    table = text[text.index("| Benchmark | Ours | Baseline | Command |"):]
    rows = [line for line in table.split("\n\n")[0].splitlines()[2:] if line.startswith("|")]
    assert len(rows) >= 10
    for row in rows:
        command = row.rstrip(" |").rsplit("|", 1)[1]
        scripts = re.findall(r"`(\w+\.py)\b", command)
        assert scripts and all((REPO / "benchmarks" / s).exists() for s in scripts), row
