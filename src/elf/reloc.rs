//! R_CUDA relocations: the descriptor of every type (up to three bit fields, each with an
//! operation), how a link-time value is patched into code or data, and the rewrites nvlink
//! makes (unified-address types become plain address types).

use crate::diag::{Error, Result};

pub const R_CUDA_64: u32 = 0x02;
pub const R_CUDA_ABS32_LO_32: u32 = 0x38;
pub const R_CUDA_ABS32_HI_32: u32 = 0x39;
/// A 16-bit absolute field: an indexed constant read's offset (`LDC c[b][R + imm]`).
pub const R_CUDA_ABS16_32: u32 = 0x3B;
pub const R_CUDA_YIELD_OPCODE9_0: u32 = 0x44;
pub const R_CUDA_YIELD_CLEAR_PRED4_87: u32 = 0x45;
pub const R_CUDA_UNUSED_CLEAR32: u32 = 0x48;
pub const R_CUDA_UNUSED_CLEAR64: u32 = 0x49;
pub const R_CUDA_UNIFIED: u32 = 0x66;
pub const R_CUDA_UNIFIED32_LO_32: u32 = 0x70;
pub const R_CUDA_UNIFIED32_HI_32: u32 = 0x71;

/// One field of a descriptor: `(bit position, width, operation, shift)`.
type Slot = (u32, u32, u32, u32);

/// Index = relocation type. Operations: 0x1 value, 0x2 global value, 0x6 low 32 bits,
/// 0x7 high 32 bits, 0x9 value >> 2, 0xA constant bank number, 0x14 clear when the
/// target is gone, 0x15 value >> shift, 0x16..0x2D byte n of the value; the others
/// (texture/surface headers, descriptors, PC-relative, unified tables) are never resolved
/// at link time by this linker and their relocations stay for the driver.
const TABLE: &[(&str, &[Slot])] = &[
    ("NONE", &[]),
    ("32", &[(0, 32, 0x1, 0)]),
    ("64", &[(0, 64, 0x1, 0)]),
    ("G32", &[(0, 32, 0x2, 0)]),
    ("G64", &[(0, 64, 0x2, 0)]),
    ("ABS32_26", &[(26, 32, 0x1, 0)]),
    ("TEX_HEADER_INDEX", &[(0, 20, 0x3, 0)]),
    ("SAMP_HEADER_INDEX", &[(20, 12, 0x3, 0)]),
    ("SURF_HW_DESC", &[(0, 32, 0x4, 0)]),
    ("SURF_HW_SW_DESC", &[(0, 32, 0x5, 0)]),
    ("ABS32_LO_26", &[(26, 32, 0x6, 0)]),
    ("ABS32_HI_26", &[(26, 32, 0x7, 32)]),
    ("ABS32_23", &[(23, 32, 0x1, 0)]),
    ("ABS32_LO_23", &[(23, 32, 0x6, 0)]),
    ("ABS32_HI_23", &[(23, 32, 0x7, 32)]),
    ("ABS24_26", &[(26, 24, 0x1, 0)]),
    ("ABS24_23", &[(23, 24, 0x1, 0)]),
    ("ABS16_26", &[(26, 16, 0x1, 0)]),
    ("ABS16_23", &[(23, 16, 0x1, 0)]),
    ("TEX_SLOT", &[(32, 8, 0x8, 0)]),
    ("SAMP_SLOT", &[(40, 5, 0x8, 0)]),
    ("SURF_SLOT", &[(26, 6, 0x8, 0)]),
    ("TEX_BINDLESSOFF13_32", &[(32, 13, 0x9, 0)]),
    ("TEX_BINDLESSOFF13_47", &[(47, 13, 0x9, 0)]),
    (
        "CONST_FIELD19_28",
        &[(28, 14, 0x9, 0), (42, 4, 0xa, 0), (26, 1, 0xb, 0)],
    ),
    ("CONST_FIELD19_23", &[(23, 14, 0x9, 0), (37, 5, 0xa, 0)]),
    ("TEX_SLOT9_49", &[(49, 9, 0x8, 0)]),
    ("6_31", &[(31, 6, 0x1, 0)]),
    ("2_47", &[(47, 2, 0x1, 0)]),
    ("TEX_BINDLESSOFF13_41", &[(41, 13, 0x9, 0)]),
    ("TEX_BINDLESSOFF13_45", &[(45, 13, 0x9, 0)]),
    ("FUNC_DESC32_23", &[(23, 32, 0xc, 0)]),
    ("FUNC_DESC32_LO_23", &[(23, 32, 0xd, 0)]),
    ("FUNC_DESC32_HI_23", &[(23, 32, 0xe, 32)]),
    ("FUNC_DESC_32", &[(0, 32, 0xf, 0)]),
    ("FUNC_DESC_64", &[(0, 64, 0xf, 0)]),
    ("CONST_FIELD21_26", &[(26, 16, 0x1, 0), (42, 5, 0xa, 0)]),
    ("QUERY_DESC21_37", &[(37, 16, 0x1, 0), (53, 5, 0xa, 0)]),
    ("CONST_FIELD19_26", &[(26, 14, 0x9, 0), (40, 5, 0xa, 0)]),
    ("CONST_FIELD21_23", &[(23, 16, 0x1, 0), (39, 5, 0xa, 0)]),
    ("PCREL_IMM24_26", &[(26, 24, 0x10, 0)]),
    ("PCREL_IMM24_23", &[(23, 24, 0x10, 0)]),
    ("ABS32_20", &[(20, 32, 0x1, 0)]),
    ("ABS32_LO_20", &[(20, 32, 0x6, 0)]),
    ("ABS32_HI_20", &[(20, 32, 0x7, 32)]),
    ("ABS24_20", &[(20, 24, 0x1, 0)]),
    ("ABS16_20", &[(20, 16, 0x1, 0)]),
    ("FUNC_DESC32_20", &[(20, 32, 0xc, 0)]),
    ("FUNC_DESC32_LO_20", &[(20, 32, 0xd, 0)]),
    ("FUNC_DESC32_HI_20", &[(20, 32, 0xe, 32)]),
    ("CONST_FIELD19_20", &[(20, 14, 0x9, 0), (34, 5, 0xa, 0)]),
    ("BINDLESSOFF13_36", &[(36, 13, 0x9, 0)]),
    ("SURF_HEADER_INDEX", &[(0, 20, 0x3, 0)]),
    ("INSTRUCTION64", &[(0, 64, 0x11, 0)]),
    ("CONST_FIELD21_20", &[(20, 16, 0x1, 0), (36, 5, 0xa, 0)]),
    ("ABS32_32", &[(32, 32, 0x1, 0)]),
    ("ABS32_LO_32", &[(32, 32, 0x6, 0)]),
    ("ABS32_HI_32", &[(32, 32, 0x7, 32)]),
    ("ABS47_34", &[(34, 47, 0x9, 0)]),
    ("ABS16_32", &[(32, 16, 0x1, 0)]),
    ("ABS24_32", &[(32, 24, 0x1, 0)]),
    ("FUNC_DESC32_32", &[(32, 32, 0xc, 0)]),
    ("FUNC_DESC32_LO_32", &[(32, 32, 0xd, 0)]),
    ("FUNC_DESC32_HI_32", &[(32, 32, 0xe, 32)]),
    ("CONST_FIELD19_40", &[(40, 14, 0x9, 0), (54, 5, 0xa, 0)]),
    ("BINDLESSOFF14_40", &[(40, 14, 0x9, 0)]),
    ("CONST_FIELD21_38", &[(38, 16, 0x1, 0), (54, 5, 0xa, 0)]),
    ("INSTRUCTION128", &[(0, 128, 0x11, 0)]),
    ("YIELD_OPCODE9_0", &[(0, 9, 0x12, 0)]),
    ("YIELD_CLEAR_PRED4_87", &[(87, 4, 0x13, 0)]),
    ("32_LO", &[(0, 32, 0x6, 0)]),
    ("32_HI", &[(0, 32, 0x7, 32)]),
    ("UNUSED_CLEAR32", &[(0, 32, 0x14, 0)]),
    ("UNUSED_CLEAR64", &[(0, 64, 0x14, 0)]),
    ("ABS24_40", &[(40, 24, 0x1, 0)]),
    ("ABS55_16_34", &[(16, 8, 0x9, 2), (34, 47, 0x15, 10)]),
    ("8_0", &[(0, 8, 0x16, 0)]),
    ("8_8", &[(0, 8, 0x17, 8)]),
    ("8_16", &[(0, 8, 0x18, 16)]),
    ("8_24", &[(0, 8, 0x19, 24)]),
    ("8_32", &[(0, 8, 0x1a, 32)]),
    ("8_40", &[(0, 8, 0x1b, 40)]),
    ("8_48", &[(0, 8, 0x1c, 48)]),
    ("8_56", &[(0, 8, 0x1d, 56)]),
    ("G8_0", &[(0, 8, 0x1e, 0)]),
    ("G8_8", &[(0, 8, 0x1f, 8)]),
    ("G8_16", &[(0, 8, 0x20, 16)]),
    ("G8_24", &[(0, 8, 0x21, 24)]),
    ("G8_32", &[(0, 8, 0x22, 32)]),
    ("G8_40", &[(0, 8, 0x23, 40)]),
    ("G8_48", &[(0, 8, 0x24, 48)]),
    ("G8_56", &[(0, 8, 0x25, 56)]),
    ("FUNC_DESC_8_0", &[(0, 8, 0x26, 0)]),
    ("FUNC_DESC_8_8", &[(0, 8, 0x27, 8)]),
    ("FUNC_DESC_8_16", &[(0, 8, 0x28, 16)]),
    ("FUNC_DESC_8_24", &[(0, 8, 0x29, 24)]),
    ("FUNC_DESC_8_32", &[(0, 8, 0x2a, 32)]),
    ("FUNC_DESC_8_40", &[(0, 8, 0x2b, 40)]),
    ("FUNC_DESC_8_48", &[(0, 8, 0x2c, 48)]),
    ("FUNC_DESC_8_56", &[(0, 8, 0x2d, 56)]),
    ("ABS20_44", &[(44, 20, 0x1, 0)]),
    ("SAMP_HEADER_INDEX_0", &[(0, 12, 0x3, 0)]),
    ("UNIFIED", &[(0, 64, 0x2e, 0)]),
    ("UNIFIED_32", &[(0, 32, 0x2e, 0)]),
    ("UNIFIED_8_0", &[(0, 8, 0x2f, 0)]),
    ("UNIFIED_8_8", &[(0, 8, 0x30, 8)]),
    ("UNIFIED_8_16", &[(0, 8, 0x31, 16)]),
    ("UNIFIED_8_24", &[(0, 8, 0x32, 24)]),
    ("UNIFIED_8_32", &[(0, 8, 0x33, 32)]),
    ("UNIFIED_8_40", &[(0, 8, 0x34, 40)]),
    ("UNIFIED_8_48", &[(0, 8, 0x35, 48)]),
    ("UNIFIED_8_56", &[(0, 8, 0x36, 56)]),
    ("UNIFIED32_LO_32", &[(32, 32, 0x37, 0)]),
    ("UNIFIED32_HI_32", &[(32, 32, 0x38, 32)]),
    ("ABS56_16_34", &[(16, 8, 0x9, 2), (34, 48, 0x15, 10)]),
    ("CONST_FIELD22_37", &[(37, 17, 0x1, 0), (54, 5, 0xa, 0)]),
];

/// Whether `ty` is an R_CUDA type (nvlink 13.5 knows 116 and refuses the others).
pub fn known(ty: u32) -> bool {
    (ty as usize) < TABLE.len()
}

/// Whether `ty` is a Mercury relocation type nvlink 13.5 takes (read off nvlink: 0 and
/// 0x10000 to 0x10040; any other, in a code's or a frame's `.nv.merc.rela`, stops it with
/// `Internal error: internal error`).
pub fn mercury_known(ty: u32) -> bool {
    ty == 0 || (0x1_0000..=0x1_0040).contains(&ty)
}

pub fn name(ty: u32) -> String {
    match TABLE.get(ty as usize) {
        Some((n, _)) => format!("R_CUDA_{n}"),
        None => format!("R_CUDA type {ty:#x}"),
    }
}

/// The type nvlink writes for a kept relocation (unified forms become address forms).
pub fn rewritten(ty: u32) -> u32 {
    match ty {
        R_CUDA_UNIFIED => R_CUDA_64,
        R_CUDA_UNIFIED32_LO_32 => R_CUDA_ABS32_LO_32,
        R_CUDA_UNIFIED32_HI_32 => R_CUDA_ABS32_HI_32,
        t => t,
    }
}

/// Whether every field of the type can be computed at link time from a section-relative
/// value (and a constant bank number).
pub fn resolvable(ty: u32) -> bool {
    TABLE.get(ty as usize).is_some_and(|(_, slots)| {
        !slots.is_empty()
            && slots
                .iter()
                .all(|&(_, _, op, _)| matches!(op, 0x1 | 0x2 | 0x6 | 0x7 | 0x9 | 0xA | 0x15..=0x25))
    })
}

/// Whether the type writes a constant bank's number beside an offset: the relocated
/// instruction reads a constant bank at that offset itself (`CONST_FIELD*`), where an
/// `ABS16_32` writes an address another instruction reads at.
pub fn reads_constant_bank(ty: u32) -> bool {
    TABLE
        .get(ty as usize)
        .is_some_and(|(_, slots)| slots.iter().any(|&(_, _, op, _)| op == 0xA))
}

/// Whether the type writes the target's function descriptor (a kernel launched from the
/// device: `FUNC_DESC*`).
pub fn is_func_desc(ty: u32) -> bool {
    TABLE
        .get(ty as usize)
        .is_some_and(|(n, _)| n.starts_with("FUNC_DESC"))
}

/// Whether the type writes the target's unified address (`UNIFIED`, `UNIFIED32_LO_32`,
/// `UNIFIED32_HI_32`: a function pointer taken in code or data).
pub fn is_unified(ty: u32) -> bool {
    TABLE
        .get(ty as usize)
        .is_some_and(|(n, _)| n.starts_with("UNIFIED"))
}

/// Whether the type asks for the target's global (load) address (`G32`, `G64`).
pub fn is_global_address(ty: u32) -> bool {
    TABLE
        .get(ty as usize)
        .is_some_and(|(_, slots)| !slots.is_empty() && slots.iter().all(|&(_, _, op, _)| op == 0x2))
}

/// The number of bytes the fields of `ty` reach from the relocation offset.
pub fn extent(ty: u32) -> u64 {
    TABLE
        .get(ty as usize)
        .map(|(_, s)| {
            s.iter()
                .map(|&(b, w, _, _)| (b + w).div_ceil(8))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0) as u64
}

/// The bits the fields of `ty` cover in a 16-byte instruction, for a relocation at byte
/// `at` of it (bits past the instruction's end left out); `None` for a type not in the
/// table.
pub fn field_mask(ty: u32, at: u64) -> Option<u128> {
    let (_, slots) = TABLE.get(ty as usize)?;
    let mut mask = 0u128;
    for &(bit, width, _, _) in slots.iter() {
        for b in (at as u32 * 8 + bit)..(at as u32 * 8 + bit + width).min(128) {
            mask |= 1u128 << b;
        }
    }
    Some(mask)
}

/// Patches `value` (S + A) and `bank` into `code` at `offset` as type `ty` says.
/// `clear` asks the clear-when-unused types to zero their field.
pub fn apply(
    code: &mut [u8],
    offset: u64,
    ty: u32,
    value: u64,
    bank: u32,
    clear: bool,
) -> Result<()> {
    let Some((_, slots)) = TABLE.get(ty as usize) else {
        return Err(Error::fatal(format!(
            "relocation type {ty:#x} is out of range"
        )));
    };
    let need = extent(ty);
    let start = usize::try_from(offset).ok().filter(|&o| {
        (o as u64)
            .checked_add(need)
            .is_some_and(|e| e <= code.len() as u64)
    });
    let Some(start) = start else {
        return Err(Error::fatal(format!(
            "{} at offset {offset:#x} passes the end of its {:#x}-byte section",
            name(ty),
            code.len()
        )));
    };
    for &(bit, width, op, shift) in slots.iter() {
        let v: u64 = match op {
            0x1 | 0x2 => value,
            0x6 => value & 0xFFFF_FFFF,
            0x7 => value >> 32,
            0x9 => value >> 2,
            0xA => bank as u64,
            0x14 => {
                if !clear {
                    continue;
                }
                0
            }
            0x15..=0x25 => value >> shift,
            _ => {
                return Err(Error::fatal(format!(
                    "{} cannot be resolved at link time",
                    name(ty)
                )));
            }
        };
        write_bits(&mut code[start..], bit, width, v);
    }
    Ok(())
}

fn write_bits(d: &mut [u8], bit: u32, width: u32, v: u64) {
    if width == 0 {
        return;
    }
    // the field's bytes read as one little-endian number, the field replaced in it (the
    // value's bits past 64 are zero)
    let (first, last) = ((bit / 8) as usize, (bit + width).div_ceil(8) as usize);
    let n = last - first;
    if n > 16 {
        for i in 0..width {
            let (b, set) = (bit + i, i < 64 && (v >> i) & 1 == 1);
            let mask = 1u8 << (b % 8);
            let byte = &mut d[(b / 8) as usize];
            *byte = if set { *byte | mask } else { *byte & !mask };
        }
        return;
    }
    let mut buf = [0u8; 16];
    buf[..n].copy_from_slice(&d[first..last]);
    let shift = bit % 8;
    let mask = u128::MAX >> (128 - width);
    let field = (v as u128 & mask) << shift;
    let word = u128::from_le_bytes(buf) & !(mask << shift) | field;
    d[first..last].copy_from_slice(&word.to_le_bytes()[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_written_as_bit_by_bit() {
        // (write_bits replaces the field in one word; this is the bit loop it replaced)
        fn by_bits(d: &mut [u8], bit: u32, width: u32, v: u64) {
            for i in 0..width {
                let (b, set) = (bit + i, i < 64 && (v >> i) & 1 == 1);
                let mask = 1u8 << (b % 8);
                let byte = &mut d[(b / 8) as usize];
                *byte = if set { *byte | mask } else { *byte & !mask };
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let width = (next() % 129) as u32;
            let bit = (next() % (129 - width as u64)) as u32;
            let v = next();
            let mut want: Vec<u8> = (0..17).map(|_| next() as u8).collect();
            let mut got = want.clone();
            by_bits(&mut want, bit, width, v);
            write_bits(&mut got, bit, width, v);
            assert_eq!(got, want, "bit {bit} width {width} value {v:#x}");
        }
    }

    #[test]
    fn table_matches_known_numbers() {
        assert_eq!(TABLE.len(), 116);
        assert_eq!(name(0x3B), "R_CUDA_ABS16_32");
        assert_eq!(name(0x73), "R_CUDA_CONST_FIELD22_37");
        assert_eq!(rewritten(0x70), 0x38);
    }

    #[test]
    fn abs16_32_and_const_field() {
        let mut code = [0u8; 16];
        apply(&mut code, 0, 0x3B, 0x18, 0, false).unwrap();
        assert_eq!(code[4], 0x18);
        let mut code = [0u8; 16];
        // CONST_FIELD19_40: offset >> 2 at bit 40, bank at bit 54
        apply(&mut code, 0, 0x40, 0x48, 3, false).unwrap();
        let w = u64::from_le_bytes(code[..8].try_into().unwrap());
        assert_eq!((w >> 40) & 0x3FFF, 0x12);
        assert_eq!((w >> 54) & 0x1F, 3);
        assert!(apply(&mut code, 12, 0x3B, 1, 0, false).is_err());
    }
}
