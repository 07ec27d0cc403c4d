# The GPU bundle (benchmarks/gpu1/bundle.py) on the lent GPU machine, for every GPU script: sourced,
#   S=/tmp/WORK parts_root=DIR here=REPO; . benchmarks/gpu1/bundle_env.sh
#   case $? in 0) ;; 1) exit 0 ;; *) exit 2 ;; esac
# copies this call's carried part(s) (DIR/.gpu1p<k>/) to $S/carry, where they outlive the call while
# the machine stays warm (30 s after a call: make the calls back to back), checks each against the
# manifest (benchmarks/gpu1/install.py: a missing or damaged part stops here, named, with the
# rebuild command), and once all are there unpacks the bundle into $S/bundle and exports what its
# programs need. Returns 0: installed and exported; 1: this call brought one part of several; 2: a
# bad part.
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
mkdir -p "$S/carry" && cp -r "$parts_root"/.gpu1p* "$S/carry/" 2>/dev/null
python3 "$here/benchmarks/gpu1/install.py" "$S/carry" "$S/bundle" --check
case $? in 0) ;; 1) return 1 ;; *) return 2 ;; esac
python3 "$here/benchmarks/gpu1/install.py" "$S/carry" "$S/bundle" || return 2
B=$S/bundle
export PYTHONPATH=$B/site PATH=$B/bin:$B/jre/bin:$PATH JAVA_HOME=$B/jre DISABLE_VERSION_CHECK=1 \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
# NVLink multicast stays off (the lent machines ask for it); vLLM without flashinfer (not carried)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
return 0
