//! Register counts across the link, as nvlink 13.5 propagates and checks them. A kernel
//! takes the register count of the functions it reaches: nvlink goes through the live
//! functions in output order (inputs in order, each in symbol order) and raises each
//! kernel reaching one (kernels last numbered in its call graph first) to that
//! function's count when it is higher (`-dump-callgraph` prints each raise). A kernel
//! whose `.nv.info` has a `MAXREG_COUNT` record (ptxas' `-maxrregcount`, or what
//! `__launch_bounds__` allows) may not be raised above it: each such raise is an error
//! (`entry function '…' with max regcount of N calls function '…' with regcount of M`,
//! exit 255, no output); a function of the kernel's own unit is already under the
//! limit, so only other inputs' functions (PTX assembled at link time, cubins compiled
//! without the limit) can break it. A relocatable link (`-r`) is not checked.

use super::calllists::CallLists;
use super::*;

/// `EIATTR_MAXREG_COUNT`: the register limit ptxas compiled a kernel under (HVAL).
pub(super) const MAXREG_COUNT: u8 = 0x1B;

impl Merger<'_> {
    /// nvlink's register propagation: (kernel, function, registers) for each raise, in
    /// the order nvlink makes them.
    pub(super) fn register_propagation(&self, cl: &CallLists) -> Vec<(FuncId, FuncId, u32)> {
        let edges: Vec<Vec<FuncId>> = FuncId::all(self.code.funcs().len())
            .map(|f| cl.callees(f))
            .collect();
        let mut entries: Vec<FuncId> = FuncId::all(self.code.funcs().len())
            .filter(|&f| self.code.live()[f] && self.code.funcs()[f].entry)
            .collect();
        entries.sort_by_key(|&e| std::cmp::Reverse(cl.node[e]));
        let reaches: Vec<HashSet<FuncId>> = entries
            .iter()
            .map(|&e| {
                let mut seen = HashSet::default();
                let mut stack = vec![e];
                while let Some(f) = stack.pop() {
                    if seen.insert(f) {
                        stack.extend(edges[f].iter().copied());
                    }
                }
                seen
            })
            .collect();
        let mut current: Vec<u32> = entries.iter().map(|&e| self.code.funcs()[e].regs).collect();
        let mut raises = Vec::new();
        let order = FuncId::all(self.code.funcs().len())
            .filter(|&f| self.code.live()[f] && !self.code.funcs()[f].entry);
        for f in order {
            let regs = self.code.funcs()[f].regs;
            for (k, &e) in entries.iter().enumerate() {
                if reaches[k].contains(&f) && regs > current[k] {
                    current[k] = regs;
                    raises.push((e, f, regs));
                }
            }
        }
        raises
    }

    /// The limit check (see the module comment): nvlink's error lines, which the merge
    /// reports after the `.nv.info` step's warnings, as nvlink does; nvlink's call lists
    /// are built only when a kernel with a limit reaches a function above it. Reads
    /// `code` (the functions' counts), `trees` and `res`; writes nothing.
    pub(super) fn check_register_limits(&self, trees: &CallTrees) -> Result<Vec<String>> {
        if self.opts().relocatable {
            return Ok(Vec::new());
        }
        let most = self.code.funcs().iter().map(|f| f.regs).max().unwrap_or(0);
        // (nearly always none: ptxas' default limit is 255)
        let mut limits: HashMap<FuncId, u32> = HashMap::default();
        for f in FuncId::all(self.code.funcs().len())
            .filter(|&f| self.code.live()[f] && self.code.funcs()[f].entry && self.reached(f))
        {
            if let Some(m) = self.register_limit(f)?.filter(|&m| m < most) {
                limits.insert(f, m);
            }
        }
        let broken = |(&k, &m): (&FuncId, &u32)| {
            (trees.of(k).iter()).any(|&g| self.code.funcs()[g].regs > m)
        };
        if !limits.iter().any(broken) {
            return Ok(Vec::new());
        }
        let cl = self.call_lists()?;
        let mut errors = Vec::new();
        for (e, f, regs) in self.register_propagation(&cl) {
            if let Some(&m) = limits.get(&e).filter(|&&m| regs > m) {
                errors.push(format!(
                    "entry function '{}' with max regcount of {m} calls function '{}' with regcount of {regs}",
                    self.sym(self.code.funcs()[e].key).name,
                    self.sym(self.code.funcs()[f].key).name,
                ));
            }
        }
        Ok(errors)
    }

    /// Kernel `f`'s `MAXREG_COUNT`, if its `.nv.info` section has one (read with the
    /// function, `Func::max_regs`).
    fn register_limit(&self, f: FuncId) -> Result<Option<u32>> {
        Ok(self.code.funcs()[f].max_regs)
    }
}
