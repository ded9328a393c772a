//! What is known of a capsule-Mercury function (`.nv.capmerc.text.<fn>`, sm_100+) beyond
//! its first word: the records of instructions that read constant bank 2 at an offset
//! the link fixes (an `LDC c[0x2][R+off]`, a jump table's entry). ptxas leaves their
//! operand unset; nvlink writes the offset there (`merge::bank2`), and a finalizer's
//! image has it written (`finalize`, which compares capsules without those operands).
//! Read off ptxas 13.5 and nvlink 13.5 at sm_100 and sm_120 (97 capsules of generated
//! switch programs): such a record is 32 bytes, its first 7 bytes below, byte 12 0x41,
//! its operand the last 4 (the 16-bit bank offset, zero-extended).

/// The first bytes of a bank-2 record.
const BANK2_RECORD: [u8; 7] = [0x02, 0x22, 0x0c, 0x06, 0xf8, 0x00, 0x42];

/// The offsets of the 32-bit operands of capsule `data`'s bank-2 records, in order.
pub fn bank2_operands(data: &[u8]) -> Vec<usize> {
    (0..data.len().saturating_sub(31))
        .filter(|&p| data[p..p + 7] == BANK2_RECORD && data[p + 12] == 0x41)
        .map(|p| p + 28)
        .collect()
}

/// Capsule `data` with its bank-2 operands zeroed (two capsules that differ only there
/// are the same code at other bank offsets).
pub fn without_bank2_operands(data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    for at in bank2_operands(data) {
        d[at..at + 4].fill(0);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bank2_records_are_found_and_only_their_operands_cleared() {
        let mut cap = vec![0x18, 0, 0, 0];
        let record = |operand: u32| {
            let mut r = vec![0u8; 32];
            r[..7].copy_from_slice(&BANK2_RECORD);
            r[10] = 1;
            r[12] = 0x41;
            r[28..].copy_from_slice(&operand.to_le_bytes());
            r
        };
        cap.extend(record(0x8040));
        cap.extend([0x02, 0x22, 0x32, 0x32, 0xf8, 0, 0x14, 8]); // another record's start
        cap.extend(record(0x8050));
        assert_eq!(bank2_operands(&cap), vec![4 + 28, 4 + 32 + 8 + 28]);
        let cleared = without_bank2_operands(&cap);
        assert_eq!(cleared.len(), cap.len());
        assert_eq!(&cleared[..4], &cap[..4]);
        assert_eq!(&cleared[32..36], &[0, 0, 0, 0]);
        assert_eq!(&cleared[36..44], &cap[36..44]);
    }
}
