"""The library's windows on warnings (a check's data warnings recorded, a compile's or a summary's
warnings kept quiet) hold for the thread inside them alone. warnings.catch_warnings swaps the
process's warning state: what other threads warned meanwhile was swallowed or kept as the window's
own, and two windows of two threads ending in the other order left the process silenced. Each test
forces the overlap with events, so that none rests on luck."""

import threading
import warnings

import pytest

WAIT_S = 60


class Beside:
    """Runs `work` in another thread, started now; join() re-raises what it raised there."""

    def __init__(self, work, name=None):
        self.errors = []

        def run():
            try:
                work()
            except BaseException as err:  # noqa: BLE001 - handed to the test's thread
                self.errors.append(err)

        self.thread = threading.Thread(target=run, name=name)
        self.thread.start()

    def join(self):
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive()
        if self.errors:
            raise self.errors[0]


def warning_said_beside(inside: threading.Event, text: str, category=UserWarning):
    """A thread that warns `text` once `inside` is set, and the event it sets after."""
    warned = threading.Event()

    def work():
        assert inside.wait(WAIT_S)
        warnings.warn(text, category, stacklevel=1)
        warned.set()

    return Beside(work), warned


def said_once_inside(real, inside: threading.Event, warned: threading.Event, own_text: str | None = None):
    """`real`, which first says it is running, waits for the other thread's warning and warns its own."""

    def call(*args, **kwargs):
        inside.set()
        assert warned.wait(WAIT_S)
        if own_text is not None:
            warnings.warn(own_text, UserWarning, stacklevel=1)
        return real(*args, **kwargs)

    return call


def test_a_warning_an_advice_fit_drops_does_not_silence_the_same_warning_said_later_by_the_user(small_sweep, monkeypatch):
    """Under Python's 'default' action a warning is shown once per place: one that a threaded advice
    fit dropped was noted as shown, and the same warning, said later in the user's own thread, vanished."""
    from types import SimpleNamespace

    from forecast.early_stop import fit_for_advice
    from forecast.forecaster import ScalingForecaster

    def helper():
        warnings.warn("said by a helper both call", UserWarning, stacklevel=1)

    def fit(self, *args, **kwargs):
        helper()
        return SimpleNamespace(diagnostics=lambda: SimpleNamespace(converged=True))

    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args: shown.append(str(message)))
    monkeypatch.setattr(ScalingForecaster, "fit", fit)
    once_key = ("said by a helper both call", UserWarning)
    for action in ("default", "once"):
        warnings.resetwarnings()  # the 'default' registries start empty
        warnings.onceregistry.pop(once_key, None)  # which resetwarnings leaves
        warnings.simplefilter(action)
        shown.clear()
        fit_for_advice(small_sweep, random_seed=0, threaded=True)
        helper()
        assert shown == ["said by a helper both call"], action
    warnings.onceregistry.pop(once_key, None)


def test_another_threads_warning_while_a_watch_or_a_trainer_fits_for_advice_is_shown(small_sweep, monkeypatch, recwarn):
    """An advice fit outside Optuna (forecast watch, the trainer's advisor, a backtest's replay) dropped
    its warnings in warnings.catch_warnings(record=True): what a trainer's other threads warned
    meanwhile went into that list and was never shown."""
    from types import SimpleNamespace

    from forecast.early_stop import fit_for_advice
    from forecast.forecaster import ScalingForecaster

    inside = threading.Event()
    beside, warned = warning_said_beside(inside, "said by the trainer's other thread")

    def fit(self, *args, **kwargs):
        return SimpleNamespace(diagnostics=lambda: SimpleNamespace(converged=True))

    monkeypatch.setattr(ScalingForecaster, "fit", said_once_inside(fit, inside, warned, "said by the advice fit"))
    fit_for_advice(small_sweep, random_seed=0)
    beside.join()
    assert [str(w.message) for w in recwarn] == ["said by the trainer's other thread"]



def test_another_threads_warning_while_validate_runs_checks_a_table_is_shown_and_not_kept_as_the_tables(small_sweep, monkeypatch,
                                                                                                       recwarn):
    """A web service validating two uploads at once: the warning another thread raised while a table
    was checked went into that table's data warnings (kept by its fit, shown on its report) and was
    said as the table's."""
    import forecast.data as data

    inside = threading.Event()
    beside, warned = warning_said_beside(inside, "said by another thread")
    monkeypatch.setattr(data, "_checked_runs", said_once_inside(data._checked_runs, inside, warned, "said of the table"))
    clean = data.validate_runs(small_sweep)
    beside.join()
    assert clean.attrs["data_warnings"] == ["said of the table"]
    said = [str(w.message) for w in recwarn]
    assert said.count("said by another thread") == 1 and said.count("said of the table") == 1


def test_two_threads_quiet_windows_ending_in_the_other_order_leave_the_warning_state_as_it_was(small_sweep, tmp_path, monkeypatch,
                                                                                                recwarn):
    """Two threads reading a folder's table beside its run logs at once (two watches in one process):
    each read is quiet about the table's own problems. The first to begin ended first; the second,
    ending, put back the state it had found, the first's quiet one, and every warning of the process
    was silenced from then on."""
    import forecast.data as data

    table = tmp_path / "runs.csv"
    small_sweep.to_csv(table, index=False)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    real_read = data._read_one_file

    def read(path):
        if threading.current_thread().name == "first":
            first_in.set()
            assert second_in.wait(WAIT_S)
        else:
            second_in.set()
            assert first_out.wait(WAIT_S)
        warnings.warn("said of the table, not read", UserWarning, stacklevel=1)
        return real_read(path)

    def read_then(done=None):
        def work():
            assert data._runs_named_in_file.__wrapped__(str(table), None) == frozenset(small_sweep["run_id"])
            if done is not None:
                done.set()

        return work

    filters, showwarning = list(warnings.filters), warnings.showwarning
    monkeypatch.setattr(data, "_read_one_file", read)
    first = Beside(read_then(first_out), name="first")
    assert first_in.wait(WAIT_S)
    second = Beside(read_then())
    first.join()
    second.join()
    assert warnings.filters == filters and warnings.showwarning is showwarning
    warnings.warn("said after both reads", UserWarning, stacklevel=1)
    assert [str(w.message) for w in recwarn] == ["said after both reads"]


def test_another_threads_warning_while_a_model_compiles_is_shown_and_raises_under_warnings_as_errors(monkeypatch):
    """A notebook fitting two sweeps in a ThreadPoolExecutor: while one compiled its model, the other
    thread's warnings were dropped, even under a filter 'error' the user had set. The compile's own
    are dropped still, raised by no filter."""
    import nutpie

    from forecast import inference

    inside = threading.Event()

    def warns_as_error():
        with pytest.raises(UserWarning, match="said by the other fit"):
            assert inside.wait(WAIT_S)
            warnings.warn("said by the other fit", UserWarning, stacklevel=1)

    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args: shown.append(str(message)))
    warnings.simplefilter("error")
    beside = Beside(warns_as_error)

    def compile_while_the_other_warns(model):
        inside.set()
        beside.join()
        warnings.warn("said by the compiler", UserWarning, stacklevel=1)
        return "compiled"

    monkeypatch.setattr(nutpie, "compile_pymc_model", compile_while_the_other_warns)
    assert inference._compiled(lambda: "model", None, {}) == ("compiled", False)
    warnings.simplefilter("always")
    warnings.warn("said after the compile", UserWarning, stacklevel=1)
    assert shown == ["said after the compile"]


def test_another_threads_warnings_while_a_fits_parameters_and_chart_are_made_are_shown(fitted, monkeypatch, recwarn):
    """parameters() quiets ArviZ's summary and plot() the budget's FarFromDataWarning, said once above
    the chart: another thread's warnings of those kinds, raised meanwhile, were dropped with them."""
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from forecast.data import FarFromDataWarning

    for make, patched, text, category in (
        (fitted.parameters, (az, "summary"), "said by another thread while parameters() ran", UserWarning),
        (lambda: fitted.plot(), (type(fitted), "predict"), "said by another thread while plot() ran", FarFromDataWarning),
    ):
        inside = threading.Event()
        beside, warned = warning_said_beside(inside, text, category)
        with monkeypatch.context() as patch:
            patch.setattr(*patched, said_once_inside(getattr(*patched), inside, warned))
            made = make()
        beside.join()
        assert made is not None and text in [str(w.message) for w in recwarn]
    plt.close("all")


def test_a_showwarning_that_cannot_be_hashed_is_kept_and_the_tables_warnings_recorded(small_sweep, monkeypatch):
    """A showwarning that is a dataclass instance (eq=True makes it unhashable), a log of warnings:
    every window asked a set of weak references whether it was a hook, and validate_runs, a fit's
    compile and predict raised TypeError: unhashable type, where catch_warnings had worked."""
    from dataclasses import dataclass, field

    from forecast.data import validate_runs

    @dataclass
    class WarningLog:
        said: list = field(default_factory=list)

        def __call__(self, message, *args, **kwargs):
            self.said.append(str(message))

    log = WarningLog()
    monkeypatch.setattr(warnings, "showwarning", log)
    warnings.simplefilter("always")
    runs = small_sweep.assign(lr=small_sweep["run_id"].str.endswith("s0").map({True: 1e-3, False: 5e-4}))
    clean = validate_runs(runs)  # one data warning: the learning rate differs between a recipe's runs
    assert len(clean.attrs["data_warnings"]) == 1 and "column 'lr'" in clean.attrs["data_warnings"][0]
    assert warnings.showwarning is log
    warnings.warn("said after the check", UserWarning, stacklevel=1)
    assert log.said == [*clean.attrs["data_warnings"], "said after the check"]


def test_another_threads_warning_is_matched_against_the_filters_without_running_our_python_code():
    """CPython walks warnings.filters by index, holding the list without a reference of its own. While a
    window was open, matching another thread's warning called the window's gate, Python code, where the
    interpreter may switch threads: a window ending there took its gates out of the list in place and the
    walk skipped the user's first filters (25 of 200,000 UserWarnings under 'error' were shown, not
    raised), and a library's catch_warnings ending there (ArviZ's, nutpie's) let the list be freed under
    the walk: 'Fatal Python error: Segmentation fault', or '_warnings.filters item 1 isn't a 5-tuple',
    within 30 s of three threads warning beside it. Matching now runs no Python code of ours."""
    import sys

    from forecast import thread_warnings

    ours = thread_warnings.__file__
    called = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == ours:
            called.append(frame.f_code.co_name)

    def warns():
        sys.setprofile(profile)
        try:
            with pytest.raises(UserWarning, match="said under the user's 'error'"):
                warnings.warn("said under the user's 'error'", UserWarning, stacklevel=1)
            warnings.warn("said beside the windows", RuntimeWarning, stacklevel=1)
        finally:
            sys.setprofile(None)

    shown = []
    warnings.simplefilter("error", UserWarning)
    warnings.simplefilter("always", RuntimeWarning)
    with thread_warnings.this_threads_warnings_dropped(RuntimeWarning), \
            thread_warnings.this_threads_warnings_recorded(UserWarning) as recorded:
        showwarning = warnings.showwarning
        warnings.showwarning = lambda message, *args: shown.append(str(message))
        try:
            Beside(warns).join()
        finally:
            warnings.showwarning = showwarning
        warnings.warn("dropped in this thread", RuntimeWarning, stacklevel=1)
        warnings.warn("recorded in this thread", UserWarning, stacklevel=1)
    assert [name for name in called if name != "shown_unless_this_threads"] == []
    assert shown == ["said beside the windows"] and [str(w.message) for w in recorded] == ["recorded in this thread"]


class _Unclosed:
    """What a ResourceWarning is about (an unclosed file). Slots: tracemalloc finds no allocation of an
    instance with a __dict__ on Python 3.11."""

    __slots__ = ()


def test_a_warnings_source_is_kept_when_recorded_and_when_passed_on_beside_a_window():
    """warnings.warn(..., source=obj) names the object a ResourceWarning is about, and under tracemalloc
    Python shows where it was allocated. Python calls a showwarning put in place without it: a warning
    recorded in a window lost it, and so did one passed on to be shown (or recorded by pytest) while any
    window was open."""
    from forecast.thread_warnings import (
        this_threads_warnings_dropped,
        this_threads_warnings_recorded,
    )

    thing = _Unclosed()
    with this_threads_warnings_recorded(ResourceWarning) as recorded:
        warnings.warn("unclosed", ResourceWarning, source=thing, stacklevel=1)
    assert [w.source for w in recorded] == [thing]
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with this_threads_warnings_dropped(FutureWarning):
            warnings.warn("unclosed", ResourceWarning, source=thing, stacklevel=1)
            Beside(lambda: warnings.warn("unclosed beside", ResourceWarning, source=thing, stacklevel=1)).join()
            warnings.warn("dropped", FutureWarning, stacklevel=1)
    assert [(str(w.message), w.source) for w in shown] == [("unclosed", thing), ("unclosed beside", thing)]


def test_where_a_resource_warnings_object_was_allocated_is_shown_while_a_fit_runs_beside(tmp_path):
    """python -X tracemalloc -W always shows 'Object allocated at' under a ResourceWarning, to find what
    left a file open: while a window was open (a fit in another thread), the allocation was not shown."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "unclosed.py"
    script.write_text(
        "import warnings\n"
        "from forecast.thread_warnings import this_threads_warnings_dropped\n"
        "class Unclosed:\n    __slots__ = ()\n"
        "thing = Unclosed()\n"
        "with this_threads_warnings_dropped(FutureWarning):\n"
        "    warnings.warn('unclosed', ResourceWarning, source=thing)\n")
    repo = str(Path(__file__).resolve().parents[1])
    said = subprocess.run([sys.executable, "-X", "tracemalloc", "-W", "always", str(script)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))},
                          timeout=WAIT_S)
    assert said.returncode == 0, said.stderr
    assert "ResourceWarning: unclosed" in said.stderr
    assert "Object allocated at (most recent call last):" in said.stderr and "thing = Unclosed()" in said.stderr


def test_a_window_goes_by_its_innermost_rule_for_a_warnings_kind_and_shows_every_other_kind():
    """Mutants that survived: rules matched with issubclass reversed (cross_validate drops its fits'
    ConvergenceWarning and FarFromDataWarning, said per cut in its table, and then dropped every other
    UserWarning of its thread too: a data warning its fits say was never shown), the outer window's
    rule asked before the inner one's, and a window of no named kind dropping UserWarnings alone. A
    warning meets the rules where a filter set inside the windows comes first (a library's own
    catch_warnings and simplefilter("always"))."""
    from forecast.forecaster import ConvergenceWarning, FarFromDataWarning
    from forecast.thread_warnings import (
        this_threads_warnings_dropped,
        this_threads_warnings_recorded,
    )

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with this_threads_warnings_dropped(ConvergenceWarning, FarFromDataWarning):
            warnings.warn("said of the data", UserWarning, stacklevel=1)
            warnings.warn("said of the fit", ConvergenceWarning, stacklevel=1)
        with this_threads_warnings_recorded(UserWarning) as recorded, this_threads_warnings_dropped(FarFromDataWarning):
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.warn("far from the data", FarFromDataWarning, stacklevel=1)  # the inner window's: dropped
                warnings.warn("the fit did not converge", ConvergenceWarning, stacklevel=1)  # a UserWarning: recorded
        with this_threads_warnings_dropped():
            warnings.warn("deprecated", DeprecationWarning, stacklevel=1)
            warnings.warn("overflow", RuntimeWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["said of the data"]
    assert [str(w.message) for w in recorded] == ["the fit did not converge"]


def _helper_warns():
    warnings.warn("said by a helper a table's check calls", UserWarning, stacklevel=1)


def test_a_recorded_window_neither_skips_a_warning_said_before_nor_hides_it_when_said_after(monkeypatch):
    """Under Python's 'default' action a warning is shown once per place, noted in a registry.
    Mutants that survived: the registries left as they were when a recording window opened (a warning
    said once before in the user's thread was skipped, never recorded as the table's), and 'default'
    in place of 'always' for a recording window (the warning it recorded was noted as shown, and the
    same warning said later in the user's thread vanished)."""
    from forecast.thread_warnings import this_threads_warnings_recorded

    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args: shown.append(str(message)))
    said = "said by a helper a table's check calls"
    warnings.resetwarnings()  # the 'default' registries start empty
    warnings.simplefilter("default")
    _helper_warns()
    with this_threads_warnings_recorded(UserWarning) as recorded:
        _helper_warns()
    assert shown == [said] and [str(w.message) for w in recorded] == [said]

    warnings.resetwarnings()
    warnings.simplefilter("default")
    shown.clear()
    with this_threads_warnings_recorded(UserWarning) as recorded:
        _helper_warns()
    _helper_warns()
    assert [str(w.message) for w in recorded] == [said] and shown == [said]


def test_a_windows_filters_put_back_by_another_threads_catch_warnings_silence_nothing(recwarn):
    """Another thread's catch_warnings (ArviZ's, nutpie's, in a fit beside) saved the filters while a
    window was open and put them back after it ended, the window's filter among them. Mutant that
    survived: that filter still matching in the window's thread, where every warning said after it
    was dropped, the ConvergenceWarning of the user's next fit included."""
    from forecast.forecaster import ConvergenceWarning
    from forecast.thread_warnings import this_threads_warnings_dropped

    opened, saved, closed = threading.Event(), threading.Event(), threading.Event()

    def catch_warnings_across_the_windows_end():
        assert opened.wait(WAIT_S)
        with warnings.catch_warnings():
            saved.set()
            assert closed.wait(WAIT_S)

    beside = Beside(catch_warnings_across_the_windows_end)
    with this_threads_warnings_dropped():
        opened.set()
        assert saved.wait(WAIT_S)
        warnings.warn("dropped in the window", UserWarning, stacklevel=1)
    closed.set()
    beside.join()
    warnings.warn("the fit did not converge", ConvergenceWarning, stacklevel=1)
    assert [(str(w.message), w.category) for w in recwarn] == [("the fit did not converge", ConvergenceWarning)]
