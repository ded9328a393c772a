"""One LTO link through an nvJitLink library by ctypes (the way cuda.bindings calls it):
python3 jitlink_once.py LIBRARY OUT.cubin ARCH INPUT.ltoir... Exits 1 with the error log
when a call fails."""
import ctypes
import os
import sys

lib_path, out, arch, inputs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
L = ctypes.CDLL(lib_path, mode=os.RTLD_LOCAL)
vp, sz = ctypes.c_void_p, ctypes.c_size_t
L.nvJitLinkCreate.argtypes = [ctypes.POINTER(vp), ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
L.nvJitLinkAddFile.argtypes = [vp, ctypes.c_int, ctypes.c_char_p]
L.nvJitLinkComplete.argtypes = [vp]
L.nvJitLinkGetLinkedCubinSize.argtypes = [vp, ctypes.POINTER(sz)]
L.nvJitLinkGetLinkedCubin.argtypes = [vp, ctypes.c_char_p]
L.nvJitLinkGetErrorLogSize.argtypes = [vp, ctypes.POINTER(sz)]
L.nvJitLinkGetErrorLog.argtypes = [vp, ctypes.c_char_p]
h = vp()
opts = [f"-arch={arch}".encode(), b"-lto"]
rc = L.nvJitLinkCreate(ctypes.byref(h), len(opts), (ctypes.c_char_p * len(opts))(*opts))
for path in inputs:
    rc = rc or L.nvJitLinkAddFile(h, 3, path.encode())  # NVJITLINK_INPUT_LTOIR
rc = rc or L.nvJitLinkComplete(h)
if rc:
    n = sz()
    L.nvJitLinkGetErrorLogSize(h, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value + 1)
    L.nvJitLinkGetErrorLog(h, log)
    sys.exit(f"nvJitLink call failed ({rc}): {log.value.decode(errors='replace')}")
n = sz()
L.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(n))
buf = ctypes.create_string_buffer(n.value)
L.nvJitLinkGetLinkedCubin(h, buf)
open(out, "wb").write(buf.raw)
