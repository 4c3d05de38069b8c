"""Warnings kept from view, or recorded, in one thread alone.

warnings.catch_warnings swaps the PROCESS's warning state (its filters and its showwarning): while
one thread is inside, the warnings every other thread raises are caught with its own, and two
windows of two threads that overlap put back each other's state in the wrong order, which left
every warning of the process silenced after a validate_runs and a fit ran side by side. Library
users call the forecast from threads of their own (a ThreadPoolExecutor fitting two sweeps, a web
service validating uploads, Optuna's n_jobs), so the library's windows use these instead.

A window sets what its thread does with warnings of some categories: drops them or records them.
Python's filters and warnings.showwarning are the process's; while a window is open they hold:
  - a filter at their front for each of its categories, 'ignore' for a category it drops, 'always'
    for one it records, whose message pattern matches in the window's thread alone (a threading.local
    whose `match` is a builtin: true there, false in any other thread). Any other thread matches
    none, so its warnings meet the filters it set, 'error' and 'once' included. The window's own are
    never raised by an 'error' filter, as inside catch_warnings, and never enter the 'default'/'once'
    registries (a dropped warning noted there made the same warning, said later in the user's thread,
    vanish). Matching runs no Python code: CPython walks the filters by index holding the list without
    a reference, and a thread switch inside the walk (Python code, as a gate's __subclasscheck__ was)
    let a filter removed meanwhile skip the user's next ones, and a list another thread's catch_warnings
    put back be freed under the walk, a segmentation fault;
  - a hook on warnings.showwarning that records the warnings of a recording thread (context: the
    rules are a context variable's) and passes every other one on to the showwarning it found, each
    with its `source` (the object a ResourceWarning is about), which Python leaves out of the call.
The filters go when their window ends, and the hook when the last one does, leaving the filters and
showwarning as they were. A window's filters put back by another thread's catch_warnings after it
ended match nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import warnings
import weakref

# what this thread (context) does with warnings while in a window: (category, list or None) pairs,
# the innermost window's first; a warning goes by the first pair whose category it falls under,
# recorded into its list, or dropped where that is None; one under no pair is Python's to show
_RULES = contextvars.ContextVar("forecast_warning_rules", default=())
_LOCK = threading.Lock()
_open = {"windows": 0}
# the hooks themselves, told by identity: a wrapper made with functools.wraps around one copies its
# attributes (its __dict__), and taken for a hook it was removed when the last window ended
_HOOKS = weakref.WeakSet()


def _rule_for(category):
    """The pair of this thread's innermost window that covers `category`, or None."""
    for covered, sink in _RULES.get():
        if issubclass(category, covered):
            return covered, sink
    return None


class _InItsThread(threading.local):
    """A filter's message pattern that matches any message in the thread that opened its window, and
    none in any other, or there once the window ended: builtins, so that matching runs no Python code
    (a str is not callable; id() of one is never 0)."""

    match = callable

    def opened(self) -> _InItsThread:
        self.match = id
        return self

    def __repr__(self) -> str:
        return "<any message in the thread of a forecast window>"


def _hook_passing_on_to(shown_by):
    """A showwarning that records a recording thread's warnings and passes the others on to
    `shown_by`, the showwarning it found. A new one each time it is put in place, each with the one it
    found: a showwarning wrapped meanwhile (a trial's log of its warnings, which calls the one it found:
    this hook) and found by the next one is passed on to, and passes on to the hook before, not back to
    itself. One hook whose target changed looped between them until RecursionError, at every warning."""

    def shown_unless_this_threads(message, category, filename, lineno, file=None, line=None):
        # Python's _showwarnmsg calls a showwarning put in place without the warning's `source` (the object
        # a ResourceWarning is about, whose allocation tracemalloc shows): taken from its frame, the caller's,
        # so that it is recorded, and shown by Python, with it. In this function, not one of its own: the
        # hook is the only Python code of ours a warning meets (see the module's docstring)
        shown = sys._getframe(1).f_locals.get("msg")
        if not (isinstance(shown, warnings.WarningMessage) and shown.message is message):  # showwarning called directly
            shown = warnings.WarningMessage(message, category, filename, lineno, file, line)
        rule = _rule_for(category)
        if rule is None:
            show_in_full = getattr(warnings, "_showwarnmsg_impl", None)  # rebound by catch_warnings(record=True)
            if shown_by is getattr(warnings, "_showwarning_orig", None) and show_in_full is not None:
                show_in_full(shown)  # what Python's showwarning does with the WarningMessage it makes, source and all
            else:  # one of the user's, called as Python calls it
                shown_by(message, category, filename, lineno, file, line)
        elif rule[1] is not None:
            rule[1].append(shown)
        # else dropped: a filter set after the window opened ('always', 'default') got before its own

    shown_unless_this_threads.passes_on_to = shown_by
    _HOOKS.add(shown_unless_this_threads)
    return shown_unless_this_threads


def _is_hook(showwarning) -> bool:
    # by identity: `in` hashes it, and a showwarning that cannot be hashed (a dataclass instance, which
    # eq=True leaves without __hash__) raised TypeError out of every window
    return any(showwarning is hook for hook in list(_HOOKS))


def _registries_cleared():
    """What catch_warnings does on entering: the 'default'/'once' registries' entries lapse, so that a
    warning said once before is recorded again rather than skipped before the filters are asked."""
    mutated = getattr(warnings, "_filters_mutated", None) or getattr(warnings, "_filters_mutated_lock_held", None)
    if mutated is not None:
        mutated()


def _open_window(entries) -> None:
    with _LOCK:
        # already in place where a catch_warnings elsewhere saved it and put it back after the last window
        if not _is_hook(warnings.showwarning):
            warnings.showwarning = _hook_passing_on_to(warnings.showwarning)
        warnings.filters[:0] = entries
        _open["windows"] += 1


def _close_window(entries) -> None:
    with _LOCK:
        warnings.filters[:] = [entry for entry in warnings.filters if not any(entry is own for own in entries)]
        _open["windows"] -= 1
        if not _open["windows"] and _is_hook(warnings.showwarning):
            warnings.showwarning = warnings.showwarning.passes_on_to


@contextlib.contextmanager
def _window(categories, sink):
    if sink is not None:
        _registries_cleared()
    in_this_thread = _InItsThread().opened()
    action = "ignore" if sink is None else "always"
    entries = [(action, in_this_thread, category, None, 0) for category in categories]
    _open_window(entries)
    token = _RULES.set(tuple((category, sink) for category in categories) + _RULES.get())
    try:
        yield sink
    finally:
        _RULES.reset(token)
        del in_this_thread.match  # inert where a catch_warnings elsewhere saved its filters and puts them back
        _close_window(entries)


def this_threads_warnings_dropped(*categories):
    """The warnings of `categories` (every warning without one) that this thread raises in the block
    are dropped; other threads' are shown as before."""
    return _window(categories or (Warning,), None)


def this_threads_warnings_recorded(*categories):
    """The warnings of `categories` (every warning without one) that this thread raises in the block
    are recorded, as warnings.WarningMessage, into the list it yields, in place of being shown;
    other threads' are shown as before."""
    return _window(categories or (Warning,), [])
