"""Command latency: how long the command line takes to answer when no sampling is needed.

Each command runs in a fresh interpreter, as a user or a script calls it:
  baseline: the same command in an interpreter that imports PyMC (and with it PyTensor and
            ArviZ) first, which is what these commands did before PyMC was imported only when a
            fit samples and ArviZ only when a user asks for `fc.idata`;
  ours:     the command as shipped.
Commands: `forecast --help`, a rejected table in `fit`, and `predict`, `decide` and `report` on a
saved fit (a fast-mode fit of the shipped trainer sweep, made once before timing). Prints the
median wall time of `--repeats` calls of each and the ratio. Target: every command that only
reads a saved fit answers in under 3 s.

    python benchmarks/command_latency.py               # 3-5 min on 2 cores: a fast fit, then 35 calls
    python benchmarks/command_latency.py --repeats 1   # quick: about 2 min
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import print_provenance  # noqa: E402

RUNS = ROOT / "examples" / "trainer_sweep" / "runs.csv"
SAMPLING_LIBRARIES = "import pymc, arviz; "


# the exit status each command must answer with; a command that fails otherwise is not timed
EXPECTED_EXIT = {"fit, rejected table": 2}


def seconds_to_answer(argv: list[str], *, preload: str, expect: int = 0) -> float:
    """Wall time of `forecast ARGV` in a fresh interpreter that first runs `preload`. A command
    that exits other than `expect` raises: a crash is not a fast answer."""
    code = f"{preload}import sys; from forecast.cli import main; sys.exit(main(sys.argv[1:]))"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=600)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise RuntimeError(f"forecast {' '.join(argv)} exited {done.returncode}, not {expect}"
                           f"{' (with ' + preload.strip() + ')' if preload else ''}: {done.stderr[-2000:]}")
    return seconds


def commands(folder: Path) -> dict[str, list[str]]:
    bad = folder / "bad.csv"
    bad.write_text("run_id,recipe,compute,metric\na,x,1,0.2\na,x,2,1.7\n")
    fit = folder / "fit"
    return {
        "--help": ["--help"],
        "fit, rejected table": ["fit", str(bad), "--out", str(folder / "never")],
        "predict, saved fit": ["predict", str(fit), "--compute", "1e12", "--json"],
        "decide, saved fit": ["decide", str(fit), "--budget", "1e12", "--json"],
        "report, saved fit": ["report", str(fit), "--budget", "1e12", "-o", str(folder / "report.html")],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls of each command on each side (median; default 3)")
    args = parser.parse_args(argv)
    print_provenance("benchmarks/command_latency.py", vars(args))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        made = subprocess.run([sys.executable, "-m", "forecast.cli", "fit", str(RUNS), "--out", str(folder / "fit"),
                               "--fast", "--no-progress"], capture_output=True, text=True, cwd=ROOT)
        if made.returncode != 0:
            print(made.stderr[-2000:])
            return 1
        print(f"{'command':<22} {'baseline s':>10} {'ours s':>8} {'ratio':>6}")
        for name, command in commands(folder).items():
            expect = EXPECTED_EXIT.get(name, 0)
            seconds_to_answer(command, preload="", expect=expect)  # warm the file cache once
            base = statistics.median(seconds_to_answer(command, preload=SAMPLING_LIBRARIES, expect=expect)
                                     for _ in range(args.repeats))
            ours = statistics.median(seconds_to_answer(command, preload="", expect=expect) for _ in range(args.repeats))
            print(f"{name:<22} {base:>10.2f} {ours:>8.2f} {ours / base:>5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
