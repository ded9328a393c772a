//! The fixture links, one test each (`fixture_links::<case>`): every case links with
//! nvlink and nvlinkrs, the images must be equivalent, byte-identical exactly where
//! `bytes.rs` says so, and the same with `-r`. `every_fixture_link_is_tested_and_listed`
//! keeps the case list, the tests and `bytes.rs`'s lists in step.

use super::*;

/// The cases: a name (`bytes.rs` lists it) and the link's arguments.
fn fixture_cases() -> Vec<(&'static str, Vec<String>)> {
    let cu = cuda();
    let lib = format!("-L{}", cu.join("lib").display());
    let nvvm = format!("-nvvmpath={}", cu.join("nvvm").display());
    let root = fixtures().parent().unwrap().to_path_buf();
    let saxpy = root.join("saxpy_dc.o").display().to_string();
    let scale = root.join("scale_dc.o").display().to_string();
    let saxpy_lto = root.join("saxpy_dlto.o").display().to_string();
    let lto_only = |name: &str| root.join(format!("{name}_lto90.o")).display().to_string();
    let whole = root.join("whole.o").display().to_string();
    vec![
        (
            "cubins sm_90",
            args(&["-arch=sm_90", "a_90.cubin", "b_90.cubin"]),
        ),
        (
            "input order reversed",
            args(&["-arch=sm_90", "b_90.cubin", "a_90.cubin"]),
        ),
        (
            "register and stack propagation",
            args(&["-arch=sm_90", "heavy_90.cubin", "caller_90.cubin"]),
        ),
        // shared memory: kernel-local arrays, equal-size arrays of device functions in
        // two inputs (nvlink's sort order), a static, dynamic shared memory
        (
            "shared memory sm_90",
            args(&["-arch=sm_90", "smem_90.cubin", "smem2_90.cubin"]),
        ),
        (
            "shared memory sm_75",
            args(&["-arch=sm_75", "smem_75.cubin", "smem2_75.cubin"]),
        ),
        (
            "shared memory sm_100",
            args(&["-arch=sm_100", "smem_100.cubin", "smem2_100.cubin"]),
        ),
        (
            "shared memory sm_120",
            args(&["-arch=sm_120", "smem_120.cubin", "smem2_120.cubin"]),
        ),
        // variables held by several kernels: one joins the first slot whose variables
        // share no kernel with it
        (
            "shared memory slots sm_75",
            args(&["-arch=sm_75", "smem3_75.cubin"]),
        ),
        (
            "shared memory slots sm_90",
            args(&["-arch=sm_90", "smem3_90.cubin"]),
        ),
        (
            "shared memory slots sm_100",
            args(&["-arch=sm_100", "smem3_100.cubin"]),
        ),
        // a slot starts where its variables' alignment asks, worked out at the end
        (
            "shared memory slot alignment sm_75",
            args(&["-arch=sm_75", "smem4_75.cubin"]),
        ),
        (
            "shared memory slot alignment sm_90",
            args(&["-arch=sm_90", "smem4_90.cubin"]),
        ),
        (
            "shared memory slot alignment sm_100",
            args(&["-arch=sm_100", "smem4_100.cubin"]),
        ),
        // a window of char arrays is aligned 1, of shorts 2 (not 4)
        (
            "shared window alignment sm_80",
            args(&["-arch=sm_80", "smem5_80.cubin"]),
        ),
        (
            "shared window alignment sm_100",
            args(&["-arch=sm_100", "smem5_100.cubin"]),
        ),
        // ptxas's internal constants (`.const_opt`) go as `_param` does: dropped, kept
        // as internal objects under --preserve-relocs
        (
            "internal constants",
            args(&["-arch=sm_80", "constopt_80.cubin"]),
        ),
        (
            "internal constants -g",
            args(&["-arch=sm_80", "-g", "constopt_80.cubin"]),
        ),
        (
            "internal constants --preserve-relocs",
            args(&["-arch=sm_80", "--preserve-relocs", "constopt_80.cubin"]),
        ),
        // dynamic parallelism: a kernel with its own shared array launched from another
        // (in its unit and from another unit) keeps its window; the launching kernel
        // holds none of its variables, barriers or stack. At sm_100 nvlink regenerates
        // libcudadevrt's kernels' code (`launched kernel sm_100` below)
        (
            "launched kernel with shared memory sm_75",
            args(&["-arch=sm_75", "cdp_75.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "launched kernel with shared memory sm_90",
            args(&["-arch=sm_90", "cdp_90.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "kernel launched from another unit",
            args(&[
                "-arch=sm_90",
                "cdp2_90.cubin",
                "cdp_90.cubin",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "kernel launched from another unit sm_75",
            args(&[
                "-arch=sm_75",
                "cdp_75.cubin",
                "cdp2_75.cubin",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        // --preserve-relocs: the applied relocations listed in .nv.resolvedrela.*, the
        // rest kept as in a debug link (sm_90: nvlink's warning; sm_75: `_param` kept)
        (
            "--preserve-relocs sm_90",
            args(&[
                "-arch=sm_90",
                "--preserve-relocs",
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        (
            "--preserve-relocs sm_75",
            args(&[
                "-arch=sm_75",
                "-preserve-relocs",
                "a_75.cubin",
                "b_75.cubin",
            ]),
        ),
        (
            "--preserve-relocs and -g, shared memory",
            args(&[
                "-g",
                "-arch=sm_90",
                "--preserve-relocs",
                "smem_90.cubin",
                "smem2_90.cubin",
            ]),
        ),
        // a template kernel without parameters in two units: under -r nvlink keeps the
        // replaced copy's `_SREG` mark, in the kept copy's parameter bank
        (
            "a template kernel in two units sm_80",
            args(&["-arch=sm_80", "tmplk1_80.cubin", "tmplk2_80.cubin"]),
        ),
        // dynamic shared memory: a function no kernel reaches (offset -1, its barrier
        // counted in the one kernel), windows grown over all arrays until none grows
        (
            "dynamic shared, one kernel sm_75",
            args(&["-arch=sm_75", "dyn1_75.cubin"]),
        ),
        // only the dynamic array: an empty data segment at sm_80; -G, the array's
        // address in the debug information -1 (issue 22)
        (
            "dynamic shared only, sm_80",
            args(&["-arch=sm_80", "dynonly_80.cubin"]),
        ),
        (
            "dynamic shared only, -G inputs sm_80",
            args(&["-arch=sm_80", "dynonly_80_G.cubin"]),
        ),
        (
            "dynamic shared only, -G inputs sm_90",
            args(&["-arch=sm_90", "dynonly_90_G.cubin"]),
        ),
        (
            "dynamic shared, one kernel sm_90",
            args(&["-arch=sm_90", "dyn1_90.cubin"]),
        ),
        (
            "dynamic shared, one kernel sm_100",
            args(&["-arch=sm_100", "dyn1_100.cubin"]),
        ),
        (
            "dynamic shared, windows grown sm_90",
            args(&["-arch=sm_90", "dyn2_90.cubin", "dyn3_90.cubin"]),
        ),
        (
            "dynamic shared, windows grown sm_120",
            args(&["-arch=sm_120", "dyn2_120.cubin", "dyn3_120.cubin"]),
        ),
        (
            "dynamic shared, only in a function no kernel reaches",
            args(&["-arch=sm_90", "dyn4_90.cubin"]),
        ),
        // (sm_100+: its capsule's Mercury relocation against the array is dropped as
        // the SASS one is resolved, though the array has no symbol in the image)
        (
            "dynamic shared, only in a function no kernel reaches sm_100",
            args(&["-arch=sm_100", "dyn4_100.cubin"]),
        ),
        (
            "dynamic shared, only in a function no kernel reaches sm_120",
            args(&["-arch=sm_120", "dyn4_120.cubin"]),
        ),
        (
            "dynamic shared, only in a function no kernel reaches, -g",
            args(&["-g", "-arch=sm_75", "dyn4_75.cubin"]),
        ),
        (
            "dynamic shared, windows grown, -g",
            args(&["-g", "-arch=sm_90", "dyn2_90.cubin", "dyn3_90.cubin"]),
        ),
        // programs that use the driver: managed variables (st_other MANAGED), printf,
        // assert, malloc/free, device new/delete, virtual functions, a function-pointer
        // table (EXTERNS records and .nv.prototype entries for the functions the driver
        // provides, a kernel's list with those of its call tree); warp primitives,
        // scoped atomics, a grid barrier, clusters at sm_90 (not at sm_100+, where
        // nvlink's code for the cluster and system-scope atomics kernels differs from
        // ptxas', see docs/rules/finalizer.md)
        (
            "driver functions and managed variables sm_75",
            args(&[
                "-arch=sm_75",
                "managed_75.cubin",
                "virt_75.cubin",
                "coop_75.cubin",
            ]),
        ),
        (
            "driver functions and managed variables sm_90",
            args(&[
                "-arch=sm_90",
                "managed_90.cubin",
                "virt_90.cubin",
                "coop_90.cubin",
            ]),
        ),
        (
            "driver functions and managed variables sm_100",
            args(&["-arch=sm_100", "managed_100.cubin", "virt_100.cubin"]),
        ),
        (
            "driver functions and managed variables sm_120",
            args(&["-arch=sm_120", "virt_120.cubin", "managed_120.cubin"]),
        ),
        (
            "managed and plain references to one variable",
            args(&["-arch=sm_90", "managed_90.cubin", "unmanaged_90.cubin"]),
        ),
        (
            "plain and managed references to one variable",
            args(&["-arch=sm_90", "unmanaged_90.cubin", "managed_90.cubin"]),
        ),
        // register limits across units: nvlink's error for each raise of a kernel's
        // register count above its MAXREG_COUNT, in its propagation order
        (
            "register limit, callee in a cubin",
            args(&[
                "-arch=sm_90",
                "regk_90.cubin",
                "regh_90.cubin",
                "regh2_90.cubin",
            ]),
        ),
        (
            "register limit, callees in input order",
            args(&[
                "-arch=sm_90",
                "regh2_90.cubin",
                "regh_90.cubin",
                "regk_90.cubin",
            ]),
        ),
        (
            "register limit, callee assembled from PTX",
            args(&["-arch=sm_90", "regk_90.cubin", "regh.ptx", "regh2_90.cubin"]),
        ),
        // kernels the host never launches: dropped when the host objects' tables speak
        // for all the code, kept (in every unit) beside a file without tables and in
        // partial LTO
        (
            "unlaunched kernels, host objects",
            args(&[
                "-arch=sm_90",
                "launch1_dc.o",
                "launch2_dc.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "unlaunched kernels, a host object and a cubin",
            args(&["-arch=sm_90", "launch1_dc.o", "launch2_90.cubin"]),
        ),
        (
            "unlaunched kernels, a host object and a cubin sm_100",
            args(&["-arch=sm_100", "launch1_dc100.o", "launch2_100.cubin"]),
        ),
        (
            "unlaunched kernels, a host object and PTX",
            args(&["-arch=sm_90", "launch2.ptx", "launch1_dc.o"]),
        ),
        (
            "unlaunched kernels, a host object and a fatbin",
            args(&["-arch=sm_90", "launch1_dc.o", "launch2.fatbin"]),
        ),
        (
            "unlaunched kernels, whole LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "launch1_lto.o",
                "launch2_lto.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "unlaunched kernels, partial LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "launch1_lto.o",
                "launch2_dc.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "unlaunched kernels, partial LTO, IR second",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "launch2_dc.o",
                "launch1_lto.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "unlaunched kernels, partial LTO with a cubin",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "launch1_lto.o",
                "launch2_90.cubin",
            ]),
        ),
        // sm_100+: the capsule-Mercury sections merged beside the SASS, nvlink's
        // sm_100 layout
        (
            "cubins sm_100",
            args(&["-arch=sm_100", "a_100.cubin", "b_100.cubin"]),
        ),
        (
            "sm_100 input order reversed",
            args(&["-arch=sm_100", "b_100.cubin", "a_100.cubin"]),
        ),
        (
            "sm_100 register and stack propagation",
            args(&["-arch=sm_100", "heavy_100.cubin", "caller_100.cubin"]),
        ),
        (
            "cubins sm_120",
            args(&["-arch=sm_120", "a_120.cubin", "b_120.cubin"]),
        ),
        // SASS for another SM of the family, and `a` targets: nvlink's .nv.compat
        (
            "sm_100 code for sm_103",
            args(&["-arch=sm_103", "a_100.cubin", "b_100.cubin"]),
        ),
        (
            "sm_100 code for sm_100a",
            args(&["-arch=sm_100a", "a_100.cubin", "b_100.cubin"]),
        ),
        // (sm_100a code keeps its CAN_FASTPATH_FINALIZE 9 and INST_TCGEN05_MMA record;
        // beside sm_100 code both go as for sm_100 code)
        (
            "sm_100a code",
            args(&["-arch=sm_100a", "a_100a.cubin", "b_100a.cubin"]),
        ),
        (
            "sm_100a code beside sm_100 code",
            args(&["-arch=sm_100a", "a_100a.cubin", "b_100.cubin"]),
        ),
        // sm_110: the reserved shared section (`.nv.shared.reserved.0`, the weak
        // `__nv_reservedSMEM_gb10b_war_var` every input defines) is memory-only, one
        // piece from `.nv.reservedSmem.offset0`; its Mercury copy one piece at 0
        (
            "sm_110 reserved shared memory",
            args(&["-arch=sm_110", "a_110.cubin", "b_110.cubin"]),
        ),
        (
            "sm_110 code for sm_110a",
            args(&["-arch=sm_110a", "b_110.cubin", "a_110.cubin"]),
        ),
        (
            "sm_120 code for sm_121a",
            args(&["-arch=sm_121a", "a_120.cubin", "b_120.cubin"]),
        ),
        (
            "sm_120 code for sm_120a",
            args(&["-arch=sm_120a", "a_120.cubin", "b_120.cubin"]),
        ),
        (
            "sm_120 four inputs",
            args(&[
                "-arch=sm_120",
                "heavy_120.cubin",
                "a_120.cubin",
                "caller_120.cubin",
                "b_120.cubin",
            ]),
        ),
        ("sm_75", args(&["-arch=sm_75", "a_75.cubin", "b_75.cubin"])),
        ("sm_80", args(&["-arch=sm_80", "a_80.cubin", "b_80.cubin"])),
        (
            "sm_80 code for sm_86",
            args(&["-arch=sm_86", "a_80.cubin", "b_80.cubin"]),
        ),
        (
            "sm_75 heavy",
            args(&["-arch=sm_75", "heavy_75.cubin", "caller_75.cubin"]),
        ),
        ("PTX input", args(&["-arch=sm_90", "a_90.cubin", "b.ptx"])),
        // the image's cuinfo note takes the lowest virtual architecture of the inputs
        (
            "compute_90 PTX for sm_120",
            args(&["-arch=sm_120", "a_120.cubin", "b.ptx"]),
        ),
        (
            "compute_100 code beside compute_120",
            args(&["-arch=sm_120", "b_120.cubin", "a_v100_120.cubin"]),
        ),
        (
            "host objects + libcudadevrt",
            args(&["-arch=sm_90", "a.o", "b.o", &lib, "-lcudadevrt"]),
        ),
        (
            "example objects",
            args(&["-arch=sm_90", &saxpy, &scale, &lib, "-lcudadevrt"]),
        ),
        (
            "example objects sm_100, one without device code",
            args(&[
                "-arch=sm_100",
                "main_100.o",
                "saxpy_100.o",
                "scale_100.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "archive",
            args(&[
                "-arch=sm_90",
                &root.join("libsaxpy.a").display().to_string(),
            ]),
        ),
        (
            "partial LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                &saxpy_lto,
                &scale,
                &lib,
                "-lcudadevrt",
            ]),
        ),
        // IR from -dc -dlto objects beside cubins, no libcudadevrt: libNVVM gets
        // --force-device-c and no host information, its prototype table stays
        (
            "partial LTO without libcudadevrt",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                &root.join("saxpy_allarch_lto.o").display().to_string(),
                &root.join("scale_allarch_lto.o").display().to_string(),
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        (
            "partial LTO sm_100",
            args(&[
                "-arch=sm_100",
                "-dlto",
                &nvvm,
                &root.join("saxpy_allarch_lto.o").display().to_string(),
                &root.join("scale_allarch_lto.o").display().to_string(),
                "a_100.cubin",
                "b_100.cubin",
            ]),
        ),
        // debug links keep every function and the shared variables' symbols (in their
        // kernel's window, or .nv_debug.shared when several kernels hold them); the
        // debug byte of e_flags counts the inputs with debug information
        (
            "-g link",
            args(&["-g", "-arch=sm_90", "a_90.cubin", "b_90.cubin"]),
        ),
        (
            "-g link, sm_75, global shared variables",
            args(&["-g", "-arch=sm_75", "heavy_75.cubin", "caller_75.cubin"]),
        ),
        (
            "-G inputs, -g link",
            args(&["-g", "-arch=sm_90", "a_90_G.cubin", "b_90_G.cubin"]),
        ),
        // -G code whose .debug_loc refers to labels ptxas left undefined: nvlink drops
        // those relocations and keeps the bytes
        (
            "-G inputs, unplaced .debug_loc labels sm_75",
            args(&["-arch=sm_75", "debugloc_75_G.cubin"]),
        ),
        (
            "-G inputs, unplaced .debug_loc labels sm_90",
            args(&["-arch=sm_90", "debugloc_90_G.cubin"]),
        ),
        (
            "-G inputs, unplaced .debug_loc labels, -g link",
            args(&["-g", "-arch=sm_90", "debugloc_90_G.cubin"]),
        ),
        // the only kernel's EXTERNS record moves to the end when its call tree adds
        // entries (assert's through -G's __assert_fail); with other kernels it stays
        (
            "-G inputs, the only kernel's EXTERNS grown",
            args(&["-arch=sm_90", "dbgext_90_G.cubin", "dbghelp_90_G.cubin"]),
        ),
        // a kernel's EXTERNS record whose list grew (the other unit's g replaced by g's
        // malloc and free) stays in place beside the new barrier count g gives it
        (
            "EXTERNS grown beside a new barrier count",
            args(&["-arch=sm_90", "extgrow1_90.cubin", "extgrow2_90.cubin"]),
        ),
        // the memory-only sections in the order nvlink makes them (input by input: its
        // kernels' windows, its own sections, .nv_debug.shared for its dynamic arrays),
        // and the data segment's memory laid out from the end of its whole file part
        (
            "memory-only sections, padding for a later window",
            args(&["-arch=sm_90", "memord1_90.cubin"]),
        ),
        (
            "memory-only sections input by input sm_90",
            args(&["-arch=sm_90", "memord1_90.cubin", "memord2_90.cubin"]),
        ),
        (
            "memory-only sections input by input sm_100",
            args(&["-arch=sm_100", "memord1_100.cubin", "memord2_100.cubin"]),
        ),
        // sm_100: .nv.merc.debug_info is a view of .debug_info; its offsets into
        // .nv.merc.debug_line (each unit's line table) stay relocations for the driver
        (
            "-G inputs, two units sm_100",
            args(&["-arch=sm_100", "dbgext_100_G.cubin", "dbghelp_100_G.cubin"]),
        ),
        // sm_100: the replaced copy's .nv_debug_info_reg_sass ranges are cleared, and
        // those of a unit's own __assert_fail when an earlier unit has one too
        (
            "-G inputs, an inline function in two units sm_100",
            args(&[
                "-arch=sm_100",
                "dbgweak1_100_G.cubin",
                "dbgweak2_100_G.cubin",
            ]),
        ),
        (
            "-G inputs, __assert_fail in two units sm_100",
            args(&[
                "-arch=sm_100",
                "dbgext_100_G.cubin",
                "dbghelp_100_G.cubin",
                "dbgassert_100_G.cubin",
            ]),
        ),
        // sm_100+ debug links (-g, or -G code among the inputs): nvlink's finalizer
        // regenerates every function at the debug level (ptxas's optimized code comes
        // out as debug code; beside -G code libcudadevrt's functions get other code
        // and capsules), and the image is libnvJitLink's link of the same units with
        // nvlink's tool note (finalize::debug)
        (
            "-g link sm_100, dynamic parallelism",
            args(&["-g", "-arch=sm_100", "dp_100.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "-g link sm_100, two units",
            args(&["-g", "-arch=sm_100", "a_100.cubin", "b_100.cubin"]),
        ),
        (
            "-g link sm_100, cooperative groups",
            args(&["-g", "-arch=sm_100", "coop_100.cubin"]),
        ),
        (
            "-g link sm_120, two units",
            args(&["-g", "-arch=sm_120", "a_120.cubin", "b_120.cubin"]),
        ),
        (
            "-G inputs beside libcudadevrt sm_100",
            args(&["-arch=sm_100", "dp_100_G.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "-G inputs beside libcudadevrt, -g link sm_100",
            args(&["-g", "-arch=sm_100", "dp_100_G.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "-G inputs with __constant__ data sm_100",
            args(&["-arch=sm_100", "dbgconst_100_G.cubin"]),
        ),
        (
            "-G inputs with __constant__ data sm_120",
            args(&["-arch=sm_120", "dbgconst_120_G.cubin"]),
        ),
        (
            "-G and plain inputs, -g link sm_120",
            args(&[
                "-g",
                "-arch=sm_120",
                "dbgconst_120_G.cubin",
                "a_120.cubin",
                "b_120.cubin",
            ]),
        ),
        (
            "-g link sm_110",
            args(&["-g", "-arch=sm_110", "a_110.cubin", "b_110.cubin"]),
        ),
        // line tables follow the code too (-lineinfo, -G -dopt=on): coop's cluster
        // kernel, which the finalizer shortens
        (
            "-lineinfo code the finalizer changes sm_100",
            args(&["-arch=sm_100", "coop_100_li.cubin"]),
        ),
        (
            "-G -dopt=on code sm_100",
            args(&["-arch=sm_100", "coop_100_Gdopt.cubin"]),
        ),
        // -G virtual functions: the stack follows nvlink's call list, not the compiler's
        // lists of indirect targets (group 4), where two destructors name each other
        (
            "-G virtual functions sm_90",
            args(&["-arch=sm_90", "virt_90_G.cubin", "managed_90.cubin"]),
        ),
        // -lineinfo code beside -G code: callers in the call graph in the order nvlink
        // made their symbols (input by input), and the debug byte of e_flags one more
        // where -lineinfo code that names inlined functions (0x0A) meets -G code
        (
            "-lineinfo beside -G code sm_90",
            args(&[
                "-arch=sm_90",
                "heavy_90_li.cubin",
                "caller_90_li.cubin",
                "dbgext_90_G.cubin",
                "dbghelp_90_G.cubin",
            ]),
        ),
        (
            "-lineinfo with inlined names beside -G code sm_90",
            args(&[
                "-arch=sm_90",
                "dbginl1_90_li.cubin",
                "dbginl2_90_li.cubin",
                "dbgext_90_G.cubin",
                "dbghelp_90_G.cubin",
            ]),
        ),
        (
            "-lineinfo with inlined names beside -G code, -g link sm_100",
            args(&[
                "-g",
                "-arch=sm_100",
                "dbginl1_100_li.cubin",
                "dbginl2_100_li.cubin",
                "dbgext_100_G.cubin",
                "dbghelp_100_G.cubin",
            ]),
        ),
        // ptxas -g run by the link (LTO's code, PTX inputs): its note names no files,
        // as nvlink's ptxas, run inside nvlink, writes it (output `elf.o`)
        (
            "-dlto -g, whole program sm_90",
            args(&[
                "-g",
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "dp_lto90.o",
                "dpmain_lto90.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "-dlto -g, whole program sm_100",
            args(&[
                "-g",
                "-arch=sm_100",
                "-dlto",
                &nvvm,
                "dp_lto100.o",
                "dpmain_lto100.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "-dlto -g, a host object sm_100",
            args(&[
                "-g",
                "-arch=sm_100",
                "-dlto",
                &nvvm,
                "dp_lto100.o",
                "dpmain_dc100.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "PTX input, -g link sm_100",
            args(&["-g", "-arch=sm_100", "b.ptx", "a_100.cubin"]),
        ),
        // an inline function defined in two units: the second's .debug_info
        // relocations (its address range) stay, against the kept copy; its
        // .debug_line and .debug_frame ones go
        (
            "-G inputs, an inline function in two units",
            args(&["-arch=sm_90", "dbgweak1_90_G.cubin", "dbgweak2_90_G.cubin"]),
        ),
        // inline functions two units define, each copy calling its unit's local
        // __popcll and __assert_fail (CCCL's cuda::std::popcount in Thrust and CUB
        // units): only the kept copy's call-graph entries stay, so the other unit's
        // __popcll and __assert_fail are dead; the replaced copy's .debug_loc
        // relocations stay, against the kept copy
        (
            "-G inputs, inline functions calling each unit's __popcll sm_80",
            args(&["-arch=sm_80", "dbgpopc1_80_G.cubin", "dbgpopc2_80_G.cubin"]),
        ),
        (
            "-G inputs, inline functions calling each unit's __popcll sm_90",
            args(&["-arch=sm_90", "dbgpopc1_90_G.cubin", "dbgpopc2_90_G.cubin"]),
        ),
        (
            "-G inputs, inline functions calling each unit's __popcll sm_100",
            args(&[
                "-arch=sm_100",
                "dbgpopc1_100_G.cubin",
                "dbgpopc2_100_G.cubin",
            ]),
        ),
        // a weak function no kernel calls, whose second copy (fewer registers) is kept:
        // the replaced copy's .debug_frame FDE keeps its range, the kept copy's is
        // cleared (sm_90 .debug_frame, sm_100+ .nv.merc.debug_frame)
        (
            "a weak function no kernel calls, replaced by a later copy sm_90",
            args(&["-arch=sm_90", "wkfde1_90.cubin", "wkfde2_90.cubin"]),
        ),
        (
            "a weak function no kernel calls, replaced by a later copy sm_100",
            args(&["-arch=sm_100", "wkfde1_100.cubin", "wkfde2_100.cubin"]),
        ),
        (
            "a weak function no kernel calls, replaced by a later copy sm_120",
            args(&["-arch=sm_120", "wkfde1_120.cubin", "wkfde2_120.cubin"]),
        ),
        // a copy a later input replaced keeps its call-graph entries (nvlink reads the
        // inputs in order), its sections made where nvlink met it: in a -g link beside a
        // -G copy, and called by a kernel (the function only it calls stays, with its
        // registers and the kernel's EXTERNS)
        (
            "-g link, a weak function replaced by a later -G copy",
            args(&["-arch=sm_90", "-g", "wkfde1_90.cubin", "wkfde2_90_G.cubin"]),
        ),
        (
            "a called weak function replaced by a later copy",
            args(&["-arch=sm_90", "wklive_90.cubin", "wkfde2_90.cubin"]),
        ),
        // three copies: one that loses when read is ignored (its calls neither written
        // nor followed: wkfde1's here), though a -g link keeps the driver functions
        // it calls as symbols with prototypes
        (
            "weak copies in three units, the second losing when read",
            args(&[
                "-arch=sm_90",
                "wklive_90.cubin",
                "wkfde1_90.cubin",
                "wkfde2_90.cubin",
            ]),
        ),
        (
            "-g link, weak copies losing when read",
            args(&[
                "-arch=sm_90",
                "-g",
                "wkfde2_90.cubin",
                "wklive_90.cubin",
                "wkfde1_90.cubin",
            ]),
        ),
        // the call graph's callers input by input (a function the first unit calls
        // before the second unit's static one)
        (
            "call graph callers input by input",
            args(&["-arch=sm_90", "cgord1_90.cubin", "cgord2_90.cubin"]),
        ),
        // a function no kernel calls: sm_100 drops its line-table sequence (a unit left
        // with none keeps a lone end_sequence), sm_90 keeps it
        (
            "-lineinfo, a removed function's line table sm_100",
            args(&[
                "-arch=sm_100",
                "a_100.cubin",
                "b_100.cubin",
                "dbgunused_100_li.cubin",
            ]),
        ),
        (
            "-lineinfo, a removed function's line table sm_90",
            args(&["-arch=sm_90", "dbgunused_90_li.cubin"]),
        ),
        // inlined functions' names: the second unit's line-table header points into
        // .debug_str past the first unit's strings at sm_100 (0 at sm_90, as nvlink)
        (
            "-lineinfo, inlined functions in two units sm_100",
            args(&[
                "-arch=sm_100",
                "dbginl1_100_li.cubin",
                "dbginl2_100_li.cubin",
            ]),
        ),
        (
            "-lineinfo, inlined functions in two units sm_90",
            args(&["-arch=sm_90", "dbginl1_90_li.cubin", "dbginl2_90_li.cubin"]),
        ),
        (
            "-lineinfo inputs beside plain ones",
            args(&[
                "-arch=sm_90",
                "heavy_90_li.cubin",
                "a_90.cubin",
                "caller_90_li.cubin",
                "b_90.cubin",
            ]),
        ),
        (
            "duplicate definitions",
            args(&["-arch=sm_90", "b_90.cubin", "dup.cubin"]),
        ),
        ("undefined reference", args(&["-arch=sm_90", "undef.cubin"])),
        // the device runtime's `cnp…` entry points stay undefined for the driver; a name
        // nvlink does not know is an undefined reference
        (
            "device runtime entry points",
            args(&["-arch=sm_90", "cnp.cubin"]),
        ),
        (
            "an unknown device runtime name",
            args(&["-arch=sm_90", "cnp.cubin", "cnpbad.cubin"]),
        ),
        // -kernels-used narrows the link and is recorded in the tool note (repeats joined
        // by commas, before -cpu-arch), as -variables-used is
        (
            "-kernels-used",
            args(&[
                "-arch=sm_90",
                "-kernels-used=kern_a",
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        (
            "-kernels-used twice, -variables-used",
            args(&[
                "-m64",
                "-arch=sm_90",
                "-cpu-arch=X86_64",
                "-kernels-used=kern_fp",
                "-variables-used=gb",
                "-kernels-used=kern_a",
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        // arch mismatches: objects without code for the target (warnings, an image
        // without code, exit 0); cubin files for another SM (fatal; below sm_100 for an
        // sm_100+ target, a warning first); LTO IR for the target without -dlto (PTX
        // beside it is used; IR alone is fatal)
        (
            "no code for the target",
            args(&["-arch=sm_80", &saxpy, &scale]),
        ),
        (
            "sm_90 cubins for sm_100",
            args(&["-arch=sm_100", "a_90.cubin", "b_90.cubin"]),
        ),
        (
            "an sm_80 cubin among sm_90 ones",
            args(&["-arch=sm_90", "a_90.cubin", "b_80.cubin"]),
        ),
        (
            "sm_100 cubin for sm_120",
            args(&["-arch=sm_120", "a_100.cubin"]),
        ),
        (
            "LTO IR and PTX without -dlto (the PTX is used)",
            args(&["-arch=sm_90", &saxpy_lto, &scale]),
        ),
        (
            "only LTO IR without -dlto",
            args(&["-arch=sm_90", &lto_only("saxpy"), &lto_only("scale")]),
        ),
        // -v: nvlink's resource lines (gmem, cmem[3], per kernel in reverse code order)
        (
            "-v, stack and registers",
            args(&["-v", "-arch=sm_90", "heavy_90.cubin", "caller_90.cubin"]),
        ),
        (
            "-v, shared memory sm_75",
            args(&["-v", "-arch=sm_75", "smem_75.cubin", "smem2_75.cubin"]),
        ),
        (
            "-v sm_100, dynamic shared",
            args(&["-v", "-arch=sm_100", "dyn2_100.cubin", "dyn3_100.cubin"]),
        ),
        (
            "-v sm_120, globals",
            args(&["-v", "-arch=sm_120", "a_120.cubin", "b_120.cubin"]),
        ),
        (
            "-v, several kernels",
            args(&[
                "-v",
                "-arch=sm_90",
                "dyn2_90.cubin",
                "dyn3_90.cubin",
                "smem3_90.cubin",
            ]),
        ),
        (
            "-v, whole-program object",
            args(&["-v", "-arch=sm_90", &whole]),
        ),
        // options that change only messages, recorded in the tool note in nvlink's order
        (
            "message options in the tool note",
            args(&[
                "-suppress-arch-warning",
                "-ignore-host-info",
                "-arch=sm_90",
                "-report-arch",
                "-Werror",
                "-v",
                "-disable-infos",
                "-w",
                "-m64",
                "-cpu-arch=X86_64",
                "-kernels-used=kern_a",
                "-maxrregcount=40",
                "-Xptxas=-v",
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        (
            "-verbose-tkinfo=true: the files in the tool note",
            args(&[
                "-arch=sm_90",
                "-verbose-tkinfo=true",
                "-v",
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        (
            "message options in a debug link's tool note",
            args(&[
                "-g",
                "-arch=sm_90",
                "-preserve-relocs",
                "-v",
                "-report-arch",
                "-dump-callgraph-no-demangle",
                "-suppress-stack-size-warning",
                "-suppress-arch-warning",
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
        // issue 35: device-graph calls the driver provides (graphcond.cu), at each target
        // and in whole LTO; every device runtime API (devapi.cu), the per-thread default
        // stream's too, with libcudadevrt and without (undefined references)
        (
            "device-graph calls sm_80",
            args(&["-arch=sm_80", "graphcond_dc80.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device-graph calls sm_90",
            args(&["-arch=sm_90", "graphcond_dc90.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device-graph calls sm_100",
            args(&["-arch=sm_100", "graphcond_dc100.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device-graph calls sm_120",
            args(&["-arch=sm_120", "graphcond_dc120.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device-graph calls, whole LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "graphcond_lto90.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "device runtime API calls",
            args(&["-arch=sm_90", "devapi_dc90.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device runtime API calls, per-thread default stream",
            args(&["-arch=sm_90", "devapi_ptsz_dc90.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device runtime API calls without libcudadevrt",
            args(&["-arch=sm_90", "devapi_dc90.o"]),
        ),
        // a host object whose host code refers only to device variables (hrvar.cu): its
        // kernel tables are empty, and no kernel table narrows the link
        (
            "variable-only host object",
            args(&["-arch=sm_90", "hrvar_dc90.o"]),
        ),
        (
            "variable-only host object beside ones without tables",
            args(&[
                "-arch=sm_90",
                "hrvar_dc90.o",
                "a.o",
                "b.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "variable-only host object beside launching ones",
            args(&[
                "-arch=sm_90",
                "hrvar_dc90.o",
                "launch1_dc.o",
                "launch2_dc.o",
            ]),
        ),
        (
            "variable-only host object, whole LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "hrvar_lto90.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "variable-only host object, whole LTO sm_100",
            args(&[
                "-arch=sm_100",
                "-dlto",
                &nvvm,
                "hrvar_lto100.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "variable-only host object beside launching ones, whole LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "hrvar_lto90.o",
                "launch1_lto.o",
                "launch2_lto.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        // a kernel the link drops that takes functions' addresses (`a.cu`'s `kern_fp`
        // stores `bar` and `local_helper` in a table): nvlink keeps those functions
        (
            "functions a dropped kernel takes the address of, host objects",
            args(&["-arch=sm_90", "launch1_dc.o", "a.o", "b.o"]),
        ),
        (
            "functions a dropped kernel takes the address of, -kernels-used",
            args(&["-arch=sm_90", "a.o", "b.o", "-kernels-used=nothing"]),
        ),
        // host code launching `parent`, which alone launches `child` (hostpar.cu), and
        // other kernels only device code launches: in whole LTO nvlink makes such a
        // kernel's sections as a plain function's
        (
            "host-launched parent of a device-launched child, whole LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "hostpar_lto90.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "host-launched parent of a device-launched child, whole LTO sm_100",
            args(&[
                "-arch=sm_100",
                "-dlto",
                &nvvm,
                "hostpar_lto100.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        (
            "host-launched parent of a device-launched child sm_80",
            args(&["-arch=sm_80", "hostpar_dc80.o", &lib, "-lcudadevrt"]),
        ),
        (
            "host-launched parent of a device-launched child sm_120",
            args(&["-arch=sm_120", "hostpar_dc120.o", &lib, "-lcudadevrt"]),
        ),
        (
            "device launches beside a host object, whole LTO",
            args(&[
                "-arch=sm_90",
                "-dlto",
                &nvvm,
                "dp_lto90.o",
                "launch1_lto.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        // dynamic parallelism from sm_100: libcudadevrt's parameter banks in the order
        // of its functions, and with them its symbols and `EIATTR_PARAM_CBANK` indices
        (
            "dynamic parallelism sm_100",
            args(&["-arch=sm_100", "cdp_100.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "dynamic parallelism sm_120",
            args(&["-arch=sm_120", "cdp_120.cubin", &lib, "-lcudadevrt"]),
        ),
        (
            "dynamic parallelism, host objects sm_100",
            args(&[
                "-arch=sm_100",
                "dp_dc100.o",
                "dpmain_dc100.o",
                &lib,
                "-lcudadevrt",
            ]),
        ),
        // whole-program objects (nvcc without -rdc, an executable cubin in .nv_fatbin):
        // nothing to link, an image without code, nvlink's own notes and .nv.compat (and
        // from sm_100 the empty Mercury tables)
        (
            "whole-program object sm_90",
            args(&["-arch=sm_90", &whole, &lib, "-lcudadevrt"]),
        ),
        ("whole-program object sm_75", args(&["-arch=sm_75", &whole])),
        (
            "whole-program object sm_90a",
            args(&["-arch=sm_90a", &whole]),
        ),
        (
            "whole-program object sm_100",
            args(&["-arch=sm_100", &whole, &lib, "-lcudadevrt"]),
        ),
        (
            "whole-program object sm_103a",
            args(&["-arch=sm_103a", &whole]),
        ),
        (
            "whole-program object sm_120",
            args(&["-arch=sm_120", &whole]),
        ),
        (
            "whole-program object sm_121",
            args(&["-arch=sm_121", &whole]),
        ),
        (
            "whole-program object beside -rdc ones",
            args(&["-arch=sm_90", &saxpy, &whole, &scale, &lib, "-lcudadevrt"]),
        ),
        (
            "LTO IR beside SASS without -dlto",
            args(&[
                "-arch=sm_90",
                &lto_only("saxpy"),
                "a_90.cubin",
                "b_90.cubin",
            ]),
        ),
    ]
}

/// One case: equivalent to nvlink's image, and byte-identical (plain and `-r`) exactly
/// where `bytes.rs` lists it so.
fn fixture_link(what: &str) {
    let cases = fixture_cases();
    let (_, a) = (cases.iter().find(|(w, _)| *w == what)).expect("a case of that name");
    if std::env::var_os("NVLINKRS_BYTES_DUMP").is_some() {
        eprintln!("CASE {what}\t{}", a.join(" "));
    }
    let identical = differential(a).unwrap_or_else(|d| panic!("{what}:\n    {d}"));
    assert_eq!(
        identical,
        bytes::BYTE_IDENTICAL.contains(&what),
        "{what}: byte-identical to nvlink's image (merge/bytes.rs: BYTE_IDENTICAL)"
    );
    let relocatable = relocatable_identical(a).unwrap_or_else(|d| panic!("{what}, -r:\n    {d}"));
    assert_eq!(
        relocatable == Some(true),
        bytes::RELOCATABLE_IDENTICAL.contains(&what),
        "{what}: -r byte-identical to nvlink's (merge/bytes.rs: RELOCATABLE_IDENTICAL)"
    );
}

macro_rules! fixture_link_tests {
    ($($test:ident => $what:literal,)*) => {
        $(
            #[test]
            fn $test() {
                fixture_link($what)
            }
        )*
        /// The cases with a test of their own.
        const TESTED: &[&str] = &[$($what),*];
    };
}

fixture_link_tests! {
    cubins_sm_90 => "cubins sm_90",
    input_order_reversed => "input order reversed",
    register_and_stack_propagation => "register and stack propagation",
    shared_memory_sm_90 => "shared memory sm_90",
    shared_memory_sm_75 => "shared memory sm_75",
    shared_memory_sm_100 => "shared memory sm_100",
    shared_memory_sm_120 => "shared memory sm_120",
    shared_memory_slots_sm_75 => "shared memory slots sm_75",
    shared_memory_slots_sm_90 => "shared memory slots sm_90",
    shared_memory_slots_sm_100 => "shared memory slots sm_100",
    shared_memory_slot_alignment_sm_75 => "shared memory slot alignment sm_75",
    shared_memory_slot_alignment_sm_90 => "shared memory slot alignment sm_90",
    shared_memory_slot_alignment_sm_100 => "shared memory slot alignment sm_100",
    shared_window_alignment_sm_80 => "shared window alignment sm_80",
    shared_window_alignment_sm_100 => "shared window alignment sm_100",
    internal_constants => "internal constants",
    internal_constants_g => "internal constants -g",
    internal_constants_preserve_relocs => "internal constants --preserve-relocs",
    launched_kernel_with_shared_memory_sm_75 => "launched kernel with shared memory sm_75",
    launched_kernel_with_shared_memory_sm_90 => "launched kernel with shared memory sm_90",
    kernel_launched_from_another_unit => "kernel launched from another unit",
    kernel_launched_from_another_unit_sm_75 => "kernel launched from another unit sm_75",
    preserve_relocs_sm_90 => "--preserve-relocs sm_90",
    preserve_relocs_sm_75 => "--preserve-relocs sm_75",
    preserve_relocs_and_g_shared_memory => "--preserve-relocs and -g, shared memory",
    a_template_kernel_in_two_units_sm_80 => "a template kernel in two units sm_80",
    dynamic_shared_one_kernel_sm_75 => "dynamic shared, one kernel sm_75",
    dynamic_shared_only_sm_80 => "dynamic shared only, sm_80",
    dynamic_shared_only_g_inputs_sm_80 => "dynamic shared only, -G inputs sm_80",
    dynamic_shared_only_g_inputs_sm_90 => "dynamic shared only, -G inputs sm_90",
    dynamic_shared_one_kernel_sm_90 => "dynamic shared, one kernel sm_90",
    dynamic_shared_one_kernel_sm_100 => "dynamic shared, one kernel sm_100",
    dynamic_shared_windows_grown_sm_90 => "dynamic shared, windows grown sm_90",
    dynamic_shared_windows_grown_sm_120 => "dynamic shared, windows grown sm_120",
    dynamic_shared_only_in_a_function_no_kernel_reaches => "dynamic shared, only in a function no kernel reaches",
    dynamic_shared_only_in_a_function_no_kernel_reaches_sm_100 => "dynamic shared, only in a function no kernel reaches sm_100",
    dynamic_shared_only_in_a_function_no_kernel_reaches_sm_120 => "dynamic shared, only in a function no kernel reaches sm_120",
    dynamic_shared_only_in_a_function_no_kernel_reaches_g => "dynamic shared, only in a function no kernel reaches, -g",
    dynamic_shared_windows_grown_g => "dynamic shared, windows grown, -g",
    driver_functions_and_managed_variables_sm_75 => "driver functions and managed variables sm_75",
    driver_functions_and_managed_variables_sm_90 => "driver functions and managed variables sm_90",
    driver_functions_and_managed_variables_sm_100 => "driver functions and managed variables sm_100",
    driver_functions_and_managed_variables_sm_120 => "driver functions and managed variables sm_120",
    managed_and_plain_references_to_one_variable => "managed and plain references to one variable",
    plain_and_managed_references_to_one_variable => "plain and managed references to one variable",
    register_limit_callee_in_a_cubin => "register limit, callee in a cubin",
    register_limit_callees_in_input_order => "register limit, callees in input order",
    register_limit_callee_assembled_from_ptx => "register limit, callee assembled from PTX",
    unlaunched_kernels_host_objects => "unlaunched kernels, host objects",
    unlaunched_kernels_a_host_object_and_a_cubin => "unlaunched kernels, a host object and a cubin",
    unlaunched_kernels_a_host_object_and_a_cubin_sm_100 => "unlaunched kernels, a host object and a cubin sm_100",
    unlaunched_kernels_a_host_object_and_ptx => "unlaunched kernels, a host object and PTX",
    unlaunched_kernels_a_host_object_and_a_fatbin => "unlaunched kernels, a host object and a fatbin",
    unlaunched_kernels_whole_lto => "unlaunched kernels, whole LTO",
    unlaunched_kernels_partial_lto => "unlaunched kernels, partial LTO",
    unlaunched_kernels_partial_lto_ir_second => "unlaunched kernels, partial LTO, IR second",
    unlaunched_kernels_partial_lto_with_a_cubin => "unlaunched kernels, partial LTO with a cubin",
    cubins_sm_100 => "cubins sm_100",
    sm_100_input_order_reversed => "sm_100 input order reversed",
    sm_100_register_and_stack_propagation => "sm_100 register and stack propagation",
    cubins_sm_120 => "cubins sm_120",
    sm_100_code_for_sm_103 => "sm_100 code for sm_103",
    sm_100_code_for_sm_100a => "sm_100 code for sm_100a",
    sm_100a_code => "sm_100a code",
    sm_100a_code_beside_sm_100_code => "sm_100a code beside sm_100 code",
    sm_110_reserved_shared_memory => "sm_110 reserved shared memory",
    sm_110_code_for_sm_110a => "sm_110 code for sm_110a",
    sm_120_code_for_sm_121a => "sm_120 code for sm_121a",
    sm_120_code_for_sm_120a => "sm_120 code for sm_120a",
    sm_120_four_inputs => "sm_120 four inputs",
    sm_75 => "sm_75",
    sm_80 => "sm_80",
    sm_80_code_for_sm_86 => "sm_80 code for sm_86",
    sm_75_heavy => "sm_75 heavy",
    ptx_input => "PTX input",
    compute_90_ptx_for_sm_120 => "compute_90 PTX for sm_120",
    compute_100_code_beside_compute_120 => "compute_100 code beside compute_120",
    host_objects_libcudadevrt => "host objects + libcudadevrt",
    example_objects => "example objects",
    example_objects_sm_100_one_without_device_code => "example objects sm_100, one without device code",
    archive => "archive",
    partial_lto => "partial LTO",
    partial_lto_without_libcudadevrt => "partial LTO without libcudadevrt",
    partial_lto_sm_100 => "partial LTO sm_100",
    g_link => "-g link",
    g_link_sm_75_global_shared_variables => "-g link, sm_75, global shared variables",
    g_inputs_g_link => "-G inputs, -g link",
    g_inputs_unplaced_debug_loc_labels_sm_75 => "-G inputs, unplaced .debug_loc labels sm_75",
    g_inputs_unplaced_debug_loc_labels_sm_90 => "-G inputs, unplaced .debug_loc labels sm_90",
    g_inputs_unplaced_debug_loc_labels_g_link => "-G inputs, unplaced .debug_loc labels, -g link",
    g_inputs_the_only_kernel_s_externs_grown => "-G inputs, the only kernel's EXTERNS grown",
    externs_grown_beside_a_new_barrier_count => "EXTERNS grown beside a new barrier count",
    memory_only_sections_padding_for_a_later_window => "memory-only sections, padding for a later window",
    memory_only_sections_input_by_input_sm_90 => "memory-only sections input by input sm_90",
    memory_only_sections_input_by_input_sm_100 => "memory-only sections input by input sm_100",
    g_inputs_two_units_sm_100 => "-G inputs, two units sm_100",
    g_inputs_an_inline_function_in_two_units_sm_100 => "-G inputs, an inline function in two units sm_100",
    g_inputs_assert_fail_in_two_units_sm_100 => "-G inputs, __assert_fail in two units sm_100",
    g_link_sm_100_dynamic_parallelism => "-g link sm_100, dynamic parallelism",
    g_link_sm_100_two_units => "-g link sm_100, two units",
    g_link_sm_100_cooperative_groups => "-g link sm_100, cooperative groups",
    g_link_sm_120_two_units => "-g link sm_120, two units",
    g_inputs_beside_libcudadevrt_sm_100 => "-G inputs beside libcudadevrt sm_100",
    g_inputs_beside_libcudadevrt_g_link_sm_100 => "-G inputs beside libcudadevrt, -g link sm_100",
    g_inputs_with_constant_data_sm_100 => "-G inputs with __constant__ data sm_100",
    g_inputs_with_constant_data_sm_120 => "-G inputs with __constant__ data sm_120",
    g_and_plain_inputs_g_link_sm_120 => "-G and plain inputs, -g link sm_120",
    g_link_sm_110 => "-g link sm_110",
    lineinfo_code_the_finalizer_changes_sm_100 => "-lineinfo code the finalizer changes sm_100",
    g_dopt_on_code_sm_100 => "-G -dopt=on code sm_100",
    g_virtual_functions_sm_90 => "-G virtual functions sm_90",
    lineinfo_beside_g_code_sm_90 => "-lineinfo beside -G code sm_90",
    lineinfo_with_inlined_names_beside_g_code_sm_90 => "-lineinfo with inlined names beside -G code sm_90",
    lineinfo_with_inlined_names_beside_g_code_g_link_sm_100 => "-lineinfo with inlined names beside -G code, -g link sm_100",
    dlto_g_whole_program_sm_90 => "-dlto -g, whole program sm_90",
    dlto_g_whole_program_sm_100 => "-dlto -g, whole program sm_100",
    dlto_g_a_host_object_sm_100 => "-dlto -g, a host object sm_100",
    ptx_input_g_link_sm_100 => "PTX input, -g link sm_100",
    g_inputs_an_inline_function_in_two_units => "-G inputs, an inline function in two units",
    g_inputs_inline_functions_calling_each_unit_s_popcll_sm_80 => "-G inputs, inline functions calling each unit's __popcll sm_80",
    g_inputs_inline_functions_calling_each_unit_s_popcll_sm_90 => "-G inputs, inline functions calling each unit's __popcll sm_90",
    g_inputs_inline_functions_calling_each_unit_s_popcll_sm_100 => "-G inputs, inline functions calling each unit's __popcll sm_100",
    a_weak_function_no_kernel_calls_replaced_by_a_later_copy_sm_90 => "a weak function no kernel calls, replaced by a later copy sm_90",
    a_weak_function_no_kernel_calls_replaced_by_a_later_copy_sm_100 => "a weak function no kernel calls, replaced by a later copy sm_100",
    a_weak_function_no_kernel_calls_replaced_by_a_later_copy_sm_120 => "a weak function no kernel calls, replaced by a later copy sm_120",
    g_link_a_weak_function_replaced_by_a_later_g_copy => "-g link, a weak function replaced by a later -G copy",
    a_called_weak_function_replaced_by_a_later_copy => "a called weak function replaced by a later copy",
    weak_copies_in_three_units_the_second_losing_when_read => "weak copies in three units, the second losing when read",
    g_link_weak_copies_losing_when_read => "-g link, weak copies losing when read",
    call_graph_callers_input_by_input => "call graph callers input by input",
    lineinfo_a_removed_function_s_line_table_sm_100 => "-lineinfo, a removed function's line table sm_100",
    lineinfo_a_removed_function_s_line_table_sm_90 => "-lineinfo, a removed function's line table sm_90",
    lineinfo_inlined_functions_in_two_units_sm_100 => "-lineinfo, inlined functions in two units sm_100",
    lineinfo_inlined_functions_in_two_units_sm_90 => "-lineinfo, inlined functions in two units sm_90",
    lineinfo_inputs_beside_plain_ones => "-lineinfo inputs beside plain ones",
    duplicate_definitions => "duplicate definitions",
    undefined_reference => "undefined reference",
    device_runtime_entry_points => "device runtime entry points",
    an_unknown_device_runtime_name => "an unknown device runtime name",
    kernels_used => "-kernels-used",
    kernels_used_twice_variables_used => "-kernels-used twice, -variables-used",
    no_code_for_the_target => "no code for the target",
    sm_90_cubins_for_sm_100 => "sm_90 cubins for sm_100",
    an_sm_80_cubin_among_sm_90_ones => "an sm_80 cubin among sm_90 ones",
    sm_100_cubin_for_sm_120 => "sm_100 cubin for sm_120",
    lto_ir_and_ptx_without_dlto_the_ptx_is_used => "LTO IR and PTX without -dlto (the PTX is used)",
    only_lto_ir_without_dlto => "only LTO IR without -dlto",
    v_stack_and_registers => "-v, stack and registers",
    v_shared_memory_sm_75 => "-v, shared memory sm_75",
    v_sm_100_dynamic_shared => "-v sm_100, dynamic shared",
    v_sm_120_globals => "-v sm_120, globals",
    v_several_kernels => "-v, several kernels",
    v_whole_program_object => "-v, whole-program object",
    message_options_in_the_tool_note => "message options in the tool note",
    verbose_tkinfo_true_the_files_in_the_tool_note => "-verbose-tkinfo=true: the files in the tool note",
    message_options_in_a_debug_link_s_tool_note => "message options in a debug link's tool note",
    device_graph_calls_sm_80 => "device-graph calls sm_80",
    device_graph_calls_sm_90 => "device-graph calls sm_90",
    device_graph_calls_sm_100 => "device-graph calls sm_100",
    device_graph_calls_sm_120 => "device-graph calls sm_120",
    device_graph_calls_whole_lto => "device-graph calls, whole LTO",
    device_runtime_api_calls => "device runtime API calls",
    device_runtime_api_calls_per_thread_default_stream => "device runtime API calls, per-thread default stream",
    device_runtime_api_calls_without_libcudadevrt => "device runtime API calls without libcudadevrt",
    variable_only_host_object => "variable-only host object",
    variable_only_host_object_beside_ones_without_tables => "variable-only host object beside ones without tables",
    variable_only_host_object_beside_launching_ones => "variable-only host object beside launching ones",
    variable_only_host_object_whole_lto => "variable-only host object, whole LTO",
    variable_only_host_object_whole_lto_sm_100 => "variable-only host object, whole LTO sm_100",
    variable_only_host_object_beside_launching_ones_whole_lto => "variable-only host object beside launching ones, whole LTO",
    functions_a_dropped_kernel_takes_the_address_of_host_objects => "functions a dropped kernel takes the address of, host objects",
    functions_a_dropped_kernel_takes_the_address_of_kernels_used => "functions a dropped kernel takes the address of, -kernels-used",
    host_launched_parent_of_a_device_launched_child_whole_lto => "host-launched parent of a device-launched child, whole LTO",
    host_launched_parent_of_a_device_launched_child_whole_lto_sm_100 => "host-launched parent of a device-launched child, whole LTO sm_100",
    host_launched_parent_of_a_device_launched_child_sm_80 => "host-launched parent of a device-launched child sm_80",
    host_launched_parent_of_a_device_launched_child_sm_120 => "host-launched parent of a device-launched child sm_120",
    device_launches_beside_a_host_object_whole_lto => "device launches beside a host object, whole LTO",
    dynamic_parallelism_sm_100 => "dynamic parallelism sm_100",
    dynamic_parallelism_sm_120 => "dynamic parallelism sm_120",
    dynamic_parallelism_host_objects_sm_100 => "dynamic parallelism, host objects sm_100",
    whole_program_object_sm_90 => "whole-program object sm_90",
    whole_program_object_sm_75 => "whole-program object sm_75",
    whole_program_object_sm_90a => "whole-program object sm_90a",
    whole_program_object_sm_100 => "whole-program object sm_100",
    whole_program_object_sm_103a => "whole-program object sm_103a",
    whole_program_object_sm_120 => "whole-program object sm_120",
    whole_program_object_sm_121 => "whole-program object sm_121",
    whole_program_object_beside_rdc_ones => "whole-program object beside -rdc ones",
    lto_ir_beside_sass_without_dlto => "LTO IR beside SASS without -dlto",
}

/// Every case has its test, and is listed in exactly one of `bytes.rs`'s lists (plain
/// and `-r`), which name no other link.
#[test]
fn every_fixture_link_is_tested_and_listed() {
    let cases: Vec<&str> = fixture_cases().iter().map(|(w, _)| *w).collect();
    assert_eq!(cases, TESTED, "the cases and their tests");
    for (identical, not, what) in [
        (bytes::BYTE_IDENTICAL, bytes::NOT_BYTE_IDENTICAL, ""),
        (
            bytes::RELOCATABLE_IDENTICAL,
            bytes::RELOCATABLE_NOT_IDENTICAL,
            "-r: ",
        ),
    ] {
        let known: Vec<&str> = not.iter().flat_map(|(_, c)| c.iter().copied()).collect();
        let unlisted: Vec<&str> = (cases.iter().copied())
            .filter(|w| identical.contains(w) == known.contains(w))
            .collect();
        assert!(
            unlisted.is_empty(),
            "{what}listed in neither or both of the identical and not identical lists: {unlisted:?}"
        );
        let strangers: Vec<&str> = (identical.iter().chain(&known))
            .copied()
            .filter(|w| !cases.contains(w))
            .collect();
        assert!(
            strangers.is_empty(),
            "{what}listed but no case: {strangers:?}"
        );
    }
}
