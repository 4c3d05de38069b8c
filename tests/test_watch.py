"""`forecast watch`: following run logs while they are appended to, torn last lines included.

The advisor (fit + rules) is replaced by a recording fake here: what is tested is the polling —
which evaluations are seen when, that a half-written line is skipped and picked up whole later,
and that advice is written atomically. The rules themselves are tested in test_early_stop.py.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from forecast.cli import main
from forecast.data import load_runs
from forecast.early_stop import EarlyStopConfig, Recommendation
from forecast.watch import WatchState, planned_budget, poll, scan_runs, watch


def row(run_id: str, i: int, metric: float) -> str:
    return json.dumps({"run_id": run_id, "recipe": run_id.split("-")[0], "compute": 100.0 * (i + 1),
                       "metric": metric, "n_eval": 800, "step": 10 * (i + 1), "compute_unit": "flops"}) + "\n"


def append(path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


class FakeAdvisor:
    """Records what it was asked; says stop for runs whose name starts with 'bad'."""

    def __init__(self):
        self.calls = []

    def __call__(self, table, budgets, config):
        self.calls.append({r: int((table["run_id"] == r).sum()) for r in sorted(budgets)} | {"_budgets": dict(budgets)})
        return {
            r: Recommendation("stop" if r.startswith("bad") else "continue", "beats_best",
                              f"{'stop' if r.startswith('bad') else 'continue'}: P(beats best) = 0.01 < 0.05",
                              run_id=r, probability=0.01, value=0.01, threshold=0.05)
            for r in budgets
        }


def fake_stop_counts(monkeypatch) -> list:
    """Replace the default advisor's fit and rules: runs named 'bad...' are told to stop on a
    comparison. Returns the list of the stop counts (recent_stops) it is handed, one per fit."""
    import forecast.watch as watch_module

    asked = []

    def fake_advise_table(table, budgets, config, *, recent_stops=0, **kwargs):
        asked.append(recent_stops)
        recs = {r: Recommendation("stop" if r.startswith("bad") else "continue", "beats_best", "stop or go", run_id=r)
                for r in budgets}
        return recs, None

    monkeypatch.setattr(watch_module, "advise_table", fake_advise_table)
    return asked


@pytest.fixture
def sweep(tmp_path):
    for run in ("good-s0", "bad-s0"):
        (tmp_path / run).mkdir()
    return tmp_path


def test_poll_follows_appends_and_skips_a_torn_last_line(sweep):
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    for i in range(4):
        append(good, row("good-s0", i, 0.1 + 0.05 * i))
        append(bad, row("bad-s0", i, 0.1))
    torn = row("good-s0", 4, 0.35)
    append(good, torn[:25])  # a write in progress
    advisor, state = FakeAdvisor(), WatchState()
    config = EarlyStopConfig(min_evals=4)

    new = poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    assert {r.run_id for r in new} == {"good-s0", "bad-s0"}
    assert advisor.calls[-1]["good-s0"] == 4  # the torn fifth row is not read
    assert advisor.calls[-1]["_budgets"] == {"good-s0": 1e4, "bad-s0": 1e4}

    assert poll(sweep, state, config=config, budget=1e4, advisor=advisor) == []  # nothing new: no refit
    assert len(advisor.calls) == 1

    append(good, torn[25:])  # the line completes
    new = poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    assert [r.run_id for r in new] == ["good-s0"]
    assert advisor.calls[-1]["good-s0"] == 5
    assert state.latest["bad-s0"].action == "stop"


def test_runs_in_warmup_and_finished_runs(sweep):
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    append(good, row("good-s0", 0, 0.1))
    for i in range(5):
        append(bad, row("bad-s0", i, 0.1))
    (sweep / "bad-s0" / "summary.json").write_text("{}")  # finished: an alternative, not advised
    advisor, state = FakeAdvisor(), WatchState()
    new = poll(sweep, state, config=EarlyStopConfig(min_evals=4), budget=1e4, advisor=advisor)
    assert [(r.run_id, r.rule) for r in new] == [("good-s0", "warmup")]
    assert advisor.calls == []  # nobody to advise yet: no fit


def test_a_log_whose_run_id_is_a_whole_number_float_names_the_run_as_load_runs_does(tmp_path):
    """Another tool's log with "run_id": 3.0 was watched as run '3.0', while `forecast report` on the
    same folder (load_runs) named it '3': the two surfaces named one run two ways."""
    (tmp_path / "r3").mkdir()
    for i in range(2):
        append(tmp_path / "r3" / "evals.jsonl", json.dumps({"run_id": 3.0, "recipe": "a", "compute": 100.0 * (i + 1),
                                                            "metric": 0.2}) + "\n")
    table, folders, unreadable = scan_runs(tmp_path)
    assert not unreadable and set(table["run_id"]) == {"3"} and folders == {"3": tmp_path / "r3"}
    assert set(load_runs(tmp_path)["run_id"]) == {"3"}


def test_budget_from_the_run_config(sweep):
    folder = sweep / "good-s0"
    for i in range(3):
        append(folder / "evals.jsonl", row("good-s0", i, 0.2))
    table, folders, unreadable = scan_runs(sweep)
    assert not unreadable
    rows = table[table["run_id"] == "good-s0"]
    assert planned_budget(folder, rows) is None
    (folder / "config.json").write_text(json.dumps({"max_steps": 120, "advisor_budget": 0.0}))
    assert planned_budget(folder, rows) == pytest.approx(300.0 / 30 * 120)  # compute per step x steps
    (folder / "config.json").write_text(json.dumps({"max_steps": 120, "advisor_budget": 5e3}))
    assert planned_budget(folder, rows) == 5e3
    assert planned_budget(folder, rows, override=7.0) == 7.0
    (folder / "config.json").write_text(json.dumps({"max_steps": "120"}))  # hand-edited: the number it spells
    assert planned_budget(folder, rows) == pytest.approx(300.0 / 30 * 120)


@pytest.mark.parametrize("config, said", [
    ({"max_steps": -5}, "max_steps -5 is not a number > 0"),
    ({"max_steps": "lots"}, "max_steps 'lots' is not a number > 0"),
    ({"advisor_budget": float("inf")}, "advisor_budget inf is not a number > 0"),
    ([1, 2], "config.json is not a JSON object"),
    # found by fuzzing: a file cut short or mistyped read as "no planned budget known", its cause unsaid
    ('{"max_steps": 12', "config.json cannot be read as JSON (JSONDecodeError: Expecting ',' delimiter"),
    ("", "config.json cannot be read as JSON (JSONDecodeError: Expecting value"),
    # found by fuzzing: JSON keeps a 1 followed by 400 zeros as an int, and math.isfinite raised OverflowError
    ('{"max_steps": 1' + "0" * 400 + "}", "max_steps of 401 digits is beyond a float's range, not a usable number > 0"),
    ('{"advisor_budget": 1' + "0" * 400 + "}", "advisor_budget of 401 digits is beyond a float's range"),
])
def test_a_hand_edited_config_costs_its_own_run_the_budget_not_the_poll(sweep, config, said):
    """It raised out of poll() with a traceback (a ValueError, TypeError or AttributeError), so
    one run's file stopped the advice for every run."""
    for i in range(4):
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", i, 0.1 + 0.05 * i))
        append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", i, 0.1))
    (sweep / "good-s0" / "config.json").write_text(json.dumps({"max_steps": 120}))
    (sweep / "bad-s0" / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    advisor, state = FakeAdvisor(), WatchState()
    new = {r.run_id: r for r in poll(sweep, state, config=EarlyStopConfig(min_evals=4), advisor=advisor)}
    assert advisor.calls[-1]["_budgets"] == {"good-s0": pytest.approx(100.0 / 10 * 120)}
    assert new["bad-s0"].rule == "no_budget" and str(sweep / "bad-s0" / "config.json") in new["bad-s0"].message
    assert said in new["bad-s0"].message


def test_watch_loop_prints_and_writes_atomically_while_the_log_grows(sweep):
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    for i in range(4):
        append(good, row("good-s0", i, 0.1 + 0.05 * i))
        append(bad, row("bad-s0", i, 0.1))
    pending = [row("good-s0", 4, 0.35)[:30], row("good-s0", 4, 0.35)[30:] + row("good-s0", 5, 0.4)]
    lines, writes = [], []

    def sleep(_seconds):  # between polls the trainer writes: first half a line, then the rest
        writes.append(json.loads((sweep / "recommendations.json").read_text()))
        if pending:
            append(good, pending.pop(0))

    state = watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=4), max_polls=4,
                  advisor=FakeAdvisor(), say=lines.append, sleep=sleep)
    assert state.polls == 4
    assert len(lines) == 3  # both runs at the first poll, good-s0 again when its rows completed
    assert lines[0].startswith("[") and "P(beats best) = 0.01 < 0.05" in lines[0]
    final = json.loads((sweep / "recommendations.json").read_text())
    assert final["recommendations"]["bad-s0"]["action"] == "stop"
    assert final["recommendations"]["good-s0"]["details"]["n_evals"] == 6
    assert all("recommendations" in w for w in writes)
    assert not list(sweep.glob(".recommendations.json.*"))  # no temporary file left behind


def test_watch_cli_once_json(sweep, capsys):
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1) + row("good-s0", 1, 0.12))
    out = sweep / "advice.json"
    assert main(["watch", str(sweep), "--once", "--json", "--budget", "1e4", "--out", str(out)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(printed) == 1 and printed[0]["rule"] == "warmup"
    assert json.loads(out.read_text())["recommendations"]["good-s0"]["rule"] == "warmup"
    assert main(["watch", str(sweep), "--once", "--max-polls", "3", "--budget", "1e4"]) == 0
    assert "--max-polls 3 has no effect with --once" in capsys.readouterr().err


def test_watch_waits_a_while_for_a_folder_a_sweep_is_about_to_make(tmp_path, capsys, monkeypatch):
    """`trainer-minimal sweep --out D ... &` then `forecast watch D`: the sweep makes D a few seconds
    in, and watch exited 2 at once. Now it waits (saying so) up to a minute; a path that never
    appears still ends in exit 2, naming the wait. Sleeping is faked."""
    import time

    import forecast.cli as cli

    folder = tmp_path / "sweep"
    naps = []

    def the_sweep_makes_it(seconds):
        naps.append(seconds)
        if len(naps) == 3 and not folder.exists():
            folder.mkdir()

    monkeypatch.setattr(time, "sleep", the_sweep_makes_it)
    cli._wait_for_the_folder(folder, wait=True)
    assert len(naps) == 3 and "does not exist yet: waiting up to 60 s" in capsys.readouterr().err
    naps.clear()
    assert main(["watch", str(tmp_path / "typo"), "--max-polls", "1"]) == 2
    assert len(naps) == cli.FOLDER_WAIT_SECONDS
    assert "typo: is not a folder (waited 60 s for it to appear)" in capsys.readouterr().err


def test_watch_cli_bad_input(tmp_path, capsys):
    assert main(["watch", str(tmp_path / "missing"), "--once"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["watch", str(tmp_path), "--once", "--threshold", "2"]) == 2


def test_a_folder_of_run_tables_without_run_logs_is_named_so_not_waited_on_in_silence(tmp_path, capsys, monkeypatch):
    """`forecast watch D` on a folder holding a run table (runs.csv, or evals.csv in each run folder)
    but no evals.jsonl said 'waiting for evals.jsonl under D' and, with --once, exited 0 having
    advised nothing; without it, it waited forever. Now --once exits 2 naming the tables it found
    and what reads them; a live watch says the same as a warning, and waits, as before."""
    import forecast.watch

    for run in ("a-s0", "b-s0"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "evals.csv").write_text("run_id,recipe,compute,metric\n" + f"{run},{run[0]},1,0.5\n")
    (tmp_path / "a-s0" / "train_log.jsonl").write_text("{}\n")  # the trainer's step log is no table
    assert main(["watch", str(tmp_path), "--once"]) == 2
    err = capsys.readouterr().err
    assert (f"{tmp_path}: holds no run log (evals.jsonl) but run tables (a-s0/evals.csv, b-s0/evals.csv): "
            "`forecast watch` follows trainer_minimal's run logs, RUN/evals.jsonl, as they are written; a table is "
            "read by `forecast report`, `decide` or `backtest`") in err
    assert not (tmp_path / "recommendations.json").exists()
    polled = []

    def a_poll_of_nothing(runs_dir, state, **kwargs):
        state.polls += 1
        polled.append(runs_dir)
        return []

    monkeypatch.setattr(forecast.watch, "poll", a_poll_of_nothing)
    assert main(["watch", str(tmp_path), "--max-polls", "1"]) == 0  # live: the logs may yet come
    assert "warning: " + str(tmp_path) + ": holds no run log" in capsys.readouterr().err and len(polled) == 1
    (tmp_path / "a-s0" / "evals.jsonl").write_text(row("a-s0", 0, 0.5))  # a log beside them: nothing said
    assert main(["watch", str(tmp_path), "--max-polls", "1"]) == 0
    assert "holds no run log" not in capsys.readouterr().err


@pytest.mark.parametrize("interval", ["nan", "inf", "1e300", "-1", "9223372036"])
def test_an_interval_that_cannot_be_slept_is_refused_before_the_first_poll(tmp_path, interval, monkeypatch, capsys):
    """`--interval nan` (or inf, or 1e300 seconds) passed the check for a negative one, and the watch
    failed with a ValueError or OverflowError traceback from time.sleep after its first poll (a fit
    of a minute or more, on a sweep in flight), exit 1."""
    import forecast.watch

    polled = []
    monkeypatch.setattr(forecast.watch, "poll", lambda *args, **kwargs: polled.append(1) or [])
    assert main(["watch", str(tmp_path), "--interval", interval, "--max-polls", "2"]) == 2
    assert "--interval must be" in capsys.readouterr().err and polled == []


@pytest.mark.parametrize("target, message", [
    ("good-s0/evals.jsonl", "is, or would become, an input read from"),  # the run log it follows
    ("good-s0/summary.json", "whose files (evals.jsonl, summary.json) are the trainer's"),  # would mark it finished
    (".", "is a folder; give a file name"),  # refused before the fit, not after it
])
def test_watch_refuses_an_out_that_would_overwrite_what_it_reads(sweep, capsys, target, message):
    log = sweep / "good-s0" / "evals.jsonl"
    append(log, row("good-s0", 0, 0.1))
    before = log.read_text()
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--out", str(sweep / target)]) == 2
    assert message in capsys.readouterr().err
    assert log.read_text() == before and not (sweep / "good-s0" / "summary.json").exists()


@pytest.mark.slow
def test_the_default_advisor_reweights_when_one_evaluation_arrives(sweep):
    """Real fits: the first poll samples, the next (one new evaluation) reweights that posterior."""
    import warnings

    import numpy as np

    def curve(i, top):
        return round(0.1 + (top - 0.1) / (1 + (6.0 / (i + 1)) ** 1.5), 4)

    for run, top in (("good-s0", 0.6), ("bad-s0", 0.3)):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, curve(i, top)) for i in range(10)))
    state, config = WatchState(), EarlyStopConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fast-mode chains may warn; not what is tested here
        first = poll(sweep, state, config=config, budget=4e3)
        assert {r.run_id for r in first} == {"good-s0", "bad-s0"}
        assert first[0].details["reweighted"] is False
        append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", 10, curve(10, 0.3)))
        second = poll(sweep, state, config=config, budget=4e3)
    assert [r.run_id for r in second] == ["bad-s0"]
    assert second[0].details["reweighted"] is True
    assert state.forecaster.data_.n_obs == 21 and np.isfinite(state.forecaster.diagnostics().pareto_k)


def test_priors_from_the_command_line_reach_the_watch_fits(sweep, intercept_advice_fit, capsys):
    """--prior goes through watch() and poll() to the default advisor's fit (here intercepted)."""
    from conftest import FitIntercepted

    import forecast.watch as watch_module

    seen = intercept_advice_fit(watch_module)
    append(sweep / "good-s0" / "evals.jsonl", "".join(row("good-s0", i, 0.1 + 0.02 * i) for i in range(5)))
    with pytest.raises(FitIntercepted):
        main(["watch", str(sweep), "--once", "--budget", "1e4", "--prior", "b_mu=0.5"])
    assert seen["priors"].b_mu == 0.5 and seen["priors"].m_mu == 0.0
    assert main(["watch", str(sweep), "--once", "--prior", "b_mu"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


def test_the_stop_cap_counts_runs_told_to_stop_over_a_window_of_compute(sweep, monkeypatch):
    """Advice comes at every evaluation, so the default advisor tells the rules how many runs it told
    to stop on a comparison within stop_cap_window of compute and that have ended since; a run told
    to stop that is still in flight is judged again at this poll instead, and an older stop no
    longer counts. The fit and the rules are faked: what is tested is the count passed to them."""
    asked = fake_stop_counts(monkeypatch)
    for run in ("bad-s1", "good-s1"):
        (sweep / run).mkdir()
    for run in ("good-s0", "bad-s0", "bad-s1", "good-s1"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.3) for i in range(5)))  # compute up to 500
    state, config = WatchState(), EarlyStopConfig(min_evals=4)
    poll(sweep, state, config=config, budget=1e4)
    assert asked == [0] and state.told_to_stop == {"bad-s0", "bad-s1"}
    (sweep / "bad-s0" / "summary.json").write_text("{}")  # bad-s0 acted on it; bad-s1 runs on
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 5, 0.3))  # compute 600 < 1.25 x 500
    poll(sweep, state, config=config, budget=1e4)
    assert asked[-1] == 1  # bad-s0 ended within the window; bad-s1 is judged again at this poll
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 6, 0.3))  # compute 700 >= 1.25 x 500
    poll(sweep, state, config=config, budget=1e4)
    assert asked[-1] == 0


def test_a_run_with_a_bad_row_is_left_out_and_the_others_still_advised(sweep):
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    for i in range(4):
        append(good, row("good-s0", i, 0.1 + 0.05 * i))
        append(bad, row("bad-s0", i, 1.7 if i == 2 else 0.1))  # a pass rate outside [0, 1]
    lines, advisor = [], FakeAdvisor()
    state = watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=4), max_polls=2,
                  advisor=advisor, say=lines.append, sleep=lambda _s: None)
    refused = [line for line in lines if line.startswith("[bad-s0] left out")]
    assert len(refused) == 1  # said once, not at every poll
    assert "column 'metric'" in refused[0] and "row 3" in refused[0] and str(bad) in refused[0]
    assert advisor.calls[-1]["_budgets"] == {"good-s0": 1e4}
    assert set(state.latest) == {"good-s0"}
    assert "bad-s0" in state.refused


def test_watch_writes_every_poll_and_says_when_every_run_has_finished(sweep):
    for run in ("good-s0", "bad-s0"):
        for i in range(3):
            append(sweep / run / "evals.jsonl", row(run, i, 0.2))
        (sweep / run / "summary.json").write_text("{}")
    lines = []
    watch(sweep, interval=0, budget=1e4, max_polls=3, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    assert json.loads((sweep / "recommendations.json").read_text())["polls"] == 3
    assert lines == [f"no run in flight under {sweep}: 2 run(s) finished (their folders hold summary.json)"]


def test_watch_writes_nothing_into_a_folder_without_run_logs(tmp_path):
    lines = []
    watch(tmp_path, interval=0, max_polls=2, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    assert list(tmp_path.iterdir()) == []
    assert lines == [f"waiting for evals.jsonl under {tmp_path}"]


def test_one_look_at_a_folder_without_run_logs_does_not_say_it_waits(tmp_path, capsys):
    """`forecast watch D --once` on a folder with no run log yet said 'waiting for evals.jsonl under D'
    and exited at once: it waited for nothing. One poll says there was nothing to advise."""
    lines = []
    watch(tmp_path, interval=0, max_polls=1, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    assert lines == [f"no evals.jsonl under {tmp_path} yet: nothing to advise at this one poll"]
    assert main(["watch", str(tmp_path), "--once"]) == 0
    assert "waiting" not in capsys.readouterr().out


def test_a_problem_seen_only_across_runs_refuses_one_run_and_its_old_advice_goes(sweep):
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    for i in range(4):
        append(good, row("good-s0", i, 0.2))
        append(bad, row("bad-s0", i, 0.1))
    advisor, state = FakeAdvisor(), WatchState()
    poll(sweep, state, config=EarlyStopConfig(min_evals=4), budget=1e4, advisor=advisor)
    assert set(state.latest) == {"good-s0", "bad-s0"}
    append(bad, row("bad-s0", 4, 0.1).replace('"flops"', '"gpu_hours"'))  # each row fine, the sweep now mixes units
    append(good, row("good-s0", 4, 0.2))
    poll(sweep, state, config=EarlyStopConfig(min_evals=4), budget=1e4, advisor=advisor)
    assert "mixes compute units" in state.refused["bad-s0"][1]
    assert advisor.calls[-1]["_budgets"] == {"good-s0": 1e4}
    assert set(state.latest) == {"good-s0"}  # bad-s0's earlier 'stop' is not left to look current


def test_watch_says_so_when_the_last_run_finishes_without_a_new_row(sweep):
    for run in ("good-s0", "bad-s0"):
        for i in range(2):
            append(sweep / run / "evals.jsonl", row(run, i, 0.2))
    lines = []

    def sleep(_seconds):  # both trainers end between polls, after their last evaluation
        for run in ("good-s0", "bad-s0"):
            (sweep / run / "summary.json").write_text("{}")

    state = watch(sweep, interval=0, budget=1e4, max_polls=3, advisor=FakeAdvisor(), say=lines.append, sleep=sleep)
    assert state.latest == {}
    assert lines[-1] == f"no run in flight under {sweep}: 2 run(s) finished (their folders hold summary.json)"
    assert sum(line.startswith("no run in flight") for line in lines) == 1
    written = json.loads((sweep / "recommendations.json").read_text())
    assert written["recommendations"] == {} and written["refused"] == {} and written["polls"] == 3


def test_reference_runs_named_like_live_runs_are_kept_apart():
    import pandas as pd

    from forecast.early_stop import reference_rows

    live = pd.DataFrame({"run_id": ["a-s0", "a-s0", "b-s0"], "recipe": ["a", "a", "b"],
                         "compute": [1.0, 2.0, 1.0], "metric": [0.2, 0.3, 0.25]})
    earlier = pd.DataFrame({"run_id": ["a-s0", "a-s0", "c-s0", "c-s0"], "recipe": ["a", "a", "c", "c"],
                            "compute": [1.0, 2.0, 1.0, 2.0], "metric": [0.21, 0.35, 0.1, 0.2]})
    kept = reference_rows(earlier, live)
    assert sorted(set(kept["run_id"])) == ["c-s0", "ref:a-s0"]  # another sweep's a-s0 is another run
    same_sweep = pd.concat([live, earlier[earlier["run_id"] == "c-s0"]], ignore_index=True)
    assert sorted(set(reference_rows(same_sweep, live)["run_id"])) == ["c-s0"]  # the live logs stand for themselves


def test_watch_with_a_reference_from_an_earlier_sweep_of_the_same_names(sweep, tmp_path):
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.1 + 0.05 * i) for i in range(4)))
    earlier = tmp_path / "earlier.csv"  # an earlier sweep's finished runs, named as the trainer names them
    rows = [f"{run},{run.split('-')[0]},{100.0 * (i + 1)},{0.12 + 0.06 * i},flops,800" for run in ("good-s0", "bad-s0") for i in range(8)]
    earlier.write_text("run_id,recipe,compute,metric,compute_unit,n_eval\n" + "\n".join(rows) + "\n")
    seen = {}

    def advisor(table, budgets, config):
        seen.update(table.groupby("run_id").size().to_dict())
        return {r: Recommendation("continue", "beats_best", "continue", run_id=r) for r in budgets}

    state = WatchState()
    poll(sweep, state, config=EarlyStopConfig(), reference=earlier, budget=1e4, advisor=advisor)
    assert not state.refused
    assert seen == {"good-s0": 4, "bad-s0": 4, "ref:good-s0": 8, "ref:bad-s0": 8}


def test_a_stop_from_a_fit_that_did_not_converge_says_so_on_its_line():
    from forecast.watch import _line

    stop = Recommendation("stop", "beats_best", "stop: P(beats best) = 0.01 < 0.1", run_id="a-s0")
    stop.details.update(converged=False, convergence_problems=["max R-hat 1.03 > 1.01"])
    assert _line(stop).endswith("(warning: the fit behind this advice did not converge: max R-hat 1.03 > 1.01)")
    stop.details["converged"] = True
    assert "warning" not in _line(stop)
    go_on = Recommendation("continue", "beats_best", "continue: P(beats best) = 0.4 >= 0.1", run_id="a-s0")
    go_on.details["converged"] = False
    assert "warning" not in _line(go_on)
    # what each chain alone advises follows the problems (recommend_runs' chains_say)
    stop.details.update(converged=False, chains_say="its 2 chains alone disagree (...), so this advice rests on how they mix")
    assert _line(stop).endswith("did not converge: max R-hat 1.03 > 1.01; its 2 chains alone disagree (...), so this "
                                "advice rests on how they mix)")
    # a stop that reads no forecast is not one decided on the fit: each line of a watch past its budget said it
    reached = Recommendation("stop", "budget_reached", "stop: compute 5.06e11 flops >= planned budget 1e9 flops",
                             run_id="a-s0")
    reached.details.update(converged=False, convergence_problems=["max R-hat 1.03 > 1.01"], chains_say="each of ...")
    assert _line(reached) == "[a-s0]: stop: compute 5.06e11 flops >= planned budget 1e9 flops"


def test_the_line_of_a_run_whose_end_falls_away_says_so_whatever_its_advice():
    from forecast.shape_check import misshapen_run_note
    from forecast.watch import _line

    note = misshapen_run_note(-5.0)
    for action in ("continue", "stop"):
        rec = Recommendation(action, "beats_best", f"{action}: P(beats best) = 0.4 >= 0.1", run_id="a-s0")
        assert "shape" not in _line(rec)
        rec.details.update(shape_note=note, late_trend_z=-5.0)
        assert _line(rec).endswith(f"{action}: P(beats best) = 0.4 >= 0.1 ({note})")
    rec.details.update(converged=False, convergence_problems=["max R-hat 1.03 > 1.01"])  # a stop: both said
    assert _line(rec).endswith(f"did not converge: max R-hat 1.03 > 1.01) ({note})")


@pytest.mark.slow
def test_a_run_made_to_decline_is_noted_beside_its_advice_in_the_lines_and_the_json(tmp_path, late_decline_sweep):
    """Real fit: the watch's advice for a run whose last third falls away from its curve says so on its
    line and in recommendations.json; no ordinary run's does."""
    import warnings

    runs, victim = late_decline_sweep
    for run, rows in runs.groupby("run_id"):
        (tmp_path / run).mkdir()
        append(tmp_path / run / "evals.jsonl", "".join(
            json.dumps({"run_id": run, "recipe": r.recipe, "compute": r.compute, "metric": r.metric, "n_eval": int(r.n_eval)}) + "\n"
            for r in rows.sort_values("compute").itertuples()))
    lines = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short fast-mode chains may warn; not what is tested here
        watch(tmp_path, interval=0, budget=4 * float(runs["compute"].max()), max_polls=1, say=lines.append,
              warn=lambda text: None, sleep=lambda s: None)
    advice = json.loads((tmp_path / "recommendations.json").read_text())["recommendations"]
    assert set(advice) == set(runs["run_id"])
    assert advice[victim]["details"]["shape_note"].startswith("shape: its last third falls away from its fitted curve")
    assert advice[victim]["details"]["late_trend_z"] < -3
    assert not any("shape_note" in rec["details"] for run, rec in advice.items() if run != victim)
    said = {line.split("]")[0][1:]: line for line in lines if line.startswith("[")}
    assert said[victim].endswith(f"({advice[victim]['details']['shape_note']})")
    assert not any("shape:" in line for run, line in said.items() if run != victim)


def test_watch_refuses_an_out_that_is_the_reference_table(sweep, tmp_path, capsys):
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1))
    reference = tmp_path / "reference.csv"
    reference.write_text("run_id,recipe,compute,metric\nold-s0,old,100,0.1\nold-s0,old,200,0.2\n")
    before = reference.read_text()
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--reference", str(reference), "--out", str(reference)]) == 2
    assert f"--out {reference}: is, or would become, an input read from {reference}" in capsys.readouterr().err
    assert reference.read_text() == before
    assert not (sweep / "recommendations.json").exists()  # refused before the first poll


@pytest.mark.parametrize("broken, where", [
    (lambda rows: rows[0] + rows[1][:30] + "\n" + rows[2], "line 2 is not valid JSON"),  # a torn line, not the last
    (lambda rows: rows[0] + "[1, 2, 3]\n" + rows[2], "line 2 is not a JSON object"),
    (lambda rows: "".join(r.replace('"run_id": "bad-s0", ', "") for r in rows), "column 'run_id', row 1"),
    (lambda rows: rows[0] + rows[1].replace('"run_id": "bad-s0", ', "") + rows[2], "column 'run_id', row 2"),
])
def test_a_log_that_cannot_be_read_refuses_its_run_once_and_is_read_again_when_it_changes(sweep, broken, where):
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    append(good, "".join(row("good-s0", i, 0.1 + 0.05 * i) for i in range(4)) + row("good-s0", 4, 0.3)[:20])  # torn last line
    bad_rows = [row("bad-s0", i, 0.1) for i in range(4)]
    bad.write_text(broken(bad_rows[:3]))
    lines, advisor = [], FakeAdvisor()
    state = watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=2,
                  advisor=advisor, say=lines.append, sleep=lambda _s: None)
    refused = [line for line in lines if line.startswith("[bad-s0] left out")]
    assert len(refused) == 1 and str(bad) in refused[0] and where in refused[0]  # said once, naming file and row
    assert set(state.refused) == {"bad-s0"}  # the torn last line of good-s0 is a write in progress, not a problem
    written = json.loads((sweep / "recommendations.json").read_text())
    assert set(written["recommendations"]) == {"good-s0"} and str(bad) in written["refused"]["bad-s0"]

    bad.write_text("".join(bad_rows))  # fixed: read again and advised
    poll(sweep, state, config=EarlyStopConfig(min_evals=3), budget=1e4, advisor=advisor)
    assert state.refused == {} and set(state.latest) == {"good-s0", "bad-s0"}


def test_a_run_whose_log_was_deleted_or_emptied_loses_its_advice(sweep):
    for run in ("gone-s0", "empty-s0"):
        (sweep / run).mkdir()
    for run in ("good-s0", "bad-s0", "gone-s0", "empty-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    lines, warnings_said, writes = [], [], []

    def sleep(_seconds):  # between polls: two logs go, then the two runs left finish
        writes.append(json.loads((sweep / "recommendations.json").read_text()))
        if len(writes) == 1:
            shutil.rmtree(sweep / "gone-s0")
            (sweep / "empty-s0" / "evals.jsonl").write_text("")
        elif len(writes) == 2:
            for run in ("good-s0", "bad-s0"):
                (sweep / run / "summary.json").write_text("{}")

    state = watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=4, advisor=FakeAdvisor(),
                  say=lines.append, warn=warnings_said.append, sleep=sleep)
    assert set(writes[0]["recommendations"]) == {"good-s0", "bad-s0", "gone-s0", "empty-s0"}
    assert set(writes[1]["recommendations"]) == {"good-s0", "bad-s0"}
    assert set(writes[1]["gone"]) == {"gone-s0", "empty-s0"}
    assert sorted(warnings_said) == ["[empty-s0] its evals.jsonl was deleted or emptied: its advice is dropped",
                                     "[gone-s0] its evals.jsonl was deleted or emptied: its advice is dropped"]  # once each
    assert state.latest == {}
    assert lines[-1] == f"no run in flight under {sweep}: 2 run(s) finished (their folders hold summary.json)"


def test_a_finished_run_whose_folder_is_deleted_is_not_said_to_lose_advice(sweep):
    """A run that had ended had no advice left; 'its advice is dropped' said otherwise."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    warnings_said, polls = [], []

    def sleep(_seconds):
        polls.append(1)
        if len(polls) == 1:
            (sweep / "good-s0" / "summary.json").write_text("{}")
        elif len(polls) == 2:
            shutil.rmtree(sweep / "good-s0")

    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=3, advisor=FakeAdvisor(),
          say=lambda _line: None, warn=warnings_said.append, sleep=sleep)
    assert warnings_said == ["[good-s0] its evals.jsonl was deleted or emptied"]


def test_the_runs_left_are_advised_again_when_a_run_is_gone(sweep):
    """Their advice compared them with the gone run ('P(beats best ...)' of a run no longer in the
    sweep): it is fitted again without it at once, not left standing until a new evaluation."""
    (sweep / "lead-s0").mkdir()
    for run in ("good-s0", "bad-s0", "lead-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    seen_by_fit = []

    def advisor(table, budgets, config):
        seen_by_fit.append(sorted(table["run_id"].unique()))
        return {r: Recommendation("continue", "beats_best", f"continue: beside {', '.join(seen_by_fit[-1])}", run_id=r)
                for r in budgets}

    state, config = WatchState(), EarlyStopConfig(min_evals=3)
    poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    assert seen_by_fit == [["bad-s0", "good-s0", "lead-s0"]]
    shutil.rmtree(sweep / "lead-s0")
    poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    assert seen_by_fit[-1] == ["bad-s0", "good-s0"]
    assert set(state.latest) == {"good-s0", "bad-s0"}
    assert all("lead-s0" not in rec.message for rec in state.latest.values())
    assert poll(sweep, state, config=config, budget=1e4, advisor=advisor) == [] and len(seen_by_fit) == 2  # said once


def test_a_budget_below_every_compute_logged_is_flagged_once(sweep):
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))  # compute 100..400
    warnings_said = []
    watch(sweep, interval=0, budget=1.0, config=EarlyStopConfig(min_evals=3), max_polls=3, advisor=FakeAdvisor(),
          say=lambda _t: None, warn=warnings_said.append, sleep=lambda _s: None)
    assert warnings_said == ["budget 1 is below the smallest compute in the data (100 flops). Is the unit right?"]
    quiet = []
    watch(sweep, interval=0, budget=1e5, config=EarlyStopConfig(min_evals=3), max_polls=1, advisor=FakeAdvisor(),
          say=lambda _t: None, warn=quiet.append, sleep=lambda _s: None)
    assert quiet == []  # far beyond the first evaluations is what a planned budget is


def test_watch_from_python_names_its_budget_keyword_and_the_command_its_flag(sweep, capsys):
    """watch() called from Python told its caller to "pass --budget", and named "--budget" in the warning
    about a budget below the data: a flag a function has not. The command's words stay its flag's."""
    append(sweep / "good-s0" / "evals.jsonl", "".join(row("good-s0", i, 0.2) for i in range(4)))
    lines, warned = [], []
    watch(sweep, interval=0, config=EarlyStopConfig(min_evals=3), max_polls=1, advisor=FakeAdvisor(),
          say=lines.append, sleep=lambda _s: None)
    assert any(line.endswith("continue: no planned budget known (pass budget=)") for line in lines)
    watch(sweep, interval=0, budget=1.0, config=EarlyStopConfig(min_evals=3), max_polls=1, advisor=FakeAdvisor(),
          say=lambda _t: None, warn=warned.append, sleep=lambda _s: None)
    assert warned and all("--budget" not in text for text in warned) and warned[0].startswith("budget 1 is below")
    (sweep / "recommendations.json").unlink()
    assert main(["watch", str(sweep), "--once", "--min-evals", "3"]) == 0
    assert "continue: no planned budget known (pass --budget)" in capsys.readouterr().out


def test_the_budget_warning_goes_to_stderr_so_json_lines_stay_parseable(sweep, capsys):
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1))  # warm-up only: no fit
    assert main(["watch", str(sweep), "--once", "--json", "--budget", "1"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["rule"] for line in captured.out.splitlines()] == ["warmup"]
    assert "warning: --budget 1 is below the smallest compute in the data" in captured.err


def test_a_bad_reference_stops_the_watcher_before_the_first_poll(sweep, tmp_path, capsys):
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.2))  # in warm-up: the first fit could be hours away
    reference = tmp_path / "reference.csv"
    reference.write_text("run_id,recipe,compute,metric\ngood-s0,good,100,0.1\ngood-s0,good,200,1.5\n")
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--reference", str(reference)]) == 2
    err = capsys.readouterr().err
    assert f"file {reference}, column 'metric', run 'good-s0', row 3: must lie in [0, 1]" in err
    assert not (sweep / "recommendations.json").exists()  # no poll was made


def test_a_log_row_without_its_run_is_named_by_file_column_and_line(sweep):
    log = sweep / "bad-s0" / "evals.jsonl"
    nameless = json.loads(row("bad-s0", 1, 0.1)) | {"run_id": " "}
    log.write_text(row("bad-s0", 0, 0.1) + json.dumps(nameless) + "\n")
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.2))
    table, folders, unreadable = scan_runs(sweep)
    assert set(table["run_id"]) == {"good-s0"}  # the other logs are still read
    assert str(unreadable[log]) == f"file {log}, column 'run_id', row 2: is missing (NaN/empty)"


def test_a_run_in_flight_with_an_unreadable_log_is_still_in_flight(sweep):
    append(sweep / "good-s0" / "evals.jsonl", "".join(row("good-s0", i, 0.2) for i in range(3)))
    (sweep / "good-s0" / "summary.json").write_text("{}")
    (sweep / "bad-s0" / "evals.jsonl").write_text(row("bad-s0", 0, 0.1) + "[1, 2]\n" + row("bad-s0", 2, 0.1))
    lines = []
    watch(sweep, interval=0, budget=1e4, max_polls=2, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    assert not any(line.startswith("no run in flight") for line in lines)
    (sweep / "bad-s0" / "summary.json").write_text("{}")  # it ended, its log still unreadable
    lines.clear()
    watch(sweep, interval=0, budget=1e4, max_polls=1, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    assert lines[-1].startswith("no run in flight")


def test_a_run_whose_advice_turns_on_the_others_new_rows_is_said_too(sweep):
    """A refit on good-s0's new row turned bad-s0 (no new row) from continue to stop: the JSON said
    stop, but only good-s0's line was printed, so a person never saw the stop a scheduler acted on."""
    for i in range(4):
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", i, 0.1 + 0.05 * i))
        append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", i, 0.1))
    calls = []

    def advisor(table, budgets, config):  # bad-s0 is told to stop from the second fit on
        calls.append(1)
        action = {r: "stop" if r == "bad-s0" and len(calls) > 1 else "continue" for r in budgets}
        return {r: Recommendation(a, "beats_best", f"{a}: P(beats best) = 0.01", run_id=r) for r, a in action.items()}

    state, config = WatchState(), EarlyStopConfig(min_evals=4)
    assert {r.run_id for r in poll(sweep, state, config=config, budget=1e4, advisor=advisor)} == {"good-s0", "bad-s0"}
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 4, 0.3))
    new = poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    assert [(r.run_id, r.action) for r in new] == [("good-s0", "continue"), ("bad-s0", "stop")]
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 5, 0.35))
    assert [r.run_id for r in poll(sweep, state, config=config, budget=1e4, advisor=advisor)] == ["good-s0"]  # unchanged: said once


def test_a_data_warning_is_said_through_warn_once_not_at_every_refit(sweep):
    """Two runs of recipe 'mix' at two learning rates: validate_runs warns at every poll's fit. The
    warning went to Python's filter, not to watch()'s warn(), and each fit reset the filter's
    memory, so the CLI said it again at every refit (and a warn= given to watch() never got it)."""
    import warnings

    shutil.rmtree(sweep / "good-s0")
    shutil.rmtree(sweep / "bad-s0")

    def mixed(run, i, lr):
        return json.dumps(json.loads(row(run, i, 0.1 + 0.02 * i)) | {"recipe": "mix", "lr": lr}) + "\n"

    for run, lr in (("mix-s0", 5e-4), ("mix-s1", 1e-3)):
        (sweep / run).mkdir()
        append(sweep / run / "evals.jsonl", "".join(mixed(run, i, lr) for i in range(4)))
    more = iter(range(4, 7))

    def sleep(_seconds):
        append(sweep / "mix-s0" / "evals.jsonl", mixed("mix-s0", next(more), 5e-4))

    said = []
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        state = watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=4), max_polls=3,
                      advisor=FakeAdvisor(), say=lambda _text: None, warn=said.append, sleep=sleep)
    assert state.polls == 3
    mix = [text for text in said if "column 'lr': differs between runs of recipe 'mix'" in text]
    assert len(mix) == 1, said
    assert not [w for w in escaped if "differs between runs" in str(w.message)]


def test_a_falling_metric_is_said_once_while_its_counts_change_and_other_warnings_still_are(sweep):
    """The warning that the metric falls with compute names how many runs fall ('in 2 of 2 runs'); watch
    said each distinct text once, so it said the same warning again whenever a run joined the count
    ('3 of 3 runs'): news to nobody. It is said once per watch; a warning of another kind is still said."""
    import warnings

    shutil.rmtree(sweep / "good-s0")
    shutil.rmtree(sweep / "bad-s0")

    def falling(run, i, lr):
        return json.dumps(json.loads(row(run, i, 0.6 - 0.05 * i)) | {"lr": lr}) + "\n"

    for run, n, lr in (("a-s0", 8, 5e-4), ("a-s1", 8, 1e-3), ("b-s0", 3, 5e-4)):
        (sweep / run).mkdir()
        append(sweep / run / "evals.jsonl", "".join(falling(run, i, lr) for i in range(n)))
    more = iter(range(3, 9))

    def sleep(_seconds):  # b-s0 grows until it is judged, and falls too
        append(sweep / "b-s0" / "evals.jsonl", falling("b-s0", next(more), 5e-4))

    said = []
    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=4), max_polls=5,
          advisor=FakeAdvisor(), say=lambda _text: None, warn=said.append, sleep=sleep)
    falls = [text for text in said if "column 'metric': falls with compute in" in text]
    assert len(falls) == 1 and "in 2 of 2 runs ('a-s0', 'a-s1'" in falls[0], said
    with warnings.catch_warnings(record=True) as now:
        warnings.simplefilter("always")
        load_runs(sweep)
    assert any("falls with compute in 3 of 3 runs" in str(w.message) for w in now)  # the count did change
    assert len([text for text in said if "column 'lr': differs between runs of recipe 'a'" in text]) == 1


def test_runs_in_two_compute_units_are_said_once_while_their_typical_compute_grows(sweep):
    """The warning that runs' compute looks like two units names each run's typical (median) compute and
    their ratio, which move at every evaluation of a run in flight: watch said it again at every poll."""
    shutil.rmtree(sweep / "good-s0")
    shutil.rmtree(sweep / "bad-s0")

    def rising(run, i, scale):
        return json.dumps(json.loads(row(run, i, 0.1 + 0.03 * i)) | {"compute": scale * (i + 1)}) + "\n"

    for run, scale in (("a-s0", 1.0), ("b-s0", 1e5)):
        (sweep / run).mkdir()
        append(sweep / run / "evals.jsonl", "".join(rising(run, i, scale) for i in range(4)))
    more = iter(range(4, 8))

    def sleep(_seconds):
        append(sweep / "b-s0" / "evals.jsonl", rising("b-s0", next(more), 1e5))

    said = []
    watch(sweep, interval=0, budget=1e6, config=EarlyStopConfig(min_evals=4), max_polls=4,
          advisor=FakeAdvisor(), say=lambda _text: None, warn=said.append, sleep=sleep)
    units = [text for text in said if "column 'compute': runs' compute differs by" in text]
    assert len(units) == 1 and "differs by 1e+05x" in units[0], said


def test_a_reference_in_another_compute_unit_is_named_not_every_run_refused(sweep, tmp_path, capsys):
    """A reference in gpu_hours beside runs logging flops: each run in turn was refused as if its own
    log 'mixes compute units', and the watcher went on with every run left out and nothing advised."""
    for i in range(4):
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", i, 0.1 + 0.05 * i))
        append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", i, 0.1))
    reference = tmp_path / "reference.csv"
    reference.write_text("run_id,recipe,compute,metric,compute_unit\n"
                         "old-s0,old,100,0.1,gpu_hours\nold-s0,old,200,0.2,gpu_hours\n")
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--reference", str(reference)]) == 2
    err = capsys.readouterr().err
    assert f"file {reference}, column 'compute_unit': counts compute in gpu_hours, the runs under {sweep} in flops" in err


def test_a_restarted_watch_keeps_the_stop_caps_history(sweep, monkeypatch):
    """A restart began with an empty history, so the cap let as many comparison stops through again
    as if none had been made. The JSON keeps them; a watch of the same folder reads them back and
    says so; a file from another folder's watch, or one that cannot be read, starts it fresh."""
    asked = fake_stop_counts(monkeypatch)
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.3) for i in range(5)))  # compute up to 500
    config, said = EarlyStopConfig(min_evals=4), []
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, sleep=lambda s: None)
    saved = json.loads((sweep / "recommendations.json").read_text())
    assert saved["comparison_stops"] == [{"compute": 500.0, "runs": ["bad-s0"]}]
    from forecast import __version__

    assert saved["forecast_version"] == __version__
    (sweep / "bad-s0" / "summary.json").write_text("{}")  # bad-s0 acted on it and ended
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 5, 0.3))  # compute 600 < 1.25 x 500
    said.clear()
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, sleep=lambda s: None)  # a restart
    assert asked[-1] == 1, "the ended run told to stop before the restart still counts"
    assert any("stop cap keeps the 1 run(s)" in line and "bad-s0" in line for line in said)
    kept = json.loads((sweep / "recommendations.json").read_text())["comparison_stops"]
    assert kept == [{"compute": 500.0, "runs": ["bad-s0"]}], "a restart keeps the history in its own file too"

    other = sweep.parent / "elsewhere"
    other.mkdir()
    saved["runs_dir"] = str(other)
    (sweep / "recommendations.json").write_text(json.dumps(saved))
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, sleep=lambda s: None)
    assert asked[-1] == 0, "another folder's stops say nothing about these runs"
    (sweep / "recommendations.json").write_text("{not json")
    warned = []
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, warn=warned.append, sleep=lambda s: None)
    assert asked[-1] == 0 and any("could not be read" in line for line in warned)


def test_a_line_writes_the_compute_reached_as_its_advice_does():
    """`forecast watch` printed '[cispo-s0] eval 40 @ 1.01e+12: stop: P(beats best ... at 4.08e12, ...)':
    two ways of writing compute on one line (and '@ 1.6e+04' beside 'at 64,000' for GPU-hours)."""
    from forecast.formatting import fmt_compute
    from forecast.watch import _line

    for now, budget, unit in [(1.01e12, 4.08e12, "flops"), (16080.0, 64320.0, "gpu_hours")]:
        rec = Recommendation("stop", "beats_best", f"stop: P(beats best 'b-s0' by 0.01 at {fmt_compute(budget)} {unit}, "
                             "4.0x now) = 0.03 < 0.1", run_id="a-s0")
        rec.details.update(n_evals=40, compute_now=now)
        line = _line(rec, unit)
        assert line.startswith(f"[a-s0] eval 40 @ {fmt_compute(now)} {unit}: stop:") and "e+" not in line, line


def test_a_watch_line_says_the_unit_of_the_compute_reached(sweep):
    """'[bad-s0] eval 4 @ 400: stop: ...' gave no unit for the compute a run had reached: the line
    says the runs' compute_unit, as the advice after it and the report do."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))

    def advisor(table, budgets, config):
        recs = FakeAdvisor()(table, budgets, config)
        for run, rec in recs.items():
            rec.details.update(n_evals=4, compute_now=float(table.loc[table["run_id"] == run, "compute"].max()))
        return recs

    lines = []
    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=1, advisor=advisor,
          say=lines.append, sleep=lambda s: None)
    assert "[bad-s0] eval 4 @ 400 flops: stop: P(beats best) = 0.01 < 0.05" in lines, lines


def test_a_restart_from_another_working_directory_keeps_the_stop_caps_history(sweep, monkeypatch):
    """recommendations.json kept RUNS_DIR as given: a watch started as `watch runs` and restarted from
    another directory as `watch /abs/runs` resolved the saved 'runs' against the new working directory,
    took the file for another folder's and silently dropped the stop cap's history."""
    asked = fake_stop_counts(monkeypatch)
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.3) for i in range(5)))
    config = EarlyStopConfig(min_evals=4)
    monkeypatch.chdir(sweep.parent)
    watch(sweep.name, budget=1e4, config=config, max_polls=1, say=lambda s: None, sleep=lambda s: None)
    (sweep / "bad-s0" / "summary.json").write_text("{}")
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 5, 0.3))
    monkeypatch.chdir(sweep / "good-s0")  # where 'sweep.name' names nothing
    said, warned = [], []
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, warn=warned.append, sleep=lambda s: None)
    assert asked[-1] == 1, "the run told to stop before the restart still counts"
    assert any("stop cap keeps the 1 run(s)" in line for line in said) and not warned

    # a file another folder's watch wrote (or this one before it moved) is not read, and that is said
    saved = json.loads((sweep / "recommendations.json").read_text())
    saved["runs_dir"] = str(sweep.parent / "elsewhere")
    (sweep / "recommendations.json").write_text(json.dumps(saved))
    warned.clear()
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, warn=warned.append, sleep=lambda s: None)
    assert asked[-1] == 0
    assert any("was written by a watch of" in line and "starts with no history" in line for line in warned)
    # a file without a history (an older version's, or no stops yet) is no news, whatever folder it names
    del saved["comparison_stops"]
    (sweep / "recommendations.json").write_text(json.dumps(saved))
    warned.clear()
    watch(sweep, budget=1e4, config=config, max_polls=1, say=said.append, warn=warned.append, sleep=lambda s: None)
    assert asked[-1] == 0 and not warned


def test_a_run_that_ends_is_said_with_how_it_ended_in_the_lines_and_the_json(sweep):
    """A sweep trained with `--advisor-every` stops runs itself (stopped.json, then summary.json).
    The watch dropped an ended run's advice without a word: a run last told 'continue' vanished
    from the lines and the JSON, and the trainer's own stop was never said. Now the line and the
    JSON's 'ended' say how each run ended: stopped by its advisor (its rule and numbers), or finished."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    lines = []

    def sleep(_seconds):  # between polls, bad-s0's advisor stops it; good-s0 runs to its end
        if (sweep / "bad-s0" / "summary.json").exists():
            return
        advice = {"action": "stop", "rule": "reach_target", "message": "stop: P(reaches 0.9 by 1e4) = 0.04 < 0.05"}
        (sweep / "bad-s0" / "stopped.json").write_text(json.dumps({"step": 40, "compute": 400.0, "advice": advice}))
        (sweep / "bad-s0" / "summary.json").write_text(json.dumps({"stopped": True}))
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 4, 0.25))
        (sweep / "good-s0" / "summary.json").write_text(json.dumps({"stopped": False}))

    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=3, advisor=FakeAdvisor(),
          say=lines.append, sleep=sleep)
    assert "[bad-s0] ended: stopped by its own advisor at eval 4 (400 flops): stop: P(reaches 0.9 by 1e4) = 0.04 < 0.05" in lines
    assert "[good-s0] ended: finished at eval 5 (500 flops)" in lines
    assert lines[-1] == (f"no run in flight under {sweep}: 2 run(s) finished (their folders hold summary.json), "
                         "1 of them stopped by their own advisor (stopped.json)")
    written = json.loads((sweep / "recommendations.json").read_text())
    assert written["recommendations"] == {}
    assert written["ended"] == {"bad-s0": "stopped by its own advisor at eval 4 (400 flops): stop: P(reaches 0.9 by 1e4) = 0.04 < 0.05",
                                "good-s0": "finished at eval 5 (500 flops)"}


def test_the_watch_says_what_it_watches_before_the_first_poll(sweep, capsys):
    """A watch of a sweep in flight printed nothing until its first fit (a minute or more on 2
    cores) and never said where its advice went: nothing told the user it was working. Its first
    line now names the folder, how often it looks, where the budget comes from and the file."""
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1))  # warm-up only: no fit
    assert main(["watch", str(sweep), "--max-polls", "2", "--interval", "0.01"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"watching evals.jsonl under {sweep} every 0.01 s, 2 polls; planned budget from each run's config.json "
                     f"(advisor_budget, else max_steps); advice written to {sweep / 'recommendations.json'} "
                     "(a line per run when it has new evaluations, after each fit)")
    out = sweep / "advice.json"
    assert main(["watch", str(sweep), "--once", "--json", "--budget", "1e4", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0].startswith(f"watching evals.jsonl under {sweep} once; planned budget --budget 10,000 "
                                                   f"for every run; advice written to {out}")
    assert [json.loads(line)["rule"] for line in captured.out.splitlines()] == ["warmup"]  # stdout stays JSON lines


def test_a_run_its_advisor_stopped_is_not_advised_before_its_summary_is_written(sweep):
    """The trainer writes stopped.json, then summary.json; a run killed between the two stays stopped
    (its --resume only writes the summary). The watch took such a run as in flight, advised it to
    continue or stop and asked the advisor about it, while `forecast report` and backtest said it
    had been stopped by its own advisor. It is now an ended run, with the advisor's reason."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    advice = {"action": "stop", "rule": "reach_target", "message": "stop: P(reaches 0.9 by 1e4) = 0.04 < 0.05"}
    (sweep / "bad-s0" / "stopped.json").write_text(json.dumps({"step": 40, "compute": 400.0, "advice": advice}))
    advisor, lines = FakeAdvisor(), []
    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=1, advisor=advisor,
          say=lines.append, sleep=lambda s: None)
    assert advisor.calls and all("bad-s0" not in call["_budgets"] for call in advisor.calls)
    written = json.loads((sweep / "recommendations.json").read_text())
    assert set(written["recommendations"]) == {"good-s0"}
    assert written["ended"] == {"bad-s0": "stopped by its own advisor at eval 4 (400 flops): stop: P(reaches 0.9 by 1e4) = 0.04 < 0.05"}
    (sweep / "good-s0" / "summary.json").write_text(json.dumps({"stopped": False}))
    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=1, advisor=FakeAdvisor(),
          say=lines.append, sleep=lambda s: None)
    assert lines[-1] == (f"no run in flight under {sweep}: 2 run(s) finished (their folders hold summary.json, "
                         "or stopped.json), 1 of them stopped by their own advisor (stopped.json)")


def test_a_run_whose_log_cannot_be_read_is_left_out_and_said(sweep, make_unreadable):
    # found by fuzzing: a log there but unreadable (permission denied) was taken for one not written yet,
    # so its run vanished from the advice without a word
    for i in range(3):
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", i, 0.2))
        append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", i, 0.1))
    make_unreadable(sweep / "bad-s0" / "evals.jsonl")
    lines = []
    watch(sweep, interval=0, budget=1e4, max_polls=1, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    refused = [line for line in lines if line.startswith("[bad-s0] left out")]
    assert len(refused) == 1 and "bad-s0/evals.jsonl: cannot be read (permission denied)" in refused[0]
    assert any(line.startswith("[good-s0]") and "left out" not in line for line in lines)
    assert "bad-s0" in json.loads((sweep / "recommendations.json").read_text())["refused"]


def test_a_log_that_begins_with_nul_bytes_is_said_as_such_not_as_utf16(sweep):
    # a crash on some file systems leaves a block of zeros where writes were lost: the log was refused as
    # "UTF-16 text without a byte-order mark; save the file as UTF-8", the wrong cause and the wrong fix
    append(sweep / "good-s0" / "evals.jsonl", "".join(row("good-s0", i, 0.2) for i in range(3)))
    log = sweep / "bad-s0" / "evals.jsonl"
    log.write_bytes(b"\x00" * 4096 + "".join(row("bad-s0", i, 0.1) for i in range(3)).encode())
    lines = []
    watch(sweep, interval=0, budget=1e4, max_polls=1, advisor=FakeAdvisor(), say=lines.append, sleep=lambda _s: None)
    refused = [line for line in lines if line.startswith("[bad-s0] left out")]
    assert len(refused) == 1 and "UTF-16" not in refused[0]
    assert "bad-s0/evals.jsonl: holds NUL bytes (zeros) from byte offset 0, on line 1" in refused[0]


@pytest.mark.parametrize("signal_name, code, said", [("SIGTERM", 143, "terminated (SIGTERM)"), ("SIGINT", 130, "interrupted")])
def test_forecast_watch_says_why_it_ended_on_sigterm_as_on_ctrl_c(sweep, capsys, monkeypatch, signal_name, code, said):
    """SIGTERM (kill, timeout, a scheduler's time limit) ended forecast watch with 143 and no word, where Ctrl-C
    said 'interrupted' (130). Either one leaves recommendations.json as its last complete write."""
    import os
    import signal

    import forecast.watch as watch_module

    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", row(run, 0, 0.2))  # warm-up only: no fit
    real_poll = watch_module.poll

    def signalled_at_the_second_poll(runs_dir, state, **kwargs):
        if state.polls == 1:
            os.kill(os.getpid(), getattr(signal, signal_name))
        return real_poll(runs_dir, state, **kwargs)

    monkeypatch.setattr(watch_module, "poll", signalled_at_the_second_poll)
    got = []  # without forecast watch's own handler, SIGTERM would end the test run: this one only notes it

    def noted(signum, _frame):
        got.append(signum)

    previous = signal.signal(signal.SIGTERM, noted)
    # Ctrl-C's own handler, set here: a test run started in the background (nohup ... &, as CI may start it)
    # ignores SIGINT, and the SIGINT case then watched on to its last poll
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        exit_code = main(["watch", str(sweep), "--interval", "0", "--max-polls", "3", "--budget", "1e4"])
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_sigint)
    assert exit_code == code and after is noted and got == []  # the handler before the watch is back
    assert capsys.readouterr().err.splitlines()[-1] == said
    assert json.loads((sweep / "recommendations.json").read_text())["polls"] == 1


def full_disk_while(monkeypatch, is_full) -> None:
    """Writes of temporary files (every atomic write's first step) fail with ENOSPC while is_full()."""
    import errno
    import os
    import pathlib

    real_write_text = pathlib.Path.write_text

    def write_text(self, *args, **kwargs):
        if is_full() and self.name.endswith(".tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


def test_a_full_disk_is_said_once_and_the_watch_goes_on_writing_again_when_it_can(sweep, monkeypatch):
    """recommendations.json on a full disk was a traceback that ended the watch at its next poll (the runs
    it watches fill that disk too). The watch now says it once, goes on advising, says when the file is
    written again, and the file is then current."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(3)))
    polls = []
    full_disk_while(monkeypatch, lambda: len(polls) < 3)  # full at polls 1-3, freed before poll 4
    lines, warned = [], []
    state = watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=4, advisor=FakeAdvisor(),
                  say=lines.append, warn=warned.append, sleep=polls.append)
    out = sweep / "recommendations.json"
    assert state.polls == 4
    assert warned == [f"{out}: No space left on device (the disk is full: free some space, or write elsewhere); "
                      f"the watch goes on, with its advice said here, and writes {out} again when it can"]
    assert sum("P(beats best)" in line for line in lines) == 2  # the advice is said while the file cannot be written
    assert lines[-1] == f"{out} is written again (it had not been since: {warned[0].split('; the watch')[0]})"
    assert json.loads(out.read_text())["polls"] == 4
    assert sorted(p.name for p in sweep.iterdir()) == ["bad-s0", "good-s0", "recommendations.json"]


def test_a_watch_that_ends_unable_to_write_its_advice_exits_1_in_a_line(sweep, monkeypatch, capsys):
    """`forecast watch --once` on a full disk: the advice is printed, and the file it names is not
    written, which the exit code and one line say (it was a traceback)."""
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1) + row("good-s0", 1, 0.12))
    full_disk_while(monkeypatch, lambda: True)
    out = sweep / "advice.json"
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "[good-s0] eval 2" in captured.out and not out.exists()
    assert captured.err.endswith(f"error: {out}: No space left on device (the disk is full: free some space, or write "
                                 "elsewhere)\n") and "Traceback" not in captured.err



def test_advice_whose_folder_is_made_read_only_is_said_once_and_the_watch_goes_on(sweep, tmp_path, monkeypatch):
    """--out in a folder made read-only while watched (chmod 500, to a user who is not root): PermissionError
    naming '.advice.json.x1y2.tmp' ended the watch. Said once now, naming advice.json, as a full disk is, and
    the runs are advised on."""
    import errno
    import pathlib

    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(3)))
    out = tmp_path / "advice" / "advice.json"
    real_write_text = pathlib.Path.write_text

    def read_only(self, *args, **kwargs):
        if self.parent == out.parent and self.name.endswith(".tmp"):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", read_only)
    warned = []
    with pytest.raises(OSError) as raised:  # the watch ends with its file not written: the CLI's line and exit 2
        watch(sweep, out=out, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=3,
              advisor=FakeAdvisor(), say=lambda line: None, warn=warned.append, sleep=lambda _s: None)
    why = f"{out}: Permission denied (this process may not write in {out.parent} (read-only, or not yours): write elsewhere)"
    assert str(raised.value) == why
    assert warned == [f"{why}; the watch goes on, with its advice said here, and writes {out} again when it can"]
    assert sorted(p.name for p in out.parent.iterdir()) == []


def test_a_watched_folder_that_is_deleted_stops_the_watch_and_is_not_made_again(sweep, capsys, monkeypatch):
    """A sweep folder deleted while watched: each run was said 'deleted or emptied', the watch polled on
    forever, and its next write made the folder again, holding only recommendations.json. It now stops
    with one line, exit 1, whether the folder goes between polls or during a fit, and makes nothing."""
    from forecast.watch import WatchedFolderGone

    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(3)))
    removed = []

    def rmtree_between_polls(_seconds):
        shutil.rmtree(sweep)
        removed.append(True)

    lines, warned = [], []
    with pytest.raises(WatchedFolderGone, match="the folder being watched is gone"):
        watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=5, advisor=FakeAdvisor(),
              say=lines.append, warn=warned.append, sleep=rmtree_between_polls)
    assert removed == [True] and not sweep.exists() and warned == []

    sweep.mkdir()
    for run in ("good-s0", "bad-s0"):
        (sweep / run).mkdir()
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(3)))
    fake_stop_counts(monkeypatch)
    import forecast.watch as watch_module

    real_advise_table = watch_module.advise_table

    def fit_while_the_folder_goes(*args, **kwargs):  # a fit takes a minute: the folder may go during it
        shutil.rmtree(sweep)
        return real_advise_table(*args, **kwargs)

    monkeypatch.setattr(watch_module, "advise_table", fit_while_the_folder_goes)
    assert main(["watch", str(sweep), "--interval", "0", "--budget", "1e4", "--min-evals", "3"]) == 1
    assert capsys.readouterr().err == (f"error: {sweep}: the folder being watched is gone (deleted, moved or unmounted) "
                                       "after 1 poll(s), so the watch stops\n")
    assert not sweep.exists()


def test_a_run_folder_reached_through_a_link_is_watched(tmp_path):
    # found by fuzzing the folder structure: watch's rglob did not follow links to run folders,
    # so such a run got no advice and the watch said nothing of it
    real = tmp_path / "real" / "good-s1"
    real.mkdir(parents=True)
    append(real / "evals.jsonl", row("good-s1", 0, 0.3) + row("good-s1", 1, 0.35))
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "good-s1").symlink_to(real)
    table, folders, unreadable = scan_runs(tmp_path / "sweep")
    assert set(table["run_id"]) == {"good-s1"} and folders == {"good-s1": tmp_path / "sweep" / "good-s1"}
    assert not unreadable


def test_a_run_folder_that_cannot_be_entered_refuses_its_run_not_the_watch(sweep, make_unenterable):
    # found by fuzzing the folder structure: a run folder without execute permission (another user's)
    # raised PermissionError out of the poll (pathlib's exists() on its log and its stopped.json)
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.3) + row("good-s0", 1, 0.35))
    append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", 0, 0.3) + row("bad-s0", 1, 0.35))
    make_unenterable(sweep / "bad-s0")
    state = WatchState()
    poll(sweep, state, config=EarlyStopConfig(), budget=1e3, advisor=FakeAdvisor())
    assert "permission denied" in state.refused["bad-s0"][1] and "good-s0" in state.latest


def test_a_run_logged_in_two_folders_is_left_out_naming_both(sweep):
    # found by fuzzing the folder structure: a copied run folder (dapo-s0 and dapo-s0-copy) was advised
    # as one run with its evaluations counted twice ('eval 4' of 2) and the budget and end of either folder
    for folder, run in (("good-s0", "good-s0"), ("good-s0-copy", "good-s0"), ("bad-s0", "bad-s0")):
        (sweep / folder).mkdir(exist_ok=True)
        append(sweep / folder / "evals.jsonl", "".join(row(run, i, 0.3 + 0.01 * i) for i in range(4)))
    advisor = FakeAdvisor()
    state = WatchState()
    poll(sweep, state, config=EarlyStopConfig(), budget=1e3, advisor=advisor)
    why = state.refused["good-s0"][1]
    assert "is logged in 2 run logs" in why and "good-s0/evals.jsonl" in why and "good-s0-copy/evals.jsonl" in why
    assert "good-s0" not in state.latest and advisor.calls[-1]["_budgets"] == {"bad-s0": 1e3}


def test_a_run_folder_that_can_be_neither_listed_nor_entered_is_said_and_the_watch_goes_on(sweep, make_private):
    # another user's run folder of mode 700 under a watched sweep ended the watch with 'permission denied'
    # (a PermissionError out of the listing), where a folder that cannot be listed is said and passed over
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.3) + row("good-s0", 1, 0.35))
    append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", 0, 0.3) + row("bad-s0", 1, 0.35))
    make_private(sweep / "bad-s0")
    with pytest.warns(UserWarning, match="bad-s0: cannot be listed \\(permission denied\\): the runs in it, if any, "
                                         "are left out"):
        table, folders, unreadable = scan_runs(sweep)
    assert set(table["run_id"]) == {"good-s0"} and not unreadable


def test_a_watched_folder_that_cannot_be_listed_keeps_its_runs_advice_as_unknown(sweep, monkeypatch):
    """The watched folder itself made unlistable (mode a-r, an I/O error of a network disk): every run was said
    and listed as 'deleted or emptied', its advice dropped, beside the warning that the folder cannot be listed.
    Nothing is known gone then: each run keeps its last advice, marked unknown, until the folder lists again."""
    import os

    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    listable = [True]
    next_polls = iter([False, False, True])  # whether the folder can be listed at polls 2, 3 and 4
    real_scandir = os.scandir

    def scandir(path="."):
        if os.path.abspath(path) == str(sweep) and not listable[0]:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    lines, warned, writes = [], [], []
    out = sweep / "good-s0" / "advice.json"

    def sleep(_s):
        writes.append(json.loads(out.read_text()))
        listable[0] = next(next_polls)

    watch(sweep, interval=0, budget=1e4, config=EarlyStopConfig(min_evals=3), max_polls=4, advisor=FakeAdvisor(),
          out=out, say=lines.append, warn=warned.append, sleep=sleep)
    writes.append(json.loads(out.read_text()))
    assert [set(w["recommendations"]) for w in writes] == [{"good-s0", "bad-s0"}] * 4
    assert all(w["gone"] == {} for w in writes) and not any("deleted" in text for text in warned + lines)
    assert [w["unlisted"] for w in writes] == [None, f"{sweep} cannot be listed (permission denied) since poll 2",
                                               f"{sweep} cannot be listed (permission denied) since poll 2", None]
    assert [text for text in warned if "cannot be listed" in text] == [
        f"{sweep} cannot be listed (permission denied) since poll 2: no run log can be read until it can, and its 2 "
        "advised run(s) are not taken as gone: each one's last advice stands in the file, unknown now (under 'unlisted')"]
    assert f"{sweep} can be listed again: its runs are read and advised again" in lines


class LevelsFit:
    """A stand-in for the watch's fit: run r's true pass rate is levels[r] at any compute, 1000 draws
    spread evenly 0.05 either side of it."""

    compute_unit = "flops"
    fit_info_: dict = {}

    def __init__(self, table, levels: dict):
        self.runs_, self.levels, self.run_ids = table, levels, list(levels)

    def run_stream(self, run_id):  # as the forecaster's: the stop advice draws each run from its own
        return 5000 + self.run_ids.index(run_id)

    def diagnostics(self):  # converged, as fit_for_advice's stand-in says: no chain is judged alone
        from types import SimpleNamespace

        return SimpleNamespace(converged=True)

    def sample_curves(self, compute, *, run_id, **_):
        draws = self.levels[run_id] - 0.05 + 0.1 * (np.arange(1000)[:, None] + 0.5) / 1000
        return np.repeat(draws, len(np.atleast_1d(compute)), axis=1)


def test_the_watch_tells_a_run_stopped_against_a_run_whose_end_falls_away_that_its_bar_is_likely_too_high(monkeypatch):
    """slow-s0 is stopped on P(beats best 'top-s0'), a run that ended; top-s0's last third falls away from
    its curve, so its forecast, the bar, is likely too high. The ended run is tested because the advice
    compares with it, and slow-s0's line and JSON details say so; its advice is the rules'."""
    import forecast.shape_check as shape_check
    import forecast.watch as watch_module
    from forecast.watch import _line, advise_table

    table = pd.DataFrame([{"run_id": run, "recipe": run[:-3], "compute": 100.0 * (i + 1), "metric": 0.3}
                          for run in ("top-s0", "slow-s0") for i in range(6)])
    monkeypatch.setattr(watch_module, "fit_for_advice", lambda table, **kwargs: (
        LevelsFit(table, {"top-s0": 0.7, "slow-s0": 0.3}), True))
    asked = []

    def flag_top(fc, *, runs=None, **_):
        asked.append(runs)
        return [{"run_id": "top-s0", "recipe": "top", "late_trend_z": -5.04}]

    monkeypatch.setattr(shape_check, "misshapen_runs", flag_top)
    recs, _ = advise_table(table, {"slow-s0": 1200.0}, EarlyStopConfig(min_evals=4, saturation_epsilon=None))
    rec = recs["slow-s0"]
    assert asked == [["slow-s0", "top-s0"]]
    assert (rec.action, rec.rule, rec.details["alternative"]) == ("stop", "beats_best", "top-s0")
    note = "shape: the run it is compared with, 'top-s0', falls away from its curve (z -5.0): its forecast is likely too high"
    assert rec.details["shape_note"] == note and rec.details["alternative_late_trend_z"] == -5.04
    assert _line(rec).endswith(f"({note})") and json.loads(json.dumps(rec.to_dict()))["details"]["shape_note"] == note


def test_the_watch_says_no_shape_note_beside_advice_no_forecast_decides(monkeypatch):
    """done-s0 has reached its planned budget (a stop whatever its forecast) and early-s0's budget is far
    beyond its compute (too_early: no rule judged its forecast); both runs' last thirds fall away from
    their curves. Their lines carried the shape note ('its forecasts are likely too high'), which made a
    reader doubt advice no forecast decided. Now the lines say nothing of it; the JSON keeps late_trend_z."""
    import forecast.shape_check as shape_check
    import forecast.watch as watch_module
    from forecast.watch import _line, advise_table

    table = pd.DataFrame([{"run_id": run, "recipe": run[:-3], "compute": 100.0 * (i + 1), "metric": 0.3}
                          for run in ("done-s0", "early-s0") for i in range(6)])
    monkeypatch.setattr(watch_module, "fit_for_advice", lambda table, **kwargs: (
        LevelsFit(table, {"done-s0": 0.5, "early-s0": 0.3}), True))
    monkeypatch.setattr(shape_check, "misshapen_runs", lambda fc, *, runs=None, **_: [
        {"run_id": run, "recipe": run[:-3], "late_trend_z": -5.04} for run in runs])
    recs, _ = advise_table(table, {"done-s0": 600.0, "early-s0": 60000.0}, EarlyStopConfig(min_evals=4))
    assert {run: (rec.action, rec.rule) for run, rec in recs.items()} == {
        "done-s0": ("stop", "budget_reached"), "early-s0": ("continue", "too_early")}
    for rec in recs.values():
        assert "shape" not in _line(rec) and "shape_note" not in rec.details
        assert json.loads(json.dumps(rec.to_dict()))["details"]["late_trend_z"] == -5.04


def test_the_watch_does_not_doubt_a_continue_with_a_bar_that_falls_away(monkeypatch):
    """lead-s0 continues: P(beats best 'top-s0') = 1.00 >= 0.1. top-s0's last third falls away from its
    curve, so its forecast, the bar, is likely too high: lead-s0's chance is if anything higher. Its line
    said 'the run it is compared with, 'top-s0', falls away ...: its forecast is likely too high', a doubt
    about a continue it only supports. The line now says nothing of it; the JSON keeps the number."""
    import forecast.shape_check as shape_check
    import forecast.watch as watch_module
    from forecast.watch import _line, advise_table

    table = pd.DataFrame([{"run_id": run, "recipe": run[:-3], "compute": 100.0 * (i + 1), "metric": 0.3}
                          for run in ("top-s0", "lead-s0") for i in range(6)])
    monkeypatch.setattr(watch_module, "fit_for_advice", lambda table, **kwargs: (
        LevelsFit(table, {"top-s0": 0.3, "lead-s0": 0.7}), True))
    monkeypatch.setattr(shape_check, "misshapen_runs", lambda fc, *, runs=None, **_: [
        {"run_id": "top-s0", "recipe": "top", "late_trend_z": -5.04}])
    rec = advise_table(table, {"lead-s0": 1200.0}, EarlyStopConfig(min_evals=4, saturation_epsilon=None))[0]["lead-s0"]
    assert (rec.action, rec.rule, rec.details["alternative"]) == ("continue", "beats_best", "top-s0")
    assert "shape" not in _line(rec) and "shape_note" not in rec.details
    assert json.loads(json.dumps(rec.to_dict()))["details"]["alternative_late_trend_z"] == -5.04


@pytest.mark.parametrize("setting, says", [
    # 0 was "--budget 0 is below the smallest compute" and then every run's "continue: no_budget"
    ({"budget": 0}, "budget must be a finite compute > 0, or None, got 0"),
    ({"budget": float("nan")}, "budget must be a finite compute > 0, or None, got nan"),
    ({"budget": "4e12"}, "budget must be a finite compute > 0, or None, got '4e12'"),
    # a negative wait failed in time.sleep ("sleep length must be non-negative") after the first poll's fit
    ({"interval": -1}, "interval must be a number of seconds >= 0 (at most 604800, a week), got -1"),
    ({"interval": float("inf")}, "interval must be a number of seconds >= 0 (at most 604800, a week), got inf"),
    ({"max_polls": 0}, "max_polls must be a whole number >= 1, or None (for ever), got 0"),  # polled once
    ({"max_polls": 1.5}, "max_polls must be a whole number >= 1, or None (for ever), got 1.5"),  # polled twice
    # True is 1 to Python: taken as one poll by a mutant of inference.is_whole_number that let bools through
    ({"max_polls": True}, "max_polls must be a whole number >= 1, or None (for ever), got True"),
])
def test_watch_in_python_refuses_what_its_command_refuses_before_the_first_poll(tmp_path, setting, says):
    """`forecast watch` checks --budget, --interval and --max-polls; watch() took the same values."""
    polled = []
    with pytest.raises(ValueError, match=re.escape(says)):
        watch(tmp_path, **{"max_polls": 1, **setting}, sleep=polled.append, say=polled.append)
    assert polled == []


def test_watch_in_python_takes_a_numpy_budget_and_a_whole_float_of_polls(tmp_path):
    state = watch(tmp_path, budget=np.float64(4e12), interval=np.int64(0), max_polls=2.0, sleep=lambda _: None,
                  say=lambda _: None)
    assert state.polls == 2


@pytest.mark.parametrize("setting, error, says", [
    ({"forecaster_kwargs": {"mode": "fats"}}, ValueError, "forecaster_kwargs {'mode': 'fats'}: mode must be 'nuts' or 'fast'"),
    ({"random_seed": -1}, ValueError, "random_seed must be an integer >= 0 or None, got -1"),
])
def test_watch_refuses_fit_settings_before_it_waits_for_runs(tmp_path, setting, error, says):
    """Taken on an empty folder, they failed at the first fit, once runs had come, with the forecaster's message."""
    with pytest.raises(error, match=re.escape(says)):
        watch(tmp_path, max_polls=1, sleep=lambda _: None, say=lambda _: None, **setting)


def test_a_random_seed_of_none_leaves_the_watch_fits_unseeded(sweep, intercept_advice_fit):
    """watch() takes random_seed=None ('an integer >= 0 or None'), and its first fit then failed:
    "unsupported operand type(s) for +: 'NoneType' and 'int'"."""
    from conftest import FitIntercepted

    import forecast.watch as watch_module

    seen = intercept_advice_fit(watch_module)
    append(sweep / "good-s0" / "evals.jsonl", "".join(row("good-s0", i, 0.1 + 0.02 * i) for i in range(5)))
    with pytest.raises(FitIntercepted):
        watch(sweep, budget=1e4, max_polls=1, random_seed=None, sleep=lambda _: None, say=lambda _: None)
    assert "random_seed" in seen and seen["random_seed"] is None


# ----------------------------------------------------------- known answers that kill hand-made mutants
# Each test below names the mutant of forecast/watch.py it was written against (session 41's mutation
# testing): the change survived every test before it, yet changed what a user sees.


def test_a_log_holding_only_a_torn_first_line_is_a_run_not_yet_evaluated(sweep):
    """Mutant 'torn last line counted complete' (_has_complete_line reading the torn line too): a run
    whose first evaluation was being written was refused, 'left out until its log changes'."""
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1)[:25])
    table, folders, unreadable = scan_runs(sweep)
    assert table.empty and folders == {} and unreadable == {}
    state = WatchState()
    assert poll(sweep, state, config=EarlyStopConfig(min_evals=4), advisor=FakeAdvisor()) == []
    assert state.refused == {}


def test_the_config_budget_uses_the_compute_per_step_of_the_latest_evaluation(sweep):
    """Mutant 'max_steps from the first evaluation': compute per step that grows (longer sequences as
    the policy learns) gave a planned budget from the first evaluation's rate, half the known one."""
    folder = sweep / "good-s0"
    (folder / "config.json").write_text(json.dumps({"max_steps": 120}))
    rows = pd.DataFrame({"compute": [600.0, 100.0, 200.0], "step": [30, 10, 20]})  # not in compute order
    assert planned_budget(folder, rows) == pytest.approx(600.0 / 30 * 120)


def test_the_logged_planned_compute_is_the_latest_evaluations(sweep):
    """Mutant 'first planned_compute, not the last': a run resumed with a longer plan kept being
    judged at its first plan's budget."""
    rows = pd.DataFrame({"compute": [300.0, 100.0, 200.0], "planned_compute": [5000.0, 1000.0, 1000.0]})
    assert planned_budget(sweep / "good-s0", rows) == 5000.0  # no config.json: the log's column


def test_a_log_of_numbers_written_as_text_gives_the_budget_of_its_latest_evaluation(sweep):
    """A log holding "compute": "40" (which validate_runs reads as a number) raised a TypeError out of
    the poll on the step ('>' between str and int), or on a sort of text beside numbers; all text, it
    sorted as text, and '9' was taken as the latest evaluation."""
    folder = sweep / "good-s0"
    rows = pd.DataFrame({"compute": ["9", "10", "80"], "planned_compute": [100.0, 100.0, 500.0]})
    assert planned_budget(folder, rows) == 500.0
    (folder / "config.json").write_text(json.dumps({"max_steps": 1000}))
    mixed = pd.DataFrame({"compute": [10.0, 20.0, "40", 80.0], "step": ["1", "2", "4", "8"]})
    assert planned_budget(folder, mixed) == pytest.approx(80.0 / 8 * 1000)


def test_watch_once_exits_1_when_a_run_is_left_out_for_its_data(sweep, capsys):
    """With every run's log holding a bad row, `watch --once` printed the refusals, advised nothing and
    exited 0: a script could not tell it from a folder with nothing to advise. The others' advice is
    still written."""
    append(sweep / "good-s0" / "evals.jsonl", row("good-s0", 0, 0.1) + row("good-s0", 1, 0.12))
    append(sweep / "bad-s0" / "evals.jsonl", row("bad-s0", 0, 0.1) + row("bad-s0", 1, 45.0))
    out = sweep / "advice.json"
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--out", str(out)]) == 1
    said = capsys.readouterr()
    assert "error: 1 run(s) left out at the last poll for their data (bad-s0" in said.err
    assert "column 'metric', run 'bad-s0', row 2" in said.out
    assert json.loads(out.read_text())["recommendations"]["good-s0"]["rule"] == "warmup"
    (sweep / "bad-s0" / "evals.jsonl").write_text(row("bad-s0", 0, 0.1) + row("bad-s0", 1, 0.11))  # mended
    assert main(["watch", str(sweep), "--once", "--budget", "1e4", "--out", str(out)]) == 0


def test_a_recommendations_file_that_is_not_a_json_object_starts_an_empty_stop_cap(tmp_path):
    """An earlier file holding a JSON array (a run table in records form) raised AttributeError
    ('list' has no 'get') out of the watch, a traceback where a note was meant."""
    from forecast.watch import previous_comparison_stops

    saved = tmp_path / "advice.json"
    saved.write_text('[{"run_id": "x"}]')
    history, note = previous_comparison_stops(saved, tmp_path)
    assert history == [] and note == f"{saved} is not a JSON object (not a recommendations file); the stop cap starts with no history"


def test_a_logged_planned_compute_of_zero_is_no_budget(sweep):
    """Mutant 'planned_compute 0 accepted': a budget of 0 (the callback's 'not known') was taken as
    the planned budget, every run judged at compute 0."""
    rows = pd.DataFrame({"compute": [100.0, 200.0], "planned_compute": [0.0, 0.0]})
    assert planned_budget(sweep / "good-s0", rows) is None


def test_a_bad_config_is_said_even_where_the_log_gives_a_planned_compute(sweep):
    """Mutant 'logged planned_compute used despite a bad config.json': the hand-edited file's
    mistake went unsaid, the run judged at a budget its config does not give."""
    from forecast.watch import planned_budget_or_why_not

    folder = sweep / "good-s0"
    (folder / "config.json").write_text(json.dumps({"max_steps": "lots"}))
    rows = pd.DataFrame({"compute": [100.0, 200.0], "step": [10, 20], "planned_compute": [5000.0, 5000.0]})
    budget, problem = planned_budget_or_why_not(folder, rows)
    assert budget is None and problem == f"{folder / 'config.json'}: max_steps 'lots' is not a number > 0"


def test_the_json_says_so_when_the_only_runs_log_is_emptied(sweep):
    """Mutant 'JSON written only while a run is seen': with the sweep's only log emptied, the file
    kept telling a scheduler the run's last advice, its 'gone' list empty."""
    log = sweep / "good-s0" / "evals.jsonl"
    for i in range(4):
        append(log, row("good-s0", i, 0.1 + 0.05 * i))
    out = sweep / "recommendations.json"
    state = watch(sweep, budget=1e4, config=EarlyStopConfig(min_evals=4), advisor=FakeAdvisor(), max_polls=2,
                  say=lambda text: None, warn=lambda text: None, sleep=lambda _s: log.write_text(""))
    written = json.loads(out.read_text())
    assert state.polls == 2 and written["polls"] == 2
    assert written["recommendations"] == {}
    assert written["gone"] == {"good-s0": "its evals.jsonl was deleted or emptied"}


def test_a_budget_between_the_logged_computes_is_not_said_to_be_below_them(sweep):
    """Mutant 'budget checked against the largest compute': a --budget that the runs are still
    on their way to was warned about as below the data (another unit?) at the first poll."""
    for i in range(4):
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", i, 0.1 + 0.05 * i))  # compute 100 to 400
    between, below = WatchState(), WatchState()
    poll(sweep, between, config=EarlyStopConfig(min_evals=4), budget=250.0, advisor=FakeAdvisor())
    poll(sweep, below, config=EarlyStopConfig(min_evals=4), budget=50.0, advisor=FakeAdvisor())
    assert between.notes == []
    assert len(below.notes) == 1 and "budget 50 is below" in below.notes[0]


def test_a_run_extended_after_its_summary_is_in_flight_again_not_ended(sweep):
    """Mutant 'an ended run stays ended': a run whose summary.json was removed to train on (extended)
    stayed under 'ended' in the JSON while it was advised again."""
    log = sweep / "good-s0" / "evals.jsonl"
    for i in range(4):
        append(log, row("good-s0", i, 0.1 + 0.05 * i))
    (sweep / "good-s0" / "summary.json").write_text("{}")
    state, advisor = WatchState(), FakeAdvisor()
    poll(sweep, state, config=EarlyStopConfig(min_evals=4), budget=1e4, advisor=advisor)
    assert set(state.ended) == {"good-s0"} and state.latest == {}
    (sweep / "good-s0" / "summary.json").unlink()
    append(log, row("good-s0", 4, 0.35))
    new = poll(sweep, state, config=EarlyStopConfig(min_evals=4), budget=1e4, advisor=advisor)
    assert [rec.run_id for rec in new] == ["good-s0"]
    assert state.ended == {} and state.finished == set()


def test_budget_overrides_each_runs_config(sweep):
    """Mutant '--budget loses to config.json' (poll reading a run's config.json before the flag):
    the budget the user gave was ignored for every trainer run, judged at its config's budget."""
    for i in range(4):
        append(sweep / "good-s0" / "evals.jsonl", row("good-s0", i, 0.1 + 0.05 * i))
    (sweep / "good-s0" / "config.json").write_text(json.dumps({"max_steps": 120, "advisor_budget": 5e3}))
    advisor = FakeAdvisor()
    poll(sweep, WatchState(), config=EarlyStopConfig(min_evals=4), budget=1e4, advisor=advisor)
    assert advisor.calls[-1]["_budgets"] == {"good-s0": 1e4}


@pytest.mark.parametrize("advice, said", [({}, "no reason recorded"), ({"rule": "beats_best"}, "beats_best"),
                                          ({"rule": "beats_best", "message": "stop: P = 0.01"}, "stop: P = 0.01")])
def test_how_a_run_stopped_by_its_advisor_ended_says_the_reason_it_has(sweep, advice, said):
    """Mutant 'stopped.json without message or rule': a stopped.json whose advice holds neither was
    said as 'stopped by its own advisor at eval 2 (200 flops): ', the reason blank."""
    from forecast.watch import how_it_ended

    folder = sweep / "good-s0"
    (folder / "stopped.json").write_text(json.dumps({"advice": advice}))
    rows = pd.DataFrame({"compute": [100.0, 200.0], "compute_unit": ["flops", "flops"]})
    assert how_it_ended(folder, rows) == f"stopped by its own advisor at eval 2 (200 flops): {said}"


@pytest.mark.parametrize("flags, said", [
    (["--max-polls", "0"], "--max-polls must be >= 1, got 0"),
    (["--once", "--reference", "{d}/missing.csv"], "--reference {d}/missing.csv: does not exist"),
])
def test_watch_cli_refuses_a_bad_flag_before_the_first_poll(tmp_path, capsys, monkeypatch, flags, said):
    """In the command's words, exit 2, before a poll (and so before a fit or a wait), nothing written."""
    import forecast.watch

    monkeypatch.setattr(forecast.watch, "poll", lambda *a, **k: pytest.fail("polled before refusing the flag"))
    assert main(["watch", str(tmp_path), *(flag.format(d=tmp_path) for flag in flags)]) == 2
    assert f"error: {said.format(d=tmp_path)}\n" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_watch_once_on_a_missing_folder_says_so_at_once_without_waiting(tmp_path, capsys, monkeypatch):
    """Only a live watch waits for a sweep to make its folder; --once is one look, so a missing folder is an
    error straight away (a script's `forecast watch DIR --once` stalled a minute on a typo)."""
    import time

    naps = []
    monkeypatch.setattr(time, "sleep", naps.append)
    assert main(["watch", str(tmp_path / "typo"), "--once"]) == 2
    err = capsys.readouterr().err
    assert naps == [] and "waiting" not in err and f"error: {tmp_path / 'typo'}: is not a folder\n" in err


def test_a_log_rewritten_to_as_many_rows_is_advised_on_its_new_rows(sweep):
    """A run killed and resumed between two polls has its log repaired (the rows after its checkpoint
    dropped, the file replaced) and those evaluations logged again, with other values: as many rows as
    before. Counted by rows alone, nothing had changed, and its advice stood on rows no longer there."""
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    append(bad, "".join(row("bad-s0", i, 0.1) for i in range(4)))
    append(good, "".join(row("good-s0", i, 0.1 + 0.05 * i) for i in range(4)))
    fitted = []

    def advisor(table, budgets, config):
        fitted.append(table.loc[table["run_id"] == "good-s0", "metric"].round(2).tolist())
        return FakeAdvisor()(table, budgets, config)

    state, config = WatchState(), EarlyStopConfig(min_evals=3)
    poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    repaired = sweep / "good-s0" / "evals.jsonl.tmp"
    repaired.write_text("".join(row("good-s0", i, 0.1 + 0.05 * i) for i in range(2))
                        + "".join(row("good-s0", i, 0.6) for i in (2, 3)))
    repaired.replace(good)  # an atomic rewrite, then the resumed run's rows
    new = poll(sweep, state, config=config, budget=1e4, advisor=advisor)
    assert fitted[-1] == [0.1, 0.15, 0.6, 0.6] and [rec.run_id for rec in new] == ["good-s0"]
    assert poll(sweep, state, config=config, budget=1e4, advisor=advisor) == [] and len(fitted) == 2  # once


def test_a_bad_row_fixed_in_place_is_advised_again(sweep):
    """README: a refused run is looked at again when its log changes. A pass rate of 1.5 corrected to 0.15
    changes no row count, and the run stayed refused (a finished run's for good: no row would come)."""
    good, bad = sweep / "good-s0" / "evals.jsonl", sweep / "bad-s0" / "evals.jsonl"
    append(good, "".join(row("good-s0", i, 0.1 + 0.05 * i) for i in range(4)))
    bad.write_text("".join(row("bad-s0", i, 1.5 if i == 2 else 0.1) for i in range(4)))
    state, config = WatchState(), EarlyStopConfig(min_evals=3)
    poll(sweep, state, config=config, budget=1e4, advisor=FakeAdvisor())
    assert set(state.refused) == {"bad-s0"}
    bad.write_text("".join(row("bad-s0", i, 0.15 if i == 2 else 0.1) for i in range(4)))
    new = poll(sweep, state, config=config, budget=1e4, advisor=FakeAdvisor())
    assert state.refused == {} and [rec.run_id for rec in new] == ["bad-s0"] and set(state.latest) == {"good-s0", "bad-s0"}


def test_a_column_another_run_brings_does_not_read_as_news_of_every_run(sweep):
    """What says a run changed is its own rows' values: a run joining with a column the others lack (its
    planned_compute, a seed left out: the others' integers read as floats beside its blanks) changes
    nothing in theirs, and they are not said again."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    state, config = WatchState(), EarlyStopConfig(min_evals=3)
    poll(sweep, state, config=config, budget=1e4, advisor=FakeAdvisor())
    (sweep / "new-s0").mkdir()
    append(sweep / "new-s0" / "evals.jsonl", "".join(json.dumps({**json.loads(row("new-s0", i, 0.2)), "n_eval": None,
                                                                 "planned_compute": 1e4}) + "\n" for i in range(4)))
    new = poll(sweep, state, config=config, budget=1e4, advisor=FakeAdvisor())
    assert [rec.run_id for rec in new] == ["new-s0"]


def test_a_run_folder_made_private_mid_watch_is_not_said_deleted(sweep, make_private):
    """A run folder made unreadable while watched (chmod 000, another user's) loses its run's advice, as a
    log that is gone does, but it was said and listed as 'deleted or emptied', which it is not."""
    for run in ("good-s0", "bad-s0"):
        append(sweep / run / "evals.jsonl", "".join(row(run, i, 0.2) for i in range(4)))
    state, config = WatchState(), EarlyStopConfig(min_evals=3)
    poll(sweep, state, config=config, budget=1e4, advisor=FakeAdvisor())
    make_private(sweep / "bad-s0")
    with pytest.warns(UserWarning, match="bad-s0: cannot be listed"):
        poll(sweep, state, config=config, budget=1e4, advisor=FakeAdvisor())
    assert set(state.latest) == {"good-s0"}
    assert "deleted" not in state.gone["bad-s0"] and "permission denied" in state.gone["bad-s0"]
    assert state.notes == [f"[bad-s0] {state.gone['bad-s0']}: its advice is dropped"]
