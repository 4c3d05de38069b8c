"""Command line: `trainer-minimal train ...` (one run) and `trainer-minimal sweep ...` (recipes x seeds).

Every Config field is a flag (--field-name), generated from the dataclass; its help text is the
field's one-line comment in config.py. Bad input (unknown preset or flag, invalid value, --resume
without a checkpoint) is refused with a message and exit code 2 before any compute is spent.
--resume on a run that already ended (stopped by the advisor, or at --max-steps) says so and exits 0.
Ctrl-C, SIGTERM and SIGHUP stop a run or a sweep (and its runs) at their last checkpoint, with a line
saying how to go on; exit 128 + the signal (130, 143, 129).

  trainer-minimal train --preset scalerl --max-steps 400 --eval-every 16 --out out/scalerl-s0
  trainer-minimal train --out out/scalerl-s0 --resume            # after a crash
  trainer-minimal sweep --presets grpo,dapo,cispo --seeds 0,1,2 --out out/sweep --workers 2
  trainer-minimal presets                                          # list the named recipes
"""

import argparse
import dataclasses
import inspect
import os
import re
import signal
import sys
import time
from contextlib import contextmanager

from . import config as config_module
from .config import (
    CHOICES,
    FLAG_NAMES,
    PRESETS,
    Config,
    SettingError,
    advisor_idle_note,
    changed_run_defining_fields,
    check_launch_environment,
    field_names,
    make_config,
    process_rank,
    settings_changed,
    validate,
)

SWEEP_FIXED = ("out", "preset", "seed", "recipe", "run_id", "resume")  # set by the sweep per run
ADVISOR_SETTINGS = ("advisor_reference", "advisor_rules", "advisor_priors")  # need advisor_every > 0


def field_help():
    """{field: its one-line comment} read from the dataclass source, so help never drifts."""
    source = inspect.getsource(config_module.Config)
    return dict(re.findall(r"^\s+(\w+): \w+ = .*?#\s*(.*)$", source, flags=re.M))


def add_config_flags(parser, exclude=(), helps=None):
    helps = {**field_help(), **(helps or {})}
    for f in dataclasses.fields(Config):
        if f.name in exclude:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = type(f.default)
        if kind is bool:  # default=None marks "not given", so argparse cannot show the real default itself
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                help=f"{helps.get(f.name, '')} (default {'on' if f.default else 'off'})")
        else:
            parser.add_argument(flag, type=kind, default=None, choices=CHOICES.get(f.name),
                                metavar=None if f.name in CHOICES else kind.__name__.upper(),
                                help=f"{helps.get(f.name, '')} (default {f.default!r})")


def explicit_overrides(args, exclude=()):
    """Flags the user actually gave (argparse leaves the others at None)."""
    return {k: v for k, v in vars(args).items() if k in field_names() and k not in exclude and v is not None}


def build_parser(on_error=None):
    """The command line's parser. on_error(message): called with argparse's refusal of the command line (a
    value of the wrong type, an unknown or repeated flag) before it is said and the process exits 2."""
    # "--clip-high -1e-3" reaches the range check, not argparse's "expected one argument"
    from forecast.cli import NumbersParser

    class Parser(NumbersParser):  # a class of its own for each parser: on_error is this command line's
        def error(self, message):
            if on_error is not None:
                on_error(message)
            super().error(message)

    parser = Parser(prog="trainer-minimal", description="A compact RL trainer (see train.py).")
    sub = parser.add_subparsers(dest="command", required=True)
    train_p = sub.add_parser("train", help="one run; every config field is a flag",
                             epilog="The defaults shown are the ScaleRL defaults; a --preset changes some of them "
                                    "(`trainer-minimal presets` lists what each one sets), and a flag given here wins over both.")
    add_config_flags(train_p)
    sweep_p = sub.add_parser("sweep", help="recipes x seeds, one folder per run, plus DIR/runs.csv",
                             epilog="The defaults shown are the ScaleRL defaults; each preset changes some of them "
                                    "(`trainer-minimal presets` lists what each one sets), and a flag given here "
                                    "wins over both, for every run of the sweep.")
    sweep_p.add_argument("--presets", required=True, help="comma list of preset names")
    sweep_p.add_argument("--seeds", default="0,1,2", help="comma list of integer seeds (default 0,1,2)")
    sweep_p.add_argument("--out", required=True, help="sweep folder")
    sweep_p.add_argument("--workers", type=int, default=1, help="runs at a time (processes) (default 1)")
    sweep_p.add_argument("--slim", action="store_true",
                         help="when done, delete checkpoints, training logs and the warm-start cache")
    # the sweep keeps one cache for all its runs in its own folder (sweep.plan_sweep), not one per run
    add_config_flags(sweep_p, exclude=SWEEP_FIXED,
                     helps={"warmstart_cache": "folder of cached warm starts; empty = OUT/_warmstart"})
    sub.add_parser("presets", help="list the named recipes and their overrides")
    parser.commands = sub.choices  # name -> its parser, for errors in the command's own words
    return parser


@contextmanager
def settings_named_by_flags():
    """A refusal of the settings (config.SettingError: every check of validate(), and those of a run's machine and
    folder: check_device, check_model_path, train.check_memory_fits, train.preflight ...) names each by the flag the user
    typed (--seed, --val-size 1000), where the Python API names its field (seed, val_size=1000). Where the
    command line resolves its settings (a run's, a sweep's), so that every word of it, a rank's to the others
    under torchrun too, is the flags'."""
    try:
        yield
    except SettingError as err:
        raise ValueError(err.with_flags()) from None


@settings_named_by_flags()
def resolve_train_config(args):
    """Config for `train`: preset + flags, or on --resume the run's saved config + flags (the saved
    config is config.json, or the checkpoint's own where config.json was deleted)."""
    overrides = explicit_overrides(args)
    if overrides.get("resume"):
        out = overrides.get("out", Config.out)
        saved, ckpt = os.path.join(out, "config.json"), os.path.join(out, "ckpt.pt")
        if not os.path.exists(ckpt):
            # config.json alone (no evaluation logged, no summary): stopped in its warm start or step-0
            # evaluation, before the first checkpoint; a --slim sweep's finished run keeps its evals.jsonl
            fresh = os.path.exists(saved) and not any(os.path.exists(os.path.join(out, name))
                                                      for name in ("evals.jsonl", "summary.json"))
            started = (f"; it was stopped before its first checkpoint: the command that started it (its flags are "
                       f"in {saved}) starts it again" if fresh else "")
            raise ValueError(f"--resume: no checkpoint in {out} (no ckpt.pt){started}")
        from .train import saved_run_config

        # where config.json was deleted, the checkpoint holds the run's settings (the ones a resume is checked
        # against), and a resume that trains writes config.json again from them (see config_restored_note)
        saved_cfg = saved_run_config(out)
        if overrides.get("advisor_every") == 0:  # turning the advisor off turns off its settings too
            overrides = {**{k: "" for k in ADVISOR_SETTINGS}, **overrides}
        cfg = dataclasses.replace(saved_cfg, **overrides)
        changed = changed_run_defining_fields(saved_cfg, cfg)
        if changed:
            raise SettingError(lambda n: f"--resume: the run in {out} was started with other settings "
                                         f"({'; '.join(settings_changed(n, saved_cfg, cfg, changed))}); these cannot "
                                         "change mid-run (only where and how long it trains, how often it is evaluated "
                                         "and its advisor can): start a new run with another --out")
        validate(cfg, saved_max_steps=saved_cfg.max_steps)
        return cfg
    return make_config(**overrides)


def device_kind(device):
    """cpu or cuda: what a rank of a multi-process run takes from --device. Each rank trains on
    cuda:LOCAL_RANK whatever index it is given (train.setup_distributed), so the index is no setting."""
    return device.partition(":")[0]


# Settings only rank 0 acts on: it alone writes the run folder and the warm-start cache, logs the run's rows and
# lines under its names, and asks the advisor (train.run_training, train.warm_start, train.advise). Another
# rank reads none of them, so its own value of one changes nothing there, and was said to be replaced by
# rank 0's: an --out written otherwise for the same folder ('run' and './run/'), or another machine's.
# advisor_every is not one: every rank follows the advisor's turns (train.advisor_due), to hear its answer.
RANK_0_ONLY = ("out", "recipe", "run_id", "warmstart_cache",
               "advisor_reference", "advisor_budget", "advisor_rules", "advisor_priors")


def same_in_effect(name, value, theirs):
    """Whether this rank's value of a setting does what rank 0's does on this rank. --device's index is no
    difference (device_kind); a model folder is the one it names here, where this rank loads rank 0's
    (relative to this rank's working directory): the same folder written otherwise (a relative or absolute
    path, a trailing slash, a symlink) is the same. An empty model_path is the tiny GPT, no folder."""
    if name == "device":
        return device_kind(value) == device_kind(theirs)
    if name == "model_path" and value and theirs:
        return os.path.realpath(value) == os.path.realpath(theirs)
    return value == theirs


def flags_replaced_by_rank_0(own, given, decided):
    """The settings this rank was started with that rank 0's decided settings replace, as flags:
    ["--lr 0.001 (rank 0's: 0.0005)", ...]. own: this rank's resolved Config (a new run: every setting,
    its preset and defaults included), or None on --resume, where the run's settings are rank 0's to
    read, so only the flags given (`given`, explicit_overrides) are compared. Settings only rank 0 acts
    on (RANK_0_ONLY) are not compared, nor values that do the same here (same_in_effect)."""
    mine = given if own is None else dataclasses.asdict(own)
    replaced = []
    for name, value in mine.items():
        theirs = getattr(decided, name)
        if name not in RANK_0_ONLY and not same_in_effect(name, value, theirs):
            if name == "device":
                value, theirs = device_kind(value), device_kind(theirs)
            replaced.append(f"--{name.replace('_', '-')} {value!r} (rank 0's: {theirs!r})")
    return replaced


def agreed_train_config(args):
    """The Config of `train`, checked (train.preflight). Under torchrun rank 0 alone reads the run folder
    (only its machine may have it: a multi-machine torchrun with --out on each machine's own disk): on
    --resume the other ranks are sent the run's settings, and a refusal of rank 0's ends them too, with
    its message. A new run's settings are its flags', which every rank resolves and checks on its own
    machine before it waits for rank 0 (a refusal there is told to rank 0, which ends too: told_rank_0; rank 0's to the others: told_the_other_ranks). Every rank checks the settings sent on its own machine (a new run's
    only where they differ from its own, checked already) and answers rank 0: a refusal there ends rank 0
    too, naming that rank and its message. Rank 0's settings are the run's on every rank: a rank launched
    by hand with other flags says which, in one warning, before it checks them (flags_replaced_by_rank_0).
    Each rank's machine is checked once with the same settings: train() does not check it again."""
    from .train import (
        check_this_machine,
        decided_by_rank_0,
        preflight,
        told_rank_0,
        told_the_other_ranks,
    )

    check_launch_environment()  # what the rest reads to know this rank and whom to tell or wait for
    own = None
    if not explicit_overrides(args).get("resume"):  # on every rank before it joins: a refusal is told to the others
        try:  # a value its flags refuse (validate) as much as what its machine lacks: either ends it before it joins
            own = resolve_train_config(args)
            with settings_named_by_flags():  # the settings its machine lacks too (a --device, a --batch-size)
                check_this_machine(own)
        except (Exception, KeyboardInterrupt) as err:  # the others wait for this rank at the store: they are told why it
            # will not come, a stop (Ctrl-C, SIGTERM) too, which waits a moment at most to tell them, then goes on
            told_rank_0("config", err)  # the other ranks tell rank 0, and rank 0 tells them
            told_the_other_ranks("config", err)
            raise

    def checked():
        cfg = own or resolve_train_config(args)
        with settings_named_by_flags():  # before rank 0 sends its refusal to the others
            preflight(cfg, this_machine=own is None)  # a new run's own settings were checked just above
        return cfg

    def checked_here(decided):
        # under a launch by hand each rank has its own command line, and rank 0's settings are the run's: said
        # before they are checked here, where a model folder or device of rank 0's may be what this machine lacks
        replaced = flags_replaced_by_rank_0(own, explicit_overrides(args), decided)
        if replaced:
            print(f"trainer-minimal: warning: rank {process_rank()} was started with other settings than rank 0: "
                  f"{'; '.join(replaced)}; rank 0's are used", file=sys.stderr, flush=True)
        # a new run's own settings were checked here before it joined: rank 0's are checked again only where they
        # differ (a setting left out of the comparison, cli.RANK_0_ONLY, is none that check_this_machine reads)
        if own is None or replaced:
            with settings_named_by_flags():  # before this rank sends its refusal to rank 0
                preflight(decided)

    # the other ranks check their machine's part of rank 0's settings (on --resume they know them only now; a
    # new run's may differ from this rank's own flags under a launch by hand): a refusal there ends rank 0 too
    return decided_by_rank_0("config", checked, check_here=checked_here)


def config_restored_note(cfg):
    """What a resume does without the run's config.json (deleted), once it is known to go ahead: its
    settings come from the checkpoint, and config.json is written again from them unless the run has
    ended (a resume of an ended run writes nothing). "" when config.json is there."""
    from .train import ended_note, run_paths

    paths = run_paths(cfg)
    if not cfg.resume or os.path.exists(paths["config"]):
        return ""
    said = f"{paths['config']} is missing: the run's settings are read from its checkpoint {paths['ckpt']}"
    if ended_note(cfg):
        return f"{said}; the run has ended, so nothing is written (config.json is written again when a resume trains)"
    return f"{said}, and config.json is written again from them"


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a scheduler's time limit, `kill`, a closed ssh terminal), raised where a
    Ctrl-C would be, so that a run and a sweep stop as they do on Ctrl-C: a sweep stops its runs (by
    default they trained on as orphans holding their folders' locks, and the rerun was refused)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


SAME_STOP_S = 1.0  # a stop signal this soon after the one that stopped the command is that stop said again
_stop_raised_at = None  # time.monotonic() of the last stop raised, or None


def _raise_stopped(signum, frame):
    """Ctrl-C, SIGTERM or SIGHUP -> KeyboardInterrupt (Stopped for the last two), except within SAME_STOP_S of
    the one before. torchrun signalled twice in a moment (a wrapper such as `timeout` and the user both, a
    scheduler that signals every process of the job) passes on SIGINT and then SIGTERM to every rank
    within milliseconds, and a rank waiting in a collective takes them together when the others end:
    the second broke into the stop of the first with a traceback in place of the line saying how to go
    on. Only that soon: a Ctrl-C swallowed on the way (a library that ends its work on one) leaves the
    next one working, as does a sweep's SIGINT to a run that has not stopped within its grace
    (sweep.STOP_GRACE_S)."""
    global _stop_raised_at
    now = time.monotonic()
    if _stop_raised_at is not None and now - _stop_raised_at < SAME_STOP_S:
        return
    _stop_raised_at = now
    raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)


@contextmanager
def stop_signals_as_ctrl_c():
    """SIGTERM and SIGHUP raise Stopped while the command runs, and Ctrl-C KeyboardInterrupt as it does
    (see _raise_stopped for what they add). A signal the user ignores (nohup ignores SIGHUP) stays
    ignored, and the handlers are put back after (main() may run in a test)."""
    global _stop_raised_at
    _stop_raised_at = None  # a stop of an earlier command (main() may run in a test) is not this one's
    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):  # Windows has no SIGHUP
        signum = getattr(signal, name, None)
        default = signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL
        if signum is None or signal.getsignal(signum) is not default:
            continue
        try:
            previous[signum] = signal.signal(signum, _raise_stopped)
        except ValueError:  # not the main thread: signals stay as they are
            break
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def interrupted_exit(err):
    """(what stopped the command, exit code): 128 + the signal, as a shell reports a process it ended."""
    if isinstance(err, Stopped):
        return f"stopped by {signal.Signals(err.signum).name}", 128 + err.signum
    return "interrupted", 128 + signal.SIGINT


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    # from the start: a stop while torch is imported and the command checked (seconds; a sweep stops a run that
    # has just started) was a KeyboardInterrupt traceback, exit -2, or for SIGTERM no word at all, exit -15
    with stop_signals_as_ctrl_c():
        try:
            checked = checked_command(argv)
        except KeyboardInterrupt as e:  # the checks write nothing
            started = "the sweep" if argv[:1] == ["sweep"] else "the run"
            return said_stop(e, f" before {started} started (nothing was written); the same command again starts it")
        if isinstance(checked, int):
            return checked
        return run_command(*checked)


def told_the_launch_of(flag_error):
    """argparse's refusal of a `train` command line (flag_error: its message) ends this process before any of
    the trainer's code, exit 2. Under a launch by hand the others waited for it at the store: rank 0 for
    JOIN_WAIT_S (300 s), then said only 'rank 1 of 2 did not join', and the others as long for a rank 0 that
    never opened it. They are told first, as of a refusal of its flags' values (agreed_train_config): rank 0
    ends at once with 'rank 1 of 2 refused: <the message>', the others with rank 0's. Nothing, and torch not
    imported, for a single process or without a store to reach (MASTER_ADDR or MASTER_PORT unset)."""
    try:  # a RANK that is no number too: telling crashed in int(RANK), a traceback in place of argparse's error
        world = int(os.environ.get("WORLD_SIZE", "1"))
        int(os.environ.get("RANK", "0"))
    except ValueError:  # not a launch this process can take part in: its own error is said alone
        return
    if world == 1 or not (os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT")):
        return
    from .train import told_rank_0, told_the_other_ranks

    refused = ValueError(flag_error)
    told_rank_0("config", refused)  # the other ranks tell rank 0, and rank 0 tells them
    told_the_other_ranks("config", refused)


def checked_command(argv):
    """(args, cfg, plan) of a command whose arguments and checks passed, or its exit code where it ends here:
    refused (2, said), `presets` and --help (0)."""
    try:
        parser = build_parser(on_error=told_the_launch_of if argv[:1] == ["train"] else None)
        args = parser.parse_args(argv)
        # `--lr 1e-5 ... --lr 1e-4`: argparse keeps the last without a word, and a run is hours
        from forecast.cli import repeated_flag

        command_parser = parser.commands[args.command]
        repeated = repeated_flag(command_parser, argv)
        if repeated:
            command_parser.error(f"{repeated} is given more than once; give it once (only the last would count)")
    except SystemExit as e:  # unknown flag or bad type (argparse printed why): 2; --help: 0
        return e.code
    cfg = plan = None
    try:
        if args.command == "presets":
            for name, overrides in PRESETS.items():
                print(f"{name:16s} {overrides or '(the defaults: ScaleRL)'}")
            return 0
        if args.command == "sweep":
            from .sweep import plan_sweep

            with settings_named_by_flags():
                plan = plan_sweep(args.presets, args.seeds, args.out, explicit_overrides(args, SWEEP_FIXED),
                                  workers=args.workers)
            idle = [advisor_idle_note(p["cfg"], FLAG_NAMES) for p in plan if p["state"] == "new"]
        else:
            cfg = agreed_train_config(args)  # torch is imported only once the arguments are known to be sane
            idle = [] if cfg.resume else [advisor_idle_note(cfg, FLAG_NAMES)]
            from .train import process_rank

            # said once under torchrun, by the rank that reads the run folder
            restored = config_restored_note(cfg) if process_rank() == 0 else ""
            if restored:
                print(f"trainer-minimal: {restored}", file=sys.stderr)
        for note in dict.fromkeys(note for note in idle if note):  # a sweep's runs mostly share one
            print(f"trainer-minimal: warning: {note}", file=sys.stderr)
    except ValueError as e:
        print(f"trainer-minimal: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the machine's (too many open files, a failing disk), said without a traceback
        return said_resource_error(e, "")
    except RuntimeError as e:  # another rank never joined the store, or it ended while this one waited on it
        return said_lost_rank(e)
    return args, cfg, plan


def run_command(args, cfg, plan):
    # Ctrl-C (or SIGTERM, SIGHUP: see Stopped): one line saying how to go on, not a traceback (from every
    # process of a sweep); the logs are append-only and the checkpoint atomic, so nothing written is lost.
    if args.command == "sweep":
        from .sweep import run_sweep
        from .train import RefusedWhereItStarts

        again = "the same command again resumes the sweep (finished runs are skipped)"
        try:
            return run_sweep(plan, args.out, args.workers, slim=args.slim, names=FLAG_NAMES)
        except RefusedWhereItStarts as e:  # a model refused as its warm start loads it, before any run started
            print(f"trainer-minimal: error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            what, code = interrupted_exit(e)
            print(f"trainer-minimal: {what}; {again}", file=sys.stderr)
            return code
        except OSError as e:  # runs.csv on a full disk, too many open files to start a run: its runs were stopped
            return said_resource_error(e, f"; the runs' own folders hold what they wrote: {again} and writes runs.csv")
    from .logging_io import RunFolderBusy
    from .train import (
        RefusedOnAnotherRank,
        RefusedOnRank0,
        RefusedWhereItStarts,
        TrainingDiverged,
        UnreadableCheckpoint,
        end_distributed,
        train,
    )

    try:
        train(cfg, machine_checked=True, names=FLAG_NAMES)  # by agreed_train_config
    except (RunFolderBusy, UnreadableCheckpoint, RefusedOnRank0, RefusedOnAnotherRank, RefusedWhereItStarts) as e:
        print(f"trainer-minimal: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # a full disk mid-run: the logs are append-only (a torn last line is dropped on --resume) and the
        # checkpoint is replaced atomically, so the run goes on from its last checkpoint once there is room
        return said_resource_error(e, how_to_go_on(cfg))
    except KeyboardInterrupt as e:
        return said_stop(e, how_to_go_on(cfg))
    except TrainingDiverged as e:  # every rank says it: each stopped at the same step
        print(f"trainer-minimal: error: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # another rank ended mid-run (a crash): its output holds the real error
        return said_lost_rank(e, how_to_go_on(cfg) if process_rank() == 0 else "")  # rank 0's folder
    finally:
        end_distributed()
    return 0


def said_lost_rank(err, then=""):
    """Exit 1 with one line where another rank of a multi-process run never joined, or ended (train.RankLost,
    or torch's error of a connection it lost), which was a torch traceback (DistNetworkError, gloo's
    'Connection reset by peer') on the rank left; any other error is re-raised, as a bug's is."""
    from .train import RankLost, lost_rank_line

    line = str(err) if isinstance(err, RankLost) else lost_rank_line(err, process_rank(),
                                                                      int(os.environ.get("WORLD_SIZE", "1")))
    if line is None:
        raise err
    print(f"trainer-minimal: error: {line}{then}", file=sys.stderr, flush=True)
    return 1


def said_stop(err, then):
    """The exit code of a command stopped by Ctrl-C, SIGTERM or SIGHUP (err), said in one line: what stopped
    it, then `then` (how to go on)."""
    what, code = interrupted_exit(err)
    if process_rank() != 0:
        # under torchrun, said once: every process is stopped, and one that torchrun ended because another
        # failed (its run folder in use, say) spoke of a stop nobody asked for, and of a resume
        return code
    print(f"trainer-minimal: {what}{then}", file=sys.stderr)
    return code


def how_to_go_on(cfg):
    """How a run stopped mid-way goes on, said after what stopped it."""
    if os.path.exists(os.path.join(cfg.out, "ckpt.pt")):
        return f"; `trainer-minimal train --out {cfg.out} --resume` goes on from the last checkpoint"
    # during the warm start or the step-0 evaluation: --resume would be refused (no checkpoint)
    return " before the run's first checkpoint (nothing to resume); the same command again starts it"


def said_resource_error(err, then):
    """Exit 1 with one line for an OSError of the machine (forecast.io.RESOURCE_ERRORS: a full disk, a
    read-only file system, too many open files), which was a traceback (torch's 'basic_ios::clear:
    iostream error' for a checkpoint on a full disk); any other OSError is re-raised, as a bug's is."""
    from forecast.io import resource_error_message

    message = resource_error_message(err)
    if message is None:
        raise err
    try:  # stderr may be a file on the full disk itself (a sweep's stdout.log): nothing more can be said then
        print(f"trainer-minimal: error: {message}{then}", file=sys.stderr, flush=True)
    except OSError:
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main())
