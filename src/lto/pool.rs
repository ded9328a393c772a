//! The module pool: what the input trees give an LTO link. Every input unit (an object,
//! a fatbin, a raw file, an archive member) contributes its IR module for the target
//! (nvlink prefers IR over SASS when `-lto` is on), or else the device code it has
//! (which makes the link partial), or else nothing with nvlink's warning. Host objects
//! also give their module id and host-reference tables; libcudadevrt is noted but not
//! counted, as it carries no IR.

use crate::arch::{Arch, Variant};
use crate::diag::{Diagnostics, Result};
use crate::input::{Code, CodeKind, Item, Node};
use crate::lto::{IrForm, IrModule};

/// A host object's contribution besides device code.
#[derive(Clone, Debug)]
pub struct HostInfo {
    pub origin: String,
    pub module_id: Option<String>,
    pub host_refs: Vec<(&'static str, Vec<String>)>,
    pub cudadevrt: bool,
    /// Whether it holds relocatable device code (`__nv_relfatbin`); a host object without
    /// (plain host code, a whole-program `nvcc -c` object, libcudart_static's members)
    /// may refer to any device symbol, as far as nvlink can tell.
    pub relocatable: bool,
}

/// An IR module with the options its fatbin member recorded.
#[derive(Clone, Debug)]
pub struct PoolModule {
    pub module: IrModule,
    /// The member's NVVM option string (`None` for raw `.ltoir` files).
    pub options: Option<String>,
    /// True when it came out of a host object (nvcc `-dc`), not a fatbin or raw file.
    pub from_host_object: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Pool {
    pub modules: Vec<PoolModule>,
    /// Units that give device code but no IR (excluding libcudadevrt), by origin.
    pub non_ir: Vec<String>,
    pub hosts: Vec<HostInfo>,
    pub cudadevrt: bool,
}

/// Whether IR built for `ir` can be linked for `target`: plain IR for any newer or equal
/// SM; `a` IR only for itself; `f` IR within its family.
pub fn ir_compatible(ir: Arch, target: Arch) -> bool {
    match ir.variant {
        Variant::Plain => ir.sm <= target.sm,
        Variant::Accelerated => ir == target,
        Variant::Family => ir.sm / 10 == target.sm / 10 && ir.sm <= target.sm,
    }
}

pub fn sass_compatible(code: Arch, target: Arch) -> bool {
    match code.variant {
        Variant::Plain => {
            code.sm == target.sm || (code.sm / 10 == target.sm / 10 && code.sm <= target.sm)
        }
        _ => code == target,
    }
}

struct Walk<'a> {
    target: Arch,
    diag: &'a Diagnostics,
    pool: Pool,
}

impl Walk<'_> {
    fn node(&mut self, n: &Node, cudadevrt: bool, host: bool) -> Result<()> {
        match &n.item {
            Item::Archive { cudadevrt: c, .. } => {
                for ch in &n.children {
                    self.node(ch, cudadevrt || *c, false)?;
                }
            }
            Item::HostObject {
                module_id,
                host_refs,
                ..
            } => {
                self.pool.hosts.push(HostInfo {
                    origin: n.origin.clone(),
                    module_id: module_id.clone(),
                    host_refs: host_refs.clone(),
                    cudadevrt,
                    relocatable: has_relocatable_code(n),
                });
                // a whole-program object's device code (`.nv_fatbin`) is not linked
                if has_relocatable_code(n) {
                    self.unit(n, cudadevrt, true)?;
                }
            }
            Item::Container { .. } | Item::Code(_) => self.unit(n, cudadevrt, host)?,
            Item::Ignored(_) => {}
        }
        Ok(())
    }

    /// One unit of device code: choose what it contributes.
    fn unit(&mut self, n: &Node, cudadevrt: bool, host: bool) -> Result<()> {
        let codes = n.codes();
        if codes.is_empty() {
            return Ok(());
        }
        if cudadevrt {
            self.pool.cudadevrt = true;
            return Ok(());
        }
        let ir = codes
            .iter()
            .filter(|(_, c)| matches!(c.kind, CodeKind::Nvvm(_) | CodeKind::Bitcode))
            .filter(|(_, c)| {
                c.member.is_none() || c.arch.is_none_or(|a| ir_compatible(a, self.target))
            })
            .max_by_key(|(_, c)| c.arch.map(|a| (a == self.target, a.sm)));
        if let Some((_, code)) = ir {
            let module = self.module(&n.origin, code)?;
            self.pool.modules.push(PoolModule {
                options: code.member.as_ref().and_then(|m| m.option_text()),
                from_host_object: host,
                module,
            });
            return Ok(());
        }
        let usable = codes.iter().any(|(_, c)| match (c.kind, c.arch) {
            (CodeKind::Cubin, Some(a)) => sass_compatible(a, self.target),
            (CodeKind::Ptx, Some(a)) => a.sm <= self.target.sm,
            (CodeKind::Cubin | CodeKind::Ptx, None) => true,
            _ => false,
        });
        if usable {
            self.pool.non_ir.push(n.origin.clone());
        } else {
            self.diag.warning(&format!(
                "SM Arch ('{}') not found in '{}'",
                self.target, n.origin
            ));
        }
        Ok(())
    }

    fn module(&self, origin: &str, code: &Code) -> Result<IrModule> {
        let data = code.bytes(origin)?;
        let form = if crate::lto::bitcode::is_bitcode(&data) {
            IrForm::Bitcode
        } else {
            IrForm::Container
        };
        // a container's header is checked before libNVVM reads it, in nvlink's words
        // for a module libNVVM refuses
        use crate::lto::container::{self, IrFormat};
        if form == IrForm::Container
            && matches!(
                container::sniff(&data),
                Some(IrFormat::LtoIr | IrFormat::NvvmContainer)
            )
        {
            container::check_for_link(&data, origin).map_err(|e| {
                crate::diag::Error::fatal("elfLink nvvm error").context(e.to_string())
            })?;
        }
        Ok(IrModule {
            name: origin.to_string(),
            data,
            form,
        })
    }
}

/// The host objects of the inputs (module ids and host-reference tables), in order.
pub fn hosts(trees: &[Node]) -> Vec<HostInfo> {
    fn walk(n: &Node, cudadevrt: bool, out: &mut Vec<HostInfo>) {
        match &n.item {
            Item::Archive { cudadevrt: c, .. } => {
                for ch in &n.children {
                    walk(ch, cudadevrt || *c, out);
                }
            }
            // a whole-program object (device code only in `.nv_fatbin`) takes no part
            Item::HostObject { .. } if !has_relocatable_code(n) => {}
            Item::HostObject {
                module_id,
                host_refs,
                ..
            } => out.push(HostInfo {
                origin: n.origin.clone(),
                module_id: module_id.clone(),
                host_refs: host_refs.clone(),
                cudadevrt,
                relocatable: true,
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for t in trees {
        walk(t, false, &mut out);
    }
    out
}

/// Whether a host object carries relocatable device code (`__nv_relfatbin`, what
/// `-rdc`/`-dc` objects have), as opposed to whole-program code alone.
fn has_relocatable_code(n: &Node) -> bool {
    n.children.iter().any(|ch| {
        matches!(
            ch.item,
            Item::Container {
                section: Some("__nv_relfatbin"),
                ..
            }
        )
    })
}

/// Builds the pool from the input trees, in input order.
pub fn collect(trees: &[Node], target: Arch, diag: &Diagnostics) -> Result<Pool> {
    let mut w = Walk {
        target,
        diag,
        pool: Pool::default(),
    };
    for t in trees {
        w.node(t, false, false)?;
    }
    Ok(w.pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ir_compatibility() {
        let p = |s| Arch::plain(s);
        assert!(ir_compatible(p(90), p(100)));
        assert!(ir_compatible(p(90), p(90)));
        assert!(!ir_compatible(p(100), p(90)));
        let a90 = Arch::new(90, Variant::Accelerated);
        assert!(ir_compatible(a90, a90));
        assert!(!ir_compatible(a90, p(90)));
        assert!(ir_compatible(p(90), a90));
    }
}
