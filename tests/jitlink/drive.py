"""Runs a fixed set of nvJitLink links and writes what each call answered.

    python3 drive.py BACKEND FIXTURES OUTDIR

BACKEND is `ctypes:PATH` (the library at PATH, through ctypes) or `bindings` (NVIDIA's
cuda.bindings.nvjitlink, which finds nvJitLink as it always does: a preloaded drop-in
first). OUTDIR gets results.json (per link: each call's result code, the logs, the
images' sizes) and the images (NAME.cubin, NAME.ptx). tests/jitlink.rs runs it against
the real library and against the drop-in and compares the two.
"""
import ctypes
import hashlib
import json
import os
import sys
import tempfile

CUBIN, PTX, LTOIR, FATBIN, OBJECT, LIBRARY, ANY = 1, 2, 3, 4, 5, 6, 10


class Ctypes:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
        self.path = path
        L, vp, sz = self.lib, ctypes.c_void_p, ctypes.c_size_t
        L.nvJitLinkCreate.argtypes = [ctypes.POINTER(vp), ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
        L.nvJitLinkAddData.argtypes = [vp, ctypes.c_int, ctypes.c_char_p, sz, ctypes.c_char_p]
        L.nvJitLinkAddFile.argtypes = [vp, ctypes.c_int, ctypes.c_char_p]
        L.nvJitLinkComplete.argtypes = [vp]
        L.nvJitLinkDestroy.argtypes = [ctypes.POINTER(vp)]
        for what in ["LinkedCubin", "LinkedPtx", "LinkedLTOIR", "ErrorLog", "InfoLog"]:
            getattr(L, f"nvJitLinkGet{what}Size").argtypes = [vp, ctypes.POINTER(sz)]
            getattr(L, f"nvJitLinkGet{what}").argtypes = [vp, ctypes.c_char_p]

    def create(self, opts):
        h = ctypes.c_void_p()
        arr = (ctypes.c_char_p * max(len(opts), 1))(*[o.encode() for o in opts])
        rc = self.lib.nvJitLinkCreate(ctypes.byref(h), len(opts), arr)
        return rc, h

    def add_data(self, h, kind, data, name):
        return self.lib.nvJitLinkAddData(h, kind, data, len(data), name.encode())

    def add_file(self, h, kind, path):
        return self.lib.nvJitLinkAddFile(h, kind, path.encode())

    def complete(self, h):
        return self.lib.nvJitLinkComplete(h)

    def get(self, h, what):
        size = ctypes.c_size_t()
        rc = getattr(self.lib, f"nvJitLinkGet{what}Size")(h, ctypes.byref(size))
        if rc != 0:
            return rc, None
        buf = ctypes.create_string_buffer(size.value)
        rc = getattr(self.lib, f"nvJitLinkGet{what}")(h, buf)
        return rc, buf.raw if rc == 0 else None

    def destroy(self, h):
        return self.lib.nvJitLinkDestroy(ctypes.byref(h))


class Bindings:
    """cuda.bindings raises nvJitLinkError for a result other than success."""

    def __init__(self):
        from cuda.bindings import nvjitlink

        self.n = nvjitlink

    def call(self, f, *args):
        try:
            return 0, f(*args)
        except self.n.nvJitLinkError as e:
            return int(e.status), None

    def create(self, opts):
        return self.call(self.n.create, len(opts), opts)

    def add_data(self, h, kind, data, name):
        return self.call(self.n.add_data, h, kind, data, len(data), name)[0]

    def add_file(self, h, kind, path):
        return self.call(self.n.add_file, h, kind, path)[0]

    def complete(self, h):
        return self.call(self.n.complete, h)[0]

    def get(self, h, what):
        snake = {"LinkedCubin": "linked_cubin", "LinkedPtx": "linked_ptx",
                 "LinkedLTOIR": "linked_ltoir", "ErrorLog": "error_log",
                 "InfoLog": "info_log"}[what]
        rc, size = self.call(getattr(self.n, f"get_{snake}_size"), h)
        if rc != 0:
            return rc, None
        buf = bytearray(size)
        rc, _ = self.call(getattr(self.n, f"get_{snake}"), h, buf)
        return rc, bytes(buf) if rc == 0 else None

    def destroy(self, h):
        return self.call(self.n.destroy, h)[0]


# a kernel in PTX, for every architecture the test names (as cuda-bindings' own test has one)
PTX_KERNEL = """.version {ver}
.target {arch}
.address_size 64

.visible .entry _Z6kernelPi(
    .param .u64 _Z6kernelPi_param_0
)
{{
    .reg .b32   %r<2>;
    .reg .b64   %rd<3>;
    ld.param.u64    %rd1, [_Z6kernelPi_param_0];
    cvta.to.global.u64  %rd2, %rd1;
    mov.u32     %r1, %tid.x;
    st.global.u32   [%rd2+0], %r1;
    ret;
}}
"""
ARCHS = [("sm_75", "6.4"), ("sm_80", "7.0"), ("sm_90", "8.0"), ("sm_90a", "8.0"),
         ("sm_100", "8.8"), ("sm_120", "8.8")]


def not_relocatable(path):
    """The object's bytes with its ELF type's low byte flipped (ET_REL no more)."""
    data = bytearray(open(path, "rb").read())
    data[16] ^= 0xFF
    return bytes(data)


# files the cases rewrite between their calls
SCRATCH = tempfile.mkdtemp(prefix="jitlink-drive-")


def text_bit_flipped(path):
    """A cubin's bytes with one control bit of each function's first instruction
    flipped: another cubin that links as well, to another image."""
    data = bytearray(open(path, "rb").read())
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize, shnum, shstrndx = (int.from_bytes(data[o:o + 2], "little") for o in (0x3A, 0x3C, 0x3E))
    sh = lambda i: data[shoff + i * shentsize:shoff + (i + 1) * shentsize]  # noqa: E731
    strtab = int.from_bytes(sh(shstrndx)[0x18:0x20], "little")
    flipped = bytes(data)
    for i in range(shnum):
        name_at = strtab + int.from_bytes(sh(i)[0:4], "little")
        if data[name_at:data.index(0, name_at)].startswith(b".text."):
            data[int.from_bytes(sh(i)[0x18:0x20], "little") + 15] ^= 0x08
    if bytes(data) == flipped:
        raise ValueError(f"{path}: no .text section")
    return bytes(data)


def head(path, n):
    """The first n bytes of a file (a fraction: that part of it)."""
    data = open(path, "rb").read()
    return data[:int(len(data) * n) if isinstance(n, float) else n]


def cases(fx):
    f = lambda n: os.path.join(fx, n)  # noqa: E731
    c = [
        ("bad_option", ["-arch=sm_90", "-bogus"], []),
        ("bad_arch", ["-arch=sm_XX"], []),
        ("no_arch", [], []),
        ("bad_opt_level", ["-arch=sm_90", "-O2"], []),
        ("ptx_without_lto", ["-arch=sm_90", "-ptx"], []),
        ("cubins", ["-arch=sm_90"], [(CUBIN, f("saxpy.cubin")), (CUBIN, f("scale.cubin"))]),
        ("ptx", ["-arch=sm_90"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("cubin_and_ptx", ["-arch=sm_90"], [(CUBIN, f("saxpy.cubin")), (PTX, f("scale.ptx"))]),
        ("ltoir", ["-arch=sm_90", "-lto"], [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("ltoir_ptx", ["-arch=sm_90", "-lto", "-ptx"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        # -ptx with code already compiled among the inputs: nvJitLink refuses it at
        # Complete (INCORRECT_INPUT_TYPE), as the drop-in must (nvlink writes the IR's PTX)
        ("ptx_with_a_cubin", ["-arch=sm_90", "-lto", "-ptx"],
         [(LTOIR, f("saxpy.ltoir")), (CUBIN, f("scale.cubin"))]),
        ("ltoir_no_cache", ["-arch=sm_90", "-lto", "-no-cache"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("ltoir_maxrreg", ["-arch=sm_90", "-lto", "-maxrregcount=16"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("ltoir_kernels_used", ["-arch=sm_90", "-lto", "-kernels-used=_Z7doublerPfi"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("ptx_maxrreg", ["-arch=sm_90", "-maxrregcount=32"],
         [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("lto_fatbins", ["-arch=sm_90", "-lto"],
         [(FATBIN, f("saxpy_lto.fatbin")), (FATBIN, f("scale_lto.fatbin"))]),
        ("fatbins", ["-arch=sm_90"], [(FATBIN, f("saxpy.fatbin")), (FATBIN, f("scale.fatbin"))]),
        ("objects", ["-arch=sm_90"], [(OBJECT, f("saxpy_dc.o")), (OBJECT, f("scale_dc.o"))]),
        ("lto_objects", ["-arch=sm_90", "-lto"],
         [(OBJECT, f("saxpy_dlto.o")), (OBJECT, f("scale_dlto.o"))]),
        ("library", ["-arch=sm_90"], [(LIBRARY, f("libsaxpy.a"))]),
        ("lto_library", ["-arch=sm_90", "-lto"], [(LIBRARY, f("libsaxpy_lto.a"))]),
        ("any", ["-arch=sm_90"], [(ANY, f("saxpy.cubin")), (ANY, f("scale.fatbin"))]),
        ("files", ["-arch=sm_90"], [(CUBIN, "file:" + f("saxpy.cubin")),
                                    (CUBIN, "file:" + f("scale.cubin"))]),
        ("unresolved", ["-arch=sm_90"], [(CUBIN, f("saxpy.cubin"))]),
        ("ltoir_without_lto", ["-arch=sm_90"], [(LTOIR, f("saxpy.ltoir"))]),
        ("cubin_other_arch", ["-arch=sm_80"], [(CUBIN, f("saxpy.cubin"))]),
        ("not_a_cubin", ["-arch=sm_90"], [(CUBIN, b"garbage")]),
        ("lto_with_ptx_only", ["-arch=sm_90", "-lto"], [(PTX, f("saxpy.ptx"))]),
        ("lineinfo", ["-arch=sm_90", "-lineinfo"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("ptx_g", ["-arch=sm_90", "-g"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("cubins_g", ["-arch=sm_90", "-g"], [(CUBIN, f("saxpy.cubin")), (CUBIN, f("scale.cubin"))]),
        ("xptxas", ["-arch=sm_90", "-Xptxas=-O1", "-Xptxas=-v"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("xptxas_lto", ["-arch=sm_90", "-lto", "-Xptxas=-v"], [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("xptxas_comma", ["-arch=sm_90", "-Xptxas=-O2,-v"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("xptxas_version", ["-arch=sm_90", "-Xptxas=--version"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("lto_math", ["-arch=sm_90", "-lto", "-ftz=1", "-prec-div=0", "-prec-sqrt=0", "-fma=0"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("math_without_lto", ["-arch=sm_90", "-ftz=1"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("lto_split_compile", ["-arch=sm_90", "-lto", "-split-compile=2"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        # options nvJitLink answers otherwise than nvlink: -O3 given is in the tool note,
        # odd register counts, architectures it refuses at Create
        ("explicit_O3", ["-arch=sm_90", "-O3"], [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("maxrreg_plus", ["-arch=sm_90", "-maxrregcount=+16"],
         [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("maxrreg_zero", ["-arch=sm_90", "-maxrregcount=0"],
         [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))]),
        ("unknown_arch", ["-arch=sm_999"], [(PTX, f("saxpy.ptx"))]),
        ("family_arch_90f", ["-arch=sm_90f"], [(CUBIN, f("saxpy.cubin")), (CUBIN, f("scale.cubin"))]),
        # a cubin beside LTO IR: nvJitLink does not resolve it against the IR
        ("cubin_and_ltoir", ["-arch=sm_90", "-lto"],
         [(CUBIN, f("saxpy.cubin")), (LTOIR, f("scale.ltoir"))]),
        # PTX for an arch-specific target another architecture cannot take
        ("ptx_sm_100a_at_sm_100", ["-arch=sm_100"],
         [(PTX, PTX_KERNEL.format(ver="8.8", arch="sm_100a").encode())]),
        # a host object whose ELF type is not ET_REL: nvlink passes over its device code,
        # nvJitLink links it
        ("object_not_relocatable", ["-arch=sm_90"],
         [(OBJECT, not_relocatable(f("saxpy_dc.o"))), (OBJECT, f("scale_dc.o"))]),
        # calls out of order: Complete twice (a link of ours, one handed over and one
        # cached by then), the linked LTO IR asked before Complete, an input after it
        ("complete_twice", ["-arch=sm_90"], [(CUBIN, f("saxpy.cubin")), (CUBIN, f("scale.cubin"))],
         {"after": ["complete"]}),
        ("complete_twice_handed_over", ["-arch=sm_90", "-O3"],
         [(PTX, f("saxpy.ptx")), (PTX, f("scale.ptx"))], {"after": ["complete"]}),
        ("ltoir_before_complete", ["-arch=sm_90", "-lto"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))], {"before": ["LinkedLTOIR"]}),
        ("input_after_complete", ["-arch=sm_90"], [(CUBIN, f("saxpy.cubin")), (CUBIN, f("scale.cubin"))],
         {"after": [(CUBIN, f("saxpy.cubin")), "complete"]}),
        # truncated inputs: nvJitLink refuses them at AddData
        ("truncated_fatbin", ["-arch=sm_90"], [(FATBIN, head(f("saxpy.fatbin"), 16)),
                                               (FATBIN, f("scale.fatbin"))]),
        ("truncated_library", ["-arch=sm_90"], [(LIBRARY, head(f("libsaxpy.a"), 0.5))]),
        ("truncated_ltoir", ["-arch=sm_90", "-lto"], [(LTOIR, head(f("saxpy.ltoir"), 16)),
                                                      (LTOIR, f("scale.ltoir"))]),
        # dense switches in device functions another unit's kernels call: their jump tables
        # go into the kernels' constant bank 2 (issue 35)
        ("switch_cubins", ["-arch=sm_90"], [(CUBIN, f("merge/swk_90.cubin")),
                                            (CUBIN, f("merge/swfn_90.cubin"))]),
        ("switch_objects_sm_100", ["-arch=sm_100"], [(OBJECT, f("merge/swk_dc100.o")),
                                                     (OBJECT, f("merge/swfn_dc100.o"))]),
        ("switch_partial_lto", ["-arch=sm_90", "-lto"], [(OBJECT, f("merge/swk_lto90.o")),
                                                         (OBJECT, f("merge/swfn_dc90.o"))]),
        # -r: a relocatable cubin, nvlinkrs's keeping the relocations of `__constant__`
        # reads that nvJitLink applies (the final links of both are compared)
        ("relocatable", ["-arch=sm_90", "-r"], [(CUBIN, f("merge/a_90.cubin")),
                                                (CUBIN, f("merge/b_90.cubin"))]),
        ("relocatable_sm_100", ["-arch=sm_100", "-r"], [(CUBIN, f("merge/a_100.cubin")),
                                                        (CUBIN, f("merge/b_100.cubin"))]),
        ("relocatable_lto", ["-arch=sm_90", "-lto", "-r"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("relocatable_ptx", ["-arch=sm_90", "-lto", "-r", "-ptx"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        # the linked LTO IR (asked of every -lto case): sm_90's IR linked at sm_100 (the
        # link's optimizer gave it another data layout string than nvJitLink's), a
        # library file's members (the linked module named as the caller named the file)
        ("linked_ir_upgraded", ["-arch=sm_100", "-lto"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("linked_ir_library_file", ["-arch=sm_90", "-lto"], [(LIBRARY, "file:" + f("libsaxpy_lto.a"))]),
        # LTO of a program that launches kernels from the device, without libcudadevrt:
        # nvJitLink fails (PTX_COMPILE, unresolved __cudaCDP2*); the drop-in, which names
        # it as nvlink wants, linked it
        ("lto_device_launch_without_devrt", ["-arch=sm_90", "-lto"],
         [(OBJECT, f("merge/hostpar_lto90.o"))]),
        # its PTX (-ptx): nvJitLink's is the whole program's; the drop-in, which named
        # libcudadevrt, wrote relocatable PTX (an unreferenced function kept)
        ("lto_ptx_device_launch_without_devrt", ["-arch=sm_90", "-lto", "-ptx"],
         [(OBJECT, f("merge/hostpar_lto90.o"))]),
        # an attacker's review (2026-12-01): links nvJitLink refuses that the drop-in
        # linked: -lto with no LTO IR (NO_MODULE_IN_PROGRAM), IR for a newer target than
        # the link's (ARCH_MISMATCH at AddData), an archive with no code for the target
        # (INVALID_INPUT at AddData), -kernels-used dropping a kernel the kept code
        # launches (an undefined reference)
        ("lto_without_ir", ["-arch=sm_90", "-lto"],
         [(OBJECT, f("saxpy_dc.o")), (OBJECT, f("scale_dc.o"))]),
        ("ltoir_newer_than_the_link", ["-arch=sm_80", "-lto"],
         [(LTOIR, f("saxpy.ltoir")), (LTOIR, f("scale.ltoir"))]),
        ("library_without_code_for_the_arch", ["-arch=sm_80"], [(LIBRARY, f("libsaxpy.a"))]),
        ("kernels_used_dropping_a_launched_kernel", ["-arch=sm_90", "-kernels-used=_Z6kern_aPii"],
         [(CUBIN, f("merge/cdp2_90.cubin"))]),
        # -kernels-used: the kernels named kept, the others dropped (and what only they
        # reach), cubins and LTO at sm_90 and sm_100+
        ("kernels_used_cubins", ["-arch=sm_90", "-kernels-used=_Z6kern_aPii"],
         [(CUBIN, f("merge/a_90.cubin")), (CUBIN, f("merge/b_90.cubin"))]),
        ("kernels_used_sm_100", ["-arch=sm_100", "-kernels-used=_Z6only_bPdi"],
         [(CUBIN, f("merge/swk_100.cubin")), (CUBIN, f("merge/swfn_100.cubin"))]),
        ("kernels_used_two_lto", ["-arch=sm_90", "-lto", "-kernels-used=_Z6kern_aPii",
                                  "-kernels-used=_Z7kern_fpPii"], [(OBJECT, f("merge/hrvar_lto90.o"))]),
        ("kernels_used_lto_sm_120", ["-arch=sm_120", "-lto", "-kernels-used=_Z5saxpyfPKfPfi"],
         [(OBJECT, f("saxpy_allarch_lto.o")), (OBJECT, f("scale_allarch_lto.o"))]),
    ]
    # an input file rewritten after AddFile: nvJitLink links what it read at AddFile (a
    # link of ours, one handed over), and a later link of the file as rewritten gets
    # its own image, not the cached one of the earlier bytes
    swap = os.path.join(SCRATCH, "swap.cubin")
    old, new = open(f("scale.cubin"), "rb").read(), text_bit_flipped(f("scale.cubin"))
    for name, opts, before, after in [
        ("file_rewritten_before_complete", ["-arch=sm_90"], old, new),
        ("file_rewritten_handed_over", ["-arch=sm_90", "-O3"], old, new),
        ("file_as_rewritten_handed_over", ["-arch=sm_90", "-O3"], new, None),
    ]:
        c.append((name, opts, [(CUBIN, f("saxpy.cubin")), (CUBIN, "file:" + swap)],
                  {"setup": [("write", swap, before)],
                   "before": [("write", swap, after)] if after else []}))
    # libcudadevrt beside a -dc object whose kernels launch others (dp.cu's `parent`):
    # nvJitLink keeps every kernel, the drop-in too though its inputs become in0.o and
    # in1.a (it dropped `parent` while libcudadevrt was known by its file name)
    m = lambda n: f(os.path.join("merge", n))  # noqa: E731
    devrt = os.environ.get("DRIVE_CUDADEVRT")
    if devrt:
        dp = m("dp_dc90.o")
        c += [
            ("cdp_devrt_data", ["-arch=sm_90"], [(OBJECT, dp), (LIBRARY, devrt)]),
            ("cdp_devrt_file", ["-arch=sm_90"], [(OBJECT, "file:" + dp), (LIBRARY, "file:" + devrt)]),
            ("cdp_devrt_any", ["-arch=sm_90"], [(ANY, dp), (ANY, devrt)]),
            # -kernels-used naming a kernel that launches another: nvJitLink's image is
            # nvlink's (the launched kernel's device-runtime calls dropped), handed over
            ("kernels_used_beside_devrt", ["-arch=sm_90", "-kernels-used=_Z6parentPiS_iS_"],
             [(OBJECT, dp), (LIBRARY, devrt)]),
            # LTO beside libcudadevrt: nvJitLink lays libNVVM's output after the other
            # inputs (the device runtime's frames, records and call-graph kernels first);
            # host code launching `parent`, which launches `child`
            ("lto_devrt_hostparent", ["-arch=sm_90", "-lto"],
             [(OBJECT, m("hostpar_lto90.o")), (LIBRARY, devrt)]),
            ("lto_devrt_dp", ["-arch=sm_90", "-lto"],
             [(OBJECT, m("dp_lto90.o")), (OBJECT, m("dpmain_lto90.o")), (LIBRARY, devrt)]),
            # libcudadevrt beside code that launches nothing: nvJitLink takes its members
            # all the same, and with them its memcpy/memset kernels (whole-program LTO
            # too, its output merged with them); the drop-in left them out
            ("devrt_nothing_launches", ["-arch=sm_90"],
             [(OBJECT, f("saxpy_dc.o")), (OBJECT, f("scale_dc.o")), (LIBRARY, devrt)]),
            # -ptx beside the libcudadevrt the caller gave: INCORRECT_INPUT_TYPE too (the
            # drop-in wrote the IR's PTX)
            ("lto_ptx_beside_devrt", ["-arch=sm_90", "-lto", "-ptx"],
             [(OBJECT, f("saxpy_dlto.o")), (OBJECT, f("scale_dlto.o")), (LIBRARY, devrt)]),
            ("lto_devrt_nothing_launches", ["-arch=sm_90", "-lto"],
             [(OBJECT, f("saxpy_dlto.o")), (OBJECT, f("scale_dlto.o")), (LIBRARY, devrt)]),
            # sm_100: nvJitLink regenerates every function's code (libcudadevrt's kernels,
            # a unit that calls no other); the drop-in, which ran no finalizer, kept ptxas'
            ("devrt_sm_100", ["-arch=sm_100"],
             [(OBJECT, m("swk_dc100.o")), (OBJECT, m("swfn_dc100.o")), (LIBRARY, devrt)]),
            ("alone_sm_100", ["-arch=sm_100"], [(OBJECT, m("hrvar_dc100.o"))]),
            # virtual functions beside libcudadevrt, LTO (libNVVM's output merged with the
            # device runtime's kernels): the kernel making the objects keeps its own
            # register count, not a destructor's it only takes the address of
            # sm_100 LTO beside libcudadevrt (libNVVM's output compiled relocatable and
            # merged): a load of `ybias[3]` has a capsule record of its own form, whose
            # operand the drop-in left 0 where nvJitLink writes 0xc
            ("lto_devrt_constants_sm_100", ["-arch=sm_100", "-lto"],
             [(OBJECT, m("cvx_lto100.o")), (OBJECT, m("cvy_lto100.o")), (LIBRARY, devrt)]),
            ("lto_devrt_virtual", ["-arch=sm_90", "-lto"],
             [(OBJECT, m("vshapes_lto90.o")), (OBJECT, m("vmain_lto90.o")), (LIBRARY, devrt)]),
            # a host object with no code the target can take (sm_100 SASS and PTX, at
            # sm_80): nvJitLink refuses it at AddData, the drop-in took it and linked an
            # image without its kernels
            ("object_for_other_archs", ["-arch=sm_80"], [(OBJECT, m("hrvar_dc100.o"))]),
        ]
    # kernels no host code launches (launch1.cu, launch2.cu): nvJitLink keeps them, where
    # nvlink's host-reference tables narrow the link
    c += [
        ("host_tables_narrow_nothing", ["-arch=sm_90"],
         [(OBJECT, m("launch1_dc.o")), (OBJECT, m("launch2_dc.o"))]),
        ("host_tables_narrow_nothing_lto", ["-arch=sm_90", "-lto"],
         [(OBJECT, m("launch1_lto.o")), (OBJECT, m("launch2_lto.o"))]),
    ]
    for arch, ver in ARCHS:
        ptx = PTX_KERNEL.format(ver=ver, arch=arch).encode()
        c.append((f"ptx_{arch}", [f"-arch={arch}"], [(PTX, ptx)]))
    for arch, _ in ARCHS:
        c.append((f"lto_{arch}", [f"-arch={arch}", "-lto"],
                  [(OBJECT, f("saxpy_allarch_lto.o")), (OBJECT, f("scale_allarch_lto.o"))]))
    return c


def step(api, h, s):
    """One call of a case's `setup`/`before`/`after` steps: "complete", an answer's name
    (its size call and copy), ("write", path, bytes), or an input (kind, path)."""
    if s == "complete":
        return api.complete(h)
    if s[0] == "write":
        with open(s[1], "wb") as f:
            f.write(s[2])
        return None
    if isinstance(s, str):
        code, data = api.get(h, s)
        return [code, None if data is None else len(data)]
    return api.add_data(h, s[0], open(s[1], "rb").read(), os.path.basename(s[1]))


def run(api, name, opts, inputs, out, steps=None):
    steps = steps or {}
    for s in steps.get("setup", []):
        step(api, None, s)
    r = {"options": opts}
    trace = os.environ.get("NVLINKRS_JITLINK_LOG")
    if trace:  # the drop-in's lines after this one are this link's
        with open(trace, "a") as f:
            f.write(f"case {name}\n")
    rc, h = api.create(opts)
    r["create"] = rc
    if h is None:
        return r
    r["add"] = []
    for kind, src in inputs:
        if isinstance(src, str) and src.startswith("file:"):
            r["add"].append(api.add_file(h, kind, src[5:]))
            continue
        data = src if isinstance(src, bytes) else open(src, "rb").read()
        r["add"].append(api.add_data(h, kind, data, os.path.basename(src) if isinstance(src, str) else "data"))
    if steps.get("before"):
        r["before"] = [step(api, h, s) for s in steps["before"]]
    if rc == 0:
        r["complete"] = api.complete(h)
    if "after" in steps:
        r["after"] = [step(api, h, s) for s in steps["after"]]
    for what in ["ErrorLog", "InfoLog"]:
        code, log = api.get(h, what)
        r[what] = [code, None if log is None else log.decode(errors="replace")]
    for what, ext in [("LinkedCubin", "cubin"), ("LinkedPtx", "ptx"), ("LinkedLTOIR", "ltoir")]:
        code, data = api.get(h, what)
        r[what] = [code, None if data is None else len(data)]
        if data is not None:
            with open(os.path.join(out, f"{name}.{ext}"), "wb") as f:
                f.write(data)
            r[what].append(hashlib.sha256(data).hexdigest())
    r["destroy"] = api.destroy(h)
    return r


def resolved_from():
    """The file the process's `nvJitLinkCreate` (as dlsym(RTLD_DEFAULT) finds it) is in."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
    libc = ctypes.CDLL(None)
    try:
        addr = ctypes.cast(libc.nvJitLinkCreate, ctypes.c_void_p)
    except AttributeError:
        return None
    info = DlInfo()
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    if libc.dladdr(addr, ctypes.byref(info)) == 0:
        return None
    return os.path.realpath(info.fname.decode())


def main():
    backend, fx, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    api = Bindings() if backend == "bindings" else Ctypes(backend.split(":", 1)[1])
    only = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    results = {}
    for name, opts, inputs, *steps in cases(fx):
        if only is None or name in only:
            results[name] = run(api, name, opts, inputs, out, *steps)
    results["_resolved_from"] = resolved_from()
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
