"""Data parallelism: torchrun with 2 CPU processes (gloo) trains the same run as one process."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from forked_ranks import ForkServer

from trainer_minimal import make_config
from trainer_minimal.cli import main
from trainer_minimal.logging_io import read_jsonl
from trainer_minimal.train import train

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = dict(d_model=32, n_layer=1, n_head=2, tasks="rev", max_size=1, train_size=400, val_size=50,
            val_samples=4, warmup_steps=30, warmup_batch=32, batch_size=8, group_size=4, gen_len=5, lr=2e-3,
            max_steps=4, eval_every=2)
# prompts of 2 to 9 tokens and one prompt per rank per mini-batch: a rank's own prompts are often
# narrower than the round's widest, and its samples end at other decode steps than the round's last
MIXED_WIDTHS = {**TINY, "tasks": "add,max", "max_size": 3, "batch_size": 2, "val_size": 20, "max_steps": 6}


def test_torchrun_gloo_two_processes(tmp_path):
    """Also: each rank padded to its own prompts' width and decoded until its own samples ended, and
    the FLOPs of those widths summed over ranks fell short of one process's count for the same round
    (24.5e6 against 26.3e6 at step 5 here), so a run's compute axis moved with its number of GPUs."""
    pytest.importorskip("torch.distributed")
    cache = str(tmp_path / "warmstart")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in MIXED_WIDTHS.items()]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "trainer_minimal", "train", "--out", str(tmp_path / "ddp"), "--warmstart-cache", cache, *flags]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    assert json.loads((tmp_path / "ddp" / "summary.json").read_text())["world_size"] == 2
    evals = read_jsonl(tmp_path / "ddp" / "evals.jsonl")
    log = read_jsonl(tmp_path / "ddp" / "train_log.jsonl")
    assert [r["step"] for r in evals] == [2, 4, 6]  # rank 0 alone writes: no duplicated rows
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert evals[0]["n_eval"] == 20 * 4  # every validation prompt graded once, across both ranks

    # one process with the same seed: same prompts, same samples (seeded per prompt), the same
    # global normalisers; only the order of float additions in the gradient sum differs
    single = train(make_config("scalerl", out=str(tmp_path / "single"), warmstart_cache=cache, **MIXED_WIDTHS))
    reference = read_jsonl(tmp_path / "single" / "evals.jsonl")
    reference_log = read_jsonl(tmp_path / "single" / "train_log.jsonl")
    assert [r["compute"] for r in evals] == pytest.approx([r["compute"] for r in reference], rel=1e-9)
    assert [r["compute"] for r in log] == pytest.approx([r["compute"] for r in reference_log], rel=1e-9)
    assert [r["trained_tokens"] for r in log] == [r["trained_tokens"] for r in reference_log]
    assert [r["metric"] for r in evals] == pytest.approx([r["metric"] for r in reference], abs=0.03)
    assert log[0]["reward"] == reference_log[0]["reward"]
    assert single["steps"] == 6


NODE_LOCAL_CACHE_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

shared = T.warm_start_path
def on_this_machine(cfg):  # rank 1 on a second machine: the cache folder there is its own, empty disk
    path = shared(cfg)
    return path.replace("warmstart", "other-machine") if os.environ["RANK"] == "1" else path
T.warm_start_path = on_this_machine
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_every_rank_starts_from_rank_0s_warm_start(tmp_path):
    """Rank 0 trains the warm start and saves it; another rank loaded the file only if it saw it, and
    where it did not (its machine's own disk under a multi-machine torchrun, a network file system that
    shows a new file late) it kept its random start: it evaluated and trained another model than rank
    0's without a word (R0 0.465 where one process measured 0.93)."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "node_local_cache.py"
    script.write_text(NODE_LOCAL_CACHE_SCRIPT)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "warmup_steps": 100, "max_steps": 2}.items()]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
           "--out", str(tmp_path / "ddp"), "--warmstart-cache", str(tmp_path / "warmstart"), *flags]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "other-machine").exists()  # rank 1 found no warm start of its own
    train(make_config("scalerl", out=str(tmp_path / "single"), warmstart_cache=str(tmp_path / "warmstart"),
                      **{**TINY, "warmup_steps": 100, "max_steps": 2}))
    r0 = [json.loads((tmp_path / name / "baseline.json").read_text())["metric"] for name in ("ddp", "single")]
    assert r0[0] == r0[1] > 0.1  # the same samples of the same warm-started model, graded on two ranks or one


GROUP_FREED_SCRIPT = """
import os, sys, time, torch
from trainer_minimal import make_config
from trainer_minimal.train import end_distributed, setup_distributed
setup_distributed(make_config("scalerl", out=sys.argv[1]))
torch.optim.AdamW([torch.nn.Parameter(torch.ones(2))])  # imports torch._dynamo, as train() does
# train() meets the other ranks in collectives before it ends: without one here, rank 0 could destroy the
# group while rank 1 still finished connecting to it ("Connection closed by peer" in connectFullMesh)
torch.distributed.barrier()
end_distributed()

def gloo_threads():
    names = []
    for thread in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{thread}/comm") as comm:
                names.append(comm.read().strip())
        except OSError:  # a thread that ended since the listing: threads end while the group is freed
            pass
    return sum(n.startswith("pt_gloo") for n in names)

# a freed group's threads may take a moment to end; a group kept alive keeps them until interpreter exit
deadline = time.monotonic() + 10
while (left := gloo_threads()) and time.monotonic() < deadline:
    time.sleep(0.1)
os.write(1, f"rank {os.environ['RANK']} gloo threads left: {left}\\n".encode())  # one write: ranks share the pipe
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="thread names are read from Linux /proc")
def test_end_distributed_frees_the_group_before_interpreter_exit(tmp_path):
    """A group that outlives destroy_process_group is torn down at interpreter exit, where gloo's
    threads now and then abort a finished run (exit -6). Its worker threads show whether it was freed."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "group_freed.py"
    script.write_text(GROUP_FREED_SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(script), str(tmp_path / "out")]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    left = dict(re.findall(r"rank (\d) gloo threads left: (\d+)", done.stdout))
    assert left == {"0": "0", "1": "0"}, done.stdout


SLOW_RANK_SCRIPT = """
import os, sys, time, types
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.consult_advisor = lambda cfg, rows, planned: types.SimpleNamespace(  # the forecaster, without its fit
    action="continue", rule="stub", message="continue: stub", details={}, to_dict=dict)
flops_model = T.FlopsModel
def late(model):  # rank 1 loads its model slower: rank 0 has answered the advisor by the time it is ready
    if os.environ["RANK"] == "1":
        time.sleep(3)
    return flops_model(model)
T.FlopsModel = late
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_a_resumed_question_to_the_advisor_does_not_hang_a_slower_rank(tmp_path):
    """A run killed while the advisor was asked is asked again on --resume. Rank 0 asks, and removes
    advisor_asking.json on a continue; a rank that read that file on its own after that skipped the
    broadcast of the answer, and both ranks then waited in different collectives forever."""
    pytest.importorskip("torch.distributed")
    run = tmp_path / "run"
    train(make_config("scalerl", out=str(run), warmstart_cache=str(tmp_path / "warmstart"), advisor_every=1,
                      **{**TINY, "max_steps": 2}))
    os.remove(run / "summary.json")  # as if killed while the advisor was asked at step 2 of 4
    (run / "advisor_asking.json").write_text(json.dumps({"step": 2}))
    script = tmp_path / "slow_rank.py"
    script.write_text(SLOW_RANK_SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(script), "--out", str(run), "--resume", "--max-steps", "4"]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    log = tmp_path / "torchrun.log"
    with open(log, "w") as f:
        child = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
        try:
            child.wait(timeout=90)
        except subprocess.TimeoutExpired:
            child.terminate()  # torchrun passes SIGTERM on to both ranks (a SIGKILL would orphan them)
            child.wait(timeout=60)
            pytest.fail("the resumed 2-process run hung after the advisor's answer")
    output = log.read_text()
    assert child.returncode == 0, output[-3000:]
    assert "advisor: continue (stub)" in output
    assert [r["step"] for r in read_jsonl(run / "evals.jsonl")] == [2, 4]
    assert not (run / "advisor_asking.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_stop_signal_does_not_break_into_the_stop(tmp_path, monkeypatch, capsys):
    """torchrun signalled twice in a moment (`timeout` and the user, a scheduler that signals every
    process) passes SIGINT and then SIGTERM on to each rank within milliseconds, and a rank waiting in a
    collective takes them together as the others end. The second broke into the stop of the first,
    and that rank ended in a traceback (after gloo's "Connection closed by peer") instead of the line
    saying how to go on. Training is faked: Ctrl-C during a step, SIGTERM while the group is freed."""
    import trainer_minimal.train as train_module

    def signalled(signum):
        os.kill(os.getpid(), signum)
        time.sleep(0.5)  # a handler that raises does so before this ends

    def interrupted_after_a_checkpoint(cfg, **_):  # train(cfg, machine_checked=True)
        os.makedirs(cfg.out)
        open(os.path.join(cfg.out, "ckpt.pt"), "wb").close()
        signalled(signal.SIGINT)
        pytest.fail("Ctrl-C did not stop the run")

    monkeypatch.setattr(train_module, "train", interrupted_after_a_checkpoint)
    monkeypatch.setattr(train_module, "end_distributed", lambda: signalled(signal.SIGTERM))
    # as a plain process has them (a test runner may hold handlers of its own)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.signal(signal.SIGINT, signal.default_int_handler)
    run = tmp_path / "run"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    try:
        code = main(["train", "--out", str(run), "--warmstart-cache", str(tmp_path / "warmstart"), *flags])
        handlers_after = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    except KeyboardInterrupt as err:  # caught here: left to pytest, it would end the whole session
        pytest.fail(f"the second signal broke into the stop: {err!r}")
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
    assert code == 130
    assert f"interrupted; `trainer-minimal train --out {run} --resume` goes on" in capsys.readouterr().err
    assert handlers_after == (signal.SIG_DFL, signal.default_int_handler)  # put back once the command returns



@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_stop_signal_after_the_same_stop_window_still_stops(monkeypatch):
    """The second of two stop signals within SAME_STOP_S is that stop said again and is ignored; a later
    one must still stop the command: a user's Ctrl-C after one that a library swallowed, or a sweep's
    SIGINT to a run still going after its grace. Here the first is swallowed, and the clock is faked."""
    import trainer_minimal.cli as cli

    now = [100.0]
    monkeypatch.setattr(cli.time, "monotonic", lambda: now[0])
    before = signal.signal(signal.SIGINT, signal.default_int_handler), signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raised = []
    try:
        with cli.stop_signals_as_ctrl_c():
            for at, signum in ((100.0, signal.SIGINT), (100.0 + cli.SAME_STOP_S / 2, signal.SIGTERM),
                               (100.0 + cli.SAME_STOP_S, signal.SIGINT), (100.0 + 2.5 * cli.SAME_STOP_S, signal.SIGTERM)):
                now[0] = at
                try:
                    signal.raise_signal(signum)
                    raised.append(None)
                except KeyboardInterrupt as err:  # swallowed, as a library might
                    raised.append(type(err).__name__)
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
    assert raised == ["KeyboardInterrupt", None, "KeyboardInterrupt", "Stopped"]

def test_a_stop_is_said_once_under_torchrun(tmp_path, monkeypatch, capsys):
    """Every rank said 'stopped by SIGTERM; ... --resume goes on', and a rank that torchrun ended because
    rank 0 failed (another process training in the folder: 'wait for it to end') said it alone, of a stop
    nobody asked for. Rank 0 says it; the others end with the same exit code, quietly."""
    import trainer_minimal.train as train_module
    from trainer_minimal.cli import Stopped

    def stopped_after_a_checkpoint(cfg, **_):  # train(cfg, machine_checked=True)
        os.makedirs(cfg.out, exist_ok=True)
        open(os.path.join(cfg.out, "ckpt.pt"), "wb").close()
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(train_module, "train", stopped_after_a_checkpoint)
    monkeypatch.setattr(train_module, "decided_by_rank_0", lambda name, decide, check_here=None: decide())  # no store to send through
    monkeypatch.setenv("WORLD_SIZE", "2")
    flags = ["--warmstart-cache", str(tmp_path / "warmstart"), *[f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]]
    said = {}
    for rank in ("0", "1"):  # a fresh run each: the fake leaves a checkpoint
        monkeypatch.setenv("RANK", rank)
        assert main(["train", "--out", str(tmp_path / f"run{rank}"), *flags]) == 143
        said[rank] = capsys.readouterr().err
    assert f"stopped by SIGTERM; `trainer-minimal train --out {tmp_path / 'run0'} --resume` goes on" in said["0"]
    assert said["1"] == ""


def test_more_processes_than_gpus_is_refused_by_every_rank(tmp_path, monkeypatch, capsys):
    """torchrun --nproc_per_node 4 on a machine with 2 GPUs: ranks 2 and 3 failed in torch.cuda.set_device
    with a CUDA traceback (invalid device ordinal) while ranks 0 and 1 waited for them. Each rank now
    refuses with the counts and the fix, before any compute (the environment is torchrun's, faked)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    for rank in ("0", "3"):
        for name, value in (("WORLD_SIZE", "4"), ("LOCAL_WORLD_SIZE", "4"), ("RANK", rank), ("LOCAL_RANK", rank)):
            monkeypatch.setenv(name, value)
        out = tmp_path / f"out{rank}"
        assert main(["train", "--device", "cuda", "--out", str(out), "--warmstart-cache", str(tmp_path / "ws"), *flags]) == 2
        assert ("4 processes on this machine (--nproc_per_node), each on its own GPU cuda:LOCAL_RANK, but it has "
                "2 CUDA device(s): give --nproc_per_node 2 or fewer") in capsys.readouterr().err
        assert not out.exists()


def test_ranks_wait_out_a_long_advisor_fit_on_either_backend(monkeypatch):
    """While rank 0 asks the advisor (a fit of minutes against a large reference) the others wait in
    a broadcast; NCCL's own default gives up after 10 minutes, so a GPU run crashed there (and again
    on --resume, which asks the same question). Both backends are given 30 minutes."""
    import datetime

    import torch

    from trainer_minimal import train as train_module

    seen = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(train_module.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(train_module.dist, "init_process_group", lambda backend, **kw: seen.update(backend=backend, **kw))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    for device, backend in (("cuda", "nccl"), ("cpu", "gloo")):
        rank, world, _ = train_module.setup_distributed(make_config("scalerl", out="unused", device=device))
        assert (rank, world, seen["backend"]) == (1, 2, backend)
        assert seen["timeout"] >= datetime.timedelta(minutes=30)


OWN_DISK_SCRIPT = """
import os, sys, torch
import trainer_minimal.train as T
from trainer_minimal.cli import main

trained = []
flops_model = T.FlopsModel
def kept(model):  # the model this rank trains, saved when it ends to compare with rank 0's checkpoint
    trained.append(model)
    return flops_model(model)
T.FlopsModel = kept
rank = os.environ["RANK"]
# each rank on a machine of its own, --out relative: rank 0's folder holds the run, rank 1's is its machine's empty disk
os.chdir(sys.argv[1] if rank == "0" else sys.argv[2])
code = main(["train", *sys.argv[4:]])
if trained:
    torch.save(trained[-1].state_dict(), os.path.join(sys.argv[3], f"rank{rank}-weights.pt"))
sys.exit(code)
"""


def torchrun_on_two_machines(tmp_path, *args):
    """2 processes under torchrun, each in a working folder of its own (tmp_path/machine0, machine1)."""
    script = tmp_path / "own_disk.py"
    script.write_text(OWN_DISK_SCRIPT)
    machines = [tmp_path / "machine0", tmp_path / "machine1"]
    for folder in machines:
        folder.mkdir(exist_ok=True)
    cmd = ["timeout", "120", sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(script), *map(str, machines), str(tmp_path), "--warmstart-cache", "warmstart", *args]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_a_resume_reads_the_run_folder_on_rank_0_alone(tmp_path):
    """Rank 0 writes the run folder, and on a multi-machine torchrun with --out on each machine's own disk
    only its machine has it; every rank read it on --resume, and rank 1 refused ('--resume: no checkpoint in
    run'), exit 2. Rank 0 alone reads the run's settings and checkpoint, and sends the other ranks what they
    need: the resumed run is the run that was never stopped, and rank 1's machine gets no file."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in MIXED_WIDTHS.items() if k != "max_steps"]  # steps that train
    done = torchrun_on_two_machines(tmp_path, "--out", "run", "--max-steps", "4", *flags)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert torch.load(tmp_path / "machine0" / "run" / "ckpt.pt", weights_only=False)["optimizer"]["state"]  # it trained
    done = torchrun_on_two_machines(tmp_path, "--out", "run", "--resume", "--max-steps", "8")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # rank 1 trained on from rank 0's weights and optimizer state: it ended with rank 0's weights (its
    # evaluations below are half of each row; a small difference in the weights seldom changes a sample)
    rank_1 = torch.load(tmp_path / "rank1-weights.pt")
    rank_0 = torch.load(tmp_path / "machine0" / "run" / "ckpt.pt", weights_only=False)["model"]
    assert rank_1.keys() == rank_0.keys()
    assert all(torch.equal(rank_1[name], rank_0[name]) for name in rank_0)
    done = torchrun_on_two_machines(tmp_path, "--out", "reference", "--max-steps", "8", *flags)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    assert list((tmp_path / "machine1").iterdir()) == []  # rank 1 neither read nor wrote a run folder
    resumed, reference = (read_jsonl(tmp_path / "machine0" / run / "evals.jsonl") for run in ("run", "reference"))
    assert [r["step"] for r in resumed] == [2, 4, 6, 8]
    assert [r["metric"] for r in resumed] == [r["metric"] for r in reference]
    assert [r["compute"] for r in resumed] == [r["compute"] for r in reference]
    assert json.loads((tmp_path / "machine0" / "run" / "summary.json").read_text())["world_size"] == 2


LATE_READER_SCRIPT = """
import os, sys, time
import trainer_minimal.train as T
from trainer_minimal.cli import main

reached = T.rendezvous_store
def late():  # rank 1 reaches the store, then is slow to ask it (a loaded machine's scheduler)
    store = reached()
    if os.environ["RANK"] == "1":
        time.sleep(2)
    return store
T.rendezvous_store = late
sys.exit(main(["train", *sys.argv[1:]]))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refusal_of_rank_0_reaches_a_late_rank_under_a_manual_launch(tmp_path):
    """Launched by hand (MASTER_ADDR, RANK, WORLD_SIZE set, no torchrun agent), rank 0 hosts the store it
    sends its verdict through, and it ended as soon as it had put a refusal there: a rank that asked
    for it a moment later found the store gone and crashed ('DistNetworkError: Failed to recv, got 0
    bytes ...', exit 1) instead of saying the refusal. Rank 0 now waits for the others to have read it."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "late_reader.py"
    script.write_text(LATE_READER_SCRIPT)
    run = tmp_path / "run"
    run.mkdir()
    (run / "evals.jsonl").write_text("")  # a run is there: rank 0 refuses a new one
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    port = free_port()
    ranks = []
    for rank in ("0", "1"):
        env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank}
        ranks.append(subprocess.Popen([sys.executable, str(script), "--out", str(run), *flags], env=env, cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    said = [rank.communicate(timeout=120) for rank in ranks]
    refusal = f"trainer-minimal: error: {run} already holds a run (evals.jsonl or ckpt.pt)"
    for rank, (_, err) in zip(ranks, said, strict=True):
        assert rank.returncode == 2 and err.startswith(refusal) and "Traceback" not in err, err[-3000:]



_FORK_SERVER = []  # started by the file's first launch by hand, closed with the file's tests


def fork_server() -> ForkServer:
    if not _FORK_SERVER:
        _FORK_SERVER.append(ForkServer())
    return _FORK_SERVER[0]


@pytest.fixture(scope="module", autouse=True)
def _fork_server_closed():
    yield
    while _FORK_SERVER:
        _FORK_SERVER.pop().close()


FORKED_SCRIPT = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a test runner's worker may ignore it
print(os.getcwd(), sys.argv[1:], os.environ.get("GIVEN"), os.environ.get("OMP_NUM_THREADS"), flush=True)
if sys.argv[1] == "raises":
    raise RuntimeError("a bug")
if sys.argv[1] == "waits":
    time.sleep(60)
    sys.exit(5)
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX fork and signals")
def test_a_rank_forked_by_the_fork_server_runs_and_ends_as_a_script_of_its_own(tmp_path):
    """launched_by_hand's ranks are forked from one process (forked_ranks.py): each must still see its own
    argv, working folder and environment alone, and end as `python script.py` does: sys.exit's code, an
    uncaught exception's traceback and exit 1, a signal's -N, Ctrl-C's uncaught KeyboardInterrupt as SIGINT."""
    import signal

    script = tmp_path / "forked.py"
    script.write_text(FORKED_SCRIPT)
    # OMP_NUM_THREADS: the server's own environment has it (1), this rank's does not
    env = {**{k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}, "GIVEN": "given"}
    started = {arg: fork_server().start(script, [arg], env, tmp_path, tmp_path)
               for arg in ("3", "raises", "waits", "0")}
    out, err = started["3"].communicate(timeout=60)
    assert started["3"].returncode == 3 and out == f"{tmp_path} ['3'] given None\n" and err == ""
    _, err = started["raises"].communicate(timeout=60)
    assert started["raises"].returncode == 1 and "Traceback" in err and err.endswith("RuntimeError: a bug\n")
    assert started["0"].wait(timeout=60) == 0
    waiting = started["waits"]
    deadline = time.monotonic() + 60
    while not waiting.stdout_path.read_text():  # its line, printed once its Ctrl-C handler is set
        assert time.monotonic() < deadline and waiting.poll() is None
        time.sleep(0.05)
    waiting.send_signal(signal.SIGINT)
    assert waiting.wait(timeout=60) == -signal.SIGINT and "KeyboardInterrupt" in waiting.communicate()[1]
    ended = fork_server().start(script, ["waits"], env, tmp_path, tmp_path)
    ended.send_signal(signal.SIGTERM)
    assert ended.wait(timeout=60) == -signal.SIGTERM


def launched_by_hand(tmp_path, script_text, *args, extra_env=None, meanwhile=None):
    """Ranks 0 and 1 started by hand (MASTER_ADDR, RANK, WORLD_SIZE set, no torchrun agent): [(exit code, stderr)].
    meanwhile(processes): called once both are started, before they are waited for (a signal sent to one).
    Each rank is forked from a process that has imported torch once (forked_ranks.py): a process of its own,
    without 2-3 s of CPU for its own import of torch."""
    script = tmp_path / "by_hand.py"
    script.write_text(script_text)
    port = free_port()
    ranks = []
    for rank in ("0", "1"):
        env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank, **(extra_env or {})}
        ranks.append(fork_server().start(script, args, env, REPO, tmp_path))
    try:
        if meanwhile is not None:
            meanwhile(ranks)
        said = [rank.communicate(timeout=60)[1] for rank in ranks]
    except subprocess.TimeoutExpired:
        for rank in ranks:
            rank.kill()  # a rank waiting in torch's store does not take SIGTERM
            rank.communicate()
        pytest.fail("a rank of the launch by hand waited on after the other had ended")
    return [(rank.returncode, err) for rank, err in zip(ranks, said, strict=True)]


RANK_1_LEAVES_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = 5
own = T.check_device
def left_on_rank_1(cfg):  # rank 1's own checks: a new run's flags before it joins, on --resume once it joined
    if os.environ["RANK"] == "1":
        if os.environ["LEAVES"] == "refuses":  # a device or model folder only its machine lacks
            raise ValueError("--device cuda:1: not on this machine")
        if os.environ["LEAVES"] == "crashes":
            raise RuntimeError("a bug on rank 1")
        os._exit(9)  # killed: it says nothing
    return own(cfg)
T.check_device = left_on_rank_1
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_a_rank_that_never_joins_a_launch_by_hand_is_said_by_rank_0(tmp_path):
    """Rank 1 ended before it joined the store rank 0 hosts (killed in its own machine's checks), and rank 0
    waited in torch's store start-up for the whole 30-minute timeout without a word (deaf to SIGTERM). It now
    gives up after JOIN_WAIT_S (5 s here) with one line, exit 1, and writes nothing."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, RANK_1_LEAVES_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags,
                                                    extra_env={"LEAVES": "killed"})
    assert code1 == 9
    assert code0 == 1 and "Traceback" not in err0, err0[-3000:]
    assert "trainer-minimal: error: rank 1 of 2 did not join within 5 s: see its output" in err0
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("leaves, code1, said0", [
    ("refuses", 2, "trainer-minimal: error: rank 1 of 2 refused: --device cuda:1: not on this machine\n"),
    ("crashes", 1, "trainer-minimal: error: rank 1 of 2 ended (RuntimeError) while it checked this run's settings: "
                   "see its output\n"),
], ids=["refuses", "crashes"])
def test_a_rank_that_refuses_before_it_joins_ends_rank_0_with_its_reason(tmp_path, leaves, code1, said0):
    """A new run's rank 1, started by hand, refused its own flags on its own machine (a device or model folder
    only it lacks), or crashed in those checks, before it joined the store rank 0 hosts; rank 0 waited for it
    to join for JOIN_WAIT_S (300 s, 5 here), then said only that rank 1 'did not join', exit 1. Rank 1 now
    joins just to tell rank 0, and rank 0 ends at once naming rank 1 and why (exit 2 for a refusal), and
    writes nothing. Rank 1 says its own error as before."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1_seen, err1) = launched_by_hand(tmp_path, RANK_1_LEAVES_SCRIPT, "--out", tmp_path / "run",
                                                         "--warmstart-cache", tmp_path / "warmstart", *flags,
                                                         extra_env={"LEAVES": leaves})
    assert code1_seen == code1, err1[-3000:]
    if leaves == "refuses":
        assert "trainer-minimal: error: --device cuda:1: not on this machine" in err1 and "Traceback" not in err1
    else:  # a bug's traceback is its own
        assert "RuntimeError: a bug on rank 1" in err1, err1[-3000:]
    assert code0 == (2 if leaves == "refuses" else 1), err0[-3000:]
    assert err0 == said0, err0[-3000:]  # one line, no C++ log above it
    assert not (tmp_path / "run").exists()


RANK_1_MISTYPED_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = 5
args = sys.argv[1:]
if os.environ["RANK"] == "1":  # a value its own command line mistyped: refused with its flags, before any machine check
    args = [arg for arg in args if not arg.startswith("--lr=")] + ["--lr", "-1"]
sys.exit(main(["train", *args]))
"""


def test_a_rank_whose_own_flags_are_refused_before_it_joins_ends_rank_0_with_its_reason(tmp_path):
    """A new run's rank 1, started by hand with a flag whose value is refused (--lr -1 on its own command
    line), ended before it joined the store rank 0 hosts, and rank 0 waited for it for JOIN_WAIT_S (300 s, 5
    here), then said only that rank 1 'did not join', exit 1: only a refusal of its machine's checks was told
    to rank 0. Rank 1 now tells rank 0 of this one too: rank 0 ends at once naming rank 1 and why, exit 2."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, RANK_1_MISTYPED_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags)
    assert code1 == 2 and err1.endswith("trainer-minimal: error: --lr must be > 0, got -1.0\n"), err1[-3000:]
    assert code0 == 2, err0[-3000:]
    assert err0 == "trainer-minimal: error: rank 1 of 2 refused: --lr must be > 0, got -1.0\n", err0[-3000:]
    assert not (tmp_path / "run").exists()


FLAG_MISTYPED_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S, T.TELL_WAIT_S = 5, 300  # a rank not told gives up in 5 s; one left waiting to tell, past launched_by_hand's 60 s
args = sys.argv[1:]
if os.environ["RANK"] in os.environ["MISTYPED_ON"].split(","):  # refused by argparse, before any of the trainer's code
    args += os.environ["MISTYPED"].split()
sys.exit(main(["train", *args]))
"""


@pytest.mark.parametrize("mistyped, on, said", [
    ("--lr abc", "1", "argument --lr: invalid float value: 'abc'"),
    ("--no-such-flag", "1", "unrecognized arguments: --no-such-flag"),
    ("--lr 1e-3", "1", "--lr is given more than once; give it once (only the last would count)"),
    ("--lr abc", "0", "argument --lr: invalid float value: 'abc'"),
    ("--lr abc", "0,1", "argument --lr: invalid float value: 'abc'"),
], ids=["type on rank 1", "unknown on rank 1", "repeated on rank 1", "type on rank 0", "type on both"])
def test_a_flag_refused_by_argparse_under_a_launch_by_hand_ends_the_other_ranks_with_its_reason(tmp_path, mistyped,
                                                                                                  on, said):
    """A new run's rank started by hand with a flag argparse refuses (a value of the wrong type, an unknown flag, a
    flag given twice) exited 2 before any of the trainer's code ran: rank 0 waited JOIN_WAIT_S (300 s, 5 here) for
    a rank 1 so refused, then said only 'rank 1 of 2 did not join', and a rank 1 waited as long for a rank 0 so
    refused, then said only that rank 0 'did not open the store', exit 1. The refused rank now tells the others
    first, as it does a value out of range: each ends at once, exit 2, rank 0 naming rank 1 and its message,
    rank 1 with rank 0's; refused on both, neither waits for the other."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, FLAG_MISTYPED_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags,
                                                    extra_env={"MISTYPED": mistyped, "MISTYPED_ON": on})
    for rank, code, err in ((0, code0, err0), (1, code1, err1)):
        assert code == 2 and "Traceback" not in err, err[-3000:]
        if str(rank) in on:  # argparse's own words, as before
            assert err.endswith(f": error: {said}\n") and "usage: trainer-minimal" in err, err[-3000:]
    if on == "1":
        assert err0 == f"trainer-minimal: error: rank 1 of 2 refused: {said}\n", err0[-3000:]
    if on == "0":
        assert err1.endswith(f"trainer-minimal: error: {said}\n"), err1[-3000:]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("rank", ["abc", ""])
def test_a_flag_refused_by_argparse_with_a_rank_that_is_no_number_is_argparses_error_alone(monkeypatch, capsys, rank):
    """A RANK that is no number (a scheduler's own, or set empty) beside WORLD_SIZE, MASTER_ADDR and MASTER_PORT:
    argparse's refusal of a flag crashed in telling the others, a ValueError traceback from int(RANK), exit 1, where
    it was argparse's error, exit 2. No launch this process can take part in: its own error is said alone, as for a
    WORLD_SIZE that is no number."""
    for name, value in (("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"), ("RANK", rank)):
        monkeypatch.setenv(name, value)
    assert main(["train", "--lr", "abc"]) == 2
    assert capsys.readouterr().err.endswith("trainer-minimal train: error: argument --lr: invalid float value: 'abc'\n")


RANK_0_REFUSES_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = T.TELL_WAIT_S = 300  # a rank that waits them out is a rank left waiting (launched_by_hand's 60 s)
own = T.check_device
def refused_on_rank_0(cfg):  # rank 0's own checks of a new run's flags, before it opens the store
    if os.environ["RANK"] == "0":
        raise ValueError("--device cuda:0: not on this machine")
    return own(cfg)
if os.environ["REFUSES"] == "rank 0":
    T.check_device = refused_on_rank_0
sys.exit(main(["train", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("refuses, batch_size, said", [
    ("rank 0", 8, "--device cuda:0: not on this machine"),
    ("both", 7, "--batch-size 7 must be divisible by the 2 processes"),
], ids=["rank 0", "both"])
def test_a_refusal_of_rank_0_before_it_opens_the_store_reaches_the_other_ranks(tmp_path, refuses, batch_size, said):
    """Launched by hand, a new run's rank 0 that refused its own flags on its machine (a device or model folder
    only it lacks, or a batch that does not split, refused by every rank alike) ended before it opened the store
    it hosts. A rank 1 that passed its own checks then waited JOIN_WAIT_S (300 s) to join it and said only
    that rank 0 'did not open the store'; one that refused too waited TELL_WAIT_S (30 s) to tell rank 0, gone,
    before it said its own error, where it ended at once before. Rank 0 now hosts the store a moment to
    put its refusal there: rank 1 ends at once with rank 0's message, or its own, exit 2 on both."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "batch_size": batch_size}.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, RANK_0_REFUSES_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags,
                                                    extra_env={"REFUSES": refuses})
    for code, err in ((code0, err0), (code1, err1)):
        assert code == 2 and err.endswith(f"trainer-minimal: error: {said}\n") and "Traceback" not in err, err[-3000:]
    assert not (tmp_path / "run").exists()


RANK_0_REFUSES_LATE_SCRIPT = """
import os, pathlib, sys, time
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = 40  # rank 1, not told, says after this (and torch's backoff) that rank 0 did not open the store
T.TELL_WAIT_S = 1  # rank 0, refused, holds the store open this long for rank 1 to join and be told
marks = pathlib.Path(os.environ["MARKS"])
own = T.check_device
def refused_late_on_rank_0(cfg):  # rank 0's checks take long (a large checkpoint's checksums), then refuse
    if os.environ["RANK"] == "0":
        while not (marks / "rank 1 joins").exists():
            time.sleep(0.05)
        time.sleep(float(os.environ["LATE_BY"]))  # rank 1 waits for the store meanwhile
        raise ValueError("--device cuda:0: not on this machine")
    return own(cfg)
T.check_device = refused_late_on_rank_0
reached = T.rendezvous_store
def joining(wait_s=None):
    (marks / f"rank {os.environ['RANK']} joins").touch()
    return reached(wait_s)
T.rendezvous_store = joining
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_a_rank_that_waited_long_for_the_store_still_hears_rank_0s_refusal(tmp_path):
    """Launched by hand, a rank 1 that waited long for rank 0 to open the store (rank 0's checks of a large
    checkpoint, or rank 1 started well before it) joined it seconds after it opened: torch's client retries its
    connection ever less often (one that had waited 30 s joined 8 s after the store opened). A refusal of rank
    0's, held in the store TELL_WAIT_S (30 s; 1 here) for the others to join and read, was gone by then, and rank
    1 waited out JOIN_WAIT_S (300 s; 40 here) to say only that rank 0 'did not open the store', exit 1. Rank 1
    now knocks at the store a few times a second and joins once it is open: it ends with rank 0's refusal, exit 2."""
    pytest.importorskip("torch.distributed")
    marks = tmp_path / "marks"
    marks.mkdir()
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, RANK_0_REFUSES_LATE_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags,
                                                    extra_env={"MARKS": str(marks), "LATE_BY": "30"})
    said = "trainer-minimal: error: --device cuda:0: not on this machine\n"
    assert code0 == 2 and err0.endswith(said) and "Traceback" not in err0, err0[-3000:]
    assert code1 == 2 and err1.endswith(said) and "Traceback" not in err1, err1[-3000:]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("leaves, code1, said0", [
    ("refuses", 2, "trainer-minimal: error: rank 1 of 2 refused: --device cuda:1: not on this machine"),
    ("crashes", 1, "trainer-minimal: error: rank 1 of 2 ended (RuntimeError) while it checked this run's settings"),
    ("killed", 9, "trainer-minimal: error: rank 1 of 2 did not answer within 5 s once it had joined: see its output"),
], ids=["refuses", "crashes", "killed"])
def test_rank_1_ending_after_it_joined_ends_rank_0_with_its_reason(tmp_path, leaves, code1, said0):
    """On --resume rank 1 joins the store for rank 0's settings and only then checks its own machine with them.
    Started by hand, a rank 1 that refused there (a device or model folder only its machine lacks), or ended
    otherwise, left rank 0 waiting a minute for it to say it had read the settings, then in the process group's
    start for torch's 30-minute timeout, deaf to Ctrl-C. Rank 1 now answers rank 0 with its verdict as rank 0
    sends its own, and a rank 1 that never answers is given up after JOIN_WAIT_S (5 s here): rank 0 ends
    with one line naming rank 1 and why, exit 2 for a refusal (1 otherwise), and writes nothing."""
    pytest.importorskip("torch.distributed")
    run = tmp_path / "run"
    train(make_config("scalerl", out=str(run), warmstart_cache=str(tmp_path / "warmstart"), **{**TINY, "max_steps": 2}))
    before = {path.name: path.read_bytes() for path in run.iterdir()}
    (code0, err0), (code1_seen, err1) = launched_by_hand(tmp_path, RANK_1_LEAVES_SCRIPT, "--out", run, "--resume",
                                                         "--max-steps", "4", extra_env={"LEAVES": leaves})
    assert code1_seen == code1, err1[-3000:]
    assert code0 == (2 if leaves == "refuses" else 1) and "Traceback" not in err0, err0[-3000:]
    assert err0.startswith(said0) and len(err0.strip().splitlines()) == 1, err0[-3000:]  # no C++ log above it
    assert {path.name: path.read_bytes() for path in run.iterdir()} == before  # rank 0 wrote nothing


def test_the_store_waits_quieted_log_is_put_back_and_a_level_the_user_set_is_left(monkeypatch):
    """store_wait_logs_quieted mutes torch's C++ log for a wait whose failures are said in one line, and
    puts the level back after; where the user set TORCH_CPP_LOG_LEVEL, they asked to see that log."""
    from trainer_minimal.train import C10_LOG_FATAL, c10_log_level, store_wait_logs_quieted

    level = c10_log_level()
    if level is None:
        pytest.skip("this torch build does not export c10's log level")
    monkeypatch.delenv("TORCH_CPP_LOG_LEVEL", raising=False)
    before = level.value
    with store_wait_logs_quieted():
        assert level.value == C10_LOG_FATAL
    assert level.value == before
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "INFO")
    with store_wait_logs_quieted():
        assert level.value == before


RANK_0_CRASHES_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = 5
own = T.update
def crashed(cfg, model, optimizer, mb, state, world):
    if os.environ["RANK"] == "0" and state["step"] == int(os.environ["CRASH_AT_STEP"]):
        raise RuntimeError("a bug on rank 0")
    return own(cfg, model, optimizer, mb, state, world)
T.update = crashed
if os.environ["RANK"] == "0" and os.environ["CRASH_AT_STEP"] == "own checks":  # its machine's, on its own flags
    def crashed_in_own_checks(cfg):
        raise RuntimeError("a bug on rank 0")
    T.check_device = crashed_in_own_checks
if os.environ["RANK"] == "0" and os.environ["CRASH_AT_STEP"] == "checks":  # the run folder's, then
    def crashed_in_checks(cfg, **_):
        raise RuntimeError("a bug on rank 0")
    T.preflight = crashed_in_checks
if os.environ["RANK"] == "0" and os.environ["CRASH_AT_STEP"] == "lock":  # the store is open, rank 1 waits on it
    def crashed_in_lock(out):
        raise RuntimeError("a bug on rank 0")
    T.lock_run_folder = crashed_in_lock
sys.exit(main(["train", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("crash_at", ["own checks", "checks", "lock", "1"])
def test_a_crash_of_rank_0_is_one_line_on_the_rank_left(tmp_path, crash_at):
    """Rank 0 of a launch by hand crashed (a bug: its traceback is the real error) and rank 1 ended in a torch
    traceback of its own: gloo's 'RuntimeError: ... Read error ...: Connection reset by peer' mid-run, the store's
    'DistNetworkError: Failed to recv, got 0 bytes' while it waited for rank 0's verdict, or it waited 30
    minutes to join a store rank 0 never opened (the join is bounded since the commit before). Rank 1 now says rank 0 ended in one line, exit 1.
    A crash in rank 0's checks of a new run, before it opened the store, left rank 1 waiting JOIN_WAIT_S (300 s,
    5 here) to join it, then saying only that rank 0 'did not open the store': rank 0 now opens it to say it
    ended, as rank 1 tells rank 0 of its own crash there, and rank 1 ends at once naming rank 0 and the error
    (as it does for a crash in rank 0's checks of the run folder once the store is open: 'lock')."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, RANK_0_CRASHES_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags,
                                                    extra_env={"CRASH_AT_STEP": crash_at})
    assert code0 == 1 and "Traceback" in err0 and "RuntimeError: a bug on rank 0" in err0  # its own, kept
    assert code1 == 1 and "Traceback" not in err1, err1[-3000:]
    if crash_at != "1":
        assert err1.endswith("trainer-minimal: error: rank 0 of 2 ended (RuntimeError) while it checked this run's "
                             "settings: see its output\n"), err1[-3000:]
    else:
        assert "rank 0 ended: see its output" in err1, err1[-3000:]
    if crash_at not in ("own checks", "checks"):  # joined, it says nothing but its line (torch's C++ log of the wait was above it);
        # a join's log stays: only there does torch say why a connect failed (a MASTER_ADDR that does not resolve)
        assert len(err1.strip().splitlines()) == 1, err1[-3000:]


STOPPED_IN_CHECKS_SCRIPT = """
import os, pathlib, signal, sys, time
import trainer_minimal.train as T
from trainer_minimal.cli import main

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a background launch may ignore it
T.JOIN_WAIT_S = 10  # a rank not told says after this that the other did not come
T.STOPPED_TELL_WAIT_S = 10  # not 2 s: a loaded machine's slow join is no failure of the telling tested here
marks = pathlib.Path(os.environ["MARKS"])
rank, where = os.environ["RANK"], os.environ["STOPPED_IN"]
def slow(check):  # the stopped rank's check takes long (a large checkpoint's checksums): it is stopped there
    def slowly(cfg, **kwargs):
        if rank == os.environ["STOPPED_RANK"]:
            (marks / "checking").touch()
            time.sleep(60)
        return check(cfg, **kwargs)
    return slowly
if where == "own checks":  # its machine's, on its own flags, before it joins
    T.check_device = slow(T.check_device)
else:  # rank 0's of the run folder, on its own flags, before it opens the store
    T.preflight = slow(T.preflight)
reached = T.rendezvous_store
def joining(wait_s=None):  # the other rank waits for the store, its own checks done
    (marks / f"rank {rank} joins").touch()
    return reached(wait_s)
T.rendezvous_store = joining
sys.exit(main(["train", *sys.argv[1:]]))
"""


def stopped_when_both_are_there(marks, stopped_rank, signum):
    """meanwhile of launched_by_hand: signum sent to stopped_rank once it is in its slow check and the other rank
    waits for the store."""
    other = marks / f"rank {1 - stopped_rank} joins"

    def stop(ranks):
        deadline = time.monotonic() + 60
        while not ((marks / "checking").exists() and other.exists()):
            if time.monotonic() > deadline or any(rank.poll() is not None for rank in ranks):
                return  # a rank ended first: its output says why, asserted below
            time.sleep(0.05)
        ranks[stopped_rank].send_signal(signum)
    return stop


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("stopped_rank, stopped_in, signum, how, said", [
    (0, "own checks", signal.SIGINT, "interrupted", "interrupted before the run started"),
    (0, "run folder's checks", signal.SIGTERM, "stopped by SIGTERM", "stopped by SIGTERM before the run started"),
    (1, "own checks", signal.SIGINT, "interrupted", None),
], ids=["rank 0 own checks, Ctrl-C", "rank 0 run folder's checks, SIGTERM", "rank 1 own checks, Ctrl-C"])
def test_a_rank_stopped_in_its_checks_before_the_store_ends_the_other_at_once(tmp_path, stopped_rank, stopped_in,
                                                                                signum, how, said):
    """Launched by hand, a new run's rank 0 stopped by Ctrl-C or SIGTERM in its own checks, before it opened the
    store it hosts, ended as asked (exit 130, 143), but told no one: rank 1 waited JOIN_WAIT_S (300 s, 10 here) to
    join, then said only that rank 0 'did not open the store'; as rank 0 did for a rank 1 stopped in its checks
    before it joined ('did not join'). The stopped rank now tells the others as it tells a crash there, waiting a
    moment at most, and ends as it did; the other ends at once: 'rank 0 of 2 was interrupted while it checked ...'."""
    pytest.importorskip("torch.distributed")
    marks = tmp_path / "marks"
    marks.mkdir()
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    said_by = launched_by_hand(tmp_path, STOPPED_IN_CHECKS_SCRIPT, "--out", tmp_path / "run", "--warmstart-cache",
                               tmp_path / "warmstart", *flags,
                               extra_env={"MARKS": str(marks), "STOPPED_RANK": str(stopped_rank), "STOPPED_IN": stopped_in},
                               meanwhile=stopped_when_both_are_there(marks, stopped_rank, signum))
    (stopped_code, stopped_err), (other_code, other_err) = said_by[stopped_rank], said_by[1 - stopped_rank]
    assert stopped_code == 128 + signum and "Traceback" not in stopped_err, stopped_err[-3000:]  # as asked, as before
    if said:  # rank 0 says the stop; another rank leaves it to rank 0, as under torchrun
        assert f"trainer-minimal: {said} (nothing was written)" in stopped_err, stopped_err[-3000:]
    assert other_code == 1 and other_err.endswith(
        f"trainer-minimal: error: rank {stopped_rank} of 2 was {how} while it checked this run's settings\n"
    ) and "Traceback" not in other_err, other_err[-3000:]
    assert not (tmp_path / "run").exists()


def test_a_port_in_use_under_a_launch_by_hand_is_not_said_to_be_a_rank_that_ended(tmp_path):
    """Rank 0 of a launch by hand could not open the store: its MASTER_PORT was another program's. torch says
    so (DistNetworkError: '... failed to listen ... address already in use'), and the rank said instead
    'rank 1 ended: see its output (this rank, 0 of 2, lost its connection: ...)': no rank had even started
    to join, and the one to look at was this one. The store's own error is said as it was before."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(taken.getsockname()[1]), "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
        done = subprocess.run([sys.executable, "-m", "trainer_minimal", "train", "--out", str(tmp_path / "run"),
                               "--warmstart-cache", str(tmp_path / "warmstart"), *flags],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ended: see its output" not in done.stderr, done.stderr[-3000:]
    assert "address already in use" in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_store_that_cannot_be_reached_to_tell_the_others_leaves_the_ranks_own_error(tmp_path, rank):
    """A new run's rank whose own flags are refused joins the store only to tell the others (told_rank_0,
    told_the_other_ranks). Where it cannot (a MASTER_PORT that is no number: torch's ValueError 'invalid
    literal for int()'), rank 1 said that in place of its own error, and rank 0 printed a thread's traceback
    above its own. Each now says its own error alone, exit 2."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "lr": -1}.items()]
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "abc",
           "WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank}
    done = subprocess.run([sys.executable, "-m", "trainer_minimal", "train", "--out", str(tmp_path / "run"), *flags],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == "trainer-minimal: error: --lr must be > 0, got -1.0\n", done.stderr[-3000:]


def refused_by_rank_0(torchrun):
    """Rank 0 refused and every rank ended with its refusal (exit 2), or was ended by torchrun on its way
    out (SIGTERM) once another rank had exited 2: which rank exits first is a race (rank 1, sent the
    refusal, can end before rank 0 and have rank 0 ended); not killed at `timeout`'s limit (exit 124)."""
    codes = dict(re.findall(r"rank\s+: (\d+) \(local_rank: \d+\)\s+exitcode\s+: (-?\d+)", torchrun.stderr))
    return torchrun.returncode == 1 and "2" in codes.values() and set(codes.values()) <= {"2", "-15"}


@pytest.mark.slow
def test_a_resume_refused_or_ended_on_rank_0_ends_every_rank_with_its_message(tmp_path):
    """With the run folder on rank 0's machine alone, rank 1 said '--resume: no checkpoint in run' for every
    resume, whatever rank 0 found. Rank 0's verdict now ends both ranks: a changed setting or a damaged
    checkpoint refused with rank 0's message (exit 2, no hang), a finished run said so (exit 0)."""
    pytest.importorskip("torch.distributed")
    (tmp_path / "machine0").mkdir()
    train(make_config("scalerl", out=str(tmp_path / "machine0" / "run"),
                      warmstart_cache=str(tmp_path / "machine0" / "warmstart"), **{**TINY, "max_steps": 2}))

    done = torchrun_on_two_machines(tmp_path, "--out", "run", "--resume")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("already finished at step 2 of 2") == 1

    done = torchrun_on_two_machines(tmp_path, "--out", "run", "--resume", "--max-steps", "4", "--lr", "1e-3")
    assert refused_by_rank_0(done), done.stderr[-3000:]
    assert "--resume: the run in run was started with other settings (--lr" in done.stderr
    assert "no checkpoint" not in done.stderr

    ckpt = tmp_path / "machine0" / "run" / "ckpt.pt"
    data = bytearray(ckpt.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte changed inside the weights
    ckpt.write_bytes(bytes(data))
    done = torchrun_on_two_machines(tmp_path, "--out", "run", "--resume", "--max-steps", "4")
    assert refused_by_rank_0(done), done.stderr[-3000:]
    assert "run/ckpt.pt is damaged" in done.stderr
    assert "no checkpoint" not in done.stderr
    assert list((tmp_path / "machine1").iterdir()) == []


RANK_1_CHECKS_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = 5
own, calls = T.check_device, []
def ended_at_rank_1s_check(cfg):  # once rank 1 has checked its own flags and is checking rank 0's: no training
    calls.append(cfg)
    if os.environ["RANK"] == "1" and len(calls) == 2:
        raise ValueError("ended before training")
    return own(cfg)
T.check_device = ended_at_rank_1s_check
args = sys.argv[1:]
if os.environ["RANK"] == "1":  # rank 1's own command line: another seed and learning rate
    args = [arg for arg in args if not arg.startswith("--lr=")] + ["--seed", "1", "--lr", "0.001"]
sys.exit(main(["train", *args]))
"""


def test_rank_1_launched_by_hand_with_other_flags_says_rank_0s_are_used(tmp_path):
    """Launched by hand, each rank has its own command line, and rank 0's settings (sent through the store)
    silently replaced rank 1's: a rank 1 given --seed 1 --lr 0.001 trained rank 0's seed and learning rate
    without a word. It now says which flags differ, and that rank 0's are used, in one line before it checks
    rank 0's settings on its machine (here that check ends the launch: nothing trains)."""
    pytest.importorskip("torch.distributed")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    (code0, err0), (code1, err1) = launched_by_hand(tmp_path, RANK_1_CHECKS_SCRIPT, "--out", tmp_path / "run",
                                                    "--warmstart-cache", tmp_path / "warmstart", *flags)
    warned = [line for line in err1.splitlines() if "warning" in line]
    assert warned == ["trainer-minimal: warning: rank 1 was started with other settings than rank 0: --seed 1 "
                      "(rank 0's: 0); --lr 0.001 (rank 0's: 0.002); rank 0's are used"], err1[-3000:]
    assert "warning" not in err0 and code1 == 2 and "ended before training" in err1
    assert code0 == 2 and "rank 1 of 2 refused: ended before training" in err0, err0[-3000:]


def test_only_settings_that_differ_are_said_to_be_replaced_by_rank_0s():
    """A new run compares every setting (the presets and defaults the flags resolve to); a resume only the
    flags given, the rest being the run's, which rank 0 reads. --device's index is none: each rank takes
    cuda:LOCAL_RANK."""
    import dataclasses

    from trainer_minimal.cli import flags_replaced_by_rank_0

    decided = make_config("scalerl", device="cuda:0", **TINY)
    assert flags_replaced_by_rank_0(make_config("scalerl", device="cuda:1", **TINY), {}, decided) == []
    assert flags_replaced_by_rank_0(make_config("dapo", device="cpu", **TINY), {}, decided) == [
        "--preset 'dapo' (rank 0's: 'scalerl')", "--device 'cpu' (rank 0's: 'cuda')",
        "--loss-type 'ppo' (rank 0's: 'cispo')", "--aggregation 'token' (rank 0's: 'prompt')",
        "--adv-norm 'group' (rank 0's: 'batch')", "--npr-threshold 0.0 (rank 0's: 0.9)",
        "--fp32-logits False (rank 0's: True)"]
    given = {"seed": 1}
    assert flags_replaced_by_rank_0(make_config("scalerl", **given, **TINY), given, decided) == [
        "--seed 1 (rank 0's: 0)", "--device 'cpu' (rank 0's: 'cuda')"]
    resumed = dataclasses.replace(decided, resume=True)
    assert flags_replaced_by_rank_0(None, {"resume": True, "max_steps": 4}, resumed) == []
    assert flags_replaced_by_rank_0(None, {"resume": True, "max_steps": 8}, resumed) == ["--max-steps 8 (rank 0's: 4)"]


def test_settings_that_change_nothing_on_rank_1_are_not_said_to_be_replaced(tmp_path):
    """Rank 1 launched by hand was warned that rank 0's settings replace its own --out written otherwise for the
    same folder ('run' and './run/', an absolute path, a symlink), and its own run name, warm-start cache and
    advisor settings: no rank but 0 reads them (rank 0 alone writes the run folder and the cache, logs the run
    and asks the advisor), whatever their values. A model folder, which every rank loads, written otherwise is
    the same folder; another one is still said, as is advisor_every, whose turns every rank follows."""
    import dataclasses

    from trainer_minimal.cli import flags_replaced_by_rank_0

    (tmp_path / "models" / "lm").mkdir(parents=True)
    (tmp_path / "other-lm").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "models" / "lm")
    decided = dataclasses.replace(make_config("scalerl", out=str(tmp_path / "run"), **TINY),
                                  model_path=str(tmp_path / "models" / "lm"))
    for out in (os.path.relpath(tmp_path / "run"), f"{tmp_path / 'run'}/", str(tmp_path / "elsewhere")):
        own = dataclasses.replace(decided, out=out, run_id="mine", recipe="mine", warmstart_cache=str(tmp_path),
                                  advisor_reference=str(tmp_path), advisor_budget=1e9, advisor_rules="target=0.5",
                                  advisor_priors="b_mu=0.5")
        assert flags_replaced_by_rank_0(own, {}, decided) == [], out
        given = {"resume": True, "out": out, "run_id": "mine"}
        assert flags_replaced_by_rank_0(None, given, dataclasses.replace(decided, resume=True)) == [], out
    for model_path in (f"{tmp_path / 'link'}/", os.path.relpath(tmp_path / "models" / "lm")):
        assert flags_replaced_by_rank_0(dataclasses.replace(decided, model_path=model_path), {}, decided) == []
    assert flags_replaced_by_rank_0(dataclasses.replace(decided, model_path=str(tmp_path / "other-lm")), {}, decided) == [
        f"--model-path {str(tmp_path / 'other-lm')!r} (rank 0's: {str(tmp_path / 'models' / 'lm')!r})"]
    assert flags_replaced_by_rank_0(dataclasses.replace(decided, model_path=""), {}, decided) == [
        f"--model-path '' (rank 0's: {str(tmp_path / 'models' / 'lm')!r})"]
    assert flags_replaced_by_rank_0(dataclasses.replace(decided, advisor_every=2), {}, decided) == [
        "--advisor-every 2 (rank 0's: 0)"]


COUNTED_CHECKS_SCRIPT = """
import os, sys
import trainer_minimal.train as T
from trainer_minimal.cli import main

T.JOIN_WAIT_S = 20
own, seeds = T.check_this_machine, []
def counted(cfg):  # the seed says whose settings were checked: this rank's own, or rank 0's
    seeds.append(cfg.seed)
    return own(cfg)
T.check_this_machine = counted
T.run_training = lambda cfg, names: None  # the checks alone
args = sys.argv[1:]
if os.environ["RANK"] == "1" and os.environ["RANK_1_SEED"]:
    args = [*args, "--seed", os.environ["RANK_1_SEED"]]
code = main(["train", *args])
os.write(2, f"rank {os.environ['RANK']} exit {code}: this machine checked for seeds {seeds}\\n".encode())
sys.exit(code)
"""


@pytest.mark.parametrize("resume, rank_1_seed, checked", [
    (False, "", ([0], [0])),
    (False, "1", ([0], [1, 0])),  # rank 1 checks its own flags, then rank 0's, which differ
    (True, "", ([0], [0])),
], ids=["new run", "rank 1 with other flags", "resume"])
def test_each_rank_checks_its_machine_once(tmp_path, resume, rank_1_seed, checked):
    """Every rank ran its machine's checks (the model folder and its tokenizer, the device, the tasks' data) two
    or three times before training, with the same settings: a new run's rank 1 on its own flags, again on rank
    0's in the CLI, and again in train(); rank 0 in the CLI's checks twice and again in train(); on --resume,
    each twice. Each rank now checks once, and a rank 1 started with other flags than rank 0 checks both."""
    pytest.importorskip("torch.distributed")
    run = tmp_path / "run"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "max_steps": 2}.items()]
    if resume:
        train(make_config("scalerl", out=str(run), warmstart_cache=str(tmp_path / "warmstart"), **{**TINY, "max_steps": 2}))
        flags = ["--resume", "--max-steps", "4"]
    said = launched_by_hand(tmp_path, COUNTED_CHECKS_SCRIPT, "--out", run, "--warmstart-cache", tmp_path / "warmstart",
                            *flags, extra_env={"RANK_1_SEED": rank_1_seed})
    for rank, ((code, err), seeds) in enumerate(zip(said, checked, strict=True)):
        assert code == 0 and f"rank {rank} exit 0: this machine checked for seeds {seeds}" in err, err[-3000:]


def test_a_single_process_checks_its_machine_once(tmp_path, monkeypatch):
    """One process ran its machine's checks three times before training: twice in the CLI's checks, and again in
    train(). It now checks once."""
    import trainer_minimal.train as T

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    checked = []
    own = T.check_this_machine
    monkeypatch.setattr(T, "check_this_machine", lambda cfg: checked.append(cfg) or own(cfg))
    monkeypatch.setattr(T, "run_training", lambda cfg, names: None)  # the checks alone
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    assert main(["train", "--out", str(tmp_path / "run"), *flags]) == 0
    assert len(checked) == 1


SILENT_PORT_SCRIPT = """
import os, socket, threading
silent = socket.socket()  # another program's port: it takes connections and answers nothing (a web server's
silent.bind(("127.0.0.1", 0))  # waits for a request line that torch's client never sends)
silent.listen(8)
held = []
threading.Thread(target=lambda: [held.append(silent.accept()) for _ in iter(int, 1)], daemon=True).start()
os.environ.update(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1",
                  MASTER_PORT=str(silent.getsockname()[1]))
import trainer_minimal.train as T
try:
    T.rendezvous_store(wait_s=3)
except T.RankLost as err:
    print(err)
"""


def test_a_rank_whose_master_port_is_another_programs_says_so_within_its_wait(tmp_path):
    """Launched by hand with a MASTER_PORT that another program listens on (and answers nothing), a rank other
    than 0 found it open (store_opened_before) and torch's client then waited for the store's answer forever,
    its timeout passed, deaf to it: no line, no end. The join is now bounded by its wait, and said in a line."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "silent_port.py"
    script.write_text(SILENT_PORT_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and "did not answer as the store" in done.stdout, done.stdout + done.stderr[-3000:]
