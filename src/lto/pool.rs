//! The module pool: what the input trees give an LTO link. Every input unit (an object,
//! a fatbin, a raw file, an archive member) contributes its IR module for the target
//! (nvlink prefers IR over SASS when `-lto` is on), or else the device code it has
//! (which makes the link partial), or else nothing with nvlink's warning. Host objects
//! also give their module id and host-reference tables; libcudadevrt is noted but not
//! counted, as it carries no IR.

use crate::arch::{Arch, ir_compatible, ptx_compatible, sass_compatible};
use crate::diag::{Diagnostics, Result};
use crate::input::{Code, CodeKind, HostInfo, Node, Unit};
use crate::ir::container;
use crate::lto::{IrForm, IrModule};

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
    /// The host-reference tables prelinked `.ltoir` files carry (see `prelink`).
    pub stored_host_refs: Vec<(&'static str, Vec<String>)>,
}

struct Walk<'a> {
    target: Arch,
    diag: &'a Diagnostics,
    pool: Pool,
}

impl Walk<'_> {
    fn node(&mut self, u: Unit) -> Result<()> {
        match u.host() {
            Some(h) => {
                let relocatable = h.relocatable;
                self.pool.hosts.push(h);
                // a whole-program object's device code (`.nv_fatbin`) is not linked
                if relocatable {
                    self.unit(u.node, u.cudadevrt, true)?;
                }
            }
            None => self.unit(u.node, u.cudadevrt, false)?,
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
            // (a prelinked `.ltoir` carries its modules' consensus, see `prelink`)
            let options = match &code.member {
                Some(m) => m.option_text(),
                None if module.form == IrForm::Container => {
                    let refs = super::staged::stored_host_refs(&module.data, &n.origin)?;
                    self.pool.stored_host_refs.extend(refs);
                    super::staged::stored_consensus(&module.data, &n.origin)?
                }
                None => None,
            };
            self.pool.modules.push(PoolModule {
                options,
                from_host_object: host,
                module,
            });
            return Ok(());
        }
        let usable = codes.iter().any(|(_, c)| match (c.kind, c.arch) {
            (CodeKind::Cubin, Some(a)) => sass_compatible(a, self.target),
            (CodeKind::Ptx, Some(a)) => ptx_compatible(a, self.target),
            (CodeKind::Cubin | CodeKind::Ptx, None) => true,
            _ => false,
        });
        if usable {
            self.pool.non_ir.push(n.origin.clone());
        } else {
            self.diag
                .warning(&crate::gather::not_found(self.target, &n.origin, &codes));
        }
        Ok(())
    }

    fn module(&self, origin: &str, code: &Code) -> Result<IrModule> {
        let data = code.bytes(origin)?;
        let form = if crate::ir::is_bitcode(&data) {
            IrForm::Bitcode
        } else {
            IrForm::Container
        };
        // a container's header is checked before libNVVM reads it, in nvlink's words
        // for a module libNVVM refuses
        if form == IrForm::Container && container::sniff(&data).is_some() {
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

/// Builds the pool from the input trees, in input order.
pub fn collect(trees: &[Node], target: Arch, diag: &Diagnostics) -> Result<Pool> {
    let mut w = Walk {
        target,
        diag,
        pool: Pool::default(),
    };
    for u in crate::input::units(trees) {
        w.node(u)?;
    }
    Ok(w.pool)
}
