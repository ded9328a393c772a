//! nvlink's numbered call lists: every function symbol numbered in order of first
//! appearance, and each live function's calls as those numbers, in nvlink's order. A
//! query of the whole program that three steps share: the `-dump-callgraph` output
//! (callgraph.rs), the recursion warning (nvinfo.rs) and the register limits
//! (reglimit.rs); built only when one of them needs it.

use super::*;

/// nvlink's numbered call graph ([`Merger::call_lists`]).
pub(super) struct CallLists {
    pub(super) nodes: usize,
    /// Each function's node number.
    pub(super) node: Vec<usize>,
    pub(super) func_of_node: HashMap<usize, FuncId>,
    /// Each live function's call list, as node numbers, in the order they were added.
    pub(super) calls: Vec<Vec<usize>>,
    /// Each global name's node number (0: not a function).
    pub(super) of_global: Vec<usize>,
}

impl CallLists {
    /// `f`'s calls that reach a live function, as functions, in order.
    pub(super) fn callees(&self, f: FuncId) -> Vec<FuncId> {
        self.calls[f]
            .iter()
            .filter_map(|n| self.func_of_node.get(n).copied())
            .collect()
    }
}

impl Merger<'_> {
    /// nvlink's call graph as it reports it (`-dump-callgraph`, the recursion warning):
    /// every function symbol of the inputs is a node, numbered from 1 by first
    /// appearance (inputs in order, each symbol table in order; global names once, local
    /// symbols each). A live function's call list is its input's `.nv.callgraph` direct
    /// calls in order, then for each indirect call, last to first, every address-taken
    /// function of its prototype in node order; repeats and self-calls stay.
    pub(super) fn call_lists(&self) -> Result<CallLists> {
        // a node is a global name (by its id), or one input's local symbol; numbered
        // from 1 in the order of first appearance
        let mut of_global = vec![0usize; self.res().globals().len()];
        let mut of_local: HashMap<SymKey, usize> = HashMap::default();
        let mut count = 0;
        for (i, inp) in self.inputs().iter().enumerate() {
            for s in 1..inp.cubin.symbols.len() {
                if inp.cubin.symbols[s].ty != STT_FUNC {
                    continue;
                }
                let k = SymKey::new(i, s);
                let n = match self.global_id(k) {
                    Some(g) => &mut of_global[g],
                    None => of_local.entry(k).or_insert(0),
                };
                if *n == 0 {
                    count += 1;
                    *n = count;
                }
            }
        }
        let number = |k: SymKey| -> Option<usize> {
            match self.global_id(k) {
                Some(g) => Some(of_global[g]),
                None => of_local.get(&k).copied(),
            }
            .filter(|&n| n > 0)
        };
        let node: Vec<usize> = self
            .code
            .funcs()
            .iter()
            .map(|f| number(f.key).expect("a function symbol is numbered"))
            .collect();
        let mut func_of_node: HashMap<usize, FuncId> = HashMap::default();
        for f in FuncId::all(self.code.funcs().len()).filter(|&f| self.code.live()[f]) {
            func_of_node.insert(node[f], f);
        }
        // each input's entries once, each to the live function it defines (a weak copy's
        // entries stay with that copy, an earlier input's copy a later one replaced
        // giving its own to the kept one: `calls_kept`); indirect calls are resolved
        // after the direct ones
        let mut calls: Vec<Vec<usize>> = vec![Vec::new(); self.code.funcs().len()];
        let mut indirect: Vec<Vec<String>> = vec![Vec::new(); self.code.funcs().len()];
        for (i, inp) in self.inputs().iter().enumerate() {
            let c = &inp.cubin;
            for (a, b, group) in c.callgraph_entries()? {
                let ka = SymKey::new(i, a as usize);
                let Some(f) = self.func_of(ka).filter(|&f| {
                    self.code.live()[f]
                        && (self.code.funcs()[f].key.input == i || self.calls_kept(ka))
                }) else {
                    continue;
                };
                match group {
                    1 => {
                        let callee = usize::try_from(b).ok().filter(|&b| b < c.symbols.len());
                        if let Some(n) = callee.and_then(|b| number(SymKey::new(i, b))) {
                            calls[f].push(n);
                        }
                    }
                    3 => indirect[f].extend(c.strtab_string(b)),
                    _ => {}
                }
            }
        }
        let mut taken_nodes: HashMap<&str, Vec<usize>> = HashMap::default();
        for (q, g) in self.code.taken_by_prototype() {
            taken_nodes.entry(q.as_str()).or_default().push(node[*g]);
        }
        for list in taken_nodes.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        for (f, protos) in FuncId::all(indirect.len()).zip(&indirect) {
            // (the indirect calls last to first, as nvlink 13.5 adds them: `cgsites.cu`)
            for p in protos.iter().rev() {
                if let Some(reached) = taken_nodes.get(p.as_str()) {
                    calls[f].extend(reached.iter().copied());
                }
            }
        }
        Ok(CallLists {
            nodes: count,
            node,
            func_of_node,
            calls,
            of_global,
        })
    }
}
