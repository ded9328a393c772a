"""nvlinkrs, an open device linker for CUDA (a drop-in for NVIDIA's nvlink), as a wheel: the
paths of what the wheel installed. The `nvlinkrs` program is on the environment's PATH (the
wheel's scripts); the drop-in libnvJitLink is inside this package.

    python -m nvlinkrs preload     # the drop-in's path, for LD_PRELOAD
"""

import os
import shutil

__all__ = ["drop_in", "program"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def drop_in():
    """The drop-in libnvJitLink (soname libnvJitLink.so.13) this wheel installed."""
    return os.path.join(_HERE, "lib", "libnvJitLink.so.13")


def program():
    """The nvlinkrs program this wheel installed (its scripts folder: the venv's bin, or
    ~/.local/bin for a user install), else the one on PATH, else None."""
    try:
        from importlib.metadata import files

        for f in files("nvlinkrs") or []:
            if f.name == "nvlinkrs" and f.parent.name in ("bin", "Scripts"):
                path = str(f.locate())
                if os.path.isfile(path):
                    return os.path.abspath(path)
    except Exception:
        pass
    return shutil.which("nvlinkrs")
