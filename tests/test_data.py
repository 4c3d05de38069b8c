"""Bad input fails at the boundary with a message naming the file, column, run and row."""

import csv
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast.data import RunDataError, load_runs, read_table, validate_runs
from forecast.forecaster import as_name


def good_table():
    rows = []
    for run, recipe in (("a-s0", "a"), ("a-s1", "a"), ("b-s0", "b")):
        for i, c in enumerate((10.0, 20.0, 40.0, 80.0)):
            rows.append({"run_id": run, "recipe": recipe, "compute": c, "metric": 0.2 + 0.05 * i, "n_eval": 100})
    return pd.DataFrame(rows)


def test_good_table_loads_from_csv_parquet_jsonl(tmp_path):
    table = good_table()
    table.to_csv(tmp_path / "runs.csv", index=False)
    table.to_parquet(tmp_path / "runs.parquet")
    (tmp_path / "runs.jsonl").write_text("\n".join(json.dumps(r) for r in table.to_dict("records")) + "\n")
    for name in ("runs.csv", "runs.parquet", "runs.jsonl"):
        runs = load_runs(tmp_path / name)
        assert len(runs) == 12 and runs["run_id"].nunique() == 3
        assert list(runs.groupby("run_id")["compute"].apply(lambda c: c.is_monotonic_increasing)) == [True] * 3


def test_folder_of_run_logs_with_torn_last_line(tmp_path):
    table = good_table()
    for run_id, run in table.groupby("run_id"):
        folder = tmp_path / run_id
        folder.mkdir()
        text = "\n".join(json.dumps(r) for r in run.to_dict("records")) + "\n"
        if run_id == "b-s0":
            text += '{"run_id": "b-s0", "recipe": "b", "comp'  # writer killed mid-line
        (folder / "evals.jsonl").write_text(text)
    (tmp_path / "runs.csv").write_text("not,the,source\n")  # combined tables are ignored when logs exist
    runs = load_runs(tmp_path)
    assert len(runs) == 12


def test_a_trainer_folder_before_its_first_evaluation_says_so(tmp_path):
    """A run (or sweep) folder read before any run has evaluated holds the trainer's per-step
    train_log.jsonl but no evals.jsonl: it was read as a run table and refused for its missing
    run_id, as if the trainer had written a bad file."""
    run = tmp_path / "sweep" / "grpo-s0"
    run.mkdir(parents=True)
    (run / "train_log.jsonl").write_text('{"step": 1, "reward": 0.5, "loss": 0.1, "compute": 1e9}\n')
    (run / "config.json").write_text('{"run_id": "grpo-s0"}\n')
    for folder in (run, tmp_path / "sweep"):
        with pytest.raises(RunDataError, match="holds trainer runs that have not evaluated yet") as err:
            load_runs(folder)
        assert "column" not in str(err.value)
    # beside tables of the user's own, the step log is not read as one of them
    good_table().to_csv(tmp_path / "sweep" / "runs.csv", index=False)
    assert len(load_runs(tmp_path / "sweep")) == 12


def test_the_trainer_s_step_log_named_as_the_input_says_what_it_is(tmp_path):
    """`forecast fit RUN/train_log.jsonl` was refused as "column 'run_id' is missing", as if the trainer had written
    a bad run table: said to be the trainer's per-step log, naming the folder (or its evals.jsonl) to give instead."""
    run = tmp_path / "grpo-s0"
    run.mkdir()
    step_log = run / "train_log.jsonl"
    step_log.write_text('{"step": 1, "reward": 0.5, "loss": 0.1, "compute": 1e9}\n')
    with pytest.raises(RunDataError) as err:
        load_runs(step_log)
    assert str(err.value) == (f"file {step_log}: is the trainer's per-step log (a row per training step, no run_id or "
                              f"metric), not a run table: give forecast the run folder ({run}), or the evals.jsonl in it "
                              "(a row per evaluation)")
    # a run table of the user's own under that name is read as any other
    good_table().to_json(step_log, orient="records", lines=True)
    assert len(load_runs(step_log)) == 12


def test_a_folder_of_tables_skips_json_files_that_a_named_json_input_reads(tmp_path):
    """A notes or config .json beside the tables made the whole folder fail on its missing run_id."""
    table = good_table()
    table.iloc[:8].to_csv(tmp_path / "part1.csv", index=False)
    table.iloc[8:].to_parquet(tmp_path / "part2.pq")
    (tmp_path / "meta.json").write_text('{"note": "hello"}\n')
    assert len(load_runs(tmp_path)) == 12
    records = tmp_path / "named" / "runs.json"
    records.parent.mkdir()
    records.write_text("\n".join(json.dumps(r) for r in table.to_dict("records")) + "\n")
    assert len(load_runs(records)) == 12
    records.write_text(table.to_json(orient="records"))  # one JSON array, as pandas writes it
    assert len(load_runs(records)) == 12
    bom = tmp_path / "named" / "bom.jsonl"  # a byte-order mark before the first line was "not valid JSON"
    bom.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r) for r in table.to_dict("records")).encode() + b"\n")
    assert len(load_runs(bom)) == 12
    (tmp_path / "only_json").mkdir()
    (tmp_path / "only_json" / "runs.json").write_text(records.read_text())
    with pytest.raises(RunDataError, match=r"folder holds no run files \(\*\.csv, \*\.parquet, \*\.pq, \*\.jsonl\)"):
        load_runs(tmp_path / "only_json")


def test_a_name_with_a_control_character_is_refused_naming_the_row():
    table = good_table()
    table.loc[5, "run_id"] = "a-s1\x00"  # a NUL: a corrupted name, which a saved fit cannot hold either
    with pytest.raises(RunDataError, match=r"column 'run_id', .*row 6: holds a control character \('a-s1\\x00'\)"):
        validate_runs(table, source="runs.csv")
    table["run_id"] = table["run_id"].str.replace("a-s1\x00", "a-s1").str.replace("-", "\t")  # a tab is text
    assert len(validate_runs(table)) == 12


def test_bad_json_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "evals.jsonl"
    path.write_text('{"run_id": "a"}\n{oops\n{"run_id": "a"}\n')
    with pytest.raises(RunDataError, match=r"line 2 is not valid JSON"):
        load_runs(path)


def test_a_json_row_too_deep_or_holding_half_a_surrogate_pair_is_refused_naming_its_line(tmp_path):
    """Found by fuzzing: a line of 100,000 nested brackets, or a string escape "\\ud800" without the second
    half of its pair, was "could not be read (RecursionError: ...)" or "(UnicodeEncodeError: ...)", naming
    the file but not the line."""
    lines = [json.dumps(r) for r in good_table().to_dict("records")]
    path = tmp_path / "runs.jsonl"
    deep = '{"run_id": "a-s0", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    for bad, said in ((deep, "nests arrays or objects too deep to read"),
                      ('{"run_id": "a-s0\\ud83d", "recipe": "a"}', r"holds \\ud83d, half of a surrogate pair")):
        path.write_text("\n".join(lines[:3] + [bad] + lines[3:]) + "\n")
        with pytest.raises(RunDataError, match=f"^file {re.escape(str(path))}: line 4 {said}"):
            load_runs(path)
        records = tmp_path / "runs.json"  # one array of rows: its item named, where no line is
        records.write_text("[" + ",\n".join(lines[:3] + [bad] + lines[3:]) + "]")
        with pytest.raises(RunDataError, match="item 4 of the array holds" if "surrogate" in said else said):
            load_runs(records)
    path.write_text("\n".join(lines[:3] + ['{"run_id": "a-s0\\ud83d\\ude00", "recipe": "a"}']) + "\n")  # a whole pair
    assert "a-s0\U0001f600" in set(read_table(path)["run_id"])


def _mutate(table, name):
    t = table.copy()
    if name == "missing column":
        t = t.drop(columns="metric")
    elif name == "nan metric":
        t.loc[5, "metric"] = np.nan
    elif name == "nan compute":
        t.loc[5, "compute"] = np.nan
    elif name == "text compute":
        t["compute"] = t["compute"].astype(object)
        t.loc[5, "compute"] = "lots"
    elif name == "zero compute":
        t.loc[5, "compute"] = 0.0
    elif name == "negative compute":
        t.loc[5, "compute"] = -3.0
    elif name == "metric above 1":
        t.loc[5, "metric"] = 1.2
    elif name == "metric below 0":
        t.loc[5, "metric"] = -0.1
    elif name == "duplicate compute":
        t.loc[5, "compute"] = t.loc[4, "compute"]
    elif name == "one point run":
        t = pd.concat([t, pd.DataFrame([{"run_id": "c-s0", "recipe": "c", "compute": 5.0, "metric": 0.3, "n_eval": 100}])], ignore_index=True)
    elif name == "mixed units":
        t["compute_unit"] = "flops"
        t.loc[5, "compute_unit"] = "gpu_hours"
    elif name == "run in two recipes":
        t.loc[5, "recipe"] = "b"
    elif name == "run with two seeds":
        t["seed"] = t["run_id"].str[-1].astype(int)
        t.loc[5, "seed"] = 7
    elif name == "empty run id":
        t.loc[5, "run_id"] = None
    elif name == "bad n_eval":
        t["n_eval"] = t["n_eval"].astype(float)
        t.loc[5, "n_eval"] = 2.5
    elif name == "infinite compute":
        t.loc[5, "compute"] = np.inf
    elif name == "compute falls as step rises":
        t["step"] = t.groupby("run_id").cumcount() * 10
        t.loc[5, "compute"] = 5.0  # the run's second evaluation, below its first: a restarted counter
    elif name == "negative step":  # was said as a compute that falls while step rises (the row sorted first)
        t["step"] = t.groupby("run_id").cumcount() * 10
        t.loc[5, "step"] = -10
    elif name == "negative device_seconds":  # was read in silence
        t["device_seconds"] = t.groupby("run_id").cumcount() * 60.0
        t.loc[5, "device_seconds"] = -1.5
    return t


CASES = {
    "missing column": ("metric", None, None, "is missing"),
    "nan metric": ("metric", "a-s1", 7, "missing"),
    "nan compute": ("compute", "a-s1", 7, "missing"),
    "text compute": ("compute", "a-s1", 7, "not a number"),
    "zero compute": ("compute", "a-s1", 7, "> 0"),
    "negative compute": ("compute", "a-s1", 7, "> 0"),
    "metric above 1": ("metric", "a-s1", 7, r"\[0, 1\]"),
    "metric below 0": ("metric", "a-s1", 7, r"\[0, 1\]"),
    "duplicate compute": ("compute", "a-s1", 7, "duplicate"),
    "one point run": (None, "c-s0", 14, "1 point"),
    "mixed units": ("compute_unit", "a-s1", 7, "mixes compute units"),
    "run in two recipes": ("recipe", "a-s1", 7, "several recipes"),
    "run with two seeds": ("seed", "a-s1", 7, r"several seeds \[1, 7\]"),
    "empty run id": ("run_id", None, 7, "missing"),
    "bad n_eval": ("n_eval", "a-s1", 7, r"whole number of graded samples from 1 to 10\*\*12, got 2.5$"),
    "infinite compute": ("compute", "a-s1", 7, "infinite"),
    "compute falls as step rises": ("compute", "a-s1", 7, "falls from 10 to 5 while step rises from 0 to 10"),
    "negative step": ("step", "a-s1", 7, "must be >= 0, got -10: an optimizer step counts from the run's start"),
    "negative device_seconds": ("device_seconds", "a-s1", 7, "must be >= 0, got -1.5: a count of device seconds"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_names_file_column_run_and_row(tmp_path, case):
    column, run, line, pattern = CASES[case]
    path = tmp_path / "runs.csv"
    _mutate(good_table(), case).to_csv(path, index=False)
    with pytest.raises(RunDataError, match=pattern) as info:
        load_runs(path)
    err = info.value
    message = str(err)
    assert str(path) in message
    assert err.column == column
    if column:
        assert f"column '{column}'" in message
    if run:
        assert err.run_id == run and f"run '{run}'" in message
    if line:
        assert err.row == line and f"row {line}" in message  # CSV line number (header = line 1)


def test_true_as_compute_is_refused_without_a_warning_that_compute_fell_to_1(tmp_path):
    rows = good_table().to_dict("records")
    rows[5]["compute"] = True  # read as 1 by the log-order check, it 'fell from 10 to 1' beside the refusal
    log = tmp_path / "runs.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RunDataError, match="true/false, not a number"):
            load_runs(log)
    assert [str(w.message) for w in caught if "falls from" in str(w.message)] == []


def test_true_false_or_a_date_as_compute_is_refused_not_read_as_a_number(tmp_path):
    rows = good_table().to_dict("records")
    rows[5]["compute"] = True  # pandas would read it as 1
    log = tmp_path / "runs.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RunDataError, match="True is true/false, not a number") as info:
        load_runs(log)
    assert (info.value.column, info.value.run_id, info.value.row) == ("compute", "a-s1", 6)

    table = good_table()
    table["compute"] = pd.to_datetime("2026-01-01") + pd.to_timedelta(table["compute"], unit="D")
    table.to_parquet(tmp_path / "dated.parquet")
    with pytest.raises(RunDataError, match="a date or a duration, not a number") as info:
        load_runs(tmp_path / "dated.parquet")
    assert info.value.column == "compute" and info.value.row == 1

    # found by fuzzing: a column of pandas' periods (a day each), which Parquet keeps, was read as days since 1970
    table["compute"] = pd.period_range("2026-01-01", periods=len(table), freq="D")
    table.to_parquet(tmp_path / "periods.parquet")
    with pytest.raises(RunDataError, match="Period\\('2026-01-01', 'D'\\) is a date or a duration, not a number") as info:
        load_runs(tmp_path / "periods.parquet")
    assert info.value.column == "compute" and info.value.row == 1


def test_a_parquet_file_with_run_id_as_its_index_reads_it_as_a_column(tmp_path):
    table = good_table().set_index("run_id")
    table.to_parquet(tmp_path / "runs.parquet")
    runs = load_runs(tmp_path / "runs.parquet")
    assert sorted(runs["run_id"].unique()) == ["a-s0", "a-s1", "b-s0"] and len(runs) == 12


def test_compute_may_repeat_a_step_but_not_fall_behind_it():
    table = good_table()
    table["step"] = table.groupby("run_id").cumcount() * 10
    assert len(validate_runs(table)) == 12  # rising together: fine
    table.loc[table["run_id"] == "b-s0", "step"] = [30, 20, 10, 0]  # step counted down: compute fell behind it
    with pytest.raises(RunDataError, match="falls from 80 to 40") as info:
        validate_runs(table)
    assert info.value.run_id == "b-s0"


def test_runs_whose_compute_sits_orders_of_magnitude_apart_are_flagged_as_a_unit_mix():
    table = good_table()
    table.loc[table["run_id"] == "b-s0", "compute"] *= 3.6e15  # b-s0 logged in FLOPs, the rest in GPU-hours
    with pytest.warns(UserWarning, match=r"run 'a-s0' at about 30, run 'b-s0' at about 1.08e17\): are they in one unit"):
        validate_runs(table)
    table.loc[table["run_id"] == "b-s0", "compute"] /= 3.6e13  # 100x apart: a bigger model, not a unit mix
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_runs(table)


def test_missing_file_and_unsupported_type(tmp_path):
    with pytest.raises(RunDataError, match="does not exist"):
        load_runs(tmp_path / "nope.csv")
    (tmp_path / "runs.txt").write_text("x")
    with pytest.raises(RunDataError, match="unsupported file type"):
        load_runs(tmp_path / "runs.txt")


def test_a_ragged_csv_names_its_line_in_words(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("run_id,recipe,compute,metric\na,x,1,0.1\na,x,2,0.2,9\n")
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    message = str(info.value)
    assert str(path) in message and "line 3 has 5 fields where the header has 4" in message
    assert "C error" not in message


def test_garbage_file_is_reported_with_its_name(tmp_path):
    path = tmp_path / "runs.parquet"
    path.write_bytes(b"definitely not parquet")
    with pytest.raises(RunDataError, match="could not be read") as info:
        load_runs(path)
    assert str(path) in str(info.value)


cell = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4), st.integers(-5, 5))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.fixed_dictionaries(
            {"run_id": st.one_of(st.sampled_from(["r1", "r2"]), cell), "recipe": st.one_of(st.sampled_from(["x", "y"]), cell), "compute": cell, "metric": cell}
        ),
        min_size=0,
        max_size=12,
    ),
    st.sets(st.sampled_from(["run_id", "recipe", "compute", "metric"]), max_size=2),
)
def test_fuzzed_tables_either_validate_cleanly_or_raise_run_data_error(rows, dropped):
    table = pd.DataFrame(rows, columns=["run_id", "recipe", "compute", "metric"]).drop(columns=list(dropped))
    try:
        clean = validate_runs(table, source="fuzz.csv")
    except RunDataError as err:
        assert str(err)  # a message, never an empty error
        return
    # whatever validates must satisfy every invariant the model relies on
    assert (clean["compute"] > 0).all() and np.isfinite(clean["compute"]).all()
    assert clean["metric"].between(0, 1).all()
    assert not clean.duplicated(["run_id", "compute"]).any()
    assert (clean.groupby("run_id").size() >= 2).all()
    assert (clean.groupby("run_id")["recipe"].nunique() == 1).all()


def test_the_ended_column_says_which_runs_ended_and_a_run_folder_fills_it(tmp_path):
    """A sweep's runs.csv (and a saved fit) says which runs ended in an optional `ended` column, as a
    run folder does with stopped.json or summary.json: reading the folder writes the same column."""
    table = good_table().assign(ended=["finished"] * 4 + [""] * 4 + ["advisor_stopped"] * 4)
    table.to_csv(tmp_path / "runs.csv", index=False)
    runs = load_runs(tmp_path / "runs.csv")
    assert runs.groupby("run_id")["ended"].first().to_dict() == {"a-s0": "finished", "a-s1": "", "b-s0": "advisor_stopped"}
    for run, files in {"a-s0": ["summary.json"], "a-s1": [], "b-s0": ["stopped.json"]}.items():
        (tmp_path / "sweep" / run).mkdir(parents=True)
        rows = good_table().query("run_id == @run").to_dict("records")
        (tmp_path / "sweep" / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for name in files:
            (tmp_path / "sweep" / run / name).write_text("{}")
    pd.testing.assert_series_equal(load_runs(tmp_path / "sweep")["ended"], runs["ended"])
    # a table without the column reads as before: no column is added
    good_table().to_csv(tmp_path / "old.csv", index=False)
    assert "ended" not in load_runs(tmp_path / "old.csv")


def test_a_table_filtered_to_other_recipes_forgets_the_runs_it_left_out_of_those_it_dropped():
    """load_runs leaves out a run in flight with one evaluation and keeps why (attrs, for the fit). A table
    filtered since to another recipe kept it too: its fit said of the recipe filtered away "recipe 'b' is
    not in the fit: its run 'b-s1' was left out (it was in flight with 1 evaluation ...; fit again once it
    has more)", as if that were its only run, its finished runs unnamed. A filter keeping the recipe, or
    the table unchanged, keeps it."""
    first = dict(run_id="b-s1", recipe="b", compute=10.0, metric=0.2, n_eval=100, ended="")
    with pytest.warns(UserWarning, match="left out"):
        runs = validate_runs(pd.concat([good_table().assign(ended="finished"), pd.DataFrame([first])], ignore_index=True))
    assert set(runs.attrs["left_out_runs"]) == {"b-s1"}
    assert set(validate_runs(runs).attrs["left_out_runs"]) == {"b-s1"}  # unchanged: load_runs, then fit
    assert set(validate_runs(runs[runs["recipe"] == "b"]).attrs["left_out_runs"]) == {"b-s1"}
    assert validate_runs(runs[runs["recipe"] == "a"]).attrs["left_out_runs"] == {}


def test_a_sweep_read_while_a_run_has_its_first_evaluation_only_leaves_that_run_out(tmp_path):
    """`forecast fit SWEEP_DIR` / `report SWEEP_DIR` on a sweep in flight exited 2 ("has 1 point(s); at
    least 2 are needed") for as long as any run had just its first evaluation, which every run started
    goes through: a run in flight that short is left out, with a warning naming it, as watch and the
    trainer's advisor leave it out. One that ended that short is still refused, as is a table of
    nothing but such runs, and a table without the `ended` column reads as before."""
    sweep = tmp_path / "sweep"
    for run, rows in good_table().groupby("run_id"):
        (sweep / run).mkdir(parents=True)
        (sweep / run / "summary.json").write_text("{}")
        (sweep / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.to_dict("records")))
    started = sweep / "b-s1"
    started.mkdir()
    first = dict(run_id="b-s1", recipe="b", compute=10.0, metric=0.2, n_eval=100)
    (started / "evals.jsonl").write_text(json.dumps(first) + "\n")
    with pytest.warns(UserWarning, match=r"1 run in flight has fewer than 2 evaluations so far and is left out "
                                         r"until it has more: b-s1"):
        runs = load_runs(sweep)
    assert sorted(runs["run_id"].unique()) == ["a-s0", "a-s1", "b-s0"] and len(runs) == 12
    (started / "summary.json").write_text("{}")  # ended after one evaluation: a curve cannot be fitted to it
    with pytest.raises(RunDataError, match=r"has 1 point\(s\); at least 2 are needed"):
        load_runs(sweep)
    (started / "summary.json").unlink()
    table = pd.concat([good_table(), pd.DataFrame([first])], ignore_index=True)
    with pytest.raises(RunDataError, match=r"has 1 point\(s\)"):  # no `ended` column: nothing says it is in flight
        validate_runs(table)
    alone = pd.DataFrame([first]).assign(ended="")
    with pytest.raises(RunDataError, match=r"has 1 point\(s\); at least 2 are needed to fit a curve \(it is in "
                                           r"flight: read it again after its next evaluation\)"):
        validate_runs(alone)


@pytest.mark.parametrize("value, run, pattern", [
    ("True", "a-s1", r"must be empty \(a run in flight\) or say how the run ended: 'finished' or 'advisor_stopped'; got 'True'"),
    ("advisor_stopped", "a-s0", r"says the run ended two ways \('finished', then 'advisor_stopped'\); give one"),
])
def test_an_ended_value_that_is_not_a_way_to_end_is_refused_naming_run_and_row(tmp_path, value, run, pattern):
    table = good_table().assign(ended=["finished"] * 4 + [""] * 8)
    table.loc[6 if run == "a-s1" else 2, "ended"] = value
    table.to_csv(tmp_path / "runs.csv", index=False)
    with pytest.raises(RunDataError, match=pattern) as info:
        load_runs(tmp_path / "runs.csv")
    assert (info.value.column, info.value.run_id, info.value.row) == ("ended", run, 8 if run == "a-s1" else 4)


SHIPPED_TRAINER_SWEEPS = sorted((Path(__file__).resolve().parent.parent / "examples").glob("trainer_sweep*/*.csv"))


@pytest.mark.parametrize("path", SHIPPED_TRAINER_SWEEPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_trainer_sweeps_load_whole(path):
    """The benchmark replays these; each is 7 recipes x 3 seeds x 40 evaluations of counted FLOPs."""
    runs = load_runs(path)
    assert runs["run_id"].nunique() == 21 and runs["recipe"].nunique() == 7
    assert (runs.groupby("run_id").size() == 40).all()
    assert set(runs["compute_unit"]) == {"flops"} and runs["metric"].between(0, 1).all()


def test_the_gpu_sweep_loads_whole():
    """examples/gpu_llama_sweep: what trainer_minimal wrote on a GPU reads like any run table."""
    runs = load_runs(Path(__file__).resolve().parent.parent / "examples" / "gpu_llama_sweep" / "runs.csv")
    assert sorted(runs["run_id"].unique()) == ["grpo-s0", "grpo-s1", "scalerl-s0", "scalerl-s1"]
    assert (runs.groupby("run_id").size() == 20).all() and set(runs["compute_unit"]) == {"flops"}
    assert runs["metric"].between(0, 1).all() and (runs["n_eval"] == 1200).all()


def _falling_metric_warnings(table) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        validate_runs(table)
    return [str(w.message) for w in caught if "falls with compute" in str(w.message)]


def test_a_metric_that_falls_with_compute_is_named_in_a_warning(tmp_path):
    """The curve rises to an asymptote (a pass rate, higher is better): a loss or an error rate was fitted
    without a word, and `decide` told to scale the recipe with the worst of it. A copy of the shipped
    trainer sweep as 1 - pass rate is now read with a warning that says what the metric must be."""
    runs = pd.read_csv(Path(__file__).resolve().parent.parent / "examples" / "trainer_sweep" / "runs.csv")
    runs["metric"] = 1 - runs["metric"]
    runs.to_csv(tmp_path / "error_rate.csv", index=False)
    with pytest.warns(UserWarning, match=r"error_rate.csv, column 'metric': falls with compute in 21 of 21 runs "
                                         r"\('cispo-s0', 'cispo-s1', 'cispo-s2' and 18 more.*rises with compute.*"
                                         r"Pass a score that rises: 1 - error rate"):
        load_runs(tmp_path / "error_rate.csv")


def test_one_run_whose_pass_rate_collapses_is_not_taken_for_a_falling_metric():
    """The trainer's advisor validates its run's own evaluations alone (early_stop.trainer_advice), and a
    run whose pass rate collapses (0.50 to 0.30: a common end of an RL run, the one the stop rules are
    for) was 'falls with compute in 1 of 1 runs ... a loss or an error rate is read upside down ... Pass
    1 - error rate', advice about a metric the trainer writes as a pass rate. One run's fall is a run
    going wrong as often as a metric upside down; a falling metric takes two runs or more (a sweep in
    flight with one run long enough to judge included)."""
    compute = [1e3 * 2 ** i for i in range(8)]
    collapse = [0.50, 0.52, 0.49, 0.45, 0.40, 0.36, 0.32, 0.30]
    run = pd.DataFrame({"run_id": "grpo-s0", "recipe": "grpo", "compute": compute, "metric": collapse, "n_eval": 500})
    assert _falling_metric_warnings(run) == []
    short = pd.DataFrame({"run_id": "grpo-s1", "recipe": "grpo", "compute": compute[:3], "metric": collapse[:3],
                          "n_eval": 500})
    assert _falling_metric_warnings(pd.concat([run, short])) == []  # the other run is too short to judge
    two = pd.concat([run, run.assign(run_id="grpo-s1")])
    assert len(_falling_metric_warnings(two)) == 1 and "in 2 of 2 runs" in _falling_metric_warnings(two)[0]


def test_each_runs_metrics_for_the_falling_check_are_its_own_in_order_of_compute():
    """The falling-metric check reads each run's metric in order of compute, its runs in order of their first
    row. It sorts the table once instead of once per run (validate_runs runs after every evaluation in
    forecast watch and the pruner); what it reads must be what a sort per run reads, rows shuffled, runs
    interleaved, a run_id missing (left out) and a run too short to judge among them."""
    from forecast.data import _metrics_by_run, runs_whose_metric_falls
    from forecast.synthetic import simulate_sweep

    sweep = simulate_sweep(rng=3, messy_fraction=1.0, n_eval=500)
    upside_down = sweep.assign(metric=1 - sweep["metric"])
    short = pd.DataFrame({"run_id": "short", "recipe": "x", "compute": [3.0, 1.0, 2.0], "metric": [0.1, 0.3, 0.2]})
    unnamed = pd.DataFrame({"run_id": [None, None], "recipe": "x", "compute": [1.0, 2.0], "metric": [0.5, 0.4]})
    for table in (sweep, upside_down):
        shuffled = pd.concat([table, short, unnamed]).sample(frac=1.0, random_state=0).reset_index(drop=True)
        by_run = {run: group.sort_values("compute")["metric"].to_numpy(dtype=float)
                  for run, group in shuffled.groupby("run_id", sort=False)}
        read = _metrics_by_run(shuffled)
        assert list(read) == list(by_run) and "short" in read and None not in read
        for run, metric in by_run.items():
            np.testing.assert_array_equal(read[run], metric)
    falling, judged = runs_whose_metric_falls(upside_down.sample(frac=1.0, random_state=1))
    assert judged == sweep["run_id"].nunique() and 2 * len(falling) > judged  # most runs of 1 - metric fall
    assert runs_whose_metric_falls(sweep) == ([], judged)


def test_the_falling_checks_medians_are_numpys_to_the_last_bit():
    """The falling-metric check takes the median of each run's steps (and of their spread) for all runs in
    one sort instead of one np.median per run; each must be np.median's number exactly, for odd and even
    lengths, repeated values, a single value and a NaN, and so the evaluation noise the check compares with."""
    from forecast.data import _evaluation_noise, _medians

    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=n) for n in rng.integers(1, 60, size=300)]
    arrays += [np.round(rng.normal(size=n), 1) for n in (2, 7, 8, 40)]  # repeated values
    arrays += [np.array([0.25]), np.array([0.1, np.nan, 0.3]), np.array([-1e-300, 1e-300])]
    np.testing.assert_array_equal(_medians(arrays), [np.median(a) for a in arrays])
    metrics = [np.clip(0.3 + 0.01 * np.cumsum(rng.normal(size=n)), 0, 1) for n in rng.integers(6, 80, size=40)]
    spreads = [np.median(np.abs(np.diff(m) - np.median(np.diff(m)))) / 0.6745 / np.sqrt(2) for m in metrics]
    no_n_eval = pd.DataFrame({"metric": np.concatenate(metrics)})
    assert _evaluation_noise(no_n_eval, metrics) == float(np.median(spreads))


def test_rising_sweeps_and_their_early_evaluations_say_nothing_of_a_falling_metric():
    """No shipped table, no synthetic sweep (the messy ones, whose runs may decline late, among them), nor
    the first evaluations of any of their runs read alone (a sweep in flight, the trainer's advisor on a
    run of its own), is taken for a falling metric."""
    from forecast.synthetic import simulate_sweep

    examples = Path(__file__).resolve().parent.parent / "examples"
    tables = [pd.read_csv(path) for path in sorted(examples.glob("*/*.csv"))]
    tables += [simulate_sweep(rng=seed, messy_fraction=messy, n_eval=n_eval)
               for seed in range(2) for messy in (0.0, 1.0) for n_eval in (16_000, 500)]
    for table in tables:
        assert _falling_metric_warnings(table) == []
        first = table.sort_values("compute", kind="stable").groupby("run_id").head(8)
        assert _falling_metric_warnings(first) == []
        for _, run in list(first.groupby("run_id"))[:6]:
            assert _falling_metric_warnings(run) == []


def test_a_csv_keeps_run_and_recipe_names_as_written(tmp_path):
    path = tmp_path / "lr.csv"
    path.write_text("run_id,recipe,compute,metric\n001,1e-3,10,0.3\n001,1e-3,20,0.35\n1,5e-4,10,0.3\n1,5e-4,20,0.33\n")
    runs = load_runs(path)
    assert set(runs["run_id"]) == {"001", "1"} and set(runs["recipe"]) == {"1e-3", "5e-4"}


def test_run_ids_held_as_whole_number_floats_are_named_as_the_numbers_they_are(tmp_path):
    """A run_id column of floats (a NaN elsewhere, or a float dtype from another tool) named run 3.0
    '3.0' in every table and message; a whole value is named '3'. Names written as text stay as written."""
    frame = pd.DataFrame({"run_id": [3.0] * 3 + [4.5] * 3, "recipe": [1.0] * 6, "compute": [1.0, 2.0, 4.0] * 2,
                          "metric": [0.1, 0.2, 0.3, 0.1, 0.2, 0.3]})
    runs = validate_runs(frame)
    assert set(runs["run_id"]) == {"3", "4.5"} and set(runs["recipe"]) == {"1"}
    with pytest.raises(RunDataError, match="run '3', row 2"):
        validate_runs(frame.assign(metric=[0.1, 1.5, 0.3, 0.1, 0.2, 0.3]))
    path = tmp_path / "runs.parquet"
    frame.astype({"run_id": "float32"}).to_parquet(path)
    assert set(load_runs(path)["run_id"]) == {"3", "4.5"}
    text = pd.DataFrame({"run_id": ["3.0"] * 2, "recipe": ["r"] * 2, "compute": [1.0, 2.0], "metric": [0.1, 0.2]})
    assert set(validate_runs(text)["run_id"]) == {"3.0"}
    for text_dtype in ("str", "string", object):  # text is read as written, a float among it as its number
        mixed = pd.DataFrame({"run_id": pd.Series(["3.0", "3.0", 4.0, 4.0], dtype=object), "compute": [1.0, 2.0] * 2,
                              "recipe": pd.Series(["2.0"] * 4, dtype=text_dtype), "metric": [0.1, 0.2] * 2})
        runs = validate_runs(mixed)
        assert set(runs["run_id"]) == {"3.0", "4"} and set(runs["recipe"]) == {"2.0"}
    # asked for by the number, a run is found under the name the table gave it
    assert (as_name(3.0, "run_id"), as_name(np.float32(4.0)), as_name(4.5), as_name("3.0")) == ("3", "4", "4.5", "3.0")


def test_a_table_with_run_id_as_its_index_is_read_as_a_parquet_file_with_it_is():
    """A DataFrame indexed by run_id (set_index, a groupby's result) was refused with "column 'run_id':
    is missing" while the same table saved as Parquet was read (its named index is a column)."""
    frame = pd.DataFrame({"run_id": ["a", "a", "b", "b"], "recipe": ["r", "r", "s", "s"],
                          "compute": [1.0, 2.0, 1.0, 2.0], "metric": [0.1, 0.2, 0.1, 0.3]})
    expected = validate_runs(frame)[["run_id", "recipe", "compute", "metric"]]
    for indexed in (frame.set_index("run_id"), frame.set_index(["recipe", "run_id"])):
        pd.testing.assert_frame_equal(validate_runs(indexed)[["run_id", "recipe", "compute", "metric"]], expected)
    with pytest.raises(RunDataError, match="column 'run_id': is missing"):
        validate_runs(frame.drop(columns="run_id").set_index("recipe").rename_axis("other"))


def test_a_csv_keeps_names_pandas_would_read_as_missing(tmp_path):
    """A recipe called None or null, a run called NA: read_csv takes them for missing by default, and
    the table was refused with "is missing (NaN/empty)" at a cell that is not empty. Other columns
    still read NA as missing, and an empty name is still refused."""
    path = tmp_path / "runs.csv"
    path.write_text("run_id,recipe,compute,metric,n_eval\nNA,None,10,0.3,NA\nNA,None,20,0.35,NA\n"
                    "nan,null,10,0.3,\nnan,null,20,0.33,\n")
    runs = load_runs(path)
    assert set(runs["run_id"]) == {"NA", "nan"} and set(runs["recipe"]) == {"None", "null"}
    assert runs["n_eval"].isna().all()
    path.write_text("run_id,recipe,compute,metric\nx,a,10,NA\nx,a,20,0.3\n")
    with pytest.raises(RunDataError, match="column 'metric', run 'x', row 2: is missing"):
        load_runs(path)
    path.write_text("run_id,recipe,compute,metric\nx,,10,0.2\nx,,20,0.3\n")
    with pytest.raises(RunDataError, match="column 'recipe', run 'x', row 2: is missing"):
        load_runs(path)


def test_blank_compute_unit_cells_take_the_tables_one_unit():
    frame = pd.DataFrame({"run_id": ["a"] * 3, "recipe": ["r"] * 3, "compute": [1.0, 2.0, 4.0],
                          "metric": [0.1, 0.2, 0.3], "compute_unit": ["gpu_hours", np.nan, " "]})
    assert list(validate_runs(frame)["compute_unit"]) == ["gpu_hours"] * 3
    frame["compute_unit"] = ["gpu_hours", "", "flops"]
    with pytest.raises(RunDataError, match="mixes compute units"):
        validate_runs(frame)


def test_n_eval_missing_on_some_rows_is_said_with_where():
    frame = pd.DataFrame({"run_id": ["a"] * 3, "recipe": ["r"] * 3, "compute": [1.0, 2.0, 4.0],
                          "metric": [0.1, 0.2, 0.3], "n_eval": [800, np.nan, 800]})
    with pytest.warns(UserWarning, match=r"column .n_eval., run .a., row 2: is missing \(here first\) while other rows have it"):
        clean = validate_runs(frame)
    # said once per table: `forecast fit` loads a table and then fits it, and printed it twice
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert validate_runs(clean).equals(clean)
    edited = clean.copy()
    edited.loc[0, "metric"] = 0.15
    with pytest.warns(UserWarning, match="is missing"):  # a changed table is checked, and said, again
        validate_runs(edited)


def test_an_error_after_blank_lines_names_the_line_of_the_file(tmp_path):
    """read_csv skips blank lines; rows counted from the header named line 5 for what is on line 7."""
    path = tmp_path / "runs.csv"
    path.write_text("run_id,recipe,compute,metric\n\na,r,1,0.1\n\n\na,r,2,0.2\na,r,3,1.5\n")
    with pytest.raises(RunDataError, match=r"column 'metric', run 'a', row 7: must lie in \[0, 1\], got 1.5"):
        load_runs(path)


def test_an_error_after_a_quoted_field_over_two_lines_names_the_line_it_is_on(tmp_path):
    """A notes cell holding a newline made the row count miss, and rows were counted from the header:
    every row after it was named a line early (row 3 for what is on line 4)."""
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('run_id,recipe,compute,metric,note\na,r,1,0.1,"two\nlines"\na,r,2,1.5,x\n')
    with pytest.raises(RunDataError, match="row 4: must lie"):
        load_runs(quoted)
    blank = tmp_path / "blank.csv"  # a blank line after it too
    blank.write_text('run_id,recipe,compute,metric,note\na,r,1,0.1,"restarted\nafter OOM"\n\na,r,2,0.2,\na,r,3,1.3,\n')
    with pytest.raises(RunDataError, match="row 6: must lie"):
        load_runs(blank)
    semicolons = tmp_path / "semicolons.csv"  # the file's own separator (and decimal commas)
    semicolons.write_text('run_id;recipe;compute;metric;note\na;r;1;0,1;"x\ny"\na;r;2;0,2;\na;r;3;1,3;\n')
    with pytest.raises(RunDataError, match="row 5: must lie"):
        load_runs(semicolons)


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    """The decoder's 'position 3' counted into a chunk of the file, and no line was named."""
    table = tmp_path / "runs.csv"
    table.write_bytes("run_id,recipe,compute,metric\na,r,1,0.1\nb\xe9,r,2,0.2\n".encode("latin-1"))
    log = tmp_path / "evals.jsonl"
    log.write_bytes(b'{"run_id": "a"}\n{"run_id": "\xff"}\n')
    for path, line, byte in ((table, 3, "0xe9"), (log, 2, "0xff")):
        with pytest.raises(RunDataError) as info:
            load_runs(path)
        assert str(info.value) == f"file {path}: line {line} is not UTF-8 text (byte {byte}); save the file as UTF-8"


def test_a_frame_with_two_columns_of_one_name_is_refused_in_words():
    """frame['metric'] was then a table, and validation failed with an AttributeError."""
    table = good_table()
    twice = pd.concat([table, table[["metric"]]], axis=1)
    with pytest.raises(RunDataError, match="column 'metric': appears more than once"):
        validate_runs(twice)
    levels = table.copy()
    levels.columns = pd.MultiIndex.from_arrays([["run"] * 5, table.columns])
    with pytest.raises(RunDataError, match="several levels"):
        validate_runs(levels)


@pytest.mark.parametrize("header, hint", [
    ("run_id, recipe, compute, metric", "' recipe' is not 'recipe': names are matched exactly"),
    ("run_id,recipe,compute,Metric", "'Metric' is not 'metric'"),
    ("Run\tRecipe\tCompute\tMetric", "the header is one column holding '\\t', which separates the columns where "
     "they are named run_id, recipe, compute and metric: is 'Run' the run id? Rename it to 'run_id'; 'Recipe' is not "
     "'recipe': names are matched exactly"),
    ("Run;Recipe;Compute;Metric", "the header is one column holding ';', which separates the columns where they are "
     "named run_id, recipe, compute and metric: is 'Run' the run id?"),
    ("run_id|recipe|compute|metric", "the header is one column holding '|': separate the columns with commas"),
    ("a,r,1,0.1", "some column names are numbers: does the table lack its header line?"),
    ("run_id,recipe,compute (FLOPs),metric",
     "'compute (FLOPs)' is not 'compute': name the column 'compute' and give its unit in a column 'compute_unit'"),
    ("run.name,recipe,compute,metric", "is 'run.name' the run id? Rename it to 'run_id'"),
    ("run_id,recipe,compute, pass_rate ", "is ' pass_rate ' the metric? Rename it to 'metric'"),
    ("run_id,recipe,total_flops,metric", "is 'total_flops' the compute? Rename it to 'compute'"),
    ("_step,run_id,Group,compute,metric", "columns present: _step, run_id, Group,"),
])
def test_a_missing_column_says_the_likely_cause(tmp_path, header, hint):
    path = tmp_path / "runs.csv"
    path.write_text(f"{header}\na,r,1,0.1\na,r,2,0.2\n")
    with pytest.raises(RunDataError, match="is missing") as info:
        load_runs(path)
    assert hint in str(info.value)


@pytest.mark.parametrize("header, hint", [
    ("Run ID,recipe,compute,metric", "'Run ID' is not 'run_id': names are matched exactly"),
    ("run_id,recipe,compute,val/accuracy", "is 'val/accuracy' the metric? Rename it to 'metric'"),
    ("run_id,recipe,compute,eval/pass@1", "is 'eval/pass@1' the metric? Rename it to 'metric'"),
    ("run_id,recipe,train/flops,metric", "is 'train/flops' the compute? Rename it to 'compute'"),
    ("run_id,recipe,GPU hours,metric",
     "is 'GPU hours' the compute? Rename it to 'compute' and give its unit in a column 'compute_unit' (gpu_hours)"),
    ("run_id,recipe,trainer/global_step,metric",
     "'trainer/global_step' counts steps, which stand in for compute only where every run's step costs the same"),
    ("run_id,kind,compute,metric", "with one run per recipe, give each run's run_id as its recipe"),
])
def test_a_missing_column_named_as_trackers_and_units_name_it_says_what_to_do(tmp_path, header, hint):
    """Names a tracker gives (a key under a prefix, 'Run ID'), compute in GPU-hours or steps, a table
    with no recipe: each was 'is missing (columns present: ...)' with nothing on what to change."""
    path = tmp_path / "runs.csv"
    path.write_text(f"{header}\na,r,1,0.1\na,r,2,0.2\n")
    with pytest.raises(RunDataError, match="is missing") as info:
        load_runs(path)
    assert hint in str(info.value)


def test_every_missing_column_is_named_at_once_with_its_likely_cause(tmp_path):
    """A tracker's export (Weights & Biases: Name, Group, a FLOPs column, eval/pass_rate) lacks all four
    columns, and the message named run_id alone: renamed, the next try named recipe, then compute, then
    metric, four trips to the file for what one message can say."""
    path = tmp_path / "wandb_export.csv"
    path.write_text("Step,Name,Group,eval/pass_rate,_runtime,flops\n10,a,r,0.1,3.2,1e12\n20,a,r,0.2,6.4,2e12\n")
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    message = str(info.value)
    assert info.value.column == "run_id"
    assert message.startswith(f"file {path}, column 'run_id': is missing (columns present: Step, Name, Group, ")
    assert "so are 'recipe', 'compute' and 'metric'" in message
    for hint in ("is 'Name' the run id? Rename it to 'run_id'", "is 'Group' the recipe? Rename it to 'recipe'",
                 "is 'flops' the compute? Rename it to 'compute'", "is 'eval/pass_rate' the metric? Rename it to 'metric'"):
        assert hint in message
    # renamed, the export would be refused next for its steps without an evaluation: the conversion is shown
    assert message.endswith("; converting a tracker's export: docs/run_format.md, 'From a tracker's export'")
    path.write_text("run_id,Recipe,compute,metric\na,r,1,0.1\na,r,2,0.2\n")  # one missing: said as before, alone
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert "so " not in str(info.value) and "'Recipe' is not 'recipe'" in str(info.value)
    assert "docs/run_format.md" not in str(info.value)


@pytest.mark.parametrize("header, row, hint", [
    ("run,tag,step,value", "a,eval/pass_rate,10,0.1",
     "a long table, one row per run, tag and step ('tag', 'value': TensorBoard's scalars): keep the rows of your pass "
     "rate's tag, with 'value' as 'metric'"),
    ("Wall time,Step,Value", "1700000000.5,10,0.1",
     "one tag of one run, as TensorBoard's chart download writes it ('Wall time', 'Step', 'Value')"),
    ("Step,a-s0 - eval/pass_rate,a-s0 - eval/pass_rate__MIN,b-s0 - eval/pass_rate", "10,0.1,0.1,0.2",
     "a column per run ('a-s0 - eval/pass_rate', as a W&B chart's CSV export): the run format has a row per evaluation"),
])
def test_a_trackers_table_of_another_shape_is_said_to_be_one(tmp_path, header, row, hint):
    """A TensorBoard long table, its chart download and a W&B chart's export hold a run's evaluations in
    rows of another shape (or one column per run): renaming alone cannot make them the run format, and
    the message sent the user to rename 'run' to 'run_id' (or said nothing), where they need to reshape."""
    path = tmp_path / "export.csv"
    path.write_text(f"{header}\n{row}\n")
    with pytest.raises(RunDataError, match="is missing") as info:
        load_runs(path)
    assert hint in str(info.value) and "docs/run_format.md, 'From a tracker's export'" in str(info.value)
    assert "Rename it" not in str(info.value)


def test_the_columns_present_are_listed_up_to_twenty():
    """A W&B chart's export of 25 runs has 76 columns, and the message listed every one."""
    table = pd.DataFrame({f"c{number}": [1.0] for number in range(76)})
    with pytest.raises(RunDataError) as info:
        validate_runs(table)
    assert "(columns present: c0, c1, " in str(info.value) and "c19 and 56 more)" in str(info.value)


def test_a_metric_logged_on_some_steps_only_says_how_many_rows_lack_it_and_why():
    """A W&B run history has a row per logged step and the pass rate on evaluation steps only: it was
    refused as 'row 2: is missing (NaN/empty)', as if one cell had been lost, with nothing on the other
    rows that lack it or on keeping the rows that hold it."""
    table = good_table()
    steps = pd.concat([table, table.assign(metric=np.nan, compute=table["compute"] + 5)]).sort_values(["run_id", "compute"])
    with pytest.raises(RunDataError) as info:
        validate_runs(steps)
    assert (info.value.column, info.value.run_id, info.value.row) == ("metric", "a-s0", 2)
    assert str(info.value).endswith(
        "is missing (NaN/empty) on 12 of 24 rows, here first: a tracker's export, with a row per logged step and "
        "this column on some? Keep the rows that hold it (docs/run_format.md, 'From a tracker's export')")
    lost = table.copy()
    lost.loc[3, "metric"] = np.nan  # one lost cell: said as before
    with pytest.raises(RunDataError) as info:
        validate_runs(lost)
    assert str(info.value) == "column 'metric', run 'a-s0', row 4: is missing (NaN/empty)"


def test_rows_lacking_a_metric_are_counted_in_the_file_named_of_a_folder_read_together(tmp_path):
    """A folder of two tables, one a tracker's per-step history: the message named b.csv and counted
    '16 of 32 rows', the rows of both files, where b.csv has 24 rows. The count is now the named file's."""
    table = good_table()
    table[table["recipe"] == "a"].to_csv(tmp_path / "a.csv", index=False)
    evaluated = table[table["recipe"] == "b"]
    steps = pd.concat([evaluated, evaluated.assign(metric=np.nan, compute=evaluated["compute"] + 5),
                       evaluated.assign(metric=np.nan, compute=evaluated["compute"] + 6)]).sort_values("compute")
    steps.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(RunDataError) as info:
        load_runs(tmp_path)
    assert (Path(info.value.source).name, info.value.column, info.value.run_id) == ("b.csv", "metric", "b-s0")
    assert "is missing (NaN/empty) on 8 of 12 rows, here first: a tracker's export" in str(info.value)


def test_a_pass_rate_written_with_a_percent_sign_says_what_to_write():
    """A sheet formatted as percentages exports '45.5%': refused as "value '45.5%' is not a number",
    where the percentages in numbers (45.5) are told to be divided by 100."""
    table = good_table().astype({"metric": object})
    table.loc[2, "metric"] = "45.5%"
    with pytest.raises(RunDataError) as info:
        validate_runs(table)
    assert str(info.value) == ("column 'metric', run 'a-s0', row 3: value '45.5%' is not a number "
                               "(a percentage: write the rate as a number in [0, 1], 0.455 for 45.5%)")


def test_a_compute_with_its_digits_grouped_says_what_to_write(tmp_path):
    """A sheet that shows thousands separators exports compute as "1,500,000,000" (quoted): refused
    as not a number, with nothing on the commas."""
    path = tmp_path / "runs.csv"
    path.write_text('run_id,recipe,compute,metric\na,r,"1,000,000,000",0.1\na,r,"1,500,000,000.5",0.2\n')
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == (f"file {path}, column 'compute', run 'a', row 2: value '1,000,000,000' is not a number "
                               "(its digits grouped by ',': write it without them, 1000000000)")


def test_a_table_of_one_row_per_run_says_the_fit_needs_each_runs_evaluations(tmp_path):
    """W&B's runs table, the first export its page offers (Name, State, Notes, User, Tags, Created,
    Runtime, Sweep, then each run's last values), holds one row per run: it was told to rename Name to
    run_id, and renamed, 'has 1 point(s); at least 2 are needed', as if one run were short."""
    path = tmp_path / "wandb_runs.csv"
    path.write_text("Name,State,Notes,User,Tags,Created,Runtime,Sweep,Group,eval/pass_rate\n"
                    "a,finished,-,me,,2026-12-01T10:00:00.000Z,3600,,r,0.3\nb,finished,-,me,,2026-12-01T11:00:00.000Z,3600,,r,0.4\n")
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert ("one row per run, as W&B's runs table: its values are each run's last, where the fit needs each run's "
            "evaluations along the way, its history") in str(info.value)
    assert "Rename it" not in str(info.value)
    renamed = pd.DataFrame({"run_id": ["a", "b"], "recipe": "r", "compute": [1e18, 2e18], "metric": [0.3, 0.4]})
    with pytest.raises(RunDataError) as info:
        validate_runs(renamed)
    assert str(info.value) == ("run 'a', row 1: has 1 point(s); at least 2 are needed to fit a curve (every run has "
                               "one row: a table of runs' last values? The fit needs each run's evaluations along the way)")


def test_a_folder_of_one_table_per_run_without_run_id_says_so(tmp_path):
    """One CSV per run (a tracker's history saved run by run, named after the run) holds no run_id:
    refused as 'file .../a-s0.csv, column run_id: is missing', as if that one file were wrong, where
    every file's rows need their run's name."""
    for run, table in good_table().groupby("run_id"):
        table.drop(columns="run_id").to_csv(tmp_path / f"{run}.csv", index=False)
    with pytest.raises(RunDataError) as info:
        load_runs(tmp_path)
    assert str(info.value).endswith("; the table is joined from 3 files (one run per file?): give each file's rows "
                                    "a column 'run_id' naming their run")


@pytest.mark.parametrize("stray_columns, said", [
    ("Name,Group,flops\nb,r,1\n", "lacks 'run_id', 'recipe', 'compute' and 'metric', which the folder's other files hold "
     "(its columns: Name, Group, flops): is it a run table? Give it those columns"),
    ("run_id,recipe,compute\nz,r,1\n", "lacks 'metric', which the folder's other files hold (its columns: run_id, "
     "recipe, compute): is it a run table? Give it that column"),
])
def test_a_file_of_a_folder_lacking_columns_the_others_hold_is_named_with_its_columns(tmp_path, stray_columns, said):
    """A stray file beside a folder's run tables (an export, notes saved as CSV) was joined to them and
    refused as 'file stray.csv, column run_id, row 2: is missing (NaN/empty)', as if a cell were empty."""
    good_table().to_csv(tmp_path / "runs.csv", index=False)
    (tmp_path / "stray.csv").write_text(stray_columns)
    with pytest.raises(RunDataError) as info:
        load_runs(tmp_path)
    assert str(info.value).startswith(f"file {tmp_path / 'stray.csv'}: {said}")


def test_a_run_table_of_a_folder_whose_header_spells_a_name_otherwise_is_told_so_not_called_stray(tmp_path):
    """One export of a folder's run tables with 'Metric' (or ' recipe') in its header was refused as a
    stray file, 'lacks 'metric' ... (its columns: ..., Metric): is it a run table? ... or move it out of the
    folder', without what the same file named alone is told: that the name is matched exactly."""
    table = good_table()
    table[table["recipe"] == "a"].to_csv(tmp_path / "a.csv", index=False)
    table[table["recipe"] == "b"].rename(columns={"metric": "Metric"}).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(RunDataError) as info:
        load_runs(tmp_path)
    said = str(info.value)
    assert said.startswith(f"file {tmp_path / 'b.csv'}: lacks 'metric', which the folder's other files hold")
    assert said.endswith("'Metric' is not 'metric': names are matched exactly, without spaces or capitals")
    assert "is it a run table" not in said


def test_a_frame_read_without_its_header_is_refused_in_words():
    """Column names 0, 1, ... (read_csv(header=None)) failed with an AttributeError on startswith."""
    table = pd.DataFrame([["a", "r", 1.0, 0.1], ["a", "r", 2.0, 0.2]])
    with pytest.raises(RunDataError, match=r"column 'run_id': is missing \(columns present: 0, 1, 2, 3\)"):
        validate_runs(table)


def test_an_empty_csv_holds_no_rows_as_an_empty_log_does(tmp_path):
    """A zero-byte CSV failed a whole folder with pandas' EmptyDataError, where an empty JSONL log
    or a header-only CSV beside the other tables is skipped."""
    good_table().to_csv(tmp_path / "part1.csv", index=False)
    (tmp_path / "part2.csv").write_text("")
    assert len(load_runs(tmp_path)) == 12
    with pytest.raises(RunDataError) as info:
        load_runs(tmp_path / "part2.csv")
    assert str(info.value) == f"file {tmp_path / 'part2.csv'}: holds no rows"


def test_a_log_torn_inside_a_multibyte_character_keeps_its_complete_rows(tmp_path):
    """A writer killed halfway through 'é' (two bytes) left a last line that is not UTF-8, and the
    whole log failed to decode, where any other torn last line is skipped."""
    rows = [{"run_id": "café", "recipe": "r", "compute": c, "metric": 0.1 * c} for c in (1, 2)]
    log = tmp_path / "evals.jsonl"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    log.write_bytes(text.encode() + '{"run_id": "café'.encode()[:-1])
    runs = load_runs(log)
    assert list(runs["run_id"]) == ["café", "café"]
    log.write_bytes(b'{"run_id": "caf\xc3"}\n' + text.encode())  # not a torn line: still an error
    with pytest.raises(RunDataError, match="line 1 is not UTF-8"):
        load_runs(log)


def test_a_jsonl_log_with_old_mac_line_ends_is_read_as_its_csv_is(tmp_path):
    """Found by fuzzing: a log whose lines end in a carriage return alone (as an old Mac editor saves it)
    was one line, not JSON, dropped as a torn last line: the log "holds no rows". A CSV so saved is read."""
    table = good_table()
    log = tmp_path / "runs.jsonl"
    lines = [json.dumps(r) for r in table.to_dict("records")]
    log.write_bytes("\r".join(lines).encode() + b"\r")
    runs = load_runs(log)
    assert len(runs) == 12 and sorted(runs["compute"]) == sorted(table["compute"])
    log.write_bytes("\r".join(lines[:5] + ["{oops"] + lines[5:]).encode() + b"\r")  # its lines numbered as an editor's
    with pytest.raises(RunDataError, match="line 6 is not valid JSON"):
        load_runs(log)
    log.write_bytes("\r".join(lines).encode() + b"\r" + lines[0][:20].encode())  # a torn last line: left out
    assert len(load_runs(log)) == 12
    log.write_bytes("\r".join(lines).encode() + b"\r" + '{"run_id": "caf\u00e9'.encode()[:-1])  # torn in a character
    assert len(load_runs(log)) == 12


def _two_runs_of_dapo(lr_a, lr_b, recipe_b="dapo") -> pd.DataFrame:
    rows = []
    for run_id, recipe, lr in (("dapo-s0", "dapo", lr_a), ("dapo-lr-s0", recipe_b, lr_b)):
        rows += [{"run_id": run_id, "recipe": recipe, "compute": c, "metric": 0.3 + c / 100, "lr": lr} for c in (1, 2, 4)]
    return pd.DataFrame(rows)


def test_runs_of_one_recipe_at_two_learning_rates_are_named_in_a_warning():
    with pytest.warns(UserWarning, match=r"column 'lr'.*differs between runs of recipe 'dapo' \(0.0005 in run 'dapo-s0', "
                                         r"0.001 in run 'dapo-lr-s0'\).*give each setting its own recipe name"):
        validate_runs(_two_runs_of_dapo(5e-4, 1e-3))


def test_a_warning_about_two_runs_of_a_folder_names_their_files_not_the_first_runs(tmp_path):
    """Read from a folder of run logs, the warnings about two runs (a recipe whose runs differ in a
    setting; runs whose compute looks like two units) named the file of the folder's first run, one
    of neither: 'file sweep/a-other/evals.jsonl, column 'lr': ... run 'dapo-s0', ... run 'dapo-lr-s0''."""
    other = [{"run_id": "a-other", "recipe": "other", "compute": c, "metric": 0.3 + c / 100} for c in (3, 6, 12)]
    mixed = _two_runs_of_dapo(5e-4, 1e-3).astype({"compute": float})
    mixed.loc[mixed["run_id"] == "dapo-lr-s0", "compute"] *= 1e4  # and in another unit, it seems
    for run, rows in [("a-other", other), *((r, g.to_dict("records")) for r, g in mixed.groupby("run_id"))]:
        (tmp_path / "sweep" / run).mkdir(parents=True)
        (tmp_path / "sweep" / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_runs(tmp_path / "sweep")
    said = [str(w.message) for w in caught if "differs" in str(w.message)]
    assert len(said) == 2, said
    for text in said:
        assert "a-other" not in text, text
        for run in ("dapo-s0", "dapo-lr-s0"):
            assert f"'{run}' ({tmp_path / 'sweep' / run / 'evals.jsonl'})" in text, text


@pytest.mark.parametrize("lr_b, recipe_b", [(5e-4, "dapo"), ("0.0005", "dapo"), (1e-3, "dapo-lr1e-3")])
def test_one_setting_per_recipe_is_read_in_silence(lr_b, recipe_b):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_runs(_two_runs_of_dapo(5e-4, lr_b, recipe_b))


def test_the_recipe_setting_columns_hold_every_trainer_knob():
    from forecast.data import RECIPE_SETTING_COLUMNS
    from trainer_minimal.train import KNOB_COLUMNS

    assert set(KNOB_COLUMNS) <= set(RECIPE_SETTING_COLUMNS)


def test_the_run_format_documents_every_column_the_toolkit_reads_by_name():
    """docs/run_format.md left out `source` (a table whose source says synthetic is labelled SYNTHETIC
    in every output) and `true_metric` (what `backtest --truth` scores on): a user's own `source`
    column changed the report's labels without a word in the format's description."""
    from forecast.backtest import TRUTH_COLUMN
    from forecast.data import OPTIONAL_NUMERIC, REQUIRED_COLUMNS

    doc = (Path(__file__).resolve().parent.parent / "docs" / "run_format.md").read_text()
    for column in (*REQUIRED_COLUMNS, *OPTIONAL_NUMERIC, "compute_unit", "source", TRUTH_COLUMN):
        assert f"| `{column}` |" in doc, column


def test_a_rate_just_outside_0_1_is_shown_with_the_digits_that_put_it_there():
    """A pass rate of 1 + 2e-16 (a mean's rounding error) was refused as 'must lie in [0, 1], got 1',
    and n_eval 16000.000001 as 'must be a positive whole number, got 16000': messages that contradict
    themselves; such values are now shown in full. Others keep the short form."""
    def refusal(value):
        table = pd.DataFrame({"run_id": ["a", "a"], "recipe": ["x", "x"], "compute": [1.0, 2.0], "metric": [0.5, value]})
        with pytest.raises(RunDataError) as err:
            validate_runs(table)
        return str(err.value)

    assert refusal(1 + 2**-52).endswith("must lie in [0, 1], got 1.0000000000000002")
    assert refusal(-1e-17).endswith("must lie in [0, 1], got -1e-17")
    assert refusal(1.5).endswith("must lie in [0, 1], got 1.5")
    table = pd.DataFrame({"run_id": ["a", "a"], "recipe": ["x", "x"], "compute": [1.0, 2.0], "metric": [0.5, 0.6],
                          "n_eval": [16000, 16000.000001]})  # the same for n_eval: "whole number, got 16000"
    rule = re.escape("must be a whole number of graded samples from 1 to 10**12, got ")
    with pytest.raises(RunDataError, match=rf"n_eval.*{rule}16000\.000001$"):
        validate_runs(table)
    with pytest.raises(RunDataError, match=rf"{rule}2\.5$"):
        validate_runs(table.assign(n_eval=[16000, 2.5]))


@pytest.mark.parametrize("n_eval", [1e30, 2**63 - 1, 10**12 + 1])
def test_an_n_eval_beyond_what_a_float_counts_exactly_is_refused(n_eval):
    """n_eval 1e30 (a typo, or not a count of samples) was taken, and fitted as a binomial noise of
    nothing; one past 2**53 is fitted as another number (the fit reads n_eval as a float). Such a
    value is refused as the pruner's and the callback's n_eval are, naming its row."""
    table = pd.DataFrame({"run_id": ["a", "a"], "recipe": ["x", "x"], "compute": [1.0, 2.0], "metric": [0.5, 0.6],
                          "n_eval": [500, n_eval]})
    with pytest.raises(RunDataError, match=r"column 'n_eval', run 'a', row 2: must be a whole number of graded samples "
                                           r"from 1 to 10\*\*12, got (1e\+30|9\.22337e\+18|1000000000001\.0)$"):
        validate_runs(table)
    assert validate_runs(table.assign(n_eval=[500, 10**12]))["n_eval"].max() == 10**12


@pytest.mark.parametrize("written", ["9007199254740993", "9007199254740993.0"])
def test_an_n_eval_a_float_rounds_into_the_old_range_is_refused_from_a_csv(tmp_path, written):
    """A CSV's n_eval column with an empty cell, or a number written with a point, is read as floats: with 2**53
    the most, 2**53 + 1 was read as 2**53 and taken, a number the table does not hold."""
    path = tmp_path / "runs.csv"
    path.write_text(f"run_id,recipe,compute,metric,n_eval\na,x,1,0.5,\na,x,2,0.6,{written}\n")
    with pytest.raises(RunDataError, match=r"runs.csv.*column 'n_eval', run 'a', row 3.* from 1 to 10\*\*12"):
        load_runs(path)


def test_a_compute_that_falls_a_little_is_shown_with_the_digits_that_tell_the_two_apart():
    """A compute that fell from 1.0000002e18 to 1.0000001e18 while the step rose was refused as
    'falls from 1e+18 to 1e+18', which reads as no fall at all."""
    table = pd.DataFrame({"run_id": ["a"] * 3, "recipe": ["x"] * 3, "compute": [1e17, 1.0000002e18, 1.0000001e18],
                          "metric": [0.5, 0.6, 0.7], "step": [1, 2, 3]})
    with pytest.raises(RunDataError, match=r"falls from 1\.0000002e\+18 to 1\.0000001e\+18 while step rises from 2 to 3"):
        validate_runs(table)
    with pytest.raises(RunDataError, match=r"falls from 2000 to 1000 while step rises"):  # the short form otherwise
        validate_runs(table.assign(compute=[100.0, 2000.0, 1000.0]))


def test_a_row_of_an_in_memory_table_joined_to_a_loaded_one_names_no_file_nan(tmp_path):
    """A loaded table carries each row's file; rows of an in-memory table joined to it have none,
    and their problems were said as 'file nan, column ...'."""
    path = tmp_path / "runs.csv"
    pd.DataFrame({"run_id": ["a-s0"] * 3, "recipe": "a", "compute": [1.0, 2.0, 3.0],
                  "metric": [0.1, 0.2, 0.3]}).to_csv(path, index=False)
    mine = pd.DataFrame({"run_id": ["b-s0"] * 3, "recipe": "b", "compute": [1.0, 2.0, 3.0],
                         "metric": [0.1, 0.2, 1.5]})
    with pytest.raises(RunDataError) as err:
        validate_runs(pd.concat([load_runs(path), mine], ignore_index=True))
    assert err.value.source is None and "nan" not in str(err.value)
    assert str(err.value).startswith("column 'metric', run 'b-s0': must lie in [0, 1]")


def test_pass_rates_given_as_percentages_are_refused_with_the_fix():
    """A metric column in percent (0-100, as a spreadsheet shows pass rates) was refused as 'must lie
    in [0, 1], got 32.8' without saying why the whole column was off; it is still refused (a count or
    a reward can lie in [0, 100] too), now with the hint to divide by 100."""
    table = good_table().assign(metric=lambda t: t["metric"] * 100)
    with pytest.raises(RunDataError, match=r"must lie in \[0, 1\], got 20 \(percentages\?.*divide it by 100") as info:
        validate_runs(table)
    assert info.value.column == "metric" and info.value.run_id == "a-s0" and info.value.row == 1
    with pytest.raises(RunDataError) as info:  # a value above 100 is no percentage: no hint
        validate_runs(table.assign(metric=lambda t: t["metric"] * 10))
    assert "percentages" not in str(info.value)


def _excel_export(table: pd.DataFrame, *, separator: str, decimal: str) -> bytes:
    """The table as Excel saves a CSV: a byte-order mark, CRLF line ends, quoted text, a separator
    closing every line (an extra empty column) and an empty last line."""
    text = table.to_csv(index=False, sep=separator, decimal=decimal, quoting=csv.QUOTE_NONNUMERIC)
    lines = [line + separator for line in text.splitlines()]
    return ("\ufeff" + "\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


@pytest.mark.parametrize("separator, decimal", [(",", "."), (";", ","), (";", ".")])
def test_a_csv_as_excel_saves_it_reads_as_the_plain_one(tmp_path, separator, decimal):
    """Excel in a decimal-comma locale saves 'run_id;recipe;...' with 0,35: refused as 'run_id is
    missing ... separate the columns with commas' (which, done, splits every number in two). Its
    trailing separator added an empty column 'Unnamed: 5' that was carried into the fit."""
    table = good_table().assign(compute=lambda t: t["compute"] * 1.5e9 + 0.5)
    plain, excel = tmp_path / "plain.csv", tmp_path / "excel.csv"
    table.to_csv(plain, index=False)
    excel.write_bytes(_excel_export(table, separator=separator, decimal=decimal))
    read = load_runs(excel)
    assert list(read.columns) == list(load_runs(plain).columns)
    pd.testing.assert_frame_equal(read.drop(columns="_source"), load_runs(plain).drop(columns="_source"))


@pytest.mark.parametrize("name, decimal", [("runs.tsv", "."), ("runs.tsv", ","), ("runs.csv", "."), ("runs.csv", ",")])
def test_a_tab_separated_table_reads_as_the_plain_one(tmp_path, name, decimal):
    """A sheet saved tab-separated (Google Sheets' .tsv, Excel's tab-delimited text, a decimal comma
    where the locale has one) was refused: a .tsv as 'unsupported file type', a tab-separated .csv as
    'run_id is missing ...: separate the columns with commas', where a ';'-separated one is read."""
    table = good_table().assign(compute=lambda t: t["compute"] * 1.5e9 + 0.5)
    table["run_id"] = table["run_id"].str.replace("-", ", ")  # a comma in a name is text, not a separator
    plain, tabbed = tmp_path / "plain.csv", tmp_path / name
    table.to_csv(plain, index=False)
    tabbed.write_bytes(table.to_csv(index=False, sep="\t", decimal=decimal).encode())
    read = load_runs(tabbed)
    pd.testing.assert_frame_equal(read.drop(columns="_source"), load_runs(plain).drop(columns="_source"))


def test_a_number_with_a_point_beside_decimal_commas_is_refused_by_name(tmp_path):
    """In a ';'-separated file whose numbers use a decimal comma, 1.234 may be 1234 (a '.' grouping
    thousands): neither reading is safe, so the cell is named."""
    path = tmp_path / "runs.csv"
    path.write_text("run_id;recipe;compute;metric\na;r;1,5E+10;0,3\na;r;2.5e10;0,35\n")
    with pytest.raises(RunDataError, match="value '2.5e10' has a '.' where the file's other numbers use a decimal "
                                           "comma") as info:
        load_runs(path)
    assert (info.value.column, info.value.run_id, info.value.row) == ("compute", "a", 3)


def test_a_row_written_twice_is_read_once_and_two_different_rows_at_one_compute_are_refused(tmp_path):
    """Two exports of a sweep joined with an overlap wrote some evaluations twice, identical in every
    column: refused as 'duplicate run_id, compute', though nothing is ambiguous; it is read once,
    with a warning naming both rows. Two rows at one compute that differ are still refused, now
    naming the other row and the values that differ."""
    table = good_table()
    (tmp_path / "part1.csv").write_text(table.iloc[:6].to_csv(index=False))
    (tmp_path / "part2.csv").write_text(table.iloc[4:].to_csv(index=False))
    with pytest.warns(UserWarning, match=rf"file {tmp_path / 'part2.csv'}, run 'a-s1', row 2: repeats file "
                                         rf"{tmp_path / 'part1.csv'} row 6 in every column, at compute 10: read once "
                                         r"\(2 rows repeat an earlier one; each is read once\)"):
        runs = load_runs(tmp_path)
    pd.testing.assert_frame_equal(runs[table.columns], validate_runs(table)[table.columns])
    path = tmp_path / "part1.csv"
    pd.concat([table, table.iloc[[2]].assign(metric=0.5)]).to_csv(path, index=False)
    with pytest.raises(RunDataError, match=r"has two rows at compute 40 \(duplicate run_id, compute\) that differ in "
                                           r"'metric' \(0.3 at row 4, 0.5 here\)") as info:
        load_runs(path)
    assert (info.value.column, info.value.run_id, info.value.row) == ("compute", "a-s0", 14)


@pytest.mark.parametrize("content, name, says", [
    (b"PK\x03\x04" + bytes(range(256)), "runs.csv", "is a zip archive, not text (an Excel workbook renamed?): save the "
                                                    "sheet as CSV (UTF-8)"),
    (b"PAR1" + bytes(64), "runs.csv", "is a Parquet file, not text: give it the suffix .parquet"),
    (b"\x1f\x8b\x08" + bytes(range(256)), "evals.jsonl", "is gzip-compressed: decompress it first"),
    (bytes(range(256)) * 4, "runs.csv", "is binary data, not a text table (CSV, JSONL): was another file named?"),
    ("run_id,recipe,compute,metric\na,x,1,0.5\n".encode("utf-16-le"), "runs.csv",
     "is UTF-16 text without a byte-order mark; save the file as UTF-8"),  # read as columns 'r u n _ i d'
    ('{"run_id": "a", "compute": 1}\n'.encode("utf-16-be"), "evals.jsonl",
     "is UTF-16 text without a byte-order mark; save the file as UTF-8"),
    (b"any", "runs.xlsx", "unsupported file type '.xlsx' (use one of .csv, .tsv, .parquet, .pq, .jsonl, .json); save the "
                          "sheet as CSV (UTF-8)"),
])
def test_a_binary_file_named_as_a_table_is_said_to_be_binary(tmp_path, content, name, says):
    """Random bytes named runs.csv were refused as 'line 3 has 2 fields where the header has 1 (a
    stray comma, or a row cut short?)', a workbook as 'line 1 is not UTF-8 text': the wrong fix."""
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == f"file {path}: {says}"


@pytest.mark.parametrize("rows_before", [3, 100])  # the zeros inside the head's 8 KiB, or past them
@pytest.mark.parametrize("rows_after", [2, 0])  # rows after the zeros, or none: the zeros end the log, no newline
def test_a_block_of_zeros_in_a_log_is_said_as_such_wherever_it_is(tmp_path, rows_before, rows_after):
    """The head (_head, 8 KiB) was judged for the zeros a crash leaves, the rest of a log was not: zeros past it
    were said as 'line 101 is not valid JSON (Expecting value)', and zeros that end the log were dropped in
    silence as a torn last line, the log's rows read as if whole. Said the same wherever they are: their byte
    offset and line in the file."""
    def rows(start, stop):
        return "".join(json.dumps({"run_id": "a-s0", "recipe": "a", "compute": float(k + 1), "metric": 0.3,
                                   "note": "x" * 100}) + "\n" for k in range(start, stop)).encode()

    before = rows(0, rows_before)
    path = tmp_path / "evals.jsonl"
    path.write_bytes(before + b"\x00" * 64 + (b"\n" + rows(rows_before, rows_before + rows_after) if rows_after else b""))
    assert (len(before) > 8192) == (rows_before == 100)
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == (f"file {path}: holds NUL bytes (zeros) from byte offset {len(before)}, on line "
                               f"{rows_before + 1}: not text but what a crash leaves on some file systems where writes "
                               "were lost; remove them (tr -d '\\000' < FILE > fixed) to read the rows around them")


@pytest.mark.parametrize("rows_before", [3, 100])  # the zeros inside the head's 8 KiB, or past them
@pytest.mark.parametrize("rows_after", [2, 0])  # rows after the zeros, or none: the zeros end the file, no newline
def test_a_block_of_zeros_in_a_csv_is_said_as_in_a_log(tmp_path, monkeypatch, rows_before, rows_after):
    """A CSV's head was judged for the zeros a crash leaves, its rest was not: zeros past its 8 KiB were read into
    a run's name ('holds a control character'), and zeros that end the file were said as 'line 102 has 1 fields
    where the header has 5 ... cut short?'. Said as in a JSONL log: their byte offset and line in the file, judged
    in the bytes the cut-short check reads anyway (the file's bytes are read once)."""
    def rows(start, stop):
        return "".join(f"a-s0,a,{k + 1}.0,0.3,{'x' * 100}\n" for k in range(start, stop)).encode()

    before = b"run_id,recipe,compute,metric,note\n" + rows(0, rows_before)
    path = tmp_path / "runs.csv"
    path.write_bytes(before + b"\x00" * 64 + (b"\n" + rows(rows_before, rows_before + rows_after) if rows_after else b""))
    assert (len(before) > 8192) == (rows_before == 100)
    read = []
    read_bytes = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or read_bytes(self))
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == (f"file {path}: holds NUL bytes (zeros) from byte offset {len(before)}, on line "
                               f"{rows_before + 2}: not text but what a crash leaves on some file systems where writes "
                               "were lost; remove them (tr -d '\\000' < FILE > fixed) to read the rows around them")
    assert read.count(path) <= 1, read


@pytest.mark.parametrize("name", ["runs.csv", "runs.tsv", "runs.jsonl"])
def test_a_text_table_s_head_is_read_once_for_what_it_is(tmp_path, monkeypatch, name):
    """A CSV's first 8 KiB were read twice, to tell a binary file (_binary_message) and then a JSONL
    one (_first_line) named .csv: once serves both, and each message is as before (the tests above)."""
    import builtins

    separator = "\t" if name.endswith(".tsv") else ","
    path = tmp_path / name
    path.write_text('{"run_id": "a-s0", "recipe": "a", "compute": 1, "metric": 0.5}\n' if name.endswith(".jsonl")
                    else separator.join(["run_id", "recipe", "compute", "metric"]) + "\n" + separator.join(["a-s0", "a", "1", "0.5"]) + "\n")
    opened = []

    def counted(file, *args, **kwargs):
        opened.append(str(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr("forecast.data.open", counted, raising=False)  # the module's own opens (pandas' are its own)
    assert len(load_runs(path, min_points=1)) == 1
    assert opened.count(str(path)) == 1, opened


@pytest.mark.parametrize("name, content, says", [
    ("runs.csv", '{"run_id": "a-s0", "recipe": "a", "compute": 1, "metric": 0.5}\n' * 2,
     "holds JSON lines (a {...} object per line), not comma-separated values: give it the suffix .jsonl"),
    ("runs.tsv", '\n  {"run_id": "a-s0", "recipe": "a", "compute": 1, "metric": 0.5}\n',
     "holds JSON lines (a {...} object per line), not tab-separated values: give it the suffix .jsonl"),
    # with a byte-order mark, as the JSONL reader allows (PowerShell's and Notepad's UTF-8): it was "holds no rows"
    ("runs.csv", '\ufeff{"run_id": "a-s0", "recipe": "a", "compute": 1, "metric": 0.5}\n',
     "holds JSON lines (a {...} object per line), not comma-separated values: give it the suffix .jsonl"),
    ("runs.jsonl", "run_id,recipe,compute,metric\na-s0,a,1,0.5\n",
     "line 1 is not valid JSON (Expecting value): it reads as a CSV header (run_id,recipe,compute,metric), "
     "so the file looks like comma-separated values: give it the suffix .csv"),
    # a sheet saved as tab-separated text, or Excel's CSV where the decimal mark is a comma: no hint was given
    ("runs.jsonl", "run_id\trecipe\tcompute\tmetric\na-s0\ta\t1\t0.5\n",
     "line 1 is not valid JSON (Expecting value): it reads as a tab-separated header "
     "(run_id\\trecipe\\tcompute\\tmetric), so the file looks like tab-separated values: give it the suffix .tsv"),
    ("runs.jsonl", "run_id;recipe;compute;metric\na-s0;a;1;0,5\n",
     "line 1 is not valid JSON (Expecting value): it reads as a semicolon-separated header "
     "(run_id;recipe;compute;metric), so the file looks like semicolon-separated values: give it the suffix .csv"),
])
def test_a_text_table_named_as_the_other_text_format_is_said_so(tmp_path, name, content, says):
    """A JSONL export named runs.csv was refused as "column 'run_id': is missing (columns present:
    {"run_id":"a-s0", recipe:"a", ...)", naming as missing the column it listed; a CSV named .jsonl
    as 'line 1 is not valid JSON' alone. Each now says which format the file holds and the suffix
    that reads it."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == f"file {path}: {says}"
    path.write_text('{"run_id": "a"}\n{"run_id": \n{"run_id": "a"}\n' if name.endswith(".jsonl") else "run_id\n{x}\n")
    with pytest.raises(RunDataError) as info:  # a bad line after a good first one is named as before, without the hint
        load_runs(path)
    assert "suffix" not in str(info.value)


@pytest.mark.parametrize("name, document", [("summary.json", {"recipes": {"a": 0.5}}), ("runs.jsonl", [{"run_id": "a"}])])
def test_a_pretty_printed_json_document_is_said_to_be_one_not_a_bad_line(tmp_path, name, document):
    """summary.json (fit --out writes one) named as the runs was refused as 'line 1 is not valid JSON
    (Expecting property name ...)', though every line of it is valid JSON as a whole."""
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2))
    with pytest.raises(RunDataError, match="holds one JSON document spread over several lines, not rows") as info:
        load_runs(path)
    assert info.value.source == path and ("in a file named .json" in str(info.value)) == isinstance(document, list)
    path.write_text('{"run_id": "a"}\n{"run_id": \n{"run_id": "a"}\n')  # a bad line in a log is still named
    with pytest.raises(RunDataError, match="line 2 is not valid JSON"):
        load_runs(path)


def test_run_names_reused_across_recipes_are_refused_with_how_to_name_them_apart():
    """Runs named by seed alone ('s0' in each recipe, as a tracker's sweep names them) were refused as
    'belongs to several recipes', which reads as a mislabelled row; the error now says what a run_id
    is and how to make two. Not renamed here: a row whose recipe is a typo would become a run."""
    table = good_table().assign(run_id=lambda t: "s" + t["run_id"].str[-1])
    with pytest.raises(RunDataError) as info:
        validate_runs(table)
    assert str(info.value).endswith("belongs to several recipes ['a', 'b']: a run_id names one run in the whole "
                                    "table; if these are 2 runs, name them apart (e.g. 'a-s0', 'b-s0')")
    assert (info.value.column, info.value.run_id, info.value.row) == ("recipe", "s0", 9)


def test_a_compute_of_zero_is_refused_as_an_evaluation_before_training():
    """A baseline evaluation at compute 0 (trackers log one at step 0) was refused as 'must be > 0,
    got 0', leaving the user to guess that the row, not the column, is the problem."""
    table = good_table()
    table.loc[0, "compute"] = 0.0
    with pytest.raises(RunDataError, match=r"must be > 0, got 0: an evaluation before training .* drop the row") as info:
        validate_runs(table)
    assert (info.value.column, info.value.run_id, info.value.row) == ("compute", "a-s0", 1)
    table.loc[0, "compute"] = -3.0
    with pytest.raises(RunDataError, match=r"must be > 0, got -3$"):
        validate_runs(table)


def test_a_log_whose_compute_restarts_without_a_step_column_is_warned_of(tmp_path):
    """A resumed run that restarted its compute counter, in a log without a step column, was read in
    silence: sorted by compute, the two stretches of its curve interleaved. Said now, naming the line."""
    computes = [10.0, 20.0, 40.0, 5.0, 15.0]
    log = tmp_path / "evals.jsonl"
    log.write_text("".join(json.dumps({"run_id": "a", "recipe": "r", "compute": c, "metric": 0.1 + 0.01 * i}) + "\n"
                           for i, c in enumerate(computes)))
    with pytest.warns(UserWarning, match=rf"file {log}, column 'compute', run 'a', row 4: falls from 40 to 5 in the "
                                         "log's order: a resumed run that restarted its compute counter"):
        load_runs(log)
    log.write_text("".join(json.dumps({"run_id": "a", "recipe": "r", "compute": c, "metric": 0.1}) + "\n"
                           for c in sorted(computes)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs(log)


def test_a_repeated_or_clashing_row_names_its_compute_as_the_tables_write_it():
    """The duplicate-row messages wrote compute with :g ('at compute 2e+10') where every other
    message and table writes fmt_compute's 2e10."""
    table = good_table().assign(compute=lambda t: t["compute"] * 1e9)
    with pytest.warns(UserWarning, match=r"in every column, at compute 1e10: read once"):
        validate_runs(pd.concat([table, table.iloc[[0]]]))
    with pytest.raises(RunDataError, match=r"has two rows at compute 1e10 \(duplicate run_id, compute\)"):
        validate_runs(pd.concat([table, table.iloc[[0]].assign(metric=0.5)]))


def _jsonl_with_a_huge_integer(path, column, with_step=True, steps_changed=(2,)):
    """Two runs of one recipe; run b-s0's second row (or the rows at steps_changed) holds a JSON integer of 401 digits in `column`
    (JSON keeps it exact, as a Python int that no float can hold)."""
    lines = []
    for run in ("a-s0", "b-s0"):
        for step, compute in enumerate((10.0, 20.0, 40.0), start=1):
            row = {"run_id": run, "recipe": "a", "compute": compute, "metric": 0.3, "lr": 0.001, "pass_add": 0.1}
            if with_step:
                row["step"] = step
            line = json.dumps(row)
            if run == "b-s0" and step in steps_changed:
                line = line.replace(f'"{column}": {json.dumps(row[column])}', f'"{column}": 1{"0" * 400}')
            lines.append(line)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("column,with_step", [("compute", True), ("compute", False), ("metric", True), ("step", True)])
def test_integer_beyond_float_range_in_jsonl_names_the_row(tmp_path, column, with_step):
    # found by fuzzing: pandas' to_numeric raised OverflowError, a traceback out of load_runs and every command
    path = tmp_path / "runs.jsonl"
    _jsonl_with_a_huge_integer(path, column, with_step)
    with pytest.raises(RunDataError, match="beyond a float's range") as err:
        load_runs(path)
    assert (str(err.value.source), err.value.column, err.value.run_id, err.value.row) == (str(path), column, "b-s0", 5)


def test_integer_beyond_float_range_in_a_recipe_setting_column_is_carried(tmp_path):
    # a recipe-knob column is carried along untouched; its check for runs of one recipe that differ
    # raised OverflowError on a 400-digit integer instead of comparing it as text
    path = tmp_path / "runs.jsonl"
    _jsonl_with_a_huge_integer(path, "lr", steps_changed=(1, 2, 3))
    with pytest.warns(UserWarning, match="column 'lr'.*differs between runs of recipe 'a'"):
        runs = load_runs(path)
    assert len(runs) == 6


def test_two_rows_at_one_compute_that_differ_in_an_integer_beyond_float_range_are_named(tmp_path):
    # found by fuzzing: the message showing the two values took float() of the 400-digit one, which raised
    # OverflowError, a traceback out of load_runs and every command, where the clash is the user's to fix
    path = tmp_path / "runs.jsonl"
    _jsonl_with_a_huge_integer(path, "lr", steps_changed=())
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[4].replace('"lr": 0.001', f'"lr": 1{"0" * 400}')]) + "\n")
    with pytest.raises(RunDataError, match=r"differ in 'lr' \(0.001 at row 5, a number of 401 digits here\)") as err:
        load_runs(path)
    assert (str(err.value.source), err.value.column, err.value.run_id, err.value.row) == (str(path), "compute", "b-s0", 7)


def test_a_repeated_row_holding_a_list_is_read_once_and_a_clash_in_a_list_is_named(tmp_path):
    # found by fuzzing: a JSONL field holding a list made the rows unhashable, so a line logged twice was kept,
    # then refused as two rows at one compute that differ in no column (StopIteration, a traceback out of every
    # command and of forecast watch); lists of two lengths raised numpy's "operands could not be broadcast"
    rows = [{"run_id": run, "recipe": "a", "compute": c, "metric": 0.3, "hist": [1, 2]}
            for run in ("a-s0", "a-s1") for c in (10.0, 20.0, 40.0)]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [*rows, rows[1]]))
    with pytest.warns(UserWarning, match=r"run 'a-s0', row 7: repeats row 2 in every column, at compute 20: read once"):
        runs = load_runs(path)
    assert len(runs) == 6
    path.write_text("".join(json.dumps(row) + "\n" for row in [*rows, {**rows[1], "hist": [1, 2, 3]}]))
    with pytest.raises(RunDataError, match=r"differ in 'hist' \(\[1, 2\] at row 2, \[1, 2, 3\] here\)") as err:
        load_runs(path)
    assert (err.value.column, err.value.run_id, err.value.row) == ("compute", "a-s0", 7)


def test_a_file_that_cannot_be_read_is_named_not_a_traceback(tmp_path, make_unreadable):
    # found by fuzzing: another user's run table (permission denied) raised PermissionError out of
    # load_runs, a traceback from every command that reads runs
    good_table().to_csv(tmp_path / "runs.csv", index=False)
    make_unreadable(tmp_path / "runs.csv")
    with pytest.raises(RunDataError, match="cannot be read \\(permission denied\\)") as err:
        load_runs(tmp_path / "runs.csv")
    assert str(err.value.source) == str(tmp_path / "runs.csv")
    # one run's log in a folder of run logs: named, the folder's other logs being fine
    for run_id, run in good_table().groupby("run_id"):
        (tmp_path / "logs" / run_id).mkdir(parents=True)
        (tmp_path / "logs" / run_id / "evals.jsonl").write_text(run.to_json(orient="records", lines=True))
    make_unreadable(tmp_path / "logs" / "a-s1" / "evals.jsonl")
    with pytest.raises(RunDataError, match="a-s1/evals.jsonl: cannot be read \\(permission denied\\)"):
        load_runs(tmp_path / "logs")


def test_a_csv_that_ends_inside_a_row_cut_short_is_refused_naming_the_line(tmp_path):
    # found by fuzzing: read_csv filled the fields of a last row cut off (a write or a copy that stopped) with NaN
    # and read its cut cell as written: a metric of 0.35 cut to 0.3 was fitted in silence
    text = good_table().to_csv(index=False)
    path = tmp_path / "runs.csv"
    path.write_text(text.rstrip("\n"))  # a whole last row without its newline is read as it is
    assert len(load_runs(path)) == 12
    path.write_text(text.rstrip("\n")[: text.rstrip("\n").rindex(",0.35") + 4])
    with pytest.raises(RunDataError, match="line 13 has 4 fields where the header has 5, and the file ends inside it") as err:
        load_runs(path)
    assert str(err.value.source) == str(path)
    path.write_text(path.read_text() + "\n")  # ended by a newline: a row of its own, its n_eval missing (said)
    with pytest.warns(UserWarning, match="column 'n_eval', run 'b-s0', row 13: is missing"):
        assert load_runs(path)["metric"].iloc[-1] == 0.3
    # a writer that leaves out every row's empty last field, the file not ended by a newline: no row was cut
    path.write_text("run_id,recipe,compute,metric,note\na,r,1,0.1,x\na,r,2,0.2\na,r,4,0.3")
    assert list(load_runs(path)["metric"]) == [0.1, 0.2, 0.3]


def test_a_csv_appended_to_while_it_is_read_is_parsed_from_the_bytes_its_checks_judged(tmp_path, monkeypatch):
    """The CSV reader read the file's bytes for its checks (the zeros a crash left, a last row cut short), then the
    file again to parse it and number its rows: a table a logger appended to in between (forecast watch reads it at
    every poll) was parsed with a last row cut short, the check having judged the earlier bytes, and its cut metric
    fitted in silence. Here a row arrives, half written, just after the checks' read."""
    text = good_table().to_csv(index=False)
    path = tmp_path / "runs.csv"
    path.write_text(text)
    read_bytes = Path.read_bytes

    def a_logger_appends_once_read(self):
        raw = read_bytes(self)
        if self == path:
            with open(path, "a") as log:
                log.write("b-s0,b,160.0,0.4")  # a row in flight: its metric cut short of 0.4186, its n_eval yet to come
        return raw

    monkeypatch.setattr(Path, "read_bytes", a_logger_appends_once_read)
    runs = load_runs(path)
    assert len(runs) == 12 and runs["compute"].max() == 80.0  # the table as its checks read it


def test_a_never_closed_quote_and_a_second_byte_order_mark_are_named_by_line_and_name(tmp_path):
    # found by fuzzing: pandas' "EOF inside string starting at row 3" counts neither the header nor blank
    # lines (the quote opens on line 5 here), and a name behind a second byte-order mark printed as 'run_id'
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('run_id,recipe,compute,metric\na,r,1,0.1\n\na,r,2,0.2\n"b,r,3,0.3\nb,r,4,0.4\n')
    with pytest.raises(RunDataError, match=r"line 5 opens a quote \(\"\) that is never closed"):
        load_runs(quoted)
    marked = tmp_path / "marked.csv"
    marked.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbfrun_id,recipe,compute,metric\na,r,1,0.1\na,r,2,0.2\n")
    with pytest.raises(RunDataError, match="'\\\\ufeffrun_id' is not 'run_id': it begins with an invisible byte-order mark"):
        load_runs(marked)


def test_a_column_named_twice_in_a_file_is_refused_not_read_from_one_of_them(tmp_path):
    # found by fuzzing: read_csv renamed a second 'metric' to 'metric.1' and the first was fitted in
    # silence; json.loads kept the last of a key given twice. A table in memory was refused already.
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text("run_id,recipe,compute,metric,metric\na,r,1,0.1,0.9\na,r,2,0.2,0.8\n")
    with pytest.raises(RunDataError, match="appears more than once in the header \\(columns 4, 5\\)") as err:
        load_runs(csv_path)
    assert err.value.column == "metric"
    csv_path.write_text("run_id;recipe;compute;metric;metric\na;r;1;0,1;0,9\na;r;2;0,2;0,8\n")  # Excel's ';' and ','
    with pytest.raises(RunDataError, match="appears more than once in the header"):
        load_runs(csv_path)
    jsonl_path = tmp_path / "runs.jsonl"
    jsonl_path.write_text('{"run_id": "a", "recipe": "r", "compute": 1, "metric": 0.1}\n'
                          '{"run_id": "a", "recipe": "r", "compute": 2, "metric": 0.2, "metric": 0.8}\n')
    with pytest.raises(RunDataError, match="is given twice on this line") as err:
        load_runs(jsonl_path)
    assert (err.value.column, err.value.row) == ("metric", 2)
    json_path = tmp_path / "runs.json"
    json_path.write_text('[{"run_id": "a", "recipe": "r", "compute": 1, "metric": 0.1, "metric": 0.9}]')
    with pytest.raises(RunDataError, match="column 'metric': is given twice in one object"):
        load_runs(json_path)
    csv_path.write_text("run_id,recipe,compute,metric,\na,r,1,0.1,\na,r,2,0.2,\n")  # Excel's trailing comma: still read
    assert len(load_runs(csv_path)) == 2


def test_two_rows_at_one_compute_that_differ_in_a_missing_nullable_cell_are_refused_in_words():
    """A notebook's table of nullable columns (convert_dtypes(), a string column of tags) with two
    rows at one compute, one tagged and one with <NA>: the message's search for the column that
    differs compared <NA> with the tag and failed inside NumPy ("ufunc method 'reduce' not supported
    for NA") instead of naming the rows."""
    table = good_table().convert_dtypes()
    table.insert(2, "tag", pd.array([pd.NA] * len(table), dtype="string"))
    twice = pd.concat([table, table.iloc[[2]].assign(tag="rerun", metric=0.5)], ignore_index=True)
    with pytest.raises(RunDataError, match=r"has two rows at compute 40 \(duplicate run_id, compute\) that differ in "
                                           r"'tag' \(<NA> at row 3, 'rerun' here\)") as info:
        validate_runs(twice)
    assert (info.value.column, info.value.run_id, info.value.row) == ("compute", "a-s0", 13)
    flagged = table.assign(flag=pd.array([pd.NA] * len(table), dtype="boolean"))[["flag", *table.columns]]
    with pytest.raises(RunDataError, match=r"differ in 'flag' \(<NA> at row 3, True here\)"):
        validate_runs(pd.concat([flagged, flagged.iloc[[2]].assign(flag=True)], ignore_index=True))


def test_a_dict_of_columns_a_list_of_rows_or_an_arrow_table_is_read_as_the_frame_it_holds(tmp_path):
    """fit(), backtest() and cross_validate() refused a notebook's dict of columns, list of row dicts
    or pyarrow table as "expected a pandas DataFrame, got dict" (cross_validate, and load_runs given a
    table, failed in pathlib: "expected str, bytes or os.PathLike object, not dict")."""
    from forecast import cross_validate

    table = good_table()
    expected = validate_runs(table)
    given = {"dict of columns": table.to_dict("list"), "list of rows": table.to_dict("records")}
    pyarrow = pytest.importorskip("pyarrow")
    given["pyarrow table"] = pyarrow.Table.from_pandas(table)
    for what, runs in given.items():
        pd.testing.assert_frame_equal(validate_runs(runs), expected, obj=what)
    with pytest.raises(ValueError, match="no run has 3 evaluations up to 0.1 of its final compute"):
        cross_validate(given["dict of columns"], cuts=(0.1,))  # read as a table, then refused for its cut
    with pytest.raises(RunDataError, match=r"could not be read as a dict of columns \(one list of values per column "
                                           r"name\): All arrays must be of the same length"):
        validate_runs({**given["dict of columns"], "metric": [0.5]})
    with pytest.raises(RunDataError, match=r"is a dict of tables \(one per run\?\): join them into one table with "
                                           r"pd.concat\(tables.values\(\), ignore_index=True\)"):
        validate_runs(dict(list(table.groupby("run_id"))))  # pandas said "If using all scalar values, ..."
    with pytest.raises(RunDataError, match=r"expected a run table: a pandas DataFrame, a dict of columns, a list of rows "
                                           r"\(dicts\) or a pyarrow or polars table; got PosixPath \(a path: "
                                           r"load_runs\(path\) reads it\)"):
        validate_runs(tmp_path / "runs.csv")
    with pytest.raises(TypeError, match="load_runs reads a file or a folder: give its path, got DataFrame"):
        load_runs(table)


def test_a_column_of_lists_in_arrow_is_kept_as_a_column_of_lists_in_python_is():
    """A run log's list field (tokens per sample, say) in a frame converted with
    convert_dtypes(dtype_backend="pyarrow") is a list<int64> column, which pandas cannot hash:
    validate_runs failed deep in pyarrow ("Function 'dictionary_encode' has no kernel matching input
    types") where the same column of Python lists was checked as usual."""
    pyarrow = pytest.importorskip("pyarrow")
    table = good_table().assign(lengths=[[3, 4]] * 12)
    arrow = table.assign(lengths=pd.array(table["lengths"], dtype=pd.ArrowDtype(pyarrow.list_(pyarrow.int64()))))
    for frame in (table, arrow):
        runs = validate_runs(frame)
        assert len(runs) == 12 and list(runs["lengths"].iloc[0]) == [3, 4]
    with pytest.raises(RunDataError, match=r"has two rows at compute 40 \(duplicate run_id, compute\)"):
        validate_runs(pd.concat([arrow, arrow.iloc[[2]].assign(metric=0.5)], ignore_index=True))


def _run_logs(folder: Path, table: pd.DataFrame) -> Path:
    """A trainer-style sweep folder: one folder per run, holding its evals.jsonl."""
    for run_id, run in table.groupby("run_id"):
        (folder / run_id).mkdir(parents=True)
        (folder / run_id / "evals.jsonl").write_text(run.to_json(orient="records", lines=True))
    return folder


def test_run_folders_reached_through_links_are_read_each_once(tmp_path):
    # found by fuzzing the folder structure: a sweep put together from links to its run folders lost
    # those runs without a word (pathlib's rglob does not follow links to folders), and one of links
    # alone was "folder holds no run files"
    _run_logs(tmp_path / "real", good_table())
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "a-s0").symlink_to(tmp_path / "real" / "a-s0")
    for run_id in ("a-s1", "b-s0"):
        (tmp_path / "real" / run_id).rename(sweep / run_id)
    (sweep / "loop").symlink_to(".")  # a link back up is not followed round for ever
    (sweep / "a-s0-again").symlink_to("a-s0")  # nor is a folder read twice through a second link
    runs = load_runs(sweep)
    assert runs.groupby("run_id").size().to_dict() == {"a-s0": 4, "a-s1": 4, "b-s0": 4}
    only_links = tmp_path / "links"
    only_links.mkdir()
    (only_links / "a-s0").symlink_to(tmp_path / "real" / "a-s0")
    assert set(load_runs(only_links)["run_id"]) == {"a-s0"}


def test_a_link_to_nothing_and_a_folder_that_cannot_be_listed_are_said(tmp_path, monkeypatch):
    # rglob skipped both in silence, and with them the runs they held
    sweep = _run_logs(tmp_path / "sweep", good_table())
    (sweep / "c-s0").symlink_to(tmp_path / "moved" / "c-s0")
    with pytest.warns(UserWarning, match="c-s0: is a link to .*moved/c-s0, which does not exist: left out"):
        assert load_runs(sweep)["run_id"].nunique() == 3
    (sweep / "c-s0").unlink()
    import os

    real_scandir = os.scandir

    def scandir(path="."):  # as root reads any folder, a folder of another user's is refused here
        if os.fspath(path) == str(sweep / "b-s0"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    (sweep / "b-s0" / "evals.jsonl").rename(sweep / "b-s0" / "elsewhere.jsonl")  # nothing to reach by name
    with pytest.raises(RunDataError, match="b-s0: cannot be listed \\(permission denied\\), so the runs in it would be "
                                           "left out") as err:
        load_runs(sweep)
    assert err.value.source == sweep / "b-s0"


def test_a_path_that_cannot_be_looked_at_is_named(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(RunDataError, match="loop: cannot be read \\(Too many levels of symbolic links\\)"):
        load_runs(tmp_path / "loop")
    with pytest.raises(RunDataError, match="does not exist"):
        load_runs(tmp_path / "gone" / "runs.csv")


def test_a_table_beside_run_logs_holding_other_runs_is_said(tmp_path):
    # found by fuzzing the folder structure: a folder with run logs is read through them alone (a
    # sweep's runs.csv repeats their rows), so a table of other runs copied in beside them was left
    # out without a word
    table = good_table()
    sweep = _run_logs(tmp_path / "sweep", table[table["run_id"] != "b-s0"])
    table.to_csv(sweep / "runs.csv", index=False)  # the sweep's own table, and b-s0 besides
    with pytest.warns(UserWarning, match=r"runs.csv: holds 1 run\(s\) that no run log \(evals.jsonl\) under .* holds "
                                         r"\(b-s0\): left out"):
        assert set(load_runs(sweep)["run_id"]) == {"a-s0", "a-s1"}
    table[table["run_id"] != "b-s0"].to_csv(sweep / "runs.csv", index=False)  # the same runs: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_runs(sweep)) == 8


def test_a_table_keeps_the_data_warnings_said_when_it_was_read(tmp_path):
    """The data's warnings reached the terminal and Python's warnings, and nothing else: a fit, its saved
    file and its report could not show them. The table validate_runs and load_runs return keeps them, as
    said (attrs["data_warnings"]), also when it is checked again in silence (load_runs, then fit), and a
    run log's compute that falls in its order, said while the file is read, is among them."""
    with pytest.warns(UserWarning, match="column 'lr'") as said:
        runs = validate_runs(_two_runs_of_dapo(5e-4, 1e-3))
    assert runs.attrs["data_warnings"] == [str(w.message) for w in said] and len(said) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, kept as said
        assert validate_runs(runs).attrs["data_warnings"] == runs.attrs["data_warnings"]
    assert validate_runs(good_table()).attrs["data_warnings"] == []
    edited = runs[runs["run_id"] == "dapo-s0"]  # another table: checked, and kept, again
    assert validate_runs(edited).attrs["data_warnings"] == []
    rows = [{"run_id": "a", "recipe": "r", "compute": c, "metric": 0.1 * i} for i, c in enumerate((10, 20, 5, 40))]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match="falls from 20 to 5 in the log's order") as said:
        runs = load_runs(tmp_path / "runs.jsonl")
    assert runs.attrs["data_warnings"] == [str(w.message) for w in said if "log's order" in str(w.message)]


def test_a_data_warning_said_before_a_bad_row_is_still_said():
    """The warnings are gathered for the table now; one said before the error that refuses the table is
    said as before (the command line printed it above the error)."""
    frame = pd.DataFrame({"run_id": ["a", "a", "a"], "recipe": ["r"] * 3, "compute": [1.0, 2.0, 2.0],
                          "metric": [0.1, 0.2, 0.3], "n_eval": [800, np.nan, 800]})
    with pytest.warns(UserWarning, match="is missing"), pytest.raises(RunDataError, match="two rows at compute 2"):
        validate_runs(frame)


def test_a_run_folder_that_can_be_neither_listed_nor_entered_is_refused_naming_it(tmp_path, make_private):
    # another user's run folder of mode 700, the usual private one: its log, looked for by name, could
    # not be looked at either, and that PermissionError escaped the listing, naming the log, not the folder
    sweep = _run_logs(tmp_path / "sweep", good_table())
    make_private(sweep / "b-s0")
    with pytest.raises(RunDataError, match="b-s0: cannot be listed \\(permission denied\\), so the runs in it would be "
                                           "left out") as err:
        load_runs(sweep)
    assert err.value.source == sweep / "b-s0"


def test_a_link_back_up_above_the_folder_reads_no_runs_outside_it(tmp_path):
    # a run folder holding a link to a folder above the sweep (a 'project -> ../..' link) had the listing
    # climb out of the folder given and read every run log beside it: another sweep's runs in this fit
    table = good_table()
    sweep = _run_logs(tmp_path / "project" / "sweep", table[table["run_id"] != "b-s0"])
    _run_logs(tmp_path / "project" / "other-sweep", table[table["run_id"] == "b-s0"])
    (sweep / "a-s0" / "project").symlink_to("../..")
    (sweep / "a-s1" / "top").symlink_to(tmp_path)
    assert set(load_runs(sweep)["run_id"]) == {"a-s0", "a-s1"}
    (sweep / "a-s1" / "top").unlink()
    views = tmp_path / "views"  # the folder given through a link: a link back up to the parent of either side
    views.mkdir()
    (views / "current").symlink_to(sweep)
    (views / "previous").symlink_to(tmp_path / "project" / "other-sweep")
    (sweep / "a-s1" / "views").symlink_to(views)
    assert set(load_runs(views / "current")["run_id"]) == {"a-s0", "a-s1"}  # a-s0/project: the real side's
    (sweep / "a-s1" / "views").unlink()
    (sweep / "b-s0").symlink_to(tmp_path / "project" / "other-sweep" / "b-s0")  # a run folder beside: read, as before
    assert set(load_runs(sweep)["run_id"]) == {"a-s0", "a-s1", "b-s0"}


def test_a_link_to_a_deep_tree_is_listed_three_folders_deep_and_the_rest_is_said(tmp_path, monkeypatch):
    # a run folder holding a link to a dataset cache (or a sweep folder a link to /usr) had the whole tree
    # below the link listed at every read, and at every poll of forecast watch: /usr's 120,000 files took 2 s,
    # a cache's millions minutes, for no run. A link gathers runs from elsewhere: its run folder, a sweep's
    # folder or a folder of sweeps; deeper than that its tree is not listed, and that is said
    import os

    table = good_table()
    sweep = _run_logs(tmp_path / "sweep", table[table["run_id"] == "a-s0"])
    _run_logs(tmp_path / "elsewhere" / "sweep-2", table[table["run_id"] == "a-s1"])
    _run_logs(tmp_path / "b-home", table[table["run_id"] == "b-s0"])
    (sweep / "gathered").symlink_to(tmp_path / "elsewhere")  # a folder of sweeps: its runs, 2 folders down, are read
    (sweep / "b-s0").symlink_to(tmp_path / "b-home" / "b-s0")  # a run folder: read
    cache = tmp_path / "cache"
    deep = cache.joinpath(*"abcdefgh")
    deep.mkdir(parents=True)
    (deep / "round").symlink_to(cache)  # a loop within the linked tree ends too
    (sweep / "a-s0" / "datasets").symlink_to(cache)
    listed = []
    real_scandir = os.scandir

    def scandir(path="."):
        listed.append(Path(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.warns(UserWarning) as said:
        runs = load_runs(sweep)
    assert runs.groupby("run_id").size().to_dict() == {"a-s0": 4, "a-s1": 4, "b-s0": 4}
    below_link = [p.relative_to(sweep / "a-s0" / "datasets") for p in listed if (sweep / "a-s0" / "datasets") in [p, *p.parents]]
    assert max(len(p.parts) for p in below_link) == 3  # a/b/c, not a/b/c/d/...
    assert [str(w.message) for w in said] == [
        f"file {sweep / 'a-s0' / 'datasets'}: is a link to {cache}, whose folders are read 3 deep, not deeper (a tree of "
        "other files, not of runs?): a run log deeper in it is left out; link its run folder, or its sweep's folder, "
        "instead"]
    assert runs.attrs["data_warnings"] == [str(said[0].message)]  # kept with the fit, as a link to nothing is
    from forecast.data import run_logs_below

    with pytest.warns(UserWarning, match="datasets: is a link to .*, whose folders are read 3 deep"):  # forecast watch's
        assert len(run_logs_below(sweep, warn_unread=True)) == 3


def test_a_run_folder_s_own_deep_folders_below_a_link_are_not_said_to_hide_run_logs(tmp_path):
    # a link to a project (its sweeps, their runs) read every run, and still warned at every read, and on every
    # report page, that 'a run log deeper in it is left out': a Hugging Face run folder holds TensorBoard's
    # runs/<date_host>/ (a DeepSpeed checkpoint its checkpoint-N/global_stepN/), 4 levels below the link. A run
    # folder's own folders hold its files, not other runs: cut there without a word
    table = good_table()
    sweep = _run_logs(tmp_path / "project" / "sweep", table)
    (sweep / "a-s0" / "runs" / "Dec05_12-00-00_host").mkdir(parents=True)
    (sweep / "a-s0" / "runs" / "Dec05_12-00-00_host" / "events.out.tfevents.1").write_text("")
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    (gathered / "project").symlink_to(tmp_path / "project")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runs = load_runs(gathered)
    assert runs["run_id"].nunique() == 3 and runs.attrs["data_warnings"] == []
    (tmp_path / "project" / "group" / "sweep-2").mkdir(parents=True)  # a run deeper than that is still said
    _run_logs(tmp_path / "project" / "group" / "sweep-2" / "seed-0", table[table["run_id"] == "a-s0"])
    with pytest.warns(UserWarning, match="project: is a link to .*, whose folders are read 3 deep"):
        load_runs(gathered)


def test_a_deep_folder_reached_through_a_link_and_by_its_own_path_is_read_in_full(tmp_path):
    # the folder given is read to any depth, as before: a link to a folder within it does not cut it short
    table = good_table()
    sweep = _run_logs(tmp_path / "sweep" / "2026" / "12" / "05" / "night", table)
    (tmp_path / "sweep" / "0-latest").symlink_to(tmp_path / "sweep" / "2026")
    (tmp_path / "sweep" / "z-latest").symlink_to(tmp_path / "sweep" / "2026")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_runs(tmp_path / "sweep")["run_id"].nunique() == 3
    assert sweep.is_dir()


def test_a_table_beside_run_logs_naming_their_runs_as_floats_is_not_said_to_hold_other_runs(tmp_path):
    # another tool's table writes run 3 as 3.0, which every table and message names '3' (formatting.name_of):
    # the table beside the logs was said to hold '2 run(s) that no run log holds (3.0, 4.0)', the logs' own
    sweep = tmp_path / "sweep"
    rows = [{"run_id": run, "recipe": "a", "compute": c, "metric": 0.1 * c} for run in (3, 4) for c in (1, 2, 3)]
    for run in (3, 4):
        (sweep / f"run-{run}").mkdir(parents=True)
        (sweep / f"run-{run}" / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["run_id"] == run))
    (sweep / "runs.jsonl").write_text("".join(json.dumps({**r, "run_id": float(r["run_id"])}) + "\n" for r in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert set(load_runs(sweep)["run_id"]) == {"3", "4"}
    with open(sweep / "runs.jsonl", "a") as table:  # a run of its own is still said, named as the fit names it
        table.write(json.dumps({"run_id": 5.0, "recipe": "a", "compute": 1, "metric": 0.1}) + "\n")
    with pytest.warns(UserWarning, match=r"holds 1 run\(s\) that no run log \(evals.jsonl\) under .* holds \(5\)"):
        load_runs(sweep)


def _sweep_with_a_table_beside_its_logs(tmp_path):
    """(a sweep folder of runs r1 and r2, each with its run log, the table runs.jsonl beside them holding both)."""
    sweep = tmp_path / "sweep"
    rows = [{"run_id": run, "recipe": "a", "compute": c, "metric": 0.1 * c} for run in ("r1", "r2") for c in (1, 2, 3)]
    for run in ("r1", "r2"):
        (sweep / run).mkdir(parents=True)
        (sweep / run / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["run_id"] == run))
    table = sweep / "runs.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return sweep, table


def test_a_table_beside_run_logs_is_read_again_once_it_changes(tmp_path):
    # forecast watch reads the folder at every poll, so the runs the table beside the logs names are kept
    # while it is unchanged; a table rewritten in place, at the same size and with its time put back
    # (touch -r), still names its new runs
    import os

    sweep, table = _sweep_with_a_table_beside_its_logs(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs(sweep)
    then = table.stat()
    table.write_text(table.read_text().replace('"r2"', '"r9"'))
    os.utime(table, ns=(then.st_atime_ns, then.st_mtime_ns))
    assert table.stat().st_size == then.st_size and table.stat().st_mtime_ns == then.st_mtime_ns
    with pytest.warns(UserWarning, match=r"holds 1 run\(s\) that no run log .* holds \(r9\)"):
        load_runs(sweep)


def test_a_table_beside_run_logs_rewritten_within_its_file_systems_time_resolution_is_read_again(tmp_path, monkeypatch):
    # a file system that keeps whole seconds (NFS, FAT, HFS+, some overlays) leaves a table rewritten in the
    # second it was read with the same size, mtime and ctime: the runs kept for it were said at every poll
    # after, the new run never. A table changed that recently is read again, not taken from what was kept
    import os

    sweep, table = _sweep_with_a_table_beside_its_logs(tmp_path)
    real_stat = Path.stat

    def stat_in_whole_seconds(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if path != table:
            return info
        whole = [int(v) // 10**9 * 10**9 for v in (info.st_atime_ns, info.st_mtime_ns, info.st_ctime_ns)]
        fields = list(info[:7]) + [w // 10**9 for w in whole]
        return os.stat_result(fields, {"st_atime_ns": whole[0], "st_mtime_ns": whole[1], "st_ctime_ns": whole[2]})

    monkeypatch.setattr(Path, "stat", stat_in_whole_seconds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_runs(sweep)
    table.write_text(table.read_text().replace('"r2"', '"r9"'))  # the same size, within the same second
    with pytest.warns(UserWarning, match=r"holds 1 run\(s\) that no run log .* holds \(r9\)"):
        load_runs(sweep)


def test_a_link_that_loops_in_a_run_folder_is_said_not_taken_for_a_folder_that_cannot_be_listed(tmp_path):
    # a link that leads back to itself (a slip of ln -s) holds no runs, as a link to nothing; since the
    # listing follows links it refused the whole sweep: 'a-s0/self: cannot be listed (too many levels of
    # symbolic links), so the runs in it would be left out: ask its owner', where rglob had read every run
    sweep = _run_logs(tmp_path / "sweep", good_table())
    (sweep / "a-s0" / "self").symlink_to("self")
    (sweep / "b-s0" / "ping").symlink_to("pong")
    (sweep / "b-s0" / "pong").symlink_to("ping")
    with pytest.warns(UserWarning) as said:
        assert load_runs(sweep)["run_id"].nunique() == 3
    messages = sorted(str(w.message) for w in said if "leads back to itself" in str(w.message))
    assert len(messages) == 3 and f"{sweep / 'a-s0' / 'self'}: is a link to self that leads back to itself" in messages[0]


def test_the_warnings_said_reading_a_folder_stay_with_a_table_filtered_before_its_fit(tmp_path):
    """A notebook filters the loaded table before it fits (runs[runs.recipe != "x"]): the table, changed,
    was checked again, and its warnings replaced the table's own, so the one said while the folder was read
    (a table of other runs beside the run logs) was lost to the fit, its saved file and its report. It
    stays (with the re-check's own, once each); that about a run the filter removed too, as the file said it."""
    table = good_table()
    sweep = _run_logs(tmp_path / "sweep", table[table["run_id"] != "b-s0"])
    table.to_csv(sweep / "runs.csv", index=False)
    with pytest.warns(UserWarning, match=r"\(b-s0\): left out") as said:
        runs = load_runs(sweep)
    read = [str(w.message) for w in said]
    assert runs.attrs["data_warnings"] == read and len(read) == 1
    for filtered in (runs[runs["recipe"] != "b"], runs.query("run_id != 'a-s1'"), runs.loc[runs["compute"] > 10].copy()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the file's warning is not said again: nothing was read again
            assert validate_runs(filtered).attrs["data_warnings"] == read
    with pytest.warns(UserWarning, match="column 'lr'") as said:
        again = validate_runs(runs[runs["recipe"] == "a"].assign(lr=np.where(runs["run_id"] == "a-s0", 5e-4, 1e-3)))
    assert again.attrs["data_warnings"] == [*read, str(said[0].message)]
    assert validate_runs(again).attrs["data_warnings"] == again.attrs["data_warnings"]  # kept once each
    edited = again[again["compute"] > 10]
    with pytest.warns(UserWarning, match="column 'lr'"):
        assert validate_runs(edited).attrs["data_warnings"] == again.attrs["data_warnings"]  # said again, kept once


def test_a_decimal_comma_in_a_comma_separated_file_is_not_said_to_group_digits(tmp_path):
    """A sheet in a locale with a decimal comma exported as comma-separated CSV quotes its numbers
    ("0,355"): it was told "its digits grouped by ',': write it without them, 0355", a pass rate of
    355. A group of thousands never starts with 0: the comma is a decimal mark, written with a point."""
    path = tmp_path / "runs.csv"
    path.write_text('run_id,recipe,compute,metric\na,r,1000,"0,355"\na,r,2000,"0,4"\n')
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == (f"file {path}, column 'metric', run 'a', row 2: value '0,355' is not a number "
                               "(a decimal comma: write it with a point, 0.355)")


def test_a_sweep_in_flight_with_one_evaluation_a_run_is_not_said_to_be_a_table_of_last_values():
    """A trainer's sweep read just after every run's first evaluation (each run in flight, one row
    each) was told "(every run has one row: a table of runs' last values? ...)" beside "(it is in
    flight: read it again after its next evaluation)": a tracker's runs table, which this is not."""
    table = pd.DataFrame({"run_id": ["a-s0", "a-s1", "b-s0"], "recipe": ["a", "a", "b"], "compute": 1e12,
                          "metric": [0.3, 0.31, 0.29], "ended": ""})
    with pytest.raises(RunDataError) as info:
        validate_runs(table)
    assert str(info.value) == ("run 'a-s0', row 1: has 1 point(s); at least 2 are needed to fit a curve (it is in "
                               "flight: read it again after its next evaluation)")


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_header_of_another_separator_is_not_told_its_right_names_are_wrong(tmp_path, separator):
    """A ';'- or tab-separated file whose names are the run format's but one ('flops') was told
    "'run_id' is not 'run_id': names are matched exactly, without spaces or capitals", and so of
    recipe and metric: each name of the one-column header was judged as missing. The names that are
    right get no hint; the one that is not does."""
    path = tmp_path / "runs.csv"
    path.write_text(separator.join(["run_id", "recipe", "flops", "metric"]) + "\n"
                    + separator.join(["a", "r", "1000", "0.3"]) + "\n")
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value).endswith(f"the header is one column holding {separator!r}, which separates the columns where "
                                    "they are named run_id, recipe, compute and metric: is 'flops' the compute? Rename "
                                    "it to 'compute'")


@pytest.mark.parametrize("metrics", [("0.35", "0.4"), ("0", "1")])
def test_a_tab_separated_compute_with_its_digits_grouped_is_not_read_as_decimal_commas(tmp_path, metrics):
    """A sheet that shows thousands separators, saved as tab-separated text, writes compute as
    1,500,000 unquoted. Its commas were taken for decimal commas: refused as "value '0.35' has a '.'
    where the file's other numbers use a decimal comma ('1,500,000')", or, with no '.' in the file,
    as "value '1.500.000' is not a number", a value the file does not hold. Two commas in one number
    group its digits; it is now said as in a comma-separated file."""
    path = tmp_path / "runs.tsv"
    path.write_text(f"run_id\trecipe\tcompute\tmetric\na\tr\t1,500,000\t{metrics[0]}\na\tr\t2,000,000\t{metrics[1]}\n")
    with pytest.raises(RunDataError) as info:
        load_runs(path)
    assert str(info.value) == (f"file {path}, column 'compute', run 'a', row 2: value '1,500,000' is not a number "
                               "(its digits grouped by ',': write it without them, 1500000)")


def test_a_tsv_file_separated_by_commas_is_read_as_its_header_shows(tmp_path):
    """A .tsv whose lines are separated by commas (a CSV saved under that name) was read by tabs, its
    header one column, and refused with hints for a tracker's export ("'recipe' groups the runs ...",
    "converting a tracker's export"), none of which it is. A header whose commas separate the run
    format's names is read by them, as a tab-separated .csv is read by its tabs."""
    path = tmp_path / "runs.tsv"
    path.write_text("run_id,recipe,compute,metric\na,r,1000,0.3\na,r,2000,0.4\n")
    runs = load_runs(path)
    assert list(runs["compute"]) == [1000.0, 2000.0] and list(runs["metric"]) == [0.3, 0.4]


def test_a_json_array_s_bad_row_is_named_by_its_place_in_the_array_counted_from_1(tmp_path):
    """Mutant 'JSON array item 0-based': a .json file of row objects named the sixth row 'row 5'."""
    rows = good_table().to_dict("records")
    rows[5]["metric"] = 1.5
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(RunDataError, match=r"must lie in \[0, 1\], got 1.5") as info:
        load_runs(path)
    assert (info.value.column, info.value.run_id, info.value.row) == ("metric", "a-s1", 6)


def test_a_run_its_advisor_stopped_after_one_evaluation_is_refused_not_left_out_as_in_flight():
    """Mutant 'a run that ended as advisor_stopped taken for one in flight': a run stopped after one
    evaluation was left out of the fit with a warning saying it would be read after its next
    evaluation, which a stopped run never has. One that ended that short is refused, as a finished one is."""
    table = pd.concat([good_table().assign(ended="finished"),
                       pd.DataFrame([dict(run_id="b-s1", recipe="b", compute=10.0, metric=0.2, n_eval=100,
                                          ended="advisor_stopped")])], ignore_index=True)
    with pytest.raises(RunDataError, match=r"run 'b-s1', row 13: has 1 point\(s\); at least 2 are needed to fit "
                                           r"a curve$"):
        validate_runs(table)


@pytest.mark.parametrize("column", ["run_id", "recipe"])
def test_a_name_of_blanks_alone_is_refused_as_missing_naming_the_row(tmp_path, column):
    """Mutant 'blank names accepted': a run_id (or recipe) cell holding spaces alone made a run named
    '   ', fitted beside the others, where an empty cell is refused as missing."""
    table = good_table()
    table[column] = table[column].astype(object)
    table.loc[5, column] = "   "
    path = tmp_path / "runs.csv"
    table.to_csv(path, index=False)
    with pytest.raises(RunDataError, match=rf"column '{column}', .*row 7: is missing \(NaN/empty\)") as info:
        load_runs(path)
    assert (info.value.source, info.value.column, info.value.row) == (str(path), column, 7)


def test_a_complete_last_line_of_a_jsonl_log_that_is_not_json_is_refused_not_taken_for_a_torn_one(tmp_path):
    """Mutant 'any bad last line skipped': only a last line without its newline is a write in
    progress; one that ends in a newline and is not JSON is damage, and skipping it lost an evaluation
    without a word."""
    rows = good_table().to_dict("records")
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"run_id": "b-s0", "recipe": "b", "comp\n')
    with pytest.raises(RunDataError, match=r"line 13 is not valid JSON"):
        load_runs(path)
    path.write_text(path.read_text().rstrip("\n"))  # the same line without its newline: torn, left out
    assert len(load_runs(path)) == 12


@pytest.mark.parametrize("name", ["a-s1\n", "a-s1\x1b[0m", "a-s1\x7f", "a-s1\r"])
def test_a_name_with_a_newline_escape_or_delete_is_refused_as_a_nul_is(name):
    """Mutant 'only NUL refused': a newline, a terminal escape or DEL in a run name is a corrupted
    name too, which would break every line the name is printed on."""
    table = good_table()
    table.loc[5, "run_id"] = name
    with pytest.raises(RunDataError, match=rf"holds a control character \({re.escape(repr(name))}\)") as info:
        validate_runs(table, source="runs.csv")
    assert (info.value.column, info.value.run_id, info.value.row) == ("run_id", name, 6)


@pytest.mark.parametrize("name", ["a-s1\n", "a-s1\x1b[0m", "a-s1\x7f", "a-s1\r", "a-s1\x00"])
def test_the_message_refusing_a_name_s_control_character_is_one_printable_line(name):
    """The refusal named the run with its control character as it is: a newline broke the message in
    two, and a carriage return ('a-s1\\r', a name from a file saved on Windows) sent the terminal back
    to the line's start, printing the rest of the message over the file and column it named."""
    table = good_table()
    table.loc[5, "run_id"] = name
    with pytest.raises(RunDataError) as info:
        validate_runs(table, source="runs.csv")
    message = str(info.value)
    assert message.isprintable(), message
    assert message.startswith(f"file runs.csv, column 'run_id', run {repr(name)}, row 6: holds a control character")
    assert info.value.run_id == name  # the name itself, for a caller to find the run by


def test_a_run_whose_ended_cell_is_given_on_some_rows_only_takes_it_on_all():
    """Mutant 'empty cells win': the run format says rows left empty take the run's value; a run that
    says 'finished' on its last row only was read as in flight on its others."""
    table = good_table().assign(ended="")
    table.loc[3, "ended"] = "finished"  # a-s0's last evaluation
    table.loc[8, "ended"] = "advisor_stopped"  # b-s0's first
    runs = validate_runs(table)
    assert runs.groupby("run_id")["ended"].agg(set).to_dict() == {
        "a-s0": {"finished"}, "a-s1": {""}, "b-s0": {"advisor_stopped"}}


def test_a_quarter_of_rows_lacking_the_metric_is_said_to_look_like_a_trackers_export():
    """Mutant 'hint from half the rows': the docstring's line is a quarter of the rows or more."""
    table = good_table()
    table.loc[[1, 5, 9], "metric"] = np.nan  # 3 of 12
    with pytest.raises(RunDataError, match=r"row 2: is missing \(NaN/empty\) on 3 of 12 rows, here first: a tracker's"):
        validate_runs(table)


@pytest.mark.parametrize("n_eval", [0, -100])
def test_an_n_eval_below_1_in_a_table_is_refused_naming_the_row(tmp_path, n_eval):
    """Mutant 'n_eval 0 accepted' (the float branch a table's column takes: read as floats, the integer
    branch the callback and pruner take never sees it): an evaluation of no samples has no binomial noise."""
    table = good_table()
    table.loc[5, "n_eval"] = n_eval
    path = tmp_path / "runs.csv"
    table.to_csv(path, index=False)
    with pytest.raises(RunDataError, match=rf"must be a whole number of graded samples from 1 to 10\*\*12, got {n_eval}$") \
            as info:
        load_runs(path)
    assert (info.value.column, info.value.run_id, info.value.row) == ("n_eval", "a-s1", 7)


def test_a_recipe_name_with_a_control_character_is_refused_as_a_run_name_is():
    """Mutant 'only run_id checked for control characters'."""
    table = good_table()
    table.loc[8:, "recipe"] = "b\n"  # the whole run, so it is not refused as a run in two recipes
    with pytest.raises(RunDataError, match=r"holds a control character \('b\\n'\)") as info:
        validate_runs(table)
    assert (info.value.column, info.value.run_id, info.value.row) == ("recipe", "b-s0", 9)


def test_rows_given_out_of_order_come_back_sorted_by_recipe_run_and_compute(tmp_path):
    """Mutant 'not sorted by compute': the table returned is sorted (validate_runs' docstring), so a
    run's last row is its latest evaluation; a log or export written out of order came back as written."""
    shuffled = good_table().sample(frac=1, random_state=3)
    path = tmp_path / "runs.csv"
    shuffled.to_csv(path, index=False)
    runs = load_runs(path)
    expected = good_table().sort_values(["recipe", "run_id", "compute"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(runs[expected.columns], expected, check_dtype=False)


def test_a_bad_line_before_a_torn_last_line_is_refused_not_skipped_with_it(tmp_path):
    """Mutant 'the line before the last taken for the last': only the torn last line of a log is a
    write in progress; a damaged line before it is refused, naming it."""
    rows = good_table().to_dict("records")
    lines = [json.dumps(r) for r in rows]
    lines[10] = lines[10][:30]  # damaged, with its newline
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines[:11]) + "\n" + lines[11][:20])  # then a torn last line
    with pytest.raises(RunDataError, match=r"line 11 is not valid JSON"):
        load_runs(path)
