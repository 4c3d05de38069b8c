#!/usr/bin/env bash
# Everything trainer_minimal claims about a GPU, in one pass (CI has none, so this is run by hand):
#   1. tests/test_trainer_gpu.py  (CUDA against CPU numerics, bfloat16 and the FP32 head, FLOPs counted
#      on the GPU, a Hugging Face model training on CUDA and resuming on the CPU, the CLI)
#   2. benchmarks/trainer_gpu.py   (seconds per step, CPU against GPU, the same runs)
#   3. a small GPU sweep of a Llama-architecture model built from a config: runs.csv in the run format
#
#     bash benchmarks/gpu_check.sh OUT_DIR [PYTHON]
#
# It needs torch with CUDA, transformers, numpy and pandas, not forecast/'s PyMC stack (the tests are
# run with --noconftest for that reason). Each part has its own time limit, so one that hangs does not
# take the others with it; the exit status is the first failure's. Where PYTHON's torch sees no CUDA
# device it says so and exits 2 before running anything or making OUT_DIR.
set -u
case "${1:-}" in  # before OUT_DIR is read: --help was taken for a folder's name and every part ran
  -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
out=${1:?usage: gpu_check.sh OUT_DIR [PYTHON]}
py=${2:-python3}
# without CUDA every GPU test skips, which reads as passing, and the rest fails after half a minute;
# on a lent GPU machine with a CPU-only torch that is device time spent on nothing
"$py" -c "
import sys
try:
    import torch
except ImportError as error:
    sys.exit(f'gpu_check.sh: {sys.executable} cannot import torch ({error}); nothing was run')
if not torch.cuda.is_available():
    sys.exit(f'gpu_check.sh: torch {torch.__version__} in {sys.executable} sees no CUDA device; '
             'these checks need a GPU (or a CUDA build of torch); nothing was run')
" || exit 2
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
# a fresh scratch folder per call: with fixed /tmp paths a second call met the first one's runs in its
# sweep folder, and two calls on one machine wrote into each other
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
note() { echo "== $* ($(date -u +%H:%M:%S))"; }

note "machine"
nvidia-smi -L
"$py" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"

note "tests/test_trainer_gpu.py"
timeout 180 "$py" -m pytest --noconftest -p no:cacheprovider -o addopts="-ra --strict-markers" -v \
  tests/test_trainer_gpu.py 2>&1 | tee "$out/gpu_tests.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

note "benchmarks/trainer_gpu.py"
timeout 200 "$py" benchmarks/trainer_gpu.py --steps 8 2>&1 | grep -v -E "Loading weights|Writing model" | tee "$out/trainer_gpu.log"
[ "${PIPESTATUS[0]}" = 0 ] || [ "$status" != 0 ] || status=2

note "GPU sweep: llama-256x4, scalerl and grpo, seeds 0 and 1"
"$py" -c "from trainer_minimal.model import save_untrained_llama as s; s('$work/llama-256', 256, 4, 8)" 2>/dev/null
timeout 150 "$py" -m trainer_minimal sweep --presets scalerl,grpo --seeds 0,1 --workers 4 --out "$work/gpu-sweep" \
  --device cuda --dtype bfloat16 --model-path "$work/llama-256" --max-steps 320 --eval-every 16 2>&1 | tail -20
[ "${PIPESTATUS[0]}" = 0 ] || [ "$status" != 0 ] || status=3
cp "$work/gpu-sweep/runs.csv" "$out/gpu_sweep_runs.csv" 2>/dev/null
tar -czf "$out/gpu_sweep_logs.tgz" --exclude='*.pt' -C "$work" gpu-sweep 2>/dev/null  # evals and logs, also of a run cut short
note "done, status $status"
exit $status
