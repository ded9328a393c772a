"""nvlinkrs, an open device linker for CUDA (a drop-in for NVIDIA's nvlink), as a wheel: the
paths of what the wheel installed. The `nvlinkrs` program is on the environment's PATH (the
wheel's scripts); the drop-in libnvJitLink is inside this package.

    python -m nvlinkrs preload     # the drop-in's path, for LD_PRELOAD
"""

import glob
import os
import sys

__all__ = ["drop_in", "program"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def drop_in():
    """The drop-in libnvJitLink (soname libnvJitLink.so.13) this wheel installed."""
    return os.path.join(_HERE, "lib", "libnvJitLink.so.13")


def program():
    """The nvlinkrs program this wheel installed, else None. Found from this package's
    own install only: `pip install --target DIR` puts it in DIR/bin; otherwise the RECORD
    of the dist-info beside this package names it (the venv's bin, ~/.local/bin), taken
    only inside this Python's prefix or user base. Never from PATH or another folder of
    sys.path (a stray `nvlinkrs-*.dist-info` in the current directory names nothing)."""
    site = os.path.dirname(_HERE)
    target = os.path.join(site, "bin", "nvlinkrs")
    if os.path.isfile(target):
        return target
    roots = [os.path.realpath(r) for r in (sys.prefix, sys.base_prefix, _user_base()) if r]
    for info in sorted(glob.glob(os.path.join(site, "nvlinkrs-*.dist-info"))):
        try:
            lines = open(os.path.join(info, "RECORD"), encoding="utf-8").read().splitlines()
        except OSError:
            continue
        for line in lines:
            name = line.split(",", 1)[0].replace("\\", "/")
            if not name.endswith("/nvlinkrs") or "/bin/" not in name:
                continue
            path = os.path.realpath(os.path.join(site, name))
            inside = any(path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)
            if inside and os.path.isfile(path):
                return path
    return None


def _user_base():
    try:
        import site as site_module

        return site_module.getuserbase()
    except Exception:
        return None
