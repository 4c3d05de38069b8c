"""Ranks of a launch by hand forked from one process that has imported torch, for tests/test_trainer_ddp.py.

Each rank of a launch by hand is a `python script.py` of its own, and each spent 2-3 s of CPU importing torch
before it did anything the test looks at: two per launch, 26 launches, a large share of the file's time
on a 2-core CI machine. A fork server (the idea of multiprocessing's "forkserver") imports torch and the
trainer once, then forks one child per rank on request. Each child is still a process of its own: its
own pid (signals reach it), environment, working folder, argv, stdout and stderr (files the test reads),
and its exit code, an uncaught exception's traceback or a KeyboardInterrupt's end are Python's own, as the
script runs as __main__ in it and ends the interpreter as a script does.

What differs from a fresh interpreter: torch and the trainer were imported before the environment of the
rank was set, so only what they read from the environment at import differs (the server is started with
the environment the launches share: PYTHONPATH, OMP_NUM_THREADS=1). The torchrun tests and
test_a_refusal_of_rank_0_reaches_a_late_rank_under_a_manual_launch still start fresh interpreters.

Run as a script, this file is the server: one JSON request per line on stdin, answered on stdout by
"started PID", and later "ended PID EXITCODE" (Popen's returncode: -N for signal N). It ends, killing
what it started, when its stdin closes (the test session ended, however it ended).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class ForkedRank:
    """A rank started by the fork server: the parts of subprocess.Popen the tests use."""

    def __init__(self, server: ForkServer, pid: int, stdout: Path, stderr: Path):
        self.server, self.pid, self.stdout_path, self.stderr_path = server, pid, stdout, stderr
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.server.ended_changed:
            while self.poll() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout)
                # at most 1 s: the listener's last notice (the server gone) may come before the server's exit
                # shows in its poll(), and then no notice is left to wake this wait
                self.server.ended_changed.wait(1.0 if left is None else min(left, 1.0))
        return self.returncode

    def communicate(self, timeout=None):
        """(stdout, stderr) once the rank has ended, as Popen's with text=True."""
        self.wait(timeout)
        return self.stdout_path.read_text(), self.stderr_path.read_text()

    def send_signal(self, signum):
        if self.poll() is None:  # not one reaped by the server, whose pid may be another process's now
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:  # reaped a moment ago, its end not heard yet: as Popen, nothing to do
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The test side: starts the server process, sends it requests, and hears of its children's ends."""

    def __init__(self):
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen([sys.executable, __file__], env=env, cwd=REPO, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ended, self.started = {}, []
        self.ended_changed = threading.Condition()
        self.request_lock = threading.Lock()
        threading.Thread(target=self._hear, daemon=True).start()

    def _hear(self):
        for line in self.process.stdout:
            what, pid, *code = line.split()
            with self.ended_changed:
                if what == "started":
                    self.started.append(int(pid))
                else:
                    self.ended[int(pid)] = int(code[0])
                self.ended_changed.notify_all()
        with self.ended_changed:  # the server is gone: no end is coming
            self.ended_changed.notify_all()

    def exit_code(self, pid):
        if pid not in self.ended and self.process.poll() is not None:
            raise RuntimeError(f"the fork server ended (exit {self.process.returncode}) before rank {pid} did")
        return self.ended.get(pid)

    def start(self, script: Path, args, env: dict, cwd, out_dir: Path) -> ForkedRank:
        """`python script *args` with environment `env` in folder `cwd`, its stdout and stderr to files in
        `out_dir`."""
        with self.request_lock:
            count = len(self.started)
            stdout, stderr = (out_dir / f"rank-{count}.{name}" for name in ("out", "err"))
            request = {"script": str(script), "args": [str(a) for a in args], "env": env, "cwd": str(cwd),
                       "stdout": str(stdout), "stderr": str(stderr)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            with self.ended_changed:
                deadline = time.monotonic() + 60
                while len(self.started) == count:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the fork server did not start the rank")
                    self.ended_changed.wait(1.0)
                pid = self.started[count]
        return ForkedRank(self, pid, stdout, stderr)

    def close(self):
        self.process.stdin.close()  # the server kills what it started and ends
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _serve():
    """The server's loop. Its children leave it through _run_as_main, never returning here."""
    import select

    import torch  # noqa: F401  the imports every rank makes, made once

    import trainer_minimal.cli  # noqa: F401
    import trainer_minimal.train  # noqa: F401

    children, pending = set(), b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.05)
        if readable:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = _fork_rank(json.loads(line))
                children.add(pid)
                os.write(1, f"started {pid}\n".encode())
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                os.write(1, f"ended {pid} {os.waitstatus_to_exitcode(status)}\n".encode())
    for pid in children:  # the test session ended: a rank left waiting in a store would wait minutes
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _fork_rank(request: dict) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _run_as_main(request)
    return pid


def _run_as_main(request: dict):
    """In the child: become `python script args` and end as it ends. An exception leaves through _serve and
    the module's end to the interpreter, which says and exits as for any script (no finally on the way)."""
    import runpy

    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = [request["script"], *request["args"]]
    sys.path[0] = os.path.dirname(request["script"])
    runpy.run_path(request["script"], run_name="__main__")
    sys.exit(0)


if __name__ == "__main__":
    _serve()
