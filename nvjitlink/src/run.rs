//! A recorded link run by nvlinkrs: the inputs written into a private folder (0700,
//! `nvlinkrs::scratch`) under the names nvlink's input reader knows them by (`in<N>.cubin`,
//! `.ptx`, `.ltoir`, `.fatbin`, `.o`, `.a`), nvJitLink's options spelled as nvlink's, and
//! `nvlinkrs::link` run on them (through its cache: the key holds the inputs' contents and
//! those names, not the folder, so another process's same link is a hit). Messages are
//! collected, not printed, into the info log. A link that fails is not answered here: the
//! caller hands it to the real library, whose result code and error log are nvJitLink's.

use std::path::{Path, PathBuf};

use nvlinkrs::diag::{Diagnostics, Level};

use crate::input;
use crate::options::Options;
use crate::rc;
use crate::record::{Call, Done, Ours};

/// The input type an input of type `ANY` is, by its content, as nvlinkrs' input reader
/// judges it (`nvlinkrs::input::kind::sniff`); none for what the drop-in leaves to the
/// real library (bitcode, NVVM containers, thin archives, text that is not PTX).
fn sniff(data: &[u8]) -> Option<i32> {
    use nvlinkrs::input::kind::Content;
    use nvlinkrs::ir::container::IrFormat;
    match nvlinkrs::input::kind::sniff(data) {
        Content::Archive => Some(input::LIBRARY),
        Content::DeviceElf => Some(input::CUBIN),
        Content::HostElf => Some(input::OBJECT),
        Content::Fatbin => Some(input::FATBIN),
        Content::Ir(IrFormat::LtoIr) => Some(input::LTOIR),
        Content::Ptx => Some(input::PTX),
        _ => None,
    }
}

/// Whether nvlinkrs takes this input as nvJitLink would at `AddData`; when not (another
/// type than its content, a cubin for another architecture, LTO IR without `-lto`, an
/// index file...), the real library judges it.
pub fn acceptable(o: &Options, kind: i32, data: &[u8]) -> bool {
    let Some(found) = sniff(data) else {
        return false;
    };
    if kind != input::ANY && kind != found || !whole(found, data) {
        return false;
    }
    match found {
        // (nvJitLink's `-lto` link of cubins or PTX beside the IR is not nvlink's: it
        // fails where nvlink resolves, or lays the image out otherwise)
        input::CUBIN | input::PTX if o.lto => false,
        input::CUBIN => {
            nvlinkrs::elf::elf_type(data) == Some(1)
                && nvlinkrs::elf::arch(data).is_some_and(|a| a.to_string() == o.arch)
        }
        input::PTX => ptx_target_fits(o, data),
        // (a host ELF of another type, an executable or a damaged header: nvlink passes
        // over its device code, nvJitLink links it)
        input::OBJECT => nvlinkrs::elf::elf_type(data) == Some(1) && has_code(o, found, data),
        // (nothing for the target, IR for a newer one: nvJitLink refuses them, INVALID_INPUT
        // or ARCH_MISMATCH)
        input::FATBIN | input::LIBRARY => has_code(o, found, data),
        input::LTOIR => o.lto && has_code(o, found, data),
        _ => true,
    }
}

/// Whether an input holds code the link can take (`gather::has_code_for`, read from its
/// bytes in memory): nvJitLink refuses the others at `AddData` (IR for a newer target,
/// ARCH_MISMATCH; an object, fatbin or archive with nothing for the target).
fn has_code(o: &Options, kind: i32, data: &[u8]) -> bool {
    use nvlinkrs::arch::{Arch, TargetKind};
    let Some((TargetKind::Sass, target)) = Arch::parse_target(&o.arch) else {
        return false;
    };
    let tree = |origin: &str| {
        let bytes = nvlinkrs::bytes::Bytes::from_vec(data.to_vec());
        let ext = nvlinkrs::input::kind::Ext::of(Path::new(origin));
        let mode = nvlinkrs::input::Mode::Link { lto: o.lto };
        nvlinkrs::input::walk(origin, ext, bytes, mode, None, 0)
    };
    on_pool(|| {
        tree(&format!("in.{}", extension(kind)))
            .is_ok_and(|t| nvlinkrs::gather::has_code_for(&[t], target, o.lto))
    })
}

/// Whether an input is whole by its own headers, as nvJitLink checks it at `AddData`
/// (a truncated one is refused there; nvlinkrs would find it only at `Complete`): an
/// ELF's sections and tables within it, a fatbin's containers, an LTO IR container's
/// header, an archive's members.
fn whole(found: i32, data: &[u8]) -> bool {
    let bytes = || nvlinkrs::bytes::Bytes::from_vec(data.to_vec());
    match found {
        input::CUBIN | input::OBJECT => {
            nvlinkrs::elf::image_extent(data).is_some_and(|end| end <= data.len())
        }
        input::FATBIN => nvlinkrs::fatbin::parse(&bytes(), "in", 0).is_ok(),
        input::LTOIR => nvlinkrs::ir::container::check_for_link(data, "in").is_ok(),
        input::LIBRARY => nvlinkrs::input::archive::parse(&bytes(), "in").is_ok(),
        _ => true,
    }
}

/// Whether a PTX's `.target` can be compiled for the link's architecture (nvJitLink
/// refuses the others at `AddData`, `sm_100a` PTX for `-arch=sm_100` say).
fn ptx_target_fits(o: &Options, data: &[u8]) -> bool {
    use nvlinkrs::arch::{Arch, TargetKind, ir_compatible};
    let text = String::from_utf8_lossy(data);
    let target = text
        .lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(".target"))
        .and_then(|t| t.split([',', ' ', '\t']).find(|w| !w.is_empty()));
    let sm = |s: &str| match Arch::parse_target(s) {
        Some((TargetKind::Sass, a)) => Some(a),
        _ => None,
    };
    match (target.and_then(sm), sm(&o.arch)) {
        (Some(ptx), Some(link)) => ir_compatible(ptx, link),
        _ => false,
    }
}

fn extension(kind: i32) -> &'static str {
    match kind {
        input::CUBIN => "cubin",
        input::PTX => "ptx",
        input::LTOIR => "ltoir",
        input::FATBIN => "fatbin",
        input::OBJECT => "o",
        _ => "a",
    }
}

/// The link's command line as nvlinkrs reads it, made without reading one (clap's parse,
/// 0.3 ms of a process's first cache hit): [`command_line`]'s, which a test holds it to.
fn link_args(
    o: &Options,
    inputs: &[PathBuf],
    output: &Path,
    kit: &Path,
    devrt_named: bool,
) -> nvlinkrs::cli::LinkArgs {
    nvlinkrs::cli::LinkArgs {
        arch: Some(o.arch.clone()),
        ignore_host_info: true,
        output_file: Some(output.to_path_buf()),
        inputs: inputs.to_vec(),
        link_time_opt: o.lto,
        emit_ptx: o.ptx,
        relocatable_link: o.relocatable,
        kernels_used: o.kernels_used.clone(),
        maxrregcount: o.maxrregcount.map(|n| n.to_string()),
        xptxas: o.xptxas.clone(),
        xnvvm: o.xnvvm.clone(),
        debug: o.debug,
        no_cache: o.no_cache,
        cuda_path: Some(kit.to_path_buf()),
        library_path: devrt_named.then(|| kit.join("lib")).into_iter().collect(),
        library: devrt_named
            .then(|| "cudadevrt".to_string())
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

/// nvlink's command line for the link.
#[cfg(test)]
fn command_line(o: &Options, inputs: &[PathBuf], output: &Path) -> Vec<String> {
    // (nvJitLink keeps every kernel: host objects' reference tables narrow nothing, in
    // a plain link or an LTO one, as with nvlink's -ignore-host-info)
    let mut args = vec![
        format!("-arch={}", o.arch),
        "-ignore-host-info".into(),
        "-o".into(),
        output.display().to_string(),
    ];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    if o.lto {
        args.push("-lto".into());
    }
    if o.ptx {
        args.push("-emit-ptx".into());
    }
    if o.relocatable {
        args.push("-r".into());
    }
    for k in &o.kernels_used {
        args.push(format!("-kernels-used={k}"));
    }
    if let Some(n) = o.maxrregcount {
        args.push(format!("-maxrregcount={n}"));
    }
    // (each `-Xptxas` value one word: see `options::read`)
    for x in &o.xptxas {
        args.push("-Xptxas".into());
        args.push(x.clone());
    }
    for x in &o.xnvvm {
        args.push("-Xnvvm".into());
        args.push(x.clone());
    }
    if o.debug {
        args.push("-g".into());
    }
    if o.no_cache {
        args.push("--no-cache".into());
    }
    args
}

/// The inputs of a link as files of `dir`, under the names nvlink's input reader knows
/// them by (`in<N>.<type>`, N the call's place).
struct Written {
    paths: Vec<PathBuf>,
    /// Some input is a host object or an archive.
    host: bool,
    /// Some input is libcudadevrt.
    devrt: bool,
}

/// A call's input: its type (an `ANY` input's by its content) and its bytes (a file's as
/// read at `AddFile`); `None` where nvlinkrs cannot take it.
fn typed_bytes(call: &Call) -> Option<(i32, Vec<u8>)> {
    let (kind, data) = match call {
        Call::Data { kind, data, .. } => (*kind, data[..data.len() - 1].to_vec()),
        Call::File { kind, data, .. } => (*kind, data.clone()?),
    };
    let kind = if kind == input::ANY {
        sniff(&data)?
    } else {
        kind
    };
    Some((kind, data))
}

fn write_inputs(ours: &Ours, dir: &Path) -> Option<Written> {
    let mut w = Written {
        paths: Vec::new(),
        host: false,
        devrt: false,
    };
    for (i, call) in ours.calls.iter().enumerate() {
        let (kind, data) = typed_bytes(call)?;
        w.host |= kind == input::OBJECT || kind == input::LIBRARY;
        let path = dir.join(format!("in{i}.{}", extension(kind)));
        std::fs::write(&path, &data).ok()?;
        w.devrt |= kind == input::LIBRARY && is_cudadevrt(&path);
        w.paths.push(path);
    }
    Some(w)
}

/// The linked program's LTO IR, as nvJitLink's `GetLinkedLTOIR` gives it
/// (`nvlinkrs::lto::linked_ir`): the link's IR linked by the toolkit's libNVVM, the
/// linked module named as nvJitLink names it, by the caller's name for the input its
/// first module came from. `None` where it cannot be made (the real library's then).
pub fn linked_ir(ours: &Ours) -> Option<Vec<u8>> {
    on_pool(|| linked_ir_here(ours))
}

fn linked_ir_here(ours: &Ours) -> Option<Vec<u8>> {
    use nvlinkrs::arch::{Arch, TargetKind};
    let kit = crate::kit::toolkit()?;
    let libnvvm = kit.libnvvm(None)?;
    let Some((TargetKind::Sass, target)) = Arch::parse_target(&ours.options.arch) else {
        return None;
    };
    // (read from the calls' bytes in memory, each under the name the link gives it)
    let mode = nvlinkrs::input::Mode::Link { lto: true };
    let mut trees = Vec::with_capacity(ours.calls.len());
    let mut origins = Vec::with_capacity(ours.calls.len());
    for (i, call) in ours.calls.iter().enumerate() {
        let (kind, data) = typed_bytes(call)?;
        let origin = format!("in{i}.{}", extension(kind));
        let ext = nvlinkrs::input::kind::Ext::of(Path::new(&origin));
        let bytes = nvlinkrs::bytes::Bytes::from_vec(data);
        trees.push(nvlinkrs::input::walk(&origin, ext, bytes, mode, None, 0).ok()?);
        origins.push(origin);
    }
    // (a name that is not UTF-8 is not one libNVVM's module takes as nvJitLink's does)
    let name_of = |module: &str| {
        let at = (origins.iter()).position(|o| module.starts_with(o.as_str()));
        let utf8 = |c: &std::ffi::CStr| c.to_str().ok().map(str::to_string);
        match at.map(|i| &ours.calls[i]) {
            Some(Call::File { path, .. }) => utf8(path),
            Some(Call::Data { name, .. }) => name.as_deref().map_or(Some(String::new()), utf8),
            None => Some(module.to_string()),
        }
    };
    let diag = Diagnostics::collector();
    let made = nvlinkrs::lto::linked_ir::make(&trees, target, &libnvvm, &name_of, &diag);
    match made {
        Ok(ir) => Some(ir),
        Err(e) => {
            let why =
                std::iter::once(e.message()).chain(e.context_chain().iter().map(|c| c.as_str()));
            fail(&format!(
                "linked LTO IR: {}",
                why.collect::<Vec<_>>().join(": ")
            ));
            None
        }
    }
}

/// The link, `None` when nvlinkrs cannot do it or it failed (the real library's then);
/// `messages` gets a failed link's messages.
pub fn link(ours: &Ours, messages: &mut String) -> Option<Done> {
    let kit = crate::kit::toolkit()?;
    // (0700: no other user reads the program's device code; a folder a killed process
    // left is reclaimed by the next process's first link)
    let dir = nvlinkrs::scratch::private_dir("nvjitlink").ok()?;
    let Written {
        paths: inputs,
        host,
        devrt,
    } = on_pool(|| write_inputs(ours, dir.path()))?;
    // (`-kernels-used` beside the device runtime: nvJitLink's image is nvlink's, whose
    // launched kernels lose their device-runtime calls, where nvlinkrs keeps them:
    // docs/rules/differences.md)
    if !ours.options.kernels_used.is_empty() && devrt {
        return fail("-kernels-used beside libcudadevrt");
    }
    let output = dir.path().join(if ours.options.ptx {
        "out.ptx"
    } else {
        "out.cubin"
    });
    // (nvlink's link of host objects' IR to a cubin wants libcudadevrt named, as nvcc's
    // device link names it; its PTX does not, nor does nvJitLink's, which writes the whole
    // program's: with libcudadevrt, nvlink's is relocatable)
    let devrt_named = host && ours.options.lto && !ours.options.ptx;
    let mut req = link_args(&ours.options, &inputs, &output, &kit.root, devrt_named)
        .request()
        .ok()?;
    req.nvjitlink = true;
    req.nvjitlink_cudadevrt = devrt;
    req.image_in_memory = true;
    // (the host program's terminal is not the linker's to draw on, nor its links another
    // process's to hold up: the cache's counters are left out when their lock is held)
    nvlinkrs::jobs::no_status_line();
    nvlinkrs::cache::stats::never_wait_for_the_lock();
    let diag = Diagnostics::collector();
    // (NVIDIA's library as the finalizer, loaded only for the targets it finalizes)
    let linked = crate::real::with_finalizer(req.target.sm >= 100, |finalizer| {
        let process = nvlinkrs::Process {
            jobserver: None,
            one_shot: false,
            finalizer,
        };
        // on threads with the stack depth the nvlinkrs command gives libNVVM, the one
        // pool of the process (made at its first link: a pool a link costs a hit 2
        // threads); the finalizer's calls come back to this thread, the program's own
        // (NVIDIA's library, called from another thread after a refused link, waits for
        // ever on a lock the first one holds: the whole link on the pool hung there)
        on_pool(|| nvlinkrs::link(&req, &diag, &process))
    });
    let first_error = || {
        let printed = diag.printed().into_iter();
        let mut errors = printed.filter(|(l, _)| *l == Level::Error);
        errors.next().map(|(_, m)| m).unwrap_or_default()
    };
    let mut timings = match linked {
        Ok(t) if diag.error_count() == 0 => t,
        Err(e) if !e.message().is_empty() => {
            *messages = info_log(&diag) + &format!("error   : {e}\n");
            return fail(e.message());
        }
        _ => {
            *messages = info_log(&diag);
            return fail(&first_error());
        }
    };
    // (nvJitLink writes PTX of IR alone: with code already compiled among the inputs it
    // refuses the link, INCORRECT_INPUT_TYPE, where nvlink writes the IR's PTX)
    if ours.options.ptx && (devrt || !timings.partial_lto.is_empty()) {
        return fail("-ptx with inputs that are not LTO IR");
    }
    let hit = timings.phases.iter().any(|(name, _)| *name == "cache");
    crate::trace(if hit {
        "nvlinkrs: cache hit"
    } else {
        "nvlinkrs: linked"
    });
    // (kept by the link, or from the output file where it kept none)
    let mut image = match timings.take_image() {
        Some(image) => image,
        None => std::fs::read(&output).ok()?,
    };
    // (nvlink's -dlto of host objects wants libcudadevrt named, and the link above names
    // it; nvJitLink links no device runtime the caller did not give: a program that
    // launches kernels from the device fails there, PTX_COMPILE, unresolved
    // `__cudaCDP2*`)
    // (the image's symbols, read once for the checks below that need them)
    let launches_unseen = host && ours.options.lto && !devrt && !ours.options.ptx;
    let kernels_named = !ours.options.kernels_used.is_empty() && !ours.options.ptx;
    let summary = (launches_unseen || kernels_named)
        .then(|| nvlinkrs::elf::device_summary(&image, "image").ok())
        .flatten();
    if launches_unseen && summary.as_ref().is_some_and(defines_device_runtime) {
        return fail("the device runtime linked, which the caller did not give");
    }
    // (an `-lto` link of no IR: nvJitLink's libNVVM refuses the empty program,
    // NO_MODULE_IN_PROGRAM, where nvlink links the code as it is)
    if ours.options.lto && no_ir_linked(&diag) {
        return fail("-lto with no LTO IR among the inputs");
    }
    // (a kernel kept beside those `-kernels-used` names: one the kept code launches,
    // which nvJitLink drops, failing on the launch's reference)
    if kernels_named
        && (summary.as_ref()).is_none_or(|s| kernels_beyond(s, &ours.options.kernels_used))
    {
        return fail("-kernels-used: a kernel the kept code launches kept");
    }
    let mut done = Done {
        result: rc::SUCCESS,
        info_log: info_log(&diag),
        ..Default::default()
    };
    if ours.options.ptx {
        // (nvJitLink's PTX is a C string: its size counts the NUL)
        image.push(0);
        done.ptx = Some(image);
    } else {
        done.cubin = Some(image);
    }
    Some(done)
}

/// The process's pool for links: threads with the stack depth the nvlinkrs command gives
/// libNVVM, made at the process's first link; `None` where threads cannot be made (the
/// link runs on the caller's pool). A child the program forked has none of its parent's
/// threads: it makes its own (the parent's, copied, is left alone, never dropped).
fn pool() -> Option<std::sync::Arc<rayon::ThreadPool>> {
    use std::sync::{Arc, Mutex};
    static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let mut held = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    match held.as_ref() {
        Some((owner, pool)) if *owner == pid => Some(pool.clone()),
        _ => {
            let pool = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .stack_size(32 << 20)
                    .build()
                    .ok()?,
            );
            if let Some(inherited) = held.replace((pid, pool.clone())) {
                std::mem::forget(inherited);
            }
            Some(pool)
        }
    }
}

/// Whether the link said, as nvlink does, that it found no LTO IR (`-dlto` ignored).
fn no_ir_linked(diag: &Diagnostics) -> bool {
    (diag.printed().iter()).any(|(_, m)| m.starts_with(nvlinkrs::lto::phase::NO_IR))
}

/// Whether an image holds a kernel `kept` does not name.
fn kernels_beyond(image: &nvlinkrs::elf::DeviceSummary, kept: &[String]) -> bool {
    (image.kernels()).any(|k| !kept.iter().any(|n| *n == *k.name))
}

/// Whether an image defines the device runtime's launch functions (`__cudaCDP2…`, from
/// libcudadevrt's members).
fn defines_device_runtime(image: &nvlinkrs::elf::DeviceSummary) -> bool {
    (image.symbols.iter()).any(|sym| sym.defined() && sym.name.starts_with("__cudaCDP2"))
}

/// `f` on the process's pool ([`pool`]): nvlinkrs's parallel work (the input reader's,
/// the key's) goes to the pool it runs on, and rayon's global pool, made in a parent
/// before a fork, has no threads in the child (its first parallel read waited forever).
pub fn on_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match pool() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Whether an archive the caller gave is libcudadevrt (by its members, as the link
/// knows it: [`nvlinkrs::input::is_device_runtime`]).
fn is_cudadevrt(path: &Path) -> bool {
    let mode = nvlinkrs::input::Mode::Inspect;
    nvlinkrs::input::load(&[path.to_path_buf()], mode).is_ok_and(|trees| {
        (trees.iter()).any(|t| {
            matches!(
                t.item,
                nvlinkrs::input::Item::Archive {
                    cudadevrt: true,
                    ..
                }
            )
        })
    })
}

/// A link nvlinkrs did not finish (the real library's then), its reason traced.
fn fail(why: &str) -> Option<Done> {
    crate::trace(&format!(
        "nvlinkrs: failed: {}",
        why.lines().next().unwrap_or("")
    ));
    None
}

/// Another tool's lines as nvJitLink's info log has them: a continuation of ptxas's
/// (`-v`'s indented `    0 bytes stack frame, ...` after a `ptxas info    : ...` line)
/// after `ptxas         . `, the others as they are. `ptxas` says whether the last line
/// of its own was ptxas's (a cache hit replays the lines one by one).
fn tool_lines(text: &str, ptxas: &mut bool) -> String {
    let mut out = String::new();
    for l in text.split_inclusive('\n') {
        let continued = l.starts_with([' ', '\t']) && !l.trim().is_empty();
        if continued && *ptxas {
            out.push_str("ptxas         . ");
        } else if !continued {
            *ptxas = l.starts_with("ptxas");
        }
        out.push_str(l);
    }
    out
}

/// The link's messages as nvJitLink's info log has them (`warning : ...`, `info    : ...`),
/// but for nvlink's note of a partial LTO link (`requested LTO but 'in1.o' not built for
/// LTO so doing partial LTO`), which nvJitLink 13.5 does not write (`switch_partial_lto`).
fn info_log(diag: &Diagnostics) -> String {
    let mut log = String::new();
    let partial_note = |m: &str| {
        m.starts_with("requested LTO but '")
            && m.ends_with("' not built for LTO so doing partial LTO")
    };
    let mut ptxas = false;
    for (level, m) in diag.printed() {
        match level {
            Level::Info if partial_note(&m) => {}
            Level::Tool => log.push_str(&tool_lines(&m, &mut ptxas)),
            _ => log.push_str(&format!("{:<8}: {m}\n", level.word())),
        }
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request made without reading a command line is the one nvlink's command line
    /// for the same link gives, for every option the drop-in carries out.
    #[test]
    fn link_args_are_the_command_lines() {
        let kit = Path::new("/kit");
        let (inputs, output) = (
            vec![PathBuf::from("/d/in0.o"), PathBuf::from("/d/in1.ltoir")],
            Path::new("/d/out.cubin"),
        );
        let all = Options {
            arch: "sm_90a".into(),
            lto: true,
            ptx: false,
            no_cache: true,
            debug: true,
            maxrregcount: Some(40),
            relocatable: true,
            kernels_used: vec!["_Z1kv".into(), "_Z1jv".into()],
            xptxas: vec!["-O1".into(), "-v".into()],
            xnvvm: vec!["-ftz=1".into(), "-split-compile=2".into()],
        };
        let ptx = Options {
            arch: "sm_100".into(),
            lto: true,
            ptx: true,
            ..Default::default()
        };
        for (o, devrt) in [(all, true), (ptx, false), (Options::default(), false)] {
            let o = Options {
                arch: if o.arch.is_empty() {
                    "sm_80".into()
                } else {
                    o.arch
                },
                ..o
            };
            let mut words = command_line(&o, &inputs, output);
            words.push(format!("--cuda-path={}", kit.display()));
            if devrt {
                words.push(format!("-L{}", kit.join("lib").display()));
                words.push("-lcudadevrt".into());
            }
            let (parsed, _, given) = nvlinkrs::cli::parse(&words).unwrap();
            nvlinkrs::cli::refuse_unimplemented(&given).unwrap();
            let want = format!("{:?}", parsed.request().unwrap());
            let got = format!(
                "{:?}",
                link_args(&o, &inputs, output, kit, devrt)
                    .request()
                    .unwrap()
            );
            assert_eq!(got, want, "{words:?}");
        }
    }
}
