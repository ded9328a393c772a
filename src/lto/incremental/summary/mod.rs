//! Per-module summaries for incremental LTO, read from the bitcode's bitstream by our
//! own reader ([`super::bitstream`]), so that they come out at every target (cicc's LLVM 7
//! bitcode up to sm_90, its LLVM 23 bitcode from sm_100 on, which LLVM 22 refuses).
//!
//! A summary lists the module's global values (functions, variables, aliases) in value
//! order, each with its linkage, whether it is defined, a kernel or a managed variable,
//! the globals its body or initializer refers to, and a canonical hash of what decides
//! its code: the records of its body with every operand that names something outside
//! the function replaced by what it names (a global by its name, a module constant,
//! type, attribute set or metadata node by a hash of its content), so that a hash
//! changes when the function's code may change and not when an unrelated edit renumbers
//! the module's values. Debug locations and debug-info nodes count only when the link
//! asks for line information (they do not change code otherwise); then the module's
//! whole metadata counts too.
//!
//! A module the reader cannot take apart function by function (a record it does not
//! know, a layout it does not expect) is *opaque*: it then counts as one item, hashed
//! whole, that every partition reaching it depends on. Never wrong, only less precise.

mod body;
mod constants;
mod hash;
mod metadata;
mod module;
mod tables;

pub use hash::{Hash, Hasher};

use crate::diag::Result;
use crate::lto::IrModule;

/// What a global value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    Function,
    Variable,
    Alias,
}

/// The linkage classes the IR linker tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Linkage {
    /// A strong definition (or a plain declaration).
    External,
    /// weak, linkonce (any or odr), common: the first definition is kept.
    Weak,
    /// internal, private: the module's own.
    Local,
    /// available_externally: a body for inlining only.
    AvailableExternally,
    /// extern_weak declarations, appending arrays.
    Other,
}

impl Linkage {
    /// LLVM's bitcode linkage numbers (old spellings included).
    pub fn from_code(code: u64) -> Linkage {
        match code {
            0 | 5 | 6 => Linkage::External,
            1 | 4 | 8 | 10 | 11 | 15 | 16 | 17 | 18 | 19 => Linkage::Weak,
            3 | 9 | 13 | 14 => Linkage::Local,
            12 => Linkage::AvailableExternally,
            _ => Linkage::Other,
        }
    }
}

/// One global value of a module.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Global {
    pub name: String,
    pub kind: Kind,
    pub linkage: Linkage,
    /// A body (functions), an initializer (variables), an aliasee (aliases).
    pub defined: bool,
    pub kernel: bool,
    /// A `__managed__` variable.
    pub managed: bool,
    pub address_space: u32,
    /// LLVM `constant`: never written.
    pub constant: bool,
    /// What decides this global's code or data, canonically (see the module comment).
    pub hash: Hash,
    /// The globals (indices into the module's list) its body or initializer refers to.
    pub refs: Vec<u32>,
    /// Referred to other than as the callee of a call (its address is used).
    pub address_taken: bool,
    /// A variable some function of the module may write (its address is used other
    /// than to load from), or whose address an initializer holds.
    pub written: bool,
    /// A function's instructions (0 for anything else): what compiling it costs,
    /// roughly; never part of a key.
    pub insts: u64,
}

/// A module's summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub globals: Vec<Global>,
    /// Why the module could not be read function by function; it then counts whole.
    pub opaque: Option<String>,
    /// The hash of the module's bitcode (what an opaque module counts as).
    pub whole: Hash,
    /// The module's inline assembly (outside functions; every partition emits it).
    pub asm: String,
}

impl Summary {
    /// The index of the global named `name`.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.globals
            .iter()
            .position(|g| g.name == name)
            .map(|i| i as u32)
    }
}

/// The LLVM bitcode inside an IR module: a container's payload, unscrambled, or the
/// module itself when it is plain bitcode.
pub fn bitcode_of(m: &IrModule) -> Result<Vec<u8>> {
    if crate::ir::is_bitcode(&m.data) {
        return Ok(m.data.to_vec());
    }
    let ir = crate::ir::write::LtoIr::read(&m.data, &m.name)?;
    let key = ir.key();
    let mut payload = ir.payload;
    if !crate::ir::is_bitcode(&payload)
        && let Some(key) = key
    {
        crate::ir::unscramble(&mut payload, key);
    }
    Ok(payload)
}

/// The summary of `m`; `lines`: the link emits line information, so debug locations
/// count. A module that cannot be read function by function comes back opaque (with
/// the reason), never as an error: its globals are then those the reader could list, or
/// none.
pub fn summarize(m: &IrModule, lines: bool) -> Summary {
    let bitcode = match bitcode_of(m) {
        Ok(b) => b,
        Err(e) => {
            return Summary {
                globals: Vec::new(),
                opaque: Some(e.to_string()),
                whole: Hash::of(&m.data),
                asm: String::new(),
            };
        }
    };
    summarize_bitcode(&bitcode, &m.name, lines)
}

/// [`summarize`] for plain bitcode (the fuzz target's entry).
pub fn summarize_bitcode(bitcode: &[u8], origin: &str, lines: bool) -> Summary {
    let whole = Hash::of(bitcode);
    let mut asm = String::new();
    let (globals, opaque) = match module::read(bitcode, origin, lines, &mut asm) {
        Ok(globals) => (globals, None),
        Err((globals, why)) => (globals, Some(why)),
    };
    Summary {
        globals,
        opaque,
        whole,
        asm,
    }
}

#[cfg(test)]
mod tests;
