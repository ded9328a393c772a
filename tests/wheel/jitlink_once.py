"""One LTO link through an nvJitLink library by ctypes (the way cuda.bindings calls it),
with tests/jitlink/drive.py's binding: python3 jitlink_once.py LIBRARY OUT.cubin ARCH
INPUT.ltoir... Exits 1 with the error log when a call fails."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jitlink"))
from drive import LTOIR, Ctypes  # noqa: E402

lib_path, out, arch, inputs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
L = Ctypes(lib_path)
rc, h = L.create([f"-arch={arch}", "-lto"])
for path in inputs:
    rc = rc or L.add_file(h, LTOIR, path)
rc = rc or L.complete(h)
if rc:
    _, log = L.get(h, "ErrorLog")
    sys.exit(f"nvJitLink call failed ({rc}): {(log or b'').decode(errors='replace')}")
rc, cubin = L.get(h, "LinkedCubin")
if rc:
    sys.exit(f"nvJitLinkGetLinkedCubin failed ({rc})")
open(out, "wb").write(cubin)
