//! What is known of a capsule-Mercury function (`.nv.capmerc.text.<fn>`, sm_100+) beyond
//! its first word: the records of its constant-bank reads. Each instruction that reads
//! bank 0, 2 or 3 at an offset has a 32-byte record (first bytes `02 22 <form> 06`, byte 12
//! the bank's mark, the offset in the last 4 bytes). ptxas leaves the offset unset where
//! the link decides it: a read of a device function's bank-2 data (a jump table's entry,
//! placed in its kernels' banks by `merge::bank2`) or of a `__constant__` variable at a
//! fixed offset (placed in the image's `.nv.constant3`). nvlink writes those
//! (`merge::mercury::records`), and a finalizer's image has them written (`finalize`,
//! which compares capsules without them).
//! Read off ptxas 13.5 and nvlink 13.5 at sm_100 to sm_121 (the new-user review's corpus
//! of 2026-12-01, `benches/results/capsules.md`): such a record's form (byte 2) is
//! 0x08 for a uniform load (`LDCU`, 32-bit offset), 0x0e for a load or an operand at a
//! fixed 16-bit offset (`@P0 LDC.U8 R0, c[0x3][RZ]`, predicated or not: byte 4 is the
//! predicate), 0x0c for a load at a register plus an offset (`LDC R6, c[0x3][R6+0x18]`);
//! byte 12 is 0x40 for bank 0, 0x41 bank 2, 0x42 bank 3. A read at a register of bank 3
//! takes its variable's address from another instruction, whose relocation has no record:
//! its own offset is ptxas's and stays. A jump table's read (bank 2, form 0x0c) carries
//! its table's offset, which the link writes.

/// A record's byte 6: the width of the value read in its high nibble over 2: 0x02 an
/// unsigned and 0x12 a signed byte (`unsigned char`, `char`), 0x22 and 0x32 16 bits
/// (`unsigned short`, `__half`; `short`), 0x42 32 bits, 0x52 64 bits (`double`), 0x62
/// 128 bits (`LDCU.128` of a 16-byte `__constant__` struct, a new user's AES rounds).
fn width(b: u8) -> bool {
    b & 0x0f == 0x02 && b <= 0x72
}

/// A record's bank mark (byte 12).
const BANK0: u8 = 0x40;
const BANK2: u8 = 0x41;
const BANK3: u8 = 0x42;

/// Whether the 32 bytes `r` are a constant read's record; with its form and bank mark.
fn record(r: &[u8]) -> Option<(u8, u8)> {
    let ok = r[0] == 0x02
        && r[1] == 0x22
        && matches!(r[2], 0x08 | 0x0c | 0x0e)
        && r[3] == 0x06
        && r[5] == 0
        && width(r[6])
        && (BANK0..=BANK3).contains(&r[12]);
    ok.then_some((r[2], r[12]))
}

/// The offsets, in capsule `data`, of the 32-bit operands of the records whose offset a
/// link writes, in the code's order, each with the bank read: bank-2 reads, and bank-3
/// reads at a fixed offset (forms 0x08, 0x0e). Records do not overlap: the scan goes on
/// after each.
pub fn linked_operands(data: &[u8]) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 32 <= data.len() {
        match record(&data[p..p + 32]) {
            Some((form, mark)) => {
                if mark == BANK2 {
                    out.push((p + 28, 2));
                } else if mark == BANK3 && form != 0x0c {
                    out.push((p + 28, 3));
                }
                p += 32;
            }
            None => p += 1,
        }
    }
    out
}

/// Capsule `data` with the operands a link writes zeroed (two capsules that differ only
/// there are the same code at other bank offsets).
pub fn without_bank_operands(data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    for (at, _) in linked_operands(data) {
        d[at..at + 4].fill(0);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `head` (its first 7 bytes) and bank `mark`, `operand` last.
    fn record_of(head: [u8; 7], mark: u8, operand: u32) -> Vec<u8> {
        let mut r = vec![0u8; 32];
        r[..7].copy_from_slice(&head);
        r[10] = 1;
        r[12] = mark;
        r[28..].copy_from_slice(&operand.to_le_bytes());
        r
    }

    #[test]
    fn the_records_a_link_writes_are_found_and_only_their_operands_cleared() {
        let mut cap = vec![0x11, 0, 0, 0];
        let mut put = |bytes: Vec<u8>| {
            cap.extend(bytes);
            cap.len()
        };
        // a jump table's entry (bank 2, at a register plus the table's offset)
        let table = put(record_of([2, 0x22, 0x0c, 6, 0xf8, 0, 0x42], BANK2, 0x8040));
        // another item of the stream between records
        put(vec![0x41, 0x0c, 0x40, 0x04]);
        // `@P0 LDC.U8 R0, c[0x3][RZ]`: predicated, fixed offset
        let fixed = put(record_of([2, 0x22, 0x0e, 6, 0x00, 0, 0x02], BANK3, 0));
        // `@!P0 LDC.U8 R0, c[0x3][R3]`: bank 3 at a register: not the link's
        let at_register = put(record_of([2, 0x22, 0x0c, 6, 0x01, 0, 0x02], BANK3, 0));
        // `LDCU.64 UR4, c[0x3][URZ]`
        let uniform = put(record_of([2, 0x22, 0x08, 6, 0xfa, 0, 0x52], BANK3, 0));
        // a kernel parameter's read (bank 0)
        let param = put(record_of([2, 0x22, 0x08, 6, 0xfa, 0, 0x42], BANK0, 0x380));
        // a width no record has
        let odd = put(record_of([2, 0x22, 0x08, 6, 0xfa, 0, 0x43], BANK3, 0));
        let written = linked_operands(&cap);
        assert_eq!(
            written,
            vec![(table - 4, 2), (fixed - 4, 3), (uniform - 4, 3)]
        );
        let cleared = without_bank_operands(&cap);
        assert_eq!(cleared.len(), cap.len());
        assert_eq!(&cleared[table - 4..table], &[0, 0, 0, 0]);
        for end in [at_register, param, odd] {
            assert_eq!(&cleared[end - 4..end], &cap[end - 4..end]);
        }
        assert_eq!(&cleared[..table - 4], &cap[..table - 4]);
    }

    #[test]
    fn a_short_or_empty_capsule_has_no_records() {
        assert!(linked_operands(&[]).is_empty());
        assert!(linked_operands(&[2, 0x22, 0x08, 6]).is_empty());
    }
}
