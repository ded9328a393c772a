//! Cutting a linked LLVM program into parts for split compilation
//! (`-split-compile(-extended)=N` on the LLVM engine), before it is optimized.
//!
//! Like NVIDIA's split compile, which optimizes per-function modules on its thread pool,
//! the parts are optimized and code-generated independently; unlike it, a part is a group
//! of functions, so that ptxas runs once per group and not once per function.
//!
//! What goes where:
//! - **roots** are the definitions that must exist once: functions other than internal
//!   ones called only directly (kernels, external functions, functions whose address is
//!   taken) and variables other than internal constants with an insignificant address;
//! - a root function belongs to the part of the input unit that defined it, and units
//!   with many roots are cut into buckets by a fixed hash of the name ([`ROOTS_PER_PART`]
//!   roots a bucket; more buckets when there would be fewer parts than `spread`);
//! - a root variable goes to the first part that uses it, or to its unit's first part;
//! - everything else (internal helpers called directly, libdevice's functions, internal
//!   constant tables) is copied into every part that reaches it, so each part's
//!   optimizer can inline it as the whole-program optimizer would;
//! - an internal root used from another part becomes external so that the merge can
//!   resolve the reference.
//!
//! The rule depends only on the program (names, their units, the reference graph) and
//! `spread`, never on the thread count. A part's bitcode changes only when something it
//! holds changes: a relink after one unit changed re-optimizes and re-assembles only that
//! unit's parts and the parts that copied its helpers.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use inkwell::module::{Linkage, Module};
use inkwell::values::AsValueRef;
use llvm_sys::core::*;
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::{LLVMLinkage, LLVMUnnamedAddr};

use crate::diag::Result;

/// Root functions per part, at most, when a unit is cut into buckets.
pub const ROOTS_PER_PART: usize = 16;

/// Helpers larger than this many instructions are shared, not copied, when several parts
/// reach them (libdevice's `sinf` is about 240; its Bessel functions run to thousands).
pub const COPY_LIMIT: usize = 1000;

/// The unit of a root that no input defined under its name (renamed internals).
const NO_UNIT: usize = usize::MAX;

/// FNV-1a, 64-bit: the bucket of a name.
pub fn bucket_of(name: &str, buckets: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (h % buckets.max(1) as u64) as usize
}

/// Records, before linking, which input unit defines each name (the first one wins).
pub fn record_origins(origins: &mut HashMap<String, usize>, unit: usize, module: &Module) {
    let functions = module.get_functions().map(|f| f.as_global_value());
    for g in functions.chain(module.get_globals()) {
        if !g.is_declaration() {
            let name = g.get_name().to_string_lossy().into_owned();
            origins.entry(name).or_insert(unit);
        }
    }
}

fn name_of(v: LLVMValueRef) -> String {
    let mut len = 0usize;
    // SAFETY: `v` is a live value of a live module; LLVM returns a pointer and length into
    // the value's name, valid until the name changes.
    unsafe {
        let p = LLVMGetValueName2(v, &mut len);
        if p.is_null() {
            return String::new();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len)).into_owned()
    }
}

/// The global values `v` refers to, through constant expressions and aggregates.
fn constant_refs(v: LLVMValueRef, out: &mut Vec<LLVMValueRef>, depth: u32) {
    // SAFETY: reads the operands of a live constant.
    unsafe {
        if !LLVMIsAGlobalValue(v).is_null() {
            out.push(v);
        } else if !LLVMIsAConstant(v).is_null() && depth < 64 {
            for i in 0..LLVMGetNumOperands(v).max(0) as u32 {
                constant_refs(LLVMGetOperand(v, i), out, depth + 1);
            }
        }
    }
}

/// The global values a function's code or a variable's initializer refers to.
fn refs_of(v: LLVMValueRef, is_function: bool) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    // SAFETY: walks the blocks and instructions of a live function (or reads a live
    // variable's initializer); every pointer comes from LLVM and is only read.
    unsafe {
        if !is_function {
            let init = LLVMGetInitializer(v);
            if !init.is_null() {
                constant_refs(init, &mut out, 0);
            }
            return out;
        }
        let mut bb = LLVMGetFirstBasicBlock(v);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                for i in 0..LLVMGetNumOperands(inst).max(0) as u32 {
                    let op = LLVMGetOperand(inst, i);
                    if !op.is_null() {
                        constant_refs(op, &mut out, 0);
                    }
                }
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
    }
    out
}

fn instructions(f: LLVMValueRef) -> usize {
    let mut n = 0;
    // SAFETY: walks the blocks and instructions of a live function.
    unsafe {
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                n += 1;
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
    }
    n
}

/// Whether function `f` carries the enum attribute `name` (`noinline`).
fn has_attribute(f: LLVMValueRef, name: &str) -> bool {
    // SAFETY: looks up an attribute kind by name and reads a live function's attribute.
    unsafe {
        let kind = LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len());
        kind != 0
            && !LLVMGetEnumAttributeAtIndex(f, llvm_sys::LLVMAttributeFunctionIndex, kind).is_null()
    }
}

fn is_local(v: LLVMValueRef) -> bool {
    // SAFETY: reads the linkage of a live global value.
    let l = unsafe { LLVMGetLinkage(v) };
    matches!(
        l,
        LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
    )
}

/// Whether every use of function `f` is as the callee of a call (no address taken).
fn only_called(f: LLVMValueRef) -> bool {
    // SAFETY: walks the use list of a live function and reads its users' operands.
    unsafe {
        let mut u = LLVMGetFirstUse(f);
        while !u.is_null() {
            let user = LLVMGetUser(u);
            if LLVMIsACallInst(user).is_null() || LLVMGetCalledValue(user) != f {
                return false;
            }
            for i in 0..LLVMGetNumArgOperands(user) {
                if LLVMGetOperand(user, i) == f {
                    return false;
                }
            }
            u = LLVMGetNextUse(u);
        }
    }
    true
}

/// Whether variable `g` may be copied into several parts: an internal constant whose
/// address nothing relies on.
fn copyable_variable(g: LLVMValueRef) -> bool {
    // SAFETY: reads attributes of a live global variable.
    unsafe {
        is_local(g)
            && LLVMIsGlobalConstant(g) != 0
            && LLVMGetUnnamedAddress(g) != LLVMUnnamedAddr::LLVMNoUnnamedAddr
    }
}

struct Node {
    value: LLVMValueRef,
    name: String,
    function: bool,
    /// Copied into every part that reaches it (not a root).
    copied: bool,
    /// Instructions (functions).
    size: usize,
    refs: Vec<usize>,
}

/// The parts of `module` as bitcode, in part order (see the module comment). `origins`
/// comes from [`record_origins`]; `spread` is the number of parts the program should at
/// least be cut into when it has enough roots. A module with aliases is not cut (one
/// part).
pub fn partition(
    module: &Module,
    origins: &HashMap<String, usize>,
    spread: usize,
) -> Result<Vec<Vec<u8>>> {
    // SAFETY: reads the module's first alias.
    let has_alias = unsafe { !LLVMGetFirstGlobalAlias(module.as_mut_ptr()).is_null() };
    if has_alias {
        return Ok(vec![module.write_bitcode_to_memory().as_slice().to_vec()]);
    }
    let mut nodes = nodes_of(module);
    let owner = owners(&mut nodes, origins, spread);
    let parts = reach(&nodes, &owner);

    // internal roots used from another part become external
    for (key, set) in &parts {
        for &i in set {
            if !nodes[i].copied && owner[i] != Some(*key) && is_local(nodes[i].value) {
                // SAFETY: changes the linkage of a live global value of `module`.
                unsafe {
                    LLVMSetLinkage(nodes[i].value, LLVMLinkage::LLVMExternalLinkage);
                    LLVMSetVisibility(
                        nodes[i].value,
                        llvm_sys::LLVMVisibility::LLVMHiddenVisibility,
                    );
                }
            }
        }
    }

    let mut out = Vec::new();
    for (key, set) in &parts {
        let keep: BTreeSet<&str> = set
            .iter()
            .filter(|&&i| nodes[i].copied || owner[i] == Some(*key))
            .map(|&i| nodes[i].name.as_str())
            .collect();
        out.push(cut(module, &keep));
    }
    Ok(out)
}

/// The definitions of `module`, functions first, each in module order, with what each
/// refers to.
fn nodes_of(module: &Module) -> Vec<Node> {
    let mut nodes: Vec<Node> = Vec::new();
    for f in module.get_functions() {
        if !f.as_global_value().is_declaration() {
            let v = f.as_value_ref();
            nodes.push(Node {
                value: v,
                name: name_of(v),
                function: true,
                copied: is_local(v) && only_called(v) && !has_attribute(v, "noinline"),
                size: instructions(v),
                refs: Vec::new(),
            });
        }
    }
    for g in module.get_globals() {
        let name = g.get_name().to_string_lossy().into_owned();
        if g.is_declaration() || name.starts_with("llvm.") {
            continue;
        }
        let v = g.as_value_ref();
        nodes.push(Node {
            value: v,
            name,
            function: false,
            copied: copyable_variable(v),
            size: 0,
            refs: Vec::new(),
        });
    }
    let index: HashMap<LLVMValueRef, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.value, i))
        .collect();
    for n in &mut nodes {
        let mut refs: Vec<usize> = refs_of(n.value, n.function)
            .into_iter()
            .filter_map(|r| index.get(&r).copied())
            .collect();
        refs.sort_unstable();
        refs.dedup();
        n.refs = refs;
    }
    nodes
}

/// Root functions by unit, each unit cut into buckets: each function's part (unit,
/// bucket), `None` for what is copied and for variables.
fn place_functions(
    nodes: &[Node],
    origins: &HashMap<String, usize>,
    spread: usize,
) -> Vec<Option<(usize, usize)>> {
    let unit_of = |n: &Node| origins.get(&n.name).copied().unwrap_or(NO_UNIT);
    let mut by_unit: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.function && !n.copied {
            by_unit.entry(unit_of(n)).or_default().push(i);
        }
    }
    let total: usize = by_unit.values().map(Vec::len).sum();
    let mut owner = vec![None; nodes.len()];
    for (&unit, roots) in &by_unit {
        let by_size = roots.len().div_ceil(ROOTS_PER_PART);
        let by_spread = (spread * roots.len()).div_ceil(total.max(1));
        let buckets = by_size.max(by_spread).clamp(1, roots.len());
        for &i in roots {
            owner[i] = Some((unit, bucket_of(&nodes[i].name, buckets)));
        }
    }
    owner
}

/// What each part reaches from its roots, stopping at other roots.
fn reach(
    nodes: &[Node],
    owner: &[Option<(usize, usize)>],
) -> BTreeMap<(usize, usize), BTreeSet<usize>> {
    let mut parts: BTreeMap<(usize, usize), BTreeSet<usize>> = BTreeMap::new();
    for (i, o) in owner.iter().enumerate() {
        let Some(key) = o else { continue };
        let seen = parts.entry(*key).or_default();
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if !seen.insert(j) {
                continue;
            }
            for &r in &nodes[j].refs {
                if nodes[r].copied {
                    stack.push(r);
                } else {
                    seen.insert(r);
                }
            }
        }
    }
    parts
}

/// Each node's part: functions by unit and bucket (a large helper that several parts
/// reach shared, no longer copied), root variables in the first part that uses them,
/// else their unit's first part.
fn owners(
    nodes: &mut [Node],
    origins: &HashMap<String, usize>,
    spread: usize,
) -> Vec<Option<(usize, usize)>> {
    let unit_of = |n: &Node| origins.get(&n.name).copied().unwrap_or(NO_UNIT);
    // a large helper that several parts reach is shared instead of copied
    let mut owner = place_functions(nodes, origins, spread);
    let mut reached_by = vec![0usize; nodes.len()];
    for set in reach(nodes, &owner).values() {
        for &i in set {
            reached_by[i] += 1;
        }
    }
    let mut changed = false;
    for (i, n) in nodes.iter_mut().enumerate() {
        if n.copied && n.function && n.size > COPY_LIMIT && reached_by[i] > 1 {
            n.copied = false;
            changed = true;
        }
    }
    if changed {
        owner = place_functions(nodes, origins, spread);
    }
    // root variables: the first part that uses them, else their unit's first part
    let first = reach(nodes, &owner);
    for i in 0..nodes.len() {
        if nodes[i].function || nodes[i].copied {
            continue;
        }
        let user = first.iter().find(|(_, s)| s.contains(&i)).map(|(k, _)| *k);
        owner[i] = Some(user.unwrap_or((unit_of(&nodes[i]), 0)));
    }
    owner
}

/// A copy of `module` that defines only `keep`; what it still uses of the rest it
/// declares, what it does not use is dropped.
fn cut(module: &Module, keep: &BTreeSet<&str>) -> Vec<u8> {
    let m = module.clone();
    // the first input's path is no part of a part's content
    m.set_name("<split part>");
    m.set_source_file_name("<split part>");
    for g in m.get_globals().collect::<Vec<_>>() {
        let name = g.get_name().to_string_lossy().into_owned();
        if g.is_declaration() || name.starts_with("llvm.") || keep.contains(name.as_str()) {
            continue;
        }
        // SAFETY: a null initializer turns a live global variable into a declaration.
        unsafe { LLVMSetInitializer(g.as_value_ref(), std::ptr::null_mut()) };
        g.set_linkage(Linkage::External);
    }
    for f in m.get_functions().collect::<Vec<_>>() {
        let name = f.get_name().to_string_lossy().into_owned();
        if f.as_global_value().is_declaration() || keep.contains(name.as_str()) {
            continue;
        }
        let decl = m.add_function(&format!("{name}.decl"), f.get_type(), None);
        decl.set_call_conventions(f.get_call_conventions());
        f.replace_all_uses_with(decl);
        // SAFETY: `f` has no uses left and is not used afterwards.
        unsafe { f.delete() };
        decl.as_global_value().set_name(&name);
    }
    // declarations nothing uses any more (the dropped bodies were their users)
    for f in m.get_functions().collect::<Vec<_>>() {
        // SAFETY: reads the use list of a live function; one without uses is deleted and
        // not used afterwards.
        unsafe {
            if f.as_global_value().is_declaration() && LLVMGetFirstUse(f.as_value_ref()).is_null() {
                f.delete();
            }
        }
    }
    for g in m.get_globals().collect::<Vec<_>>() {
        // SAFETY: as above, for variables.
        unsafe {
            if g.is_declaration() && LLVMGetFirstUse(g.as_value_ref()).is_null() {
                LLVMDeleteGlobal(g.as_value_ref());
            }
        }
    }
    m.write_bitcode_to_memory().as_slice().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;

    /// Two units: k1 and t from unit 0, k2, p and the variables g, fp from unit 1; both
    /// kernels call the small helper h, the recursive r and the out-of-line t, read the
    /// constant table and write g; p is reached only through fp.
    fn program(k2_factor: &str) -> String {
        format!(
            r#"
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
@g = addrspace(1) global i32 0
@tab = internal unnamed_addr addrspace(1) constant [2 x float] [float 1.0, float 2.0]
@fp = addrspace(1) global ptr @p
define internal float @h(float %x) {{
  %y = fmul float %x, 2.0
  ret float %y
}}
define internal float @r(float %x, i32 %n) {{
  %c = icmp sle i32 %n, 1
  br i1 %c, label %done, label %more
more:
  %m = sub i32 %n, 1
  %a = call float @r(float %x, i32 %m)
  %b = call float @r(float %a, i32 %m)
  ret float %b
done:
  ret float %x
}}
define internal float @t(float %x) noinline {{
  ret float %x
}}
define internal float @p(float %x) {{
  ret float %x
}}
define ptx_kernel void @k1(ptr %o) {{
  %v = load float, ptr addrspace(1) @tab
  %a = call float @h(float %v)
  %b = call float @r(float %a, i32 5)
  %c = call float @t(float %b)
  store float %c, ptr %o
  store i32 1, ptr addrspace(1) @g
  ret void
}}
define ptx_kernel void @k2(ptr %o) {{
  %v = load float, ptr addrspace(1) getelementptr (i8, ptr addrspace(1) @tab, i64 4)
  %a = call float @h(float %v)
  %b = call float @r(float %a, i32 3)
  %c = call float @t(float %b)
  %d = fmul float %c, {k2_factor}
  store float %d, ptr %o
  store i32 2, ptr addrspace(1) @g
  ret void
}}
"#
        )
    }

    fn parts_of(ir: &str) -> Vec<Vec<u8>> {
        let ctx = Context::create();
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(
            ir.as_bytes(),
            "test.ll",
        );
        let m = ctx.create_module_from_ir(buf).expect("test IR parses");
        let origins: HashMap<String, usize> = [
            ("k1", 0),
            ("t", 0),
            ("h", 0),
            ("r", 0),
            ("tab", 0),
            ("k2", 1),
            ("p", 1),
            ("g", 1),
            ("fp", 1),
        ]
        .into_iter()
        .map(|(n, u)| (n.to_string(), u))
        .collect();
        partition(&m, &origins, 1).unwrap()
    }

    /// (name, defined here, linkage) of every function and variable of a part.
    fn contents(bitcode: &[u8]) -> Vec<(String, bool, Linkage)> {
        let ctx = Context::create();
        let buf =
            inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(bitcode, "part");
        let m = Module::parse_bitcode_from_buffer(&buf, &ctx).unwrap();
        m.verify().expect("a part verifies");
        let mut out: Vec<(String, bool, Linkage)> = m
            .get_functions()
            .map(|f| f.as_global_value())
            .chain(m.get_globals())
            .map(|g| {
                let name = g.get_name().to_string_lossy().into_owned();
                (name, !g.is_declaration(), g.get_linkage())
            })
            .filter(|(n, _, _)| !n.starts_with("llvm."))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn parts_follow_units_copy_helpers_and_share_roots() {
        use Linkage::{External, Internal};
        let parts = parts_of(&program("3.0"));
        assert_eq!(parts.len(), 2);
        let def = |n: &str, l| (n.to_string(), true, l);
        let decl = |n: &str| (n.to_string(), false, External);
        // unit 0: k1 and t (external now: k2 calls it), the copied helpers and table,
        // and g, which k1 uses first
        assert_eq!(
            contents(&parts[0]),
            [
                def("g", External),
                def("h", Internal),
                def("k1", External),
                def("r", Internal),
                def("t", External),
                def("tab", Internal),
            ]
        );
        // unit 1: k2, p and fp, its own copies of h, r and the table; t and g declared
        assert_eq!(
            contents(&parts[1]),
            [
                def("fp", External),
                decl("g"),
                def("h", Internal),
                def("k2", External),
                def("p", Internal),
                def("r", Internal),
                decl("t"),
                def("tab", Internal),
            ]
        );
        // the same program gives the same bytes; a change to k2 leaves unit 0's part
        assert_eq!(parts, parts_of(&program("3.0")));
        let changed = parts_of(&program("5.0"));
        assert_eq!(changed[0], parts[0]);
        assert_ne!(changed[1], parts[1]);
    }

    #[test]
    fn buckets_are_a_fixed_function_of_the_name() {
        // FNV-1a of "k": changing this breaks every cached part, so it is pinned
        assert_eq!(bucket_of("k", 1_000_003), 80533); // 0xaf63e64c8601fd8a % 1000003
        assert_eq!(bucket_of("anything", 1), 0);
        assert_eq!(bucket_of("anything", 0), 0);
    }
}
