#!/usr/bin/env bash
# One GPU lease, prepared here and run there in one call (device minutes are few: nothing is installed or guessed there).
#
#   benchmarks/gpu_lease.sh prepare [DIR]   # here (needs pip, and the project's venv for the encoder): DIR (default
#                                           # .gpu, git-ignored) gets ../shared/gpu/make-carry.sh's wheels and int8
#                                           # MiniLM, SST-2 from ../shared/data/glue, and this script; ≈ 60 MB with the tree
#   bash .gpu/gpu_lease.sh run [DIR]        # there, from the checkout's root, with DIR carried; BUDGET (default 555 s)
#                                           # bounds the whole, QL (320 s) the quality part; what is left goes to mfu
#
# The run writes to $OUT (the files that come back): quality-results.json, mfu-results.json, their stdout, the
# machine, and logs.tar.xz (every part's logs and MLflow store, no weights).
set -uo pipefail
mode=${1:?prepare or run}; dir=${2:-.gpu}
if [ "$mode" = prepare ]; then
  set -e
  here=$(cd "$(dirname "$0")" && pwd); shared=${SHARED:-$here/../../shared}
  PYTHON=${PYTHON:-python3} bash "$shared/gpu/make-carry.sh" "$dir" --encoder
  tar -cf - -C "$shared/data/glue" SST-2/train.tsv SST-2/dev.tsv | xz -9 > "$dir/sst2.tar.xz"
  cp "$0" "$dir/gpu_lease.sh"
  du -sh "$dir"; exit 0
fi
T0=$(date +%s); BUDGET=${BUDGET:-555}; QL=${QL:-320}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p /tmp/sst2 /tmp/site /tmp/enc
xz -dc "$dir/sst2.tar.xz" | tar -x -C /tmp/sst2
xz -dc "$dir/site.tar.xz" | tar -x -C /tmp/site && xz -dc "$dir/site2.tar.xz" | tar -x -C /tmp/site
# the carry strips Ray's dashboard client; a sweep's local Ray starts its dashboard, which wants both of these
mkdir -p /tmp/site/ray/dashboard/client/build/static && echo '<html></html>' > /tmp/site/ray/dashboard/client/build/index.html
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
cp "$dir"/enc/tok/* /tmp/enc/ && xz -dc "$dir/enc/w.npz.xz" > /tmp/w.npz &&
  python3 "$dir/enc/unpack_encoder.py" /tmp/w.npz /tmp/enc/model.safetensors
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch,transformers,ray,mlflow,optuna;print(torch.__version__,transformers.__version__,ray.__version__,mlflow.__version__,optuna.__version__)"
  echo "unpacked in $(( $(date +%s) - T0 )) s"; } | tee "$OUT/machine.txt"
python3 benchmarks/gpu_suite.py --out /tmp/q --parts quality --limit-s "$QL" --data-dir /tmp/sst2 --encoder /tmp/enc \
  --num-samples 16 --train-limit 8000 --teacher-epochs 1 --before-limit-s 0 --sweep-set search.confirm=false \
  2>&1 | tee "$OUT/quality.out"
ML=$(( BUDGET - ($(date +%s) - T0) - 15 ))
echo "mfu bound $ML s"
if [ "$ML" -gt 60 ]; then
  python3 benchmarks/gpu_suite.py --out /tmp/m --parts mfu --limit-s "$ML" --mfu-layouts unpadded+compile,padded+compile \
    2>&1 | tee "$OUT/mfu.out"
fi
cp /tmp/q/results.json "$OUT/quality-results.json" 2>/dev/null; cp /tmp/m/results.json "$OUT/mfu-results.json" 2>/dev/null
tar -cf - -C /tmp --exclude='*/teacher/*' --exclude='*/best/*' --exclude='*.safetensors' --exclude='*.onnx' \
  --exclude='*/ray-*' q m 2>/dev/null | xz -1 > "$OUT/logs.tar.xz"
echo "total $(( $(date +%s) - T0 )) s"
