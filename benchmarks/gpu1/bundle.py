"""Build what the workstation study needs on a GPU machine that has CUDA torch and transformers
but no internet and no gentax environment (the lent H200: Python 3.12, KINDS.md's package list).

    python benchmarks/gpu1/bundle.py OUT_DIR

OUT_DIR/site/   the distributions (and their requirements) that the study's jobs import beyond that
                machine's image, copied file by file from the venvs that scripts/setup.sh made
                (pure-Python files run under 3.12 as they are; ctypes libraries too) — except those
                with CPython extensions, which are downloaded as cp312 manylinux wheels and unpacked
OUT_DIR/jre/    a Java runtime cut by jlink to the modules ScienceWorld's jar needs (jdeps)
The caller packs OUT_DIR (benchmarks/gpu1/device.sh unpacks it there).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

VENVS = [Path("/opt/gentax/venv-sft"), Path("/opt/gentax/venv")]  # LlamaFactory's own versions first
#: what the study imports on the GPU machine (the workflow, the envs, LlamaFactory for SFT)
ROOTS = ["snakemake", "scienceworld", "gym-sokoban", "rapidfuzz", "alfworld", "textworld", "fast_downward_textworld",
         "gguf", "jsonschema", "tabulate", "llamafactory", "trl", "datasets", "omegaconf", "fire"]
#: on the GPU machine's image already (KINDS.md "Python packages already there"), or never imported there
PRESENT = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs build certifi
charset-normalizer click cloudpickle colorama contourpy cycler einops filelock flatbuffers fonttools frozenlist fsspec
grpcio h11 h5py hf-xet httpcore httpx huggingface-hub idna imageio jinja2 joblib kiwisolver markdown markdown-it-py
markupsafe matplotlib mdurl ml-dtypes mpmath msgpack multidict networkx numpy nvidia-ml-py packaging pandas pathspec
peft pillow pip pluggy propcache protobuf psutil pyarrow pygments pyparsing python-dateutil pyyaml regex requests rich
safetensors scipy sentencepiece setuptools six sympy tabulate tensorboard tiktoken tokenizers torch torchaudio
torchvision tqdm transformers triton typer typing-extensions urllib3 uvloop werkzeug wheel wrapt xxhash yarl zipp
tensorboard-data-server shellingham typing-inspect mypy-extensions pytz tzdata
pygame av gradio gradio-client deepspeed""".split())
#: requirements the study's code paths never import there (jericho's spaCy, LlamaFactory's hub clients,
#: the MILP scheduler's solver binaries: the device runs Snakemake with --scheduler greedy)
NOT_IMPORTED = set("""spacy blis thinc srsly preshed cymem murmurhash wasabi weasel confection catalogue spacy-legacy
spacy-loggers cloudpathlib modelscope modelscope-hub hf-transfer cryptography cffi pycparser pulp""".split())
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_24_x86_64", "manylinux_2_5_x86_64"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> dict[str, metadata.Distribution]:
    found = {}
    for venv in VENVS:
        for site in venv.glob("lib/python3*/site-packages"):
            for dist in metadata.distributions(path=[str(site)]):
                found.setdefault(norm(dist.metadata["Name"]), dist)
    return found


def closure(roots, dists) -> list[str]:
    todo, seen = [norm(r) for r in roots], set()
    while todo:
        name = todo.pop()
        if name in seen or name in PRESENT or name in NOT_IMPORTED:
            continue
        if name not in dists:
            raise SystemExit(f"{name}: not installed in {', '.join(map(str, VENVS))}")
        seen.add(name)
        for line in dists[name].requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"python_version": "3.12", "python_full_version": "3.12.3",
                                                           "extra": ""}):
                todo.append(norm(req.name))
    return sorted(seen)


def has_extension(dist) -> bool:
    return any(str(f).endswith(".so") and "cpython" in str(f) for f in dist.files or [])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    args = ap.parse_args()
    out = Path(args.out)
    site, wheels = out / "site", out / "wheels"
    shutil.rmtree(out, ignore_errors=True)
    site.mkdir(parents=True)
    wheels.mkdir()
    dists = distributions()
    binary = []
    for name in closure(ROOTS, dists):
        dist = dists[name]
        if has_extension(dist):
            binary.append(f"{dist.metadata['Name']}=={dist.version}")
            continue
        base = Path(dist.locate_file(""))
        for rel in dist.files or []:
            src = base / rel
            if "__pycache__" in rel.parts or not src.is_file():
                continue
            # files installed beside the venv (py4j's jar under share/) go to site/share
            dst = site / "share" / Path(*rel.parts[rel.parts.index("share") + 1:]) if rel.parts[0] == ".." else site / rel
            if rel.parts[0] == ".." and "share" not in rel.parts:
                continue  # console scripts (bin/)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    if binary:
        plat = [arg for p in PLATFORMS for arg in ("--platform", p)]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", *plat, "-d", str(wheels), *binary],
                       check=True)
        for wheel in wheels.glob("*.whl"):
            zipfile.ZipFile(wheel).extractall(site)
    shutil.rmtree(wheels)
    print("binary (cp312 wheels):", " ".join(binary))
    jdk = Path("/usr/lib/jvm/java-17-openjdk-amd64")
    jar = next(site.glob("scienceworld/scienceworld.jar"))
    mods = subprocess.run([jdk / "bin" / "jdeps", "--print-module-deps", "--ignore-missing-deps", str(jar)],
                          capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    subprocess.run([jdk / "bin" / "jlink", "--add-modules", f"{mods},jdk.unsupported", "--strip-debug",
                    "--no-man-pages", "--no-header-files", "--compress=2", "--output", str(out / "jre")], check=True)
    print("jre modules:", mods)
    return 0


if __name__ == "__main__":
    sys.exit(main())
