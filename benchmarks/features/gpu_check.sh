#!/usr/bin/env bash
# One short GPU session: the CUDA tests, then throughput (fp32 / bf16, batch sizes), then
# CoNLL-2003 on the GPU. Every step has its own time limit so one slow step cannot eat the rest.
#
#   bash benchmarks/features/gpu_check.sh OUT_DIR [CONLL_DIR] [EMBEDDINGS_FILE]
#
# Writes logs and JSON into OUT_DIR. PYTHON (default python3) must have torch with CUDA and
# textorch's dependencies importable (PYTHONPATH may point at the checkout).
set -u
out=${1:?usage: gpu_check.sh OUT_DIR [CONLL_DIR] [EMBEDDINGS_FILE]}
conll=${2:-../shared/data/conll2003}
vectors=${3:-../shared/embeddings/w2v-conll-grobid-100d.txt}
py=${PYTHON:-python3}
mkdir -p "$out"
# The CoNLL-2003 model, its embeddings cache and tagged output: scratch, removed at the end (not in OUT_DIR).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
step() { echo "=== $1 ($(date +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/machine.txt"
$py -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee -a "$out/machine.txt"

step "CUDA tests"
timeout 150 $py -m pytest -q -p no:cacheprovider tests/train/test_cuda.py tests/models/test_crf.py -k cuda 2>&1 | tail -25 | tee "$out/tests.log"

step "throughput"
timeout 170 $py -m benchmarks bench_gpu --devices 1 --sentences 8000 --transformer-sentences 3000 \
    --precisions fp32 bf16 --batch-sizes 32 256 2>&1 | grep -v "it/s]" | tee "$out/bench_gpu.log"
cp benchmarks/results/bench_gpu.json "$out/" 2>/dev/null

if [ -f "$conll/eng.train" ] && [ -f "$vectors" ]; then
    step "CoNLL-2003 BidLSTM_CRF on the GPU (2 epochs)"
    timeout 140 $py -m textorch.cli.main seq train-eval --train "$conll/eng.train" --valid "$conll/eng.testa" \
        --test "$conll/eng.testb" --embeddings "$vectors" --cache-dir "$scratch/textorch-cache" --max-epoch 2 \
        --early-stop false --device cuda --output "$scratch/conll-model" --metrics-json "$out/conll-metrics.json" 2>&1 \
        | grep -v "it/s]" | tail -12 | tee "$out/conll.log"
    for batch in 32 256; do
        timeout 40 $py -m textorch.cli.main seq tag --model "$scratch/conll-model" --input "$conll/eng.testb" --input-format conll \
            --output "$scratch/tagged.conll" --device cuda --batch-size $batch --cache-dir "$scratch/textorch-cache" \
            --stats-json "$out/conll-tag-b$batch.json" 2>&1 | tail -2
        cat "$out/conll-tag-b$batch.json"; echo
    done
fi
step "done"
