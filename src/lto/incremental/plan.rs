//! The partition plan: from the modules' summaries, which kernels the whole-program link
//! would keep, one partition per unit whose kernels those are (its *roots*), the
//! variables each partition must leave to one definition (*pins*), the data partition
//! that defines the variables the host can see, and each partition's *manifest*: the
//! hashes of exactly the functions and variables its roots reach, which with its option
//! list and the tools make its cache key.
//!
//! The rules, each what the whole-program link does (docs/design/incremental-lto.md):
//! * a name resolves as the IR linker resolves it: the first strong definition, else
//!   the first weak or linkonce one (a template instantiated in several units), else an
//!   `available_externally` body; an internal symbol is its own module's;
//! * kernels kept: every kernel when libNVVM has no host-reference list (no host
//!   information, or all six lists empty), else those the lists name (`*` globs;
//!   external kernels by `ek`, internal ones by `ik`); then, until nothing changes,
//!   every kernel a kept one refers to (a launch from the device);
//! * variables the host can see: every defined external variable without lists, else
//!   those the variable lists name; they are pinned wherever reached and defined by the
//!   data partition;
//! * a variable that two partitions reach and some unit may write (its address is used
//!   other than to load from, `summary`), and a `__constant__` one two partitions reach,
//!   is pinned too, so that its state (or its room in the 64 KiB constant bank) is not
//!   duplicated; an internal one keeps its module-unique name (two units' internal
//!   variables of one name make the link fall back to whole-program LTO). A variable
//!   nobody writes may be copied: each partition reads the same initial bytes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::summary::{Global, Hash, Hasher, Kind, Linkage, Summary};
use crate::input::HostRefs;
use crate::input::host_refs::glob;

/// A global of the program: (module, index in its summary).
pub type Node = (usize, u32);

/// A partition's host-reference lists: its roots and its pins (the six lists the host
/// objects' tables give a whole-program link; `tables` unused).
pub type Lists = HostRefs;

/// A partition's lists as incremental LTO makes and hands them to libNVVM.
impl HostRefs {
    fn pin(&mut self, g: &Global) {
        let list = match (g.linkage == Linkage::Local, g.address_space == 4) {
            (false, false) => &mut self.eg,
            (true, false) => &mut self.ig,
            (false, true) => &mut self.ec,
            (true, true) => &mut self.ic,
        };
        list.push(g.name.clone());
    }

    /// As libNVVM options (`-host-ref-ek=a,b`), every list sorted; an empty kernel list
    /// is given one name no symbol has, so that libNVVM keeps no kernel it was not told
    /// to (with all six lists empty it would keep every kernel and variable).
    pub fn partition_options(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, l) in [
            ("ek", &self.ek),
            ("ik", &self.ik),
            ("ec", &self.ec),
            ("ic", &self.ic),
            ("eg", &self.eg),
            ("ig", &self.ig),
        ] {
            let mut l = l.clone();
            l.sort();
            l.dedup();
            if k == "ek" && l.is_empty() && self.ik.is_empty() {
                l.push(NO_KERNEL.into());
            }
            if !l.is_empty() {
                out.push(format!("-host-ref-{k}={}", l.join(",")));
            }
        }
        out
    }
}

/// A kernel name no program has (`$` is not in C++ mangling).
pub const NO_KERNEL: &str = "$nvlinkrs$no$kernel";

/// One libNVVM program of the incremental link.
#[derive(Clone, Debug)]
pub struct Partition {
    /// The unit whose kernels are its roots (`None`: the data partition).
    pub module: Option<usize>,
    pub lists: Lists,
    /// The hash of what it reaches (see the module comment).
    pub manifest: Hash,
    /// How many functions and variables it reaches.
    pub reach: usize,
    /// What compiling it costs, roughly: the instructions of what it reaches.
    pub work: u64,
}

/// The plan of an incremental link.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Code partitions in input order, then the data partition.
    pub partitions: Vec<Partition>,
    /// Variables that must end up defined once (the pins of every partition): their
    /// definitions in all but one partition's PTX become declarations.
    pub pinned: BTreeSet<String>,
    /// The kernels the image will hold.
    pub kernels: BTreeSet<String>,
    /// The whole-program link's share of [`Partition::work`]: the instructions of what
    /// all kernels reach, each function once.
    pub whole_work: u64,
    /// The instructions of every module, each partition's libNVVM program reads them all.
    pub read_work: u64,
    /// Why no estimate of the partitions' time against the whole link's can be made
    /// ([`unestimated`]), if so.
    pub unestimated: Option<String>,
    /// The device runtime's function the program calls, if it does ([`runtime_call`]):
    /// nvlink then links it as relocatable code, which [`Plan::first_share`] weighs.
    pub relocatable: Option<String>,
}

/// Why the link cannot be partitioned (it is then linked whole-program).
pub type Refusal = String;

struct Program<'a> {
    sums: &'a [Summary],
    /// Non-internal names to their definition.
    defs: HashMap<&'a str, Node>,
    /// Non-internal variables some unit may write.
    written: BTreeSet<&'a str>,
}

impl<'a> Program<'a> {
    fn new(sums: &'a [Summary], names: &[String]) -> Result<Program<'a>, Refusal> {
        let mut defs: HashMap<&str, (Node, u8)> = HashMap::new();
        for (m, s) in sums.iter().enumerate() {
            if s.globals.is_empty() && s.opaque.is_some() {
                return Err(format!(
                    "'{}' could not be read ({})",
                    names[m],
                    s.opaque.as_deref().unwrap_or_default()
                ));
            }
            for (i, g) in s.globals.iter().enumerate() {
                let rank = match (g.defined, g.linkage) {
                    (false, _) | (_, Linkage::Local | Linkage::Other) => continue,
                    (true, Linkage::External) => 0,
                    (true, Linkage::Weak) => 1,
                    (true, Linkage::AvailableExternally) => 2,
                };
                match defs.get(g.name.as_str()) {
                    Some(&(_, 0)) if rank == 0 => {
                        return Err(format!("'{}' is defined twice", g.name));
                    }
                    Some(&(_, r)) if r <= rank => {}
                    _ => {
                        defs.insert(&g.name, ((m, i as u32), rank));
                    }
                }
            }
        }
        let written = sums
            .iter()
            .flat_map(|s| &s.globals)
            .filter(|g| g.written && g.linkage != Linkage::Local)
            .map(|g| g.name.as_str())
            .collect();
        Ok(Program {
            sums,
            defs: defs.into_iter().map(|(k, (n, _))| (k, n)).collect(),
            written,
        })
    }

    /// Whether a variable may be written by some unit.
    fn writable(&self, n: Node) -> bool {
        let g = self.global(n);
        match g.linkage {
            Linkage::Local => g.written,
            _ => self.written.contains(g.name.as_str()),
        }
    }

    fn global(&self, (m, i): Node) -> &'a Global {
        &self.sums[m].globals[i as usize]
    }

    /// What a reference from module `m` to its global `i` names: the definition it
    /// resolves to, or (unresolved: libdevice, libcudadevrt, an intrinsic) itself.
    fn resolve(&self, (m, i): Node) -> Node {
        let g = self.global((m, i));
        if g.linkage == Linkage::Local || (g.defined && g.linkage == Linkage::External) {
            return (m, i);
        }
        self.defs.get(g.name.as_str()).copied().unwrap_or((m, i))
    }

    /// Everything `roots` reach, roots included, in a fixed order.
    fn closure(&self, roots: impl IntoIterator<Item = Node>) -> BTreeSet<Node> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Node> = roots.into_iter().map(|n| self.resolve(n)).collect();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            let g = self.global(n);
            if g.defined {
                for &r in &g.refs {
                    stack.push(self.resolve((n.0, r)));
                }
            }
        }
        seen
    }

    /// Every definition of a kernel, as the link would keep it (a weak one where it
    /// resolves).
    fn kernels(&self) -> Vec<Node> {
        let mut out = Vec::new();
        for (m, s) in self.sums.iter().enumerate() {
            for (i, g) in s.globals.iter().enumerate() {
                let n = (m, i as u32);
                if g.kernel && g.defined && self.resolve(n) == n {
                    out.push(n);
                }
            }
        }
        out
    }
}

/// Whether the host-reference lists say nothing (libNVVM then keeps every kernel and
/// external variable).
fn no_lists(r: &HostRefs) -> bool {
    [&r.ek, &r.ik, &r.ec, &r.ic, &r.eg, &r.ig]
        .iter()
        .all(|l| l.is_empty())
}

fn matches(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| glob(p, name))
}

/// Whether the whole-program link keeps variable `g` visible to the host.
fn host_visible(g: &Global, refs: Option<&HostRefs>) -> bool {
    if g.kind != Kind::Variable || !g.defined || !matches!(g.address_space, 1 | 4) {
        return false;
    }
    let local = g.linkage == Linkage::Local;
    match refs {
        None => !local && g.linkage != Linkage::Other,
        Some(r) => {
            let list = match (local, g.address_space == 4) {
                (false, false) => &r.eg,
                (true, false) => &r.ig,
                (false, true) => &r.ec,
                (true, true) => &r.ic,
            };
            matches(list, &g.name)
        }
    }
}

/// Makes the plan. `names`: the modules' names (for messages); `host_refs`: the lists
/// the whole-program link hands libNVVM (`None`: no host information).
pub fn make(
    sums: &[Summary],
    names: &[String],
    host_refs: Option<&HostRefs>,
) -> Result<Plan, Refusal> {
    let p = Program::new(sums, names)?;
    let refs = host_refs.filter(|r| !no_lists(r));
    // the kernels the whole-program link keeps
    let all = p.kernels();
    let named = |n: &Node| {
        let g = p.global(*n);
        match refs {
            None => true,
            Some(r) if g.linkage == Linkage::Local => matches(&r.ik, &g.name),
            Some(r) => matches(&r.ek, &g.name),
        }
    };
    let mut kept: BTreeSet<Node> = all.iter().copied().filter(named).collect();
    loop {
        let reached: BTreeSet<Node> = p
            .closure(kept.iter().copied())
            .into_iter()
            .filter(|n| all.contains(n))
            .collect();
        if reached.is_subset(&kept) {
            break;
        }
        kept.extend(reached);
    }
    // one partition per unit with kept kernels, in input order
    let mut roots: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
    for &n in &kept {
        roots.entry(n.0).or_default().push(n);
    }
    if roots.is_empty() {
        return Err(match refs {
            Some(_) if !all.is_empty() => "the host objects' kernel lists (what the host code launches) name none of the program's kernels".into(),
            _ => "the program defines no kernel".into(),
        });
    }
    let closures: Vec<BTreeSet<Node>> = roots
        .values()
        .map(|r| p.closure(r.iter().copied()))
        .collect();
    let mut reached_by: HashMap<Node, usize> = HashMap::new();
    for c in &closures {
        for &n in c {
            *reached_by.entry(n).or_default() += 1;
        }
    }
    let visible: Vec<Node> = (0..sums.len())
        .flat_map(|m| (0..sums[m].globals.len() as u32).map(move |i| (m, i)))
        .filter(|&n| p.resolve(n) == n && host_visible(p.global(n), refs))
        .collect();
    let pinned_here = |n: &Node| {
        let g = p.global(*n);
        let shared = reached_by.get(n).copied().unwrap_or(0) >= 2;
        g.kind == Kind::Variable
            && g.defined
            && matches!(g.address_space, 1 | 4)
            && (visible.contains(n) || shared && (p.writable(*n) || g.address_space == 4))
    };
    let mut partitions = Vec::new();
    let mut pinned_nodes: BTreeSet<Node> = visible.iter().copied().collect();
    for ((&m, r), closure) in roots.iter().zip(&closures) {
        let mut lists = Lists::default();
        for &k in r {
            let g = p.global(k);
            match g.linkage {
                Linkage::Local => lists.ik.push(g.name.clone()),
                _ => lists.ek.push(g.name.clone()),
            }
        }
        for n in closure.iter().filter(|n| pinned_here(n)) {
            lists.pin(p.global(*n));
            pinned_nodes.insert(*n);
        }
        partitions.push(Partition {
            module: Some(m),
            manifest: manifest(&p, closure),
            reach: closure.len(),
            work: work(&p, closure.iter()),
            lists,
        });
    }
    // the data partition: every pinned variable, and what their initializers reach
    let mut data = Lists::default();
    for &n in &pinned_nodes {
        data.pin(p.global(n));
    }
    let data_closure = p.closure(pinned_nodes.iter().copied());
    partitions.push(Partition {
        module: None,
        manifest: manifest(&p, &data_closure),
        reach: data_closure.len(),
        work: work(&p, data_closure.iter()),
        lists: data,
    });
    check_local_names(&p, &pinned_nodes)?;
    let whole_work = work(&p, reached_by.keys());
    let read_work = sums
        .iter()
        .flat_map(|s| &s.globals)
        .map(|g| g.insts + 1)
        .sum();
    // A pointer to a device function is a value of the whole program ptxas compiled: an
    // index into the calling kernel's own table of the clones it may call (a new user's
    // program: a pointer one partition's kernel stored, or the host read from a variable
    // the data partition initialized, called garbage in another partition's kernel). A
    // program where any unit takes a function's address links whole-program.
    if let Some(name) = function_address_taken(&p) {
        return Err(format!(
            "the address of the device function '{name}' is taken: a pointer to a function is a value of the partition that takes it, which another partition cannot call through"
        ));
    }
    Ok(Plan {
        partitions,
        pinned: pinned_nodes
            .iter()
            .map(|&n| p.global(n).name.clone())
            .collect(),
        kernels: kept.iter().map(|&n| p.global(n).name.clone()).collect(),
        whole_work,
        read_work,
        unestimated: unestimated(&p, names),
        relocatable: runtime_call(&p),
    })
}

/// A device function (not a kernel) whose address some unit takes, by that unit's own
/// entry for it: its definition, or its declaration of another unit's, or its copy of a
/// template another unit's copy stands for (a reviewer's programs: the flag on the taking
/// unit's entry, the definition the name resolves to unflagged).
fn function_address_taken(p: &Program) -> Option<String> {
    p.sums.iter().enumerate().find_map(|(m, s)| {
        s.globals.iter().enumerate().find_map(|(i, g)| {
            if g.kind != Kind::Function || !g.address_taken {
                return None;
            }
            let target = match p.defs.get(g.name.as_str()) {
                Some(&n) => n,
                None if g.defined => (m, i as u32),
                None => return None,
            };
            let t = p.global(target);
            (!g.kernel && !t.kernel).then(|| t.name.clone())
        })
    })
}

/// Why the summaries cannot weigh the partitions against the whole-program link: a
/// module they could not read function by function (its instructions are not counted).
fn unestimated(p: &Program, names: &[String]) -> Option<String> {
    let (_, n) = p.sums.iter().zip(names).find(|(s, _)| s.opaque.is_some())?;
    Some(format!("'{n}' could not be read function by function"))
}

/// The device runtime's function (libcudadevrt's `__cudaCDP*`, `cudaLaunchDevice*`: a
/// launch from the device, the device's `cudaMalloc`) the program calls, which no module
/// defines: nvlink then links the program as relocatable code.
fn runtime_call(p: &Program) -> Option<String> {
    let call = p.sums.iter().flat_map(|s| &s.globals).find(|g| {
        g.kind == Kind::Function
            && !g.defined
            && (g.name.starts_with("__cudaCDP") || g.name.starts_with("cudaLaunchDevice"))
            && !p.defs.contains_key(g.name.as_str())
    })?;
    Some(call.name.clone())
}

/// How much longer than the estimate says the whole-program link of a program that calls
/// the device runtime is taken to be, against its partitions: nvlink links it as
/// relocatable code (libNVVM `--device-c`, ptxas `-c`), which the estimate does not model.
/// Measured partitions' time against the whole link's, with the estimate: a new user's
/// 8-unit program 149% (estimate 86%), `benches/gen/devlaunch` 90% (97%), a new user's
/// CUB/Thrust program 64% at sm_90 (41%) and 22% at sm_100 (44%): weighed so, the first
/// link builds the partitions for the last two and links the first two whole-program.
const RELOCATABLE_WEIGHT: f64 = 1.75;

/// How a compile's time grows with the instructions it compiles: faster than in
/// proportion (libNVVM's whole-program passes and ptxas over one large PTX), as the
/// measured links show (`benches/results/incremental.md`: 32 partitions of a program
/// whose functions they reach 3.3 times over in all, side by side on 2 cores, took 70% of
/// the whole link's time).
const GROWTH: f64 = 1.37;

/// What each partition's libNVVM program costs for every instruction of every module,
/// in the measure [`GROWTH`] gives a compile: it parses and links all the modules, then
/// drops what the partition does not reach. Fitted to the 128-unit program
/// (`benches/results/incremental.md`: 128 partitions side by side on 2 cores took 70-75%
/// of the whole link's time, where their compiles alone would give 42%).
const READ_COST: f64 = 0.25;

/// What any compile costs beside its instructions, in the same measure (libNVVM's
/// program, ptxas' process): the time of compiling about 150 instructions (some 50 ms).
const FIXED_COST: f64 = 1000.0;

/// What a partitioned link costs beside its compiles (rewriting each partition's PTX,
/// merging their cubins), in the same measure. With it and [`FIXED_COST`] a small
/// program, whose links are quick either way, links whole-program first.
const PARTITIONED_COST: f64 = 2000.0;

impl Plan {
    /// The time a cold partitioned link is expected to take, as a share of the
    /// whole-program link's, on `workers` workers: each partition reads every module and
    /// compiles what it reaches (a function several reach, in each), the partitions side
    /// by side; the whole link reads every module once and compiles each function once.
    /// From instruction counts alone: an estimate to choose the faster way to a first
    /// image, never anything an image depends on.
    pub fn cold_share(&self, workers: usize) -> f64 {
        let all: Vec<usize> = (0..self.partitions.len()).collect();
        self.share(&all, workers)
    }

    /// [`Plan::cold_share`] as a first link weighs it: for a program nvlink links as
    /// relocatable code, [`RELOCATABLE_WEIGHT`] times it.
    pub fn first_share(&self, workers: usize) -> f64 {
        let weight = match self.relocatable {
            Some(_) => RELOCATABLE_WEIGHT,
            None => 1.0,
        };
        self.cold_share(workers) * weight
    }

    /// As [`Plan::cold_share`] for compiling the partitions `todo` alone (the others
    /// cached): a relink's estimate where no measured time says.
    pub fn share(&self, todo: &[usize], workers: usize) -> f64 {
        let read = READ_COST * self.read_work as f64;
        let compile = |work: u64| (work as f64).powf(GROWTH);
        let costs: Vec<f64> = (todo.iter())
            .filter_map(|&i| self.partitions.get(i))
            .filter(|p| p.module.is_some() || p.reach > 0)
            .map(|p| FIXED_COST + read + compile(p.work))
            .collect();
        let total: f64 = costs.iter().sum();
        let longest = costs.iter().copied().fold(0.0, f64::max);
        let wall = PARTITIONED_COST + (total / workers.max(1) as f64).max(longest);
        wall / (FIXED_COST + read + compile(self.whole_work))
    }
}

/// The instructions of `nodes`, and one for each (a variable, a declaration).
fn work<'a>(p: &Program, nodes: impl Iterator<Item = &'a Node>) -> u64 {
    nodes.map(|&n| p.global(n).insts + 1).sum()
}

/// A pinned internal variable is named by its name alone: no other unit may have a
/// global of that name (the IR linker would rename one of them).
fn check_local_names(p: &Program, pinned: &BTreeSet<Node>) -> Result<(), Refusal> {
    for &(m, i) in pinned {
        let g = p.global((m, i));
        if g.linkage != Linkage::Local {
            continue;
        }
        let clash = p
            .sums
            .iter()
            .enumerate()
            .any(|(k, s)| k != m && s.globals.iter().any(|o| o.name == g.name));
        if clash {
            return Err(format!(
                "the internal variable '{}' is shared by partitions and another unit has a global of that name",
                g.name
            ));
        }
    }
    Ok(())
}

/// The hash of what a closure holds: each member's content hash, in a fixed order
/// (by hash: where a member comes from does not matter, what it is does).
fn manifest(p: &Program, closure: &BTreeSet<Node>) -> Hash {
    let mut items: Vec<Hash> = closure.iter().map(|&n| p.global(n).hash).collect();
    items.sort_unstable();
    let mut h = Hasher::new("manifest");
    for i in &items {
        h.hash(i);
    }
    h.done()
}

/// The names that the IR linker may rename: those an internal global of one unit shares
/// with a global of another (or of the same name in two units), unit by unit in their
/// order. libNVVM's renaming follows them, so they are part of every key.
pub fn collisions(sums: &[Summary]) -> Hash {
    let mut count: HashMap<&str, (usize, bool)> = HashMap::new();
    for s in sums {
        let mut seen = BTreeSet::new();
        for g in &s.globals {
            if seen.insert(g.name.as_str()) {
                let e = count.entry(&g.name).or_default();
                e.0 += 1;
                e.1 |= g.linkage == Linkage::Local;
            }
        }
    }
    let mut h = Hasher::new("collisions");
    for (m, s) in sums.iter().enumerate() {
        for g in &s.globals {
            if count
                .get(g.name.as_str())
                .is_some_and(|&(n, local)| n >= 2 && local)
            {
                h.u64(m as u64)
                    .str(&g.name)
                    .u64((g.linkage == Linkage::Local) as u64);
            }
        }
    }
    h.done()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(works: &[u64], whole: u64) -> Plan {
        let part = |module, work| Partition {
            module,
            lists: Lists::default(),
            manifest: Hash::default(),
            reach: 1,
            work,
        };
        let mut partitions: Vec<Partition> =
            (0..works.len()).map(|m| part(Some(m), works[m])).collect();
        partitions.push(Partition {
            reach: 0,
            ..part(None, 0)
        });
        Plan {
            partitions,
            pinned: BTreeSet::new(),
            kernels: BTreeSet::new(),
            whole_work: whole,
            read_work: whole,
            unestimated: None,
            relocatable: None,
        }
    }

    #[test]
    fn partitions_side_by_side_take_a_share_of_the_whole_link_that_falls_with_workers() {
        let disjoint = plan(&[20_000, 20_000, 20_000, 20_000], 80_000);
        let shares: Vec<f64> = (1..=5).map(|w| disjoint.cold_share(w)).collect();
        // (compiles grow faster than their size: four quarters cost less than the whole)
        assert!(shares[0] < 1.0 && shares[0] > 0.25, "{shares:?}");
        assert!(shares.windows(2).all(|s| s[1] <= s[0]), "{shares:?}");
        // four partitions: a fifth worker has nothing to do
        assert_eq!(shares[3], shares[4]);
        // a partition that reaches everything is never faster than the whole link
        let all = plan(&[80_000, 1_000], 80_000);
        assert!(all.cold_share(8) >= 1.0);
        // small programs: the cost of each compile decides, and they link whole first
        assert!(plan(&[50, 50], 100).cold_share(2) > 0.9);
    }
}
