"""Check, join and unpack the GPU bundle (benchmarks/gpu1/bundle.py) on the GPU machine.

    python3 benchmarks/gpu1/install.py PARTS_ROOT DEST [--check]

PARTS_ROOT holds the carry folders ``.gpu1p<k>/`` (each: one part and the bundle's manifest.json).
Every part present is checked (size, sha256); ``--check`` stops there (exit 0: all here and good; 1:
others still to come). Else the parts are joined, checked and unpacked into DEST; DEST/installed.json
names the bundle, so a second call does nothing. A missing or damaged part: exit 2, one line naming
it and the rebuild command. Standard library only (no gentax environment there yet).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path

PART_PREFIX = ".gpu1p"
MANIFEST = "manifest.json"


class BundleError(Exception):
    """A missing or damaged part, or manifests that disagree (the message says which and what to do)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(parts_root: Path) -> dict:
    """The bundle's manifest from the carry folders (all copies must name the same bundle)."""
    found = sorted(parts_root.glob(f"{PART_PREFIX}*/{MANIFEST}"))
    if not found:
        raise BundleError(f"no {PART_PREFIX}<k>/{MANIFEST} under {parts_root}: carry the bundle's parts "
                          "(python benchmarks/gpu1/bundle.py OUT_DIR --carry-root .)")
    manifests = {path: json.loads(path.read_text()) for path in found}
    bundles = {m["bundle"] for m in manifests.values()}
    if len(bundles) > 1:
        listing = ", ".join(f"{p.parent.name}: {m['bundle'][:12]}" for p, m in manifests.items())
        raise BundleError(f"the carry folders hold parts of different bundles ({listing}): "
                          f"carry every part of one build ({next(iter(manifests.values()))['rebuild']})")
    return next(iter(manifests.values()))


def part_folder(index: int) -> str:
    return f"{PART_PREFIX}{index}"


def check_parts(parts_root: Path, manifest: dict) -> tuple[list[Path], list[str]]:
    """(paths of the parts here and good, names of those not here yet); a part that is here but has
    the wrong size or sha256 raises BundleError naming it."""
    good, missing = [], []
    for index, entry in enumerate(manifest["parts"]):
        path = parts_root / part_folder(index) / entry["name"]
        if not path.is_file():
            missing.append(entry["name"])
            continue
        size = path.stat().st_size
        if size != entry["bytes"] or sha256_file(path) != entry["sha256"]:
            what = f"{size} bytes, expected {entry['bytes']}" if size != entry["bytes"] else "sha256 differs"
            raise BundleError(f"bundle part {entry['name']} in {part_folder(index)}/ is damaged ({what}): "
                              f"carry it again, or rebuild the bundle ({manifest['rebuild']}) and carry every part")
        good.append(path)
    return good, missing


def install(parts_root: Path, dest: Path) -> str:
    """Join, check and unpack the bundle into ``dest``; returns what was done (one line)."""
    manifest = read_manifest(parts_root)
    marker = dest / "installed.json"
    if marker.is_file() and json.loads(marker.read_text()).get("bundle") == manifest["bundle"]:
        return f"bundle {manifest['bundle'][:12]} already installed in {dest}"
    good, missing = check_parts(parts_root, manifest)
    if missing:
        folders = [part_folder(i) for i, e in enumerate(manifest["parts"]) if e["name"] in missing]
        raise BundleError(f"bundle part {missing[0]} is missing ({len(missing)} of {len(manifest['parts'])} missing: "
                          f"{', '.join(missing)}): carry {', '.join(folders)}; they come from "
                          f"`{manifest['rebuild']}`")
    start = time.perf_counter()
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    joined = staging / "bundle.tar.xz"
    with joined.open("wb") as out:
        for path in good:
            with path.open("rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 20)
    if sha256_file(joined) != manifest["bundle"]:
        raise BundleError(f"the joined parts do not give bundle {manifest['bundle'][:12]} although each part checks: "
                          f"rebuild it ({manifest['rebuild']}) and carry every part")
    with tarfile.open(joined, "r:xz") as tar:
        tar.extractall(staging, filter="tar")
    joined.unlink()
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    record = {"bundle": manifest["bundle"], "parts": len(manifest["parts"]), "bytes": manifest["bytes"],
              "install_s": round(time.perf_counter() - start, 1)}
    marker.write_text(json.dumps(record) + "\n")
    return f"bundle {manifest['bundle'][:12]} installed in {dest}: {len(good)} parts joined, checked and unpacked in {record['install_s']} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts_root", type=Path, help="the folder holding the .gpu1p<k>/ carry folders")
    ap.add_argument("dest", type=Path)
    ap.add_argument("--check", action="store_true", help="only check the parts here; list those still to come")
    args = ap.parse_args(argv)
    try:
        if args.check:
            manifest = read_manifest(args.parts_root)
            good, missing = check_parts(args.parts_root, manifest)
            print(f"bundle {manifest['bundle'][:12]}: {len(good)} of {len(manifest['parts'])} parts here and good"
                  + (f"; still to come: {', '.join(missing)}" if missing else ""))
            return 1 if missing else 0
        else:
            print(install(args.parts_root, args.dest))
    except BundleError as exc:
        print(f"install.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
