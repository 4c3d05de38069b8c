"""trainer-minimal's command line with known answers, without training: the defaults its help states are the
ones it uses, and what it says about a bad command line. tests/test_trainer_run.py runs the commands."""

import dataclasses
import os
import re
import subprocess
import sys

import pytest

from trainer_minimal.cli import build_parser, main
from trainer_minimal.config import PRESETS, to_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_sweep_s_defaults_are_the_ones_its_help_states():
    """`sweep --help` says seeds 0,1,2 and one run at a time: the parser's defaults are those, not only the
    help text (kills the mutants with another --seeds or --workers default under the same help)."""
    args = build_parser().parse_args(["sweep", "--presets", "grpo", "--out", "sweep"])
    assert (args.seeds, args.workers, args.slim) == ("0,1,2", 1, False)


def test_a_sweep_with_no_runs_at_a_time_is_refused_naming_the_value(tmp_path, capsys):
    """`--workers 0` (or -1) said "--workers must be >= 1", without the value given: exit 2 naming both,
    before the sweep's folder is made."""
    from trainer_minimal.sweep import run_sweep

    assert run_sweep([], str(tmp_path / "sweep"), workers=-1) == 2
    assert capsys.readouterr().err == "trainer-minimal: error: --workers must be >= 1, got -1\n"
    assert not (tmp_path / "sweep").exists()


def test_a_max_size_past_64_bit_numbers_is_refused_naming_it_where_add_or_mul_draw_them():
    """`--max-size 19` failed the data's generation with numpy's "high is out of
    bounds for int64", naming no setting: add and mul draw numbers of max_size digits as 64-bit integers.
    18 digits fit; the tasks without numbers take any size (their prompts are checked against the model)."""
    from trainer_minimal.config import make_config

    assert make_config(max_size=18).max_size == 18
    for size, tasks, named in ((19, "sort,rev,add", "add"), (25, "mul,max", "mul"), (19, "add,mul", "add and mul")):
        with pytest.raises(ValueError, match=f"max_size={size} must be at most 18 with tasks {named}, whose numbers"):
            make_config(max_size=size, tasks=tasks)
    assert make_config(max_size=19, tasks="sort,rev").max_size == 19


@pytest.mark.parametrize("flag", ["--threads", "--d-model", "--n-head"])
def test_a_whole_number_past_what_torch_holds_is_refused_naming_the_flag_and_the_value(tmp_path, capsys, flag):
    """`--threads 100000000000000000000` (and --d-model) crashed in torch with "Overflow when unpacking long long",
    a traceback, once the run's folder was made: refused first, exit 2, naming the setting and the value. The
    limit, 2**31 - 1, is torch's for a thread count, far past any size or count of a run."""
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), flag, str(10**20)]) == 2
    assert capsys.readouterr().err == f"trainer-minimal: error: {flag} must be at most 2147483647, got {10**20}\n"
    assert not out.exists()


@pytest.mark.parametrize("presets, seeds, said", [
    ("scalerl", "", "--seeds '' names no seed"),
    ("scalerl", ",", "--seeds ',' names no seed"),
    (",", "0", "--presets ',' names no preset"),
])
def test_a_sweep_given_no_preset_or_no_seed_names_the_flag_and_its_value(tmp_path, presets, seeds, said):
    """`--seeds ""` (a shell variable unset) said "a sweep needs at least one preset and one seed", naming
    neither the flag nor what it was given."""
    from trainer_minimal.sweep import plan_sweep

    with pytest.raises(ValueError, match=said):
        plan_sweep(presets, seeds, str(tmp_path / "sweep"), {})


@pytest.mark.parametrize("seeds, said", [("-1", "-1"), ("0,-1,2", "-1"), ("3,-7", "-7")])
def test_a_sweep_given_a_negative_seed_names_the_flag_and_its_value(tmp_path, seeds, said):
    """`--seeds -1` was refused by each run's config as "seed must be >= 0, got -1": the sweep's flag is --seeds,
    and a list of several seeds was not named."""
    from trainer_minimal.sweep import plan_sweep

    with pytest.raises(ValueError, match=re.escape(f"--seeds {seeds!r}: each seed must be a whole number >= 0, got {said}")):
        plan_sweep("scalerl", seeds, str(tmp_path / "sweep"), {})
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("argv, flags_said, fields_said", [
    (["--seed", "-1"], "--seed must be >= 0, got -1", "seed must be >= 0, got -1"),
    (["--val-size", "0"], "--val-size must be >= 1, got 0", "val_size must be >= 1, got 0"),
    (["--d-model", "30"], "--d-model 30 must be divisible by --n-head 4", "d_model=30 must be divisible by n_head=4"),
    (["--device", "gpu"], "--device 'gpu': use cpu, cuda or cuda:N", "device='gpu': use cpu, cuda or cuda:N"),
    (["--advisor-every", "1", "--advisor-priors", "a_sd=-1"], "--advisor-priors: a_sd must be > 0 and at most 20, got -1.0",
     "advisor_priors: a_sd must be > 0 and at most 20, got -1.0"),
])
def test_a_refused_setting_is_named_by_its_flag_at_the_command_line_and_by_its_field_in_python(tmp_path, capsys, argv,
                                                                                              flags_said, fields_said):
    """`train --seed -1` said "seed must be >= 0, got -1": the user typed --seed. At the command line (a run's,
    a sweep's) a refusal names the flag as typed; the Python API (make_config, validate) names the field."""
    import dataclasses

    from trainer_minimal.config import make_config, validate

    assert main(["train", "--out", str(tmp_path / "run"), *argv]) == 2
    assert capsys.readouterr().err == f"trainer-minimal: error: {flags_said}\n"
    if "--seed" not in argv:  # a sweep's flag is --seeds (test_a_sweep_given_a_negative_seed_names_the_flag...)
        assert main(["sweep", "--presets", "grpo", "--seeds", "0", "--out", str(tmp_path / "sweep"), *argv]) == 2
        assert capsys.readouterr().err == f"trainer-minimal: error: {flags_said}\n"
    settings = dict(zip(argv[::2], argv[1::2], strict=True))
    fields = {flag.removeprefix("--").replace("-", "_"): value if flag in ("--device", "--advisor-priors") else int(value)
              for flag, value in settings.items()}
    with pytest.raises(ValueError, match=f"^{re.escape(fields_said)}$"):
        make_config(**fields)
    with pytest.raises(ValueError, match=f"^{re.escape(fields_said)}$"):
        validate(dataclasses.replace(make_config(), **fields))
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def checked_outside_validate(check, cfg):
    """The refusal of a check of a run's settings made outside validate() (its machine's, its files'), by name."""
    from trainer_minimal import config, train
    from trainer_minimal.tasks import build_datasets

    if check == "check_sequences_fit":
        return train.check_sequences_fit(cfg, *build_datasets(cfg))
    return getattr(config if hasattr(config, check) else train, check)(cfg)


@pytest.mark.parametrize("argv, fields, check, flags_said, fields_said", [
    (["--model-path", "/nonexistent/model"], dict(model_path="/nonexistent/model"), "check_model_path",
     "--model-path '/nonexistent/model' is not a local Hugging Face model folder (no config.json)",
     "model_path='/nonexistent/model' is not a local Hugging Face model folder (no config.json)"),
    (["--advisor-every", "1", "--advisor-reference", "/nonexistent/runs.csv"],
     dict(advisor_every=1, advisor_reference="/nonexistent/runs.csv"), "check_advisor_reference",
     "--advisor-reference '/nonexistent/runs.csv' does not exist", "advisor_reference '/nonexistent/runs.csv' does not exist"),
    (["--device", "cuda:1"], dict(device="cuda:1"), "check_device",
     "--device 'cuda:1' but this torch build sees no CUDA device", "device='cuda:1' but this torch build sees no CUDA device"),
    (["--train-size", "10000000"], dict(train_size=10000000), "check_memory_fits",
     "the task data 2.33 GiB (--train-size 10000000, --val-size 300)), more than the 1 GiB this machine has",
     "the task data 2.33 GiB (train_size=10000000, val_size=300)), more than the 1 GiB this machine has"),
    (["--tasks", "sort", "--max-size", "61"], dict(tasks="sort", max_size=61), "check_sequences_fit",
     "with --tasks 'sort' up to --max-size 61: lower --max-size or --gen-len",
     "with tasks='sort' up to max_size=61: lower max_size or gen_len"),
], ids=["model_path", "advisor_reference", "device", "memory", "sequences"])
def test_a_setting_refused_outside_validate_is_named_by_its_flag_at_the_command_line_and_by_its_field_in_python(
        tmp_path, capsys, monkeypatch, argv, fields, check, flags_said, fields_said):
    """The checks of a run's machine and files, made where a run starts and a sweep is planned (not in validate():
    they ask torch, read files, build the data), named fields at the command line: `--lr 0` said "--lr must be >
    0" and `--device cuda:1` "device='cuda:1' but ...". They name the flag there, as validate()'s checks do, and
    the field in the Python API. This machine is made to have 1 GiB and no CUDA device."""
    import torch

    from trainer_minimal import train
    from trainer_minimal.config import make_config

    monkeypatch.setattr(train, "machine_memory", lambda: 2**30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cache = ["--warmstart-cache", str(tmp_path / "cache")]
    for command in (["train", "--out", str(tmp_path / "run")],
                    ["sweep", "--presets", "scalerl", "--seeds", "0", "--out", str(tmp_path / "sweep")]):
        assert main([*command, *cache, *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("trainer-minimal: error: ") and flags_said in err and err.count("\n") == 1, err
    with pytest.raises(ValueError) as refused:
        checked_outside_validate(check, make_config(**fields))
    assert fields_said in str(refused.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("name", ["lr", "warmup_lr", "cispo_max", "clip_high"])
def test_a_setting_past_float32_is_refused_naming_it_before_any_update(name):
    """`--lr 1e39` (--warmup-lr, --cispo-max, --clip-high 1e300: finite, so taken) crashed in torch at the first
    update with "value cannot be converted to type float without overflow", a traceback: these reach float32
    tensors, a learning rate divided by AdamW's 1 - beta1 = 0.1 first. Refused by the config's checks; 1e37 is taken."""
    from trainer_minimal.config import make_config

    assert getattr(make_config(**{name: 1e37}), name) == 1e37
    with pytest.raises(ValueError, match=rf"^{name} must be at most 1e\+37 \(it reaches float32 tensors\), got 1e\+300$"):
        make_config(**{name: 1e300})


@pytest.mark.parametrize("argv, fields, said", [
    (["--weight-decay", "1e4"], dict(weight_decay=1e4),
     "{lr} x {weight_decay} must be below 1 (AdamW shrinks every weight by that share at each step), got 0.0005 x 10000"),
    (["--lr", "0.01", "--weight-decay", "100"], dict(lr=0.01, weight_decay=100.0),
     "{lr} x {weight_decay} must be below 1 (AdamW shrinks every weight by that share at each step), got 0.01 x 100"),
    (["--temperature", "1e-300"], dict(temperature=1e-300),
     "{temperature} must be at least 1e-06 (below it sampling is greedy all the same, and the logits divided by it "
     "overflow), got 1e-300"),
], ids=["weight_decay", "lr", "temperature"])
def test_settings_that_make_training_diverge_at_once_are_refused_naming_them(tmp_path, capsys, argv, fields, said):
    """`--weight-decay 1e4` (typed for 1e-4) or `--temperature 1e-300` trained to NaN weights and a pass rate of 0,
    and the run ended as if it had finished, exit 0. Refused before the run folder is made; the edge is taken."""
    from trainer_minimal.config import make_config

    assert main(["train", "--out", str(tmp_path / "run"), *argv]) == 2
    flags = {name: f"--{name.replace('_', '-')}" for name in ("lr", "weight_decay", "temperature")}
    assert capsys.readouterr().err == f"trainer-minimal: error: {said.format(**flags)}\n"
    with pytest.raises(ValueError, match=f"^{re.escape(said.format(**{name: name for name in flags}))}$"):
        make_config(**fields)
    assert not (tmp_path / "run").exists()
    assert make_config(lr=0.01, weight_decay=99.0).weight_decay == 99.0 and make_config(temperature=1e-6).temperature == 1e-6


def test_resume_without_a_checkpoint_names_the_folder_and_says_how_to_start_it(tmp_path, capsys):
    """Exit 2 naming the folder it looked in; the hint to start it again only where the run stopped before its
    first checkpoint (config.json alone), not where an evaluation was logged (a --slim sweep's finished run)
    (kills the mutant that left the folder out of the message)."""
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert f"trainer-minimal: error: --resume: no checkpoint in {run} (no ckpt.pt)\n" == capsys.readouterr().err
    run.mkdir()
    (run / "config.json").write_text("{}")
    assert main(["train", "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"no checkpoint in {run} (no ckpt.pt); it was stopped before its first checkpoint" in err
    assert f"(its flags are in {run / 'config.json'}) starts it again" in err
    (run / "evals.jsonl").write_text("")
    assert main(["train", "--out", str(run), "--resume"]) == 2
    assert f"no checkpoint in {run} (no ckpt.pt)\n" in capsys.readouterr().err


def test_presets_lists_each_recipe_with_its_overrides_and_exits_0(capsys):
    """`trainer-minimal presets` is a listing, not an error: exit 0, a line per preset, the ScaleRL one saying
    it is the defaults (kills the mutant that exited 1 after listing)."""
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(PRESETS)
    assert lines[list(PRESETS).index("scalerl")].split() == ["scalerl", "(the", "defaults:", "ScaleRL)"]
    assert lines[list(PRESETS).index("scalerl-g4")].split() == ["scalerl-g4", "{'group_size':", "4}"]


def test_a_bad_flag_of_a_process_that_cannot_reach_a_store_is_said_without_importing_torch(tmp_path):
    """WORLD_SIZE set (a shell left from a launch, a scheduler's environment) but no MASTER_ADDR: there is no
    store to tell the other ranks through, so argparse's error is said at once, before torch is imported
    (seconds; kills the mutant that imported the trainer to tell the others whenever WORLD_SIZE > 1)."""
    code = ("import sys; from trainer_minimal.cli import main; code = main(['train', '--lr', 'x']); "
            "print(code, 'torch' in sys.modules, 'trainer_minimal.train' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    env.update(WORLD_SIZE="2", RANK="1", PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "argument --lr: invalid float value: 'x'" in done.stderr


@pytest.mark.parametrize("change, said", [
    ("reference removed", "--advisor-reference {reference!r} does not exist"),
    ("run started", "{run} already holds a run (evals.jsonl or ckpt.pt); pass --resume"),
])
def test_a_run_folder_changed_after_the_command_s_checks_is_refused_in_one_line_naming_the_flags(tmp_path, capsys,
                                                                                              monkeypatch, change,
                                                                                              said):
    """train() checks the run folder again (preflight) where the run starts, after the command's own checks: what
    changed in between (a file removed, another run started in the folder) was refused there as a traceback naming
    the field (advisor_reference ...). The same refusal as the first check's: one line, exit 2, naming the flag."""
    from trainer_minimal import cli

    run, reference = tmp_path / "run", tmp_path / "runs.csv"
    reference.write_text("recipe\n")
    checked = cli.agreed_train_config

    def changed_after_the_checks(args):
        cfg = checked(args)
        if change == "reference removed":
            reference.unlink()
        else:  # another command started a run in the folder
            run.mkdir()
            (run / "evals.jsonl").write_text("")
        return cfg

    monkeypatch.setattr(cli, "agreed_train_config", changed_after_the_checks)
    assert main(["train", "--out", str(run), "--warmstart-cache", str(tmp_path / "cache"), "--advisor-every", "1",
                 "--advisor-reference", str(reference)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainer-minimal: error: ") and err.count("\n") == 1, err
    assert said.format(run=run, reference=str(reference)) in err
    assert not (run / "ckpt.pt").exists()
    if change == "reference removed":  # the Python API names the field
        from trainer_minimal.config import make_config
        from trainer_minimal.train import train

        with pytest.raises(ValueError, match=re.escape(f"advisor_reference {str(reference)!r} does not exist")):
            train(make_config(out=str(tmp_path / "api"), advisor_every=1, advisor_reference=str(reference)))


def test_a_sweep_s_run_another_sweep_started_with_other_settings_meanwhile_is_refused_naming_the_flags(
        tmp_path, capsys, monkeypatch):
    """Two sweeps into one folder at once both plan their shared runs as new; a run the other started since, with
    other settings, is refused as the plan would have refused it (tests/test_trainer_run.py: in Python, naming
    the fields). At the command line: one line naming the flag, the sweep's other runs launched, the sweep's exit
    for a run refused (1, as for a run whose `train` refused it), and the other sweep's run as it left it: its
    files, and its rows in the sweep's runs.csv. The runs are faked; the other sweep starts its run while this
    one builds its warm starts."""
    import json

    import trainer_minimal.sweep as sweep_module

    out, launched, real_popen = tmp_path / "sweep", [], subprocess.Popen

    def fake_run(cmd, **kwargs):
        launched.append(cmd)
        return real_popen([sys.executable, "-c", "pass"], **kwargs)

    theirs = out / "grpo-s1"

    def other_sweep_starts_grpo_s1(configs):
        cfg = next(cfg for cfg in configs if cfg.run_id == "grpo-s1")
        theirs.mkdir(parents=True)
        (theirs / "config.json").write_text(to_json(dataclasses.replace(cfg, lr=1e-3)) + "\n")
        (theirs / "ckpt.pt").write_bytes(b"their checkpoint")
        (theirs / "evals.jsonl").write_text(json.dumps(dict(run_id="grpo-s1", recipe="grpo", seed=1, step=2,
                                                            compute=1.0, metric=0.25, n_eval=200)) + "\n")
        (theirs / "stdout.log").write_text("their run's own line\n")

    monkeypatch.setattr(subprocess, "Popen", fake_run)
    monkeypatch.setattr(sweep_module, "prepare_warm_starts", other_sweep_starts_grpo_s1)
    code = main(["sweep", "--presets", "grpo", "--seeds", "0,1", "--out", str(out), "--warmstart-cache",
                 str(tmp_path / "cache"), "--max-steps", "4", "--eval-every", "2", "--lr", "0.002", "--tasks", "rev",
                 "--max-size", "1", "--train-size", "400", "--val-size", "50", "--d-model", "32", "--n-layer", "1",
                 "--n-head", "2", "--batch-size", "8", "--group-size", "4"])
    assert code == 1
    err = capsys.readouterr().err
    refused = [line for line in err.splitlines() if "grpo-s1 was refused" in line]
    assert refused == [f"[sweep]   grpo-s1 was refused: {theirs} was started since this sweep was planned, with "
                       "other settings: --lr 0.001 -> 0.002"], err
    assert "[sweep] refused runs: grpo-s1 (" in err and "failed runs" not in err, err  # a rerun would refuse it again
    assert [cmd[cmd.index("--out") + 1] for cmd in launched] == [str(out / "grpo-s0")]  # grpo-s1 not launched
    assert (theirs / "ckpt.pt").read_bytes() == b"their checkpoint"
    assert json.loads((theirs / "config.json").read_text())["lr"] == 1e-3
    assert (theirs / "stdout.log").read_text() == "their run's own line\n"
    assert "0.25" in (out / "runs.csv").read_text().splitlines()[1]  # their row, in the table


def test_a_refusal_s_changed_settings_are_decided_once_and_said_by_the_caller_s_names():
    """A resume's (and a sweep re-run's) refusal decides on the fields that define the run and differ (not those a
    resume may change: max_steps, out), then says the same list, by field or by flag: the list was computed
    twice, once to decide and once per message."""
    from trainer_minimal.config import (
        FIELD_NAMES,
        FLAG_NAMES,
        changed_run_defining_fields,
        make_config,
        settings_changed,
    )

    saved = make_config(out="a")
    cfg = dataclasses.replace(saved, lr=1e-3, seed=7, max_steps=2, out="b", fp32_logits=False)
    changed = changed_run_defining_fields(saved, cfg)
    assert changed == ["seed", "fp32_logits", "lr"]  # in Config's order
    assert settings_changed(FIELD_NAMES, saved, cfg, changed) == ["seed 0 -> 7", "fp32_logits True -> False",
                                                                  "lr 0.0005 -> 0.001"]
    assert settings_changed(FLAG_NAMES, saved, cfg, changed) == ["--seed 0 -> 7", "--fp32-logits True -> False",
                                                                 "--lr 0.0005 -> 0.001"]
    assert changed_run_defining_fields(saved, dataclasses.replace(saved, max_steps=2, out="b")) == []
