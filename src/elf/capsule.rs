//! What is known of a capsule-Mercury function (`.nv.capmerc.text.<fn>`, sm_100+) beyond
//! its first word: the records of instructions that read a constant bank at an offset
//! the link fixes: bank 2 (an `LDC c[0x2][R+off]`, a jump table's entry) and bank 3 (an
//! `LDC` of a `__constant__` variable, whose offset in the image's `.nv.constant3` follows
//! the variables of the inputs before its own). ptxas leaves their operand unset; nvlink
//! writes the offset there (`merge::bank2`), and a finalizer's image has it written
//! (`finalize`, which compares capsules without those operands).
//! Read off ptxas 13.5 and nvlink 13.5 at sm_100 and sm_120 (97 capsules of generated
//! switch programs for bank 2; a unit whose `__constant__` variable comes after another
//! unit's, for bank 3): such a record is 32 bytes, its first 7 bytes below, byte 12 the
//! bank's mark, its operand the last 4 (the bank offset, zero-extended) ([`operands`]).

/// The records a link patches, by the constant bank they read and their form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bank {
    /// Device functions' data merged into their kernels' banks (`merge::bank2`).
    Two,
    /// The module's `__constant__` variables (`.nv.constant3`).
    Three,
    /// A `__constant__` variable read through a 16-bit field (R_MERCURY_ABS16): a load in
    /// libNVVM's whole-program output compiled relocatable (`ybias[3]`), or a scalar's
    /// read as an instruction's operand in `-rdc` code (`o[i] = y`; byte 4 0xf8 there).
    Three16,
}

impl Bank {
    /// Every kind of record, for what compares capsules without their operands.
    pub const ALL: [Bank; 3] = [Bank::Two, Bank::Three, Bank::Three16];

    /// The record's first 4 bytes, its byte 4 and byte 6 (each one of the listed values:
    /// bank 3's byte 6 is the width read, [`WIDTHS`]), byte 5 zero, and its byte 12, the
    /// bank's mark.
    fn signature(self) -> ([u8; 4], &'static [u8], &'static [u8], u8) {
        match self {
            Bank::Two => ([0x02, 0x22, 0x0c, 0x06], &[0xf8], &[0x42], 0x41),
            Bank::Three => ([0x02, 0x22, 0x08, 0x06], &[0xfa], WIDTHS, 0x42),
            Bank::Three16 => ([0x02, 0x22, 0x0e, 0x06], &[0x01, 0xf8], WIDTHS, 0x42),
        }
    }
}

/// A bank-3 record's byte 6, the width of the value read: 0x02 an unsigned and 0x12 a
/// signed byte (`unsigned char`, `char`), 0x22 and 0x32 16 bits (`unsigned short`,
/// `__half`; `short`), 0x42 32 bits, 0x52 64 bits (`double`). nvlink writes the offset of
/// each (attacker review of 2026-11-30: the 8-bit unsigned and 16-bit ones were left 0).
const WIDTHS: &[u8] = &[0x02, 0x12, 0x22, 0x32, 0x42, 0x52];

/// The offsets of the 32-bit operands of capsule `data`'s records of `bank`, in order.
pub fn operands(data: &[u8], bank: Bank) -> Vec<usize> {
    let (head, fourth, sixth, mark) = bank.signature();
    let same = |r: &[u8]| {
        r[..4] == head
            && fourth.contains(&r[4])
            && r[5] == 0
            && sixth.contains(&r[6])
            && r[12] == mark
    };
    (0..data.len().saturating_sub(31))
        .filter(|&p| same(&data[p..p + 32]))
        .map(|p| p + 28)
        .collect()
}

/// A 16-bit record's byte 4, the read's predicate as it reads: the register times 8, its
/// lowest bit the negation (0xf8: none, `PT`; 0 and 1 `@P0` and `@!P0`; 0x08, 0x09 `@P1`,
/// `@!P1`; 0x10 to 0x21 seen too: a new user's function of six conditional reads of a
/// `__constant__` struct, new-user review of 2026-12-01, which had its records left 0 at
/// sm_100 with the values 0x00, 0x01, 0x08 and 0x09 alone listed here).
fn predicate(b: u8) -> bool {
    b & 0x06 == 0
}

/// Bank 3's 16-bit records (`Bank::Three16`) as a fuller reading finds them, in order,
/// each with whether nvlink writes its operand: also those whose byte 4 is a predicate
/// ([`predicate`]: predicated reads, `@P0 LDC.U16`, `@P1 LDC.S8`), and the
/// records of an indexed read (`02 22 0c 06`, byte 4 0, byte 6 0x42, bank 3's mark),
/// which take a relocation of their own but whose operand nvlink leaves as ptxas wrote it
/// (a `__noinline__` function's `switch` reading `table[3]`, `table[5]` and `table[k]`:
/// four relocations, three operands written).
/// `wide` also takes indexed reads' records whose byte 4 is 0xf8 (a function reading two
/// `__constant__` arrays, one at an index the other gives).
pub fn bank3_records_with_indexed(data: &[u8], wide: bool) -> Vec<(usize, bool)> {
    let indexed: &[u8] = if wide { &[0x00, 0xf8] } else { &[0x00] };
    let form = |r: &[u8], head: u8, fourth: &dyn Fn(u8) -> bool| {
        r[..4] == [0x02, 0x22, head, 0x06]
            && fourth(r[4])
            && r[5] == 0
            && WIDTHS.contains(&r[6])
            && r[12] == 0x42
    };
    (0..data.len().saturating_sub(31))
        .filter_map(|p| {
            let r = &data[p..p + 32];
            if form(r, 0x0e, &predicate) {
                Some((p + 28, true))
            } else if form(r, 0x0c, &|b| indexed.contains(&b)) {
                Some((p + 28, false))
            } else {
                None
            }
        })
        .collect()
}

/// Capsule `data` with its constant-bank operands zeroed (two capsules that differ only
/// there are the same code at other bank offsets), the fuller reading's 16-bit records
/// too (predicated reads: a finalizer's image has them written, the unit 0; a new user's
/// FIR kernel at sm_100a, whose control bits were left as ptxas wrote them).
pub fn without_bank_operands(data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    let fuller = bank3_records_with_indexed(data, true)
        .into_iter()
        .map(|(at, _)| at);
    for at in Bank::ALL
        .iter()
        .flat_map(|&b| operands(data, b))
        .chain(fuller)
    {
        d[at..at + 4].fill(0);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bank_records_are_found_and_only_their_operands_cleared() {
        let mut cap = vec![0x18, 0, 0, 0];
        let record = |operand: u32| {
            let mut r = vec![0u8; 32];
            r[..7].copy_from_slice(&[0x02, 0x22, 0x0c, 0x06, 0xf8, 0x00, 0x42]);
            r[10] = 1;
            r[12] = 0x41;
            r[28..].copy_from_slice(&operand.to_le_bytes());
            r
        };
        cap.extend(record(0x8040));
        cap.extend([0x02, 0x22, 0x32, 0x32, 0xf8, 0, 0x14, 8]); // another record's start
        cap.extend(record(0x8050));
        assert_eq!(operands(&cap, Bank::Two), vec![4 + 28, 4 + 32 + 8 + 28]);
        // a record of `head` (its first 7 bytes) and `mark` (byte 12), `operand` last;
        // appended to the capsule: where it starts
        let mut put = |head: [u8; 7], mark: u8, operand: u32| {
            let mut r = vec![0u8; 32];
            r[..7].copy_from_slice(&head);
            r[12] = mark;
            r[28..].copy_from_slice(&operand.to_le_bytes());
            cap.extend(r);
            cap.len() - 32
        };
        // a bank-3 record (a `__constant__` variable's `LDC`) is found as such
        let at = put([0x02, 0x22, 0x08, 0x06, 0xfa, 0x00, 0x42], 0x42, 0x124);
        // and one of libNVVM's relocatable output (`ybias[3]`, another form)
        let at2 = put([0x02, 0x22, 0x0e, 0x06, 0x01, 0x00, 0x42], 0x42, 0);
        // and a scalar's read in `-rdc` code (`o[i] = y`), byte 4 0xf8
        let at3 = put([0x02, 0x22, 0x0e, 0x06, 0xf8, 0x00, 0x42], 0x42, 0);
        // and a `char`'s read (byte 6 0x12), a bank-3 record of the 32-bit form
        let at4 = put([0x02, 0x22, 0x08, 0x06, 0xfa, 0x00, 0x12], 0x42, 0);
        assert_eq!(operands(&cap, Bank::Two).len(), 2);
        assert_eq!(operands(&cap, Bank::Three), vec![at + 28, at4 + 28]);
        assert_eq!(operands(&cap, Bank::Three16), vec![at2 + 28, at3 + 28]);
        let cleared = without_bank_operands(&cap);
        assert_eq!(cleared.len(), cap.len());
        assert_eq!(&cleared[..4], &cap[..4]);
        assert_eq!(&cleared[32..36], &[0, 0, 0, 0]);
        assert_eq!(&cleared[36..44], &cap[36..44]);
        assert_eq!(&cleared[at + 28..at + 32], &[0, 0, 0, 0]);
        assert_eq!(&cleared[at2 + 28..at2 + 32], &[0, 0, 0, 0]);
        assert_eq!(&cleared[at3 + 28..at3 + 32], &[0, 0, 0, 0]);
        assert_eq!(&cleared[at4 + 28..], &[0, 0, 0, 0]);
    }
}
