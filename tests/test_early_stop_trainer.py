"""trainer_minimal consults forecast.early_stop every N evaluations and stops on its advice."""

from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest

from forecast.formatting import fmt_compute

train_module = pytest.importorskip("trainer_minimal.train")
config_module = pytest.importorskip("trainer_minimal.config")


def strong_reference(path) -> None:
    """A finished reference run far better than a tiny CPU run can get, over a wide FLOPs range."""
    compute = np.geomspace(1e5, 1e9, 12)
    metric = 0.3 + 0.65 * (1 - np.exp(-compute / 3e6))
    pd.DataFrame({"run_id": "strong-s0", "recipe": "strong", "compute": compute, "metric": metric.round(4),
                  "n_eval": 32, "compute_unit": "flops"}).to_csv(path, index=False)


def test_trainer_stops_when_the_advisor_says_stop(tmp_path, capsys):
    strong_reference(tmp_path / "reference.csv")
    cfg = config_module.make_config(
        "scalerl", out=str(tmp_path / "run"), max_steps=16, eval_every=2, warmup_steps=5, train_size=64,
        val_size=16, val_samples=2, batch_size=4, group_size=2, n_layer=1, d_model=16, n_head=2,
        advisor_every=2, advisor_reference=str(tmp_path / "reference.csv"),
    )
    summary = train_module.train(cfg)
    assert summary["stopped"] is True
    assert summary["steps"] < cfg.max_steps  # compute saved
    stopped = json.loads((tmp_path / "run" / "stopped.json").read_text())
    advice = stopped["advice"]
    assert (advice["action"], advice["rule"]) == ("stop", "beats_best")
    assert advice["probability"] < advice["threshold"] == 0.1
    assert advice["message"].startswith("stop: P(beats best 'strong-s0'") and "< 0.1" in advice["message"]
    evals = [json.loads(line) for line in (tmp_path / "run" / "evals.jsonl").read_text().splitlines()]
    assert len(evals) == 4  # advice at evaluations 2 (warm-up: too few) and 4 (stop)
    # compute says its unit, on the trainer's lines as in the advice: 'compute 1.2e+06' and
    # 'at 4.8e6, 2.0x now' left a planner to guess FLOPs, GPU-hours or steps
    budget = advice["details"]["budget"]
    assert f" at {fmt_compute(budget)} flops, " in advice["message"], advice["message"]
    printed = capsys.readouterr().out
    steps = [line for line in printed.splitlines() if " pass " in line and " reward " in line]
    assert len(steps) == 4 and f"compute {fmt_compute(evals[-1]['compute'])} flops " in steps[-1], steps
    assert f"advisor: stop (beats_best): {advice['message'].removeprefix('stop: ')}" in printed


def test_the_advisor_takes_its_rules_and_priors_from_the_trainer_config(tmp_path, monkeypatch):
    """No reference runs, so only the target and saturation rules can fire; a target out of reach
    (advisor_rules) stops the run, and every fit behind the advice used advisor_priors."""
    from forecast import early_stop
    from forecast.model import Priors

    fitted_priors = []

    def recording_fit(*args, **kwargs):
        fc, converged = real_fit(*args, **kwargs)
        fitted_priors.append(fc.priors)
        return fc, converged

    real_fit = early_stop.fit_for_advice
    monkeypatch.setattr(early_stop, "fit_for_advice", recording_fit)
    cfg = config_module.make_config(
        "scalerl", out=str(tmp_path / "run"), max_steps=16, eval_every=2, warmup_steps=5, train_size=64,
        val_size=16, val_samples=2, batch_size=4, group_size=2, n_layer=1, d_model=16, n_head=2,
        advisor_every=2, advisor_rules="target=0.99,p_target_threshold=0.2", advisor_priors="b_mu=0.5,m_mu=0.5",
    )
    summary = train_module.train(cfg)
    assert summary["stopped"] is True and summary["steps"] < cfg.max_steps
    advice = json.loads((tmp_path / "run" / "stopped.json").read_text())["advice"]
    assert (advice["action"], advice["rule"], advice["threshold"]) == ("stop", "reach_target", 0.2)
    assert advice["probability"] < 0.2 and "0.99" in advice["message"]
    assert fitted_priors and all(p == Priors(b_mu=0.5, m_mu=0.5) for p in fitted_priors)


def unconverged_report():
    from forecast.inference import ConvergenceReport

    return ConvergenceReport(max_rhat=1.08, min_ess_bulk=90.0, min_ess_tail=120.0, divergences=3, n_draws=400)


def saturated_advice_on_a_fit_judged(monkeypatch, diagnostics):
    """trainer_advice on four evaluations of one run, with stand-ins for the fit (whose diagnostics() is
    `diagnostics`) and for the rules (a 'saturated' stop): only what trainer_advice adds is under test."""
    from forecast import early_stop

    fit = types.SimpleNamespace(run_ids=["live-s0"], diagnostics=diagnostics)
    monkeypatch.setattr(early_stop, "fit_for_advice", lambda table, **kwargs: (fit, diagnostics().converged))
    monkeypatch.setattr(early_stop, "recommend_runs", lambda fc, budgets, config, **kwargs: {
        "live-s0": early_stop.Recommendation("stop", "saturated", "stop: flat", run_id="live-s0")})
    evals = pd.DataFrame({"run_id": "live-s0", "recipe": "live", "compute": [1e5, 2e5, 4e5, 8e5],
                          "metric": [0.3, 0.35, 0.37, 0.38], "n_eval": 32})
    return early_stop.trainer_advice(evals, planned_compute=1e7, config=early_stop.EarlyStopConfig(min_evals=2))


def test_trainer_advice_names_what_did_not_converge(monkeypatch):
    """An unconverged fit leaves its problems (R-hat, ESS, divergences) in the recommendation's
    details, where the trainer's printed line and stopped.json read them. Stand-ins for the fit
    and the rules: only what trainer_advice adds is under test."""
    rec = saturated_advice_on_a_fit_judged(monkeypatch, unconverged_report)
    assert rec.details["converged"] is False
    assert rec.details["convergence_problems"] == unconverged_report().problems()
    assert any("R-hat up to 1.080" in p for p in rec.details["convergence_problems"])


def test_advice_on_a_fit_of_unknown_divergences_says_unknown(monkeypatch):
    """A fit whose draws came without the sampler's statistics (a hand-made or reweighted one) has
    divergences None: the advice's problems and the trainer's printed line say "unknown", never "None",
    and nothing compares None with a number (TypeError)."""
    from forecast.inference import ConvergenceReport

    def unknown_report():
        return ConvergenceReport(max_rhat=1.001, min_ess_bulk=900.0, min_ess_tail=900.0, divergences=None, n_draws=400)

    rec = saturated_advice_on_a_fit_judged(monkeypatch, unknown_report)
    assert rec.details["converged"] is False
    # the trainer's line, forecast watch's and the Hugging Face callback's say the advice's problems as they are
    from forecast.hf_callback import _convergence_note
    from forecast.watch import _line

    for line in (train_module.advice_line("stop", rec.rule, rec.message, rec.details), _line(rec), _convergence_note(rec)):
        assert "divergences unknown" in line and "None" not in line


def test_trainer_advice_names_a_float_run_id_as_the_fit_does(monkeypatch):
    """Evaluations whose run_id is a whole-number float (another tool's log writing "run_id": 3.0; a
    column read as floats) are fitted as run '3' (formatting.name_of), while trainer_advice named the run
    str(3.0), '3.0': the run was asked about under a name the fit does not have ('unknown run_id '3.0';
    the fit has: 3', a KeyError after the fit) and compared with itself as another run. Stand-ins for
    the fit and the rules, which see the names trainer_advice gives them."""
    from forecast import early_stop

    seen = {}

    def fit(table, **kwargs):
        return types.SimpleNamespace(run_ids=sorted(table["run_id"].unique()), diagnostics=unconverged_report), True

    def rules(fc, budgets, config, alternatives, **kwargs):
        seen.update(budgets=list(budgets), alternatives=list(alternatives), fitted=list(fc.run_ids))
        return {run: early_stop.Recommendation("continue", "none", "continue", run_id=run) for run in budgets}

    monkeypatch.setattr(early_stop, "fit_for_advice", fit)
    monkeypatch.setattr(early_stop, "recommend_runs", rules)
    evals = pd.DataFrame({"run_id": 3.0, "recipe": "live", "compute": [1e5, 2e5, 4e5, 8e5],
                          "metric": [0.3, 0.35, 0.37, 0.38], "n_eval": 32})
    rec = early_stop.trainer_advice(evals, planned_compute=1e7, config=early_stop.EarlyStopConfig(min_evals=2))
    assert seen == {"budgets": ["3"], "alternatives": [], "fitted": ["3"]} and rec.run_id == "3"
    warming = early_stop.trainer_advice(evals.head(1), planned_compute=1e7)
    assert (warming.rule, warming.run_id) == ("warmup", "3")


def test_the_printed_advice_names_the_action_once_and_warns_of_an_unconverged_stop():
    problems = unconverged_report().problems()
    line = train_module.advice_line("continue", "warmup", "continue: 1 evaluation(s) so far; rules start at 3", {})
    assert line == "advisor: continue (warmup): 1 evaluation(s) so far; rules start at 3"
    converged = train_module.advice_line("stop", "beats_best", "stop: P(beats best) = 0.02 < 0.1", {"converged": True})
    assert converged == "advisor: stop (beats_best): P(beats best) = 0.02 < 0.1"
    unconverged = {"converged": False, "convergence_problems": problems}
    stop = train_module.advice_line("stop", "beats_best", "stop: P(beats best) = 0.02 < 0.1", unconverged)
    assert stop == ("advisor: stop (beats_best): P(beats best) = 0.02 < 0.1 (warning: the forecaster's fit did "
                    f"not converge: {'; '.join(problems)})")
    assert "R-hat up to 1.080" in stop and "3 divergent transitions" in stop and "bulk ESS as low as 90" in stop
    # a continue ends nothing, so its line stays short
    assert "warning" not in train_module.advice_line("continue", "saturated", "continue: x", unconverged)
    # what each chain alone advises follows the problems, as forecast watch says it
    agreed = {**unconverged, "chains_say": "each of its 2 chains alone says stop (...)"}
    assert train_module.advice_line("stop", "beats_best", "stop: P(beats best) = 0.02 < 0.1", agreed).endswith(
        f"not converge: {'; '.join(problems)}; each of its 2 chains alone says stop (...))")


def test_the_trainers_reference_keeps_an_earlier_sweeps_run_of_the_same_name(tmp_path):
    """As forecast watch does (reference_rows): the trainer names runs recipe-s{seed}, so an earlier
    sweep's dapo-s0 is another run to compare with, while this sweep's own log of it is the run itself."""
    import pandas as pd

    from forecast.early_stop import _reference_table

    live = pd.DataFrame({"run_id": ["dapo-s0"] * 2, "recipe": ["dapo"] * 2, "compute": [1.0, 2.0], "metric": [0.2, 0.3]})
    earlier = pd.DataFrame({"run_id": ["dapo-s0"] * 3, "recipe": ["dapo"] * 3, "compute": [1.0, 2.0, 4.0],
                            "metric": [0.25, 0.33, 0.4]})
    earlier.to_csv(tmp_path / "earlier.csv", index=False)
    assert set(_reference_table(tmp_path / "earlier.csv", live)["run_id"]) == {"ref:dapo-s0"}
    own = pd.concat([live, earlier.assign(run_id="grpo-s0", recipe="grpo")], ignore_index=True)
    own.to_csv(tmp_path / "own.csv", index=False)
    assert set(_reference_table(tmp_path / "own.csv", live)["run_id"]) == {"grpo-s0"}


def test_the_trainers_reference_of_float_run_ids_knows_the_live_run_in_it(tmp_path):
    """A reference table whose run_id column holds floats (Parquet, another tool's log) is read raw, run
    3 as 3.0, while the live run, validated, is '3' (formatting.name_of): the reference's own log of
    the live run was not recognised as the run itself ('3.0' is not '3'), was kept, and once the two
    were validated together was one run '3' of two logs. It is known by its name as the fit gives it."""
    from forecast.data import validate_runs
    from forecast.early_stop import _reference_table

    live = validate_runs(pd.DataFrame({"run_id": [3.0] * 2, "recipe": ["dapo"] * 2, "compute": [1.0, 2.0],
                                       "metric": [0.2, 0.3]}))
    own = pd.DataFrame({"run_id": [3.0, 3.0, 4.0, 4.0, 4.0], "recipe": ["dapo", "dapo", "grpo", "grpo", "grpo"],
                        "compute": [1.0, 2.0, 1.0, 2.0, 4.0], "metric": [0.2, 0.3, 0.25, 0.33, 0.4]})
    own.to_parquet(tmp_path / "own.parquet")
    assert set(_reference_table(tmp_path / "own.parquet", live)["run_id"]) == {"4"}
    earlier = own.assign(metric=own["metric"] + 0.01)  # an earlier sweep's run 3: another run
    earlier.to_parquet(tmp_path / "earlier.parquet")
    assert set(_reference_table(tmp_path / "earlier.parquet", live)["run_id"]) == {"ref:3", "4"}


def test_the_trainers_advice_fits_pad_to_few_sizes_as_its_table_grows(intercept_advice_fit):
    """Each padded size is a model compiled once per process (about 25 s, about 100 MB kept). The
    trainer's fits were padded to the next multiple of 64 rows, so a run asking every few
    evaluations compiled again every 64 rows of its table (its own and the reference runs'), for as
    long as it trained. They are padded to sizes 1.5x apart now (advice_pad), as the watcher's are."""
    from conftest import FitIntercepted

    from forecast import early_stop

    seen = intercept_advice_fit(early_stop)
    pads = set()
    for n in range(4, 1200, 16):
        compute = np.geomspace(1e5, 1e9, n)
        evals = pd.DataFrame({"run_id": "live-s0", "recipe": "live", "compute": compute, "metric": 0.3, "n_eval": 32})
        with pytest.raises(FitIntercepted):
            early_stop.trainer_advice(evals, planned_compute=1e10, config=early_stop.EarlyStopConfig(min_evals=2))
        assert seen["pad_to"] >= n
        pads.add(seen["pad_to"])
    assert len(pads) <= 5  # 256, 384, 576, 896, 1344; a 64-row bucket made 19 sizes here
    sizes = {early_stop.advice_pad(n) for n in range(1, 10_001)}
    assert len(sizes) <= 10 and all(s % 64 == 0 for s in sizes)
    assert all(n <= early_stop.advice_pad(n) <= max(256, 1.5 * n + 64) for n in range(1, 10_001))


def test_a_reference_recipe_at_another_setting_is_said_by_the_trainer_once_and_kept_in_the_advice(
        tmp_path, monkeypatch, capsys):
    """An earlier sweep's 'live' recipe at lr 5e-4 as reference for a live 'live' run at 1e-3: they
    are pooled as seeds of one recipe. The warning saying so went to Python's warnings printing (a
    source line under it) at every consult, and was not in the advice, so stopped.json kept a stop
    decided against the pooled recipe without a word about it."""
    import warnings

    from forecast import early_stop

    fit = types.SimpleNamespace(run_ids=["live-s0", "ref:live-s0"], diagnostics=unconverged_report)
    monkeypatch.setattr(early_stop, "fit_for_advice", lambda table, **kwargs: (fit, True))
    monkeypatch.setattr(early_stop, "recommend_runs", lambda fc, budgets, config, **kwargs: {
        "live-s0": early_stop.Recommendation("stop", "beats_best", "stop: P(beats best) = 0.02 < 0.1", run_id="live-s0")})
    compute = [1e5, 2e5, 4e5, 8e5]
    evals = pd.DataFrame({"run_id": "live-s0", "recipe": "live", "compute": compute, "metric": [0.3, 0.35, 0.37, 0.38],
                          "lr": 1e-3})
    evals.assign(metric=[0.31, 0.36, 0.4, 0.42], lr=5e-4).to_csv(tmp_path / "earlier.csv", index=False)
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        rec = early_stop.trainer_advice(evals, reference_path=tmp_path / "earlier.csv", planned_compute=1e7)
    assert len(rec.details["data_warnings"]) == 1
    assert "column 'lr': differs between runs of recipe 'live'" in rec.details["data_warnings"][0]
    assert [str(w.message) for w in escaped] == rec.details["data_warnings"]  # a caller of the function is told

    cfg = types.SimpleNamespace(out=str(tmp_path), run_id="live-s0", advisor_budget=1e7, advisor_rules="",
                                advisor_priors="", advisor_reference=str(tmp_path / "earlier.csv"))
    with warnings.catch_warnings(record=True) as escaped:  # the trainer says it itself (below), not Python
        warnings.simplefilter("always")
        assert train_module.consult_advisor(cfg, evals.to_dict("records"), 1e7).details["data_warnings"] == rec.details["data_warnings"]
    assert not [w for w in escaped if "differs between runs" in str(w.message)]

    monkeypatch.setattr(train_module, "consult_advisor", lambda cfg, rows, planned: rec)
    monkeypatch.setattr(train_module, "_SAID_DATA_WARNINGS", set())
    for _ in range(2):
        assert train_module.advise(cfg, [], {"step": 4, "compute": 8e5})["details"]["data_warnings"] == rec.details["data_warnings"]
    printed = capsys.readouterr().out.splitlines()
    assert [line.startswith("[live-s0] advisor: warning: ") for line in printed] == [True, False, False]


def _live_run_and_its_advisor_config(tmp_path):
    """Four evaluations of a trainer run 'live-s0' and a stand-in of its config, asking the advisor."""
    evals = pd.DataFrame({"run_id": "live-s0", "recipe": "live", "compute": [1e5, 2e5, 4e5, 8e5],
                          "metric": [0.3, 0.35, 0.37, 0.38], "n_eval": 32})
    cfg = types.SimpleNamespace(out=str(tmp_path), run_id="live-s0", advisor_budget=1e7, advisor_rules="min_evals=2",
                                advisor_priors="", advisor_reference="")
    return evals, cfg


def test_the_trainers_advice_on_a_run_whose_end_falls_away_says_so_on_its_line_and_in_stopped_json(
        tmp_path, monkeypatch, capsys):
    """forecast watch and the report said beside a run's advice that its last third falls away from its
    fitted curve (its forecasts likely too high, their intervals too narrow); the trainer's own advisor
    printed and recorded the same advice without it. Stand-ins for the fit, the rules and the shape test:
    what trainer_advice and the trainer add is under test. A stand-in fit without the evaluations the
    shape test reads gets no note, and no error."""
    import forecast.shape_check as shape_check
    from forecast import early_stop

    asked = []

    def flag_the_live_run(fc, *, runs=None, **_):
        asked.append(runs)
        return [{"run_id": "live-s0", "recipe": "live", "late_trend_z": -5.04}]

    holding_data = types.SimpleNamespace(run_ids=["live-s0"], diagnostics=unconverged_report, data_=object(),
                                         draws=lambda name: None, curve_parameters=lambda **kwargs: None)
    fits = [holding_data]
    monkeypatch.setattr(early_stop, "fit_for_advice", lambda table, **kwargs: (fits[-1], True))
    monkeypatch.setattr(early_stop, "recommend_runs", lambda fc, budgets, config, **kwargs: {
        "live-s0": early_stop.Recommendation("stop", "saturated", "stop: flat", run_id="live-s0")})
    monkeypatch.setattr(shape_check, "misshapen_runs", flag_the_live_run)
    evals, cfg = _live_run_and_its_advisor_config(tmp_path)
    stopped = train_module.advise(cfg, evals.to_dict("records"), {"step": 4, "compute": 8e5})
    note = shape_check.misshapen_run_note(-5.04)
    assert asked == [["live-s0"]]  # the run advised alone: the trainer asks about no other
    assert stopped["details"]["shape_note"] == note and stopped["details"]["late_trend_z"] == -5.04  # stopped.json's
    assert (stopped["action"], stopped["rule"], stopped["message"]) == ("stop", "saturated", "stop: flat")
    assert capsys.readouterr().out.strip() == f"[live-s0] advisor: stop (saturated): flat ({note})"
    assert train_module.advice_line("continue", "beats_best", "continue: P = 0.4", {"shape_note": note}) == (
        f"advisor: continue (beats_best): P = 0.4 ({note})")  # a continue says it too: it leans on the forecast

    fits.append(types.SimpleNamespace(run_ids=["live-s0"], diagnostics=unconverged_report))  # no data_ to test
    rec = early_stop.trainer_advice(evals, planned_compute=1e7, config=early_stop.EarlyStopConfig(min_evals=2))
    assert "shape_note" not in rec.details and len(asked) == 1


def test_resume_of_a_run_the_advisor_stopped_says_its_shape_note_as_the_stop_did(tmp_path, monkeypatch, capsys):
    """The advisor's stop of a run whose last third falls away from its curve said so on its line, and
    stopped.json records it; --resume of that run said 'already stopped by the advisor at step 4: ...'
    without it. It now says the note in the same words. Stand-ins for the fit, the rules and the shape test."""
    import forecast.shape_check as shape_check
    from forecast import early_stop

    fit = types.SimpleNamespace(run_ids=["live-s0"], diagnostics=unconverged_report, data_=object(),
                                draws=lambda name: None, curve_parameters=lambda **kwargs: None)
    monkeypatch.setattr(early_stop, "fit_for_advice", lambda table, **kwargs: (fit, True))
    monkeypatch.setattr(early_stop, "recommend_runs", lambda fc, budgets, config, **kwargs: {
        "live-s0": early_stop.Recommendation("stop", "saturated", "stop: flat", run_id="live-s0")})
    monkeypatch.setattr(shape_check, "misshapen_runs", lambda fc, *, runs=None, **_: [
        {"run_id": "live-s0", "recipe": "live", "late_trend_z": -5.04}])
    evals, cfg = _live_run_and_its_advisor_config(tmp_path)
    stopped = train_module.advise(cfg, evals.to_dict("records"), {"step": 4, "compute": 8e5})
    note = f"({shape_check.misshapen_run_note(-5.04)})"
    assert capsys.readouterr().out.strip().endswith(f"stop (saturated): flat {note}")  # the first time
    paths = train_module.run_paths(cfg)
    (tmp_path / "stopped.json").write_text(json.dumps({"step": 4, "compute": 8e5, "advice": stopped}))
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 4, "stopped": True}))
    cfg.resume = True
    assert train_module.ended_note(cfg) == (
        f"[live-s0] already stopped by the advisor at step 4: saturated: flat {note} "
        f"(delete {paths['stopped']} to train on)")


def test_the_trainers_stop_at_its_planned_budget_has_no_shape_note_though_the_run_is_flagged(
        tmp_path, monkeypatch, capsys):
    """A stop at the planned budget (budget_reached) is certain whatever the forecast: a shape note
    beside it ('its forecasts are likely too high') only made a reader doubt it. The printed line has
    none; stopped.json keeps the test's number. Stand-ins for the fit, the rules and the shape test."""
    import forecast.shape_check as shape_check
    from forecast import early_stop

    fit = types.SimpleNamespace(run_ids=["live-s0"], diagnostics=unconverged_report, data_=object(),
                                draws=lambda name: None, curve_parameters=lambda **kwargs: None)
    monkeypatch.setattr(early_stop, "fit_for_advice", lambda table, **kwargs: (fit, True))
    monkeypatch.setattr(early_stop, "recommend_runs", lambda fc, budgets, config, **kwargs: {
        "live-s0": early_stop.Recommendation("stop", "budget_reached", "stop: compute 8e5 flops >= planned budget 4e5 flops",
                                             run_id="live-s0")})
    monkeypatch.setattr(shape_check, "misshapen_runs", lambda fc, *, runs=None, **_: [
        {"run_id": "live-s0", "recipe": "live", "late_trend_z": -5.04}])
    evals, cfg = _live_run_and_its_advisor_config(tmp_path)
    stopped = train_module.advise(cfg, evals.to_dict("records"), {"step": 4, "compute": 8e5})
    assert "shape_note" not in stopped["details"] and stopped["details"]["late_trend_z"] == -5.04
    assert capsys.readouterr().out.strip() == (
        "[live-s0] advisor: stop (budget_reached): compute 8e5 flops >= planned budget 4e5 flops")


def test_the_trainers_stop_against_a_reference_run_whose_end_falls_away_says_its_bar_is_likely_too_high(
        tmp_path, monkeypatch, capsys):
    """A stop on P(beats best 'ref:strong-s0') leans on that reference run's forecast; its last third
    falls away from its curve, so the forecast is likely too high and the stop may come too early. The
    reference run is tested beside the run advised, and the trainer's line and stopped.json say so.
    Stand-ins for the fit, the rules and the shape test."""
    import forecast.shape_check as shape_check
    from forecast import early_stop

    asked = []

    def flag_the_reference(fc, *, runs=None, **_):
        asked.append(runs)
        return [{"run_id": "ref:strong-s0", "recipe": "strong", "late_trend_z": -5.04}]

    fit = types.SimpleNamespace(run_ids=["live-s0", "ref:strong-s0"], diagnostics=unconverged_report, data_=object(),
                                draws=lambda name: None, curve_parameters=lambda **kwargs: None)
    monkeypatch.setattr(early_stop, "fit_for_advice", lambda table, **kwargs: (fit, True))
    monkeypatch.setattr(early_stop, "recommend_runs", lambda fc, budgets, config, **kwargs: {
        "live-s0": early_stop.Recommendation("stop", "beats_best", "stop: P(beats best 'ref:strong-s0') = 0.02 < 0.1",
                                             run_id="live-s0", details={"alternative": "ref:strong-s0"})})
    monkeypatch.setattr(shape_check, "misshapen_runs", flag_the_reference)
    evals, cfg = _live_run_and_its_advisor_config(tmp_path)
    stopped = train_module.advise(cfg, evals.to_dict("records"), {"step": 4, "compute": 8e5})
    note = ("shape: the run it is compared with, 'ref:strong-s0', falls away from its curve (z -5.0): its forecast is "
            "likely too high")
    assert asked == [["live-s0", "ref:strong-s0"]]
    assert stopped["details"]["shape_note"] == note and stopped["details"]["alternative_late_trend_z"] == -5.04
    assert "late_trend_z" not in stopped["details"] and stopped["rule"] == "beats_best"
    assert capsys.readouterr().out.strip().endswith(f"< 0.1 ({note})")


@pytest.mark.slow
def test_the_trainers_advice_on_a_fitted_run_made_to_decline_notes_it(tmp_path, late_decline_sweep):
    """Real fit (the trainer's padded advice fit): the live run is the sweep's run made to decline late,
    the other runs its reference; its advice carries the note, as forecast watch's does."""
    from forecast import early_stop

    runs, victim = late_decline_sweep
    runs[runs["run_id"] != victim].to_csv(tmp_path / "reference.csv", index=False)
    live = runs[runs["run_id"] == victim].sort_values("compute")
    rec = early_stop.trainer_advice(live, reference_path=tmp_path / "reference.csv",
                                    planned_compute=4 * float(live["compute"].max()))
    assert rec.details["late_trend_z"] < -3
    assert rec.details["shape_note"].startswith("shape: its last third falls away from its fitted curve (z -")
    assert rec.details["shape_note"] in train_module.advice_line(rec.action, rec.rule, rec.message, rec.details)

