#!/usr/bin/env python3
"""Writes the nvlinkrs wheel (scripts/wheel.sh builds and strips what goes in, then runs
this): the `nvlinkrs` program (and the LLVM helper when given) as the wheel's scripts, so
that pip puts them on the environment's PATH; the package `nvlinkrs` (python/nvlinkrs)
with the drop-in libnvJitLink as nvlinkrs/lib/libnvJitLink.so.13; metadata depending on
NVIDIA's CUDA 13 wheels for ptxas, libNVVM, libnvJitLink and libcudadevrt. The platform
tag is manylinux_2_N for the newest glibc symbol version the binaries need (read off
their dynamic symbols). The archive is deterministic: sorted entries, fixed times.
Usage: wheel.py OUT_DIR VERSION PROGRAM DROP_IN [HELPER]"""

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

# NVIDIA's wheels a link needs: ptxas and nvlink's neighbours (nvcc), libNVVM, the
# finalizer and the drop-in's hand-over (nvJitLink), libcudadevrt (the runtime)
REQUIRES = [
    "nvidia-cuda-nvcc~=13.5",
    "nvidia-nvvm~=13.5",
    "nvidia-nvjitlink~=13.5",
    "nvidia-cuda-runtime~=13.5",
]
SUMMARY = "An open device linker for CUDA: a drop-in for nvlink, with LTO, a cache and a drop-in libnvJitLink"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def glibc_tag(paths):
    """manylinux_2_N_x86_64 for the newest GLIBC_2.N any of `paths` needs."""
    newest = 17
    for p in paths:
        syms = subprocess.run(["objdump", "-T", p], capture_output=True, text=True, check=True).stdout
        for minor in re.findall(r"GLIBC_2\.(\d+)", syms):
            newest = max(newest, int(minor))
    machine = os.uname().machine
    return f"manylinux_2_{newest}_{machine}"


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    out, version, program, drop_in = argv[:4]
    helper = argv[4] if len(argv) == 5 else None
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.join(here, "..", "python", "nvlinkrs")
    binaries = [program, drop_in] + ([helper] if helper else [])
    tag = glibc_tag(binaries)
    data = f"nvlinkrs-{version}.data"
    info = f"nvlinkrs-{version}.dist-info"
    entries = []  # (name, bytes, executable)
    for f in sorted(os.listdir(package)):
        if f.endswith(".py"):
            entries.append((f"nvlinkrs/{f}", open(os.path.join(package, f), "rb").read(), False))
    entries.append(("nvlinkrs/lib/libnvJitLink.so.13", open(drop_in, "rb").read(), True))
    entries.append((f"{data}/scripts/nvlinkrs", open(program, "rb").read(), True))
    if helper:
        entries.append((f"{data}/scripts/nvlinkrs-llvm", open(helper, "rb").read(), True))
    metadata = [
        "Metadata-Version: 2.1",
        "Name: nvlinkrs",
        f"Version: {version}",
        f"Summary: {SUMMARY}",
        "License: Apache-2.0",
        "Requires-Python: >=3.8",
        *[f"Requires-Dist: {r}" for r in REQUIRES],
        "",
        "nvlinkrs takes nvlink's command line; `python -m nvlinkrs preload` prints the",
        "drop-in libnvJitLink's path for LD_PRELOAD.",
        "",
    ]
    wheel = ["Wheel-Version: 1.0", "Generator: nvlinkrs scripts/wheel.py", "Root-Is-Purelib: false", f"Tag: py3-none-{tag}", ""]
    entries.append((f"{info}/METADATA", "\n".join(metadata).encode(), False))
    entries.append((f"{info}/WHEEL", "\n".join(wheel).encode(), False))
    record = [record_line(n, b) for n, b, _ in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), False))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"nvlinkrs-{version}-py3-none-{tag}.whl")
    tmp = path + ".part"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, b, executable in entries:
            zi = zipfile.ZipInfo(name, FIXED_TIME)
            zi.external_attr = (0o100755 if executable else 0o100644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, b)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
