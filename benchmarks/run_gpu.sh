#!/usr/bin/env bash
# Every GPU check in one go, for a session on a machine with a CUDA device: the card's state, the
# gpu-marked tests (kernels bit for bit against the CPU path, measures on CUDA against numpy), then
# bench_gpu.py (measures at n = 400,000, d = 800 in float64 and float32; rounding bandwidth).
# Usage: bash benchmarks/run_gpu.sh [OUTDIR]   -- logs go to OUTDIR (default: the current folder).
set -uo pipefail
out=${1:-.}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu,memory.used \
  --format=csv 2>&1 | tee "$out/nvidia_smi.txt"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| cupy', cupy.__version__)"
python3 -m pytest -q -p no:cacheprovider -m "not slow" tests/test_lowprec_gpu.py 2>&1 | tee "$out/pytest_gpu.txt" || status=1
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_measures_properties.py tests/test_measures_gpu.py \
  tests/test_lowprec_training.py 2>&1 | tee -a "$out/pytest_gpu.txt" || status=1
python3 benchmarks/bench_gpu.py --profile "${@:2}" 2>&1 | tee "$out/bench_gpu.txt" || status=1
exit $status
