//! The byte scrambling NVIDIA applies to LTO IR: the IR region of cicc's `.ltoir`
//! containers, and the zstd frame of compressed NVVM fatbin members (flag 0x10000). Both
//! use the same reversible stream, keyed by the container's 4-byte content key.
//!
//! The stream: a 32-bit linear congruential generator seeded with the key supplies one
//! key byte per position (low byte first, a new word every four bytes); each byte is
//! undone through a fixed 256-entry permutation indexed by the XOR of the stored byte and
//! the previous stored byte (the complement of the key's low byte before the first one).
//! Found by watching libNVVM undo a `.ltoir` in a debugger; checked against what nvlink
//! hands libNVVM for the same member (tests/lto.rs).

/// The permutation applied on the way back to plain bytes.
const UNMIX: [u8; 256] = [
    0x64, 0x80, 0x0d, 0x1e, 0xe2, 0xf6, 0xef, 0x16, 0x98, 0xff, 0x29, 0x3a, 0x5e, 0xcf, 0x28, 0xad,
    0x84, 0x45, 0xfc, 0xce, 0x65, 0xab, 0xe3, 0xac, 0xeb, 0x97, 0x49, 0x92, 0xc3, 0x13, 0xa8, 0xf7,
    0xdd, 0x7c, 0xd0, 0xde, 0xf8, 0x78, 0x72, 0xec, 0xa5, 0x12, 0x94, 0x2b, 0x39, 0x53, 0x9a, 0x90,
    0x04, 0x3f, 0xae, 0x99, 0x32, 0x75, 0xbf, 0xc1, 0x02, 0x91, 0xdb, 0xfe, 0x7d, 0xd6, 0xb5, 0xf0,
    0x3d, 0x3c, 0xb3, 0xb6, 0x00, 0xbc, 0x76, 0xa2, 0x9c, 0xe1, 0x50, 0x85, 0x09, 0x4a, 0x66, 0x2d,
    0xb7, 0x6a, 0xd5, 0x79, 0xea, 0x3e, 0x1b, 0xd1, 0xa3, 0x7b, 0x71, 0x95, 0x59, 0xb2, 0x87, 0x8b,
    0x5c, 0x9f, 0x81, 0x18, 0x27, 0xcb, 0x4b, 0x93, 0x11, 0x2a, 0x6b, 0xbd, 0xa0, 0xc8, 0xf5, 0x19,
    0xf2, 0x1f, 0xc2, 0x40, 0x6c, 0xdf, 0x03, 0xda, 0x21, 0x55, 0xb1, 0x82, 0x63, 0x89, 0x77, 0xe6,
    0xa9, 0xc9, 0x73, 0x24, 0xc6, 0xd9, 0xe4, 0x37, 0x17, 0x4f, 0xf4, 0x68, 0xc7, 0x07, 0x86, 0xaf,
    0xfa, 0xa6, 0xb8, 0xdc, 0x88, 0x0a, 0x47, 0x8e, 0xe7, 0x14, 0x1a, 0x83, 0x74, 0x9e, 0x35, 0x7f,
    0xfd, 0x52, 0xe0, 0xa1, 0x41, 0x4c, 0x0b, 0x33, 0x44, 0x8f, 0xf3, 0xbb, 0x08, 0x58, 0x7a, 0x0c,
    0xf1, 0x3b, 0xe5, 0x9b, 0x26, 0xd4, 0x5d, 0xc0, 0xf9, 0x7e, 0xa7, 0x60, 0xe8, 0x51, 0x25, 0x34,
    0xd7, 0x0f, 0x4d, 0x5a, 0xd3, 0x36, 0x1d, 0xc4, 0x8a, 0x2f, 0x20, 0x62, 0xb0, 0xaa, 0x61, 0x8d,
    0x8c, 0x69, 0x01, 0x48, 0x38, 0xed, 0xd8, 0x6e, 0x42, 0xcc, 0x05, 0x2e, 0x22, 0x10, 0x5b, 0x06,
    0x4e, 0x23, 0x46, 0x0e, 0xba, 0xe9, 0x5f, 0xee, 0xb9, 0xb4, 0x30, 0xa4, 0x54, 0xbe, 0x1c, 0x57,
    0xcd, 0xfb, 0x96, 0x9d, 0x31, 0x67, 0xc5, 0x70, 0x15, 0x43, 0x6d, 0x56, 0x2c, 0xd2, 0x6f, 0xca,
];

struct Stream {
    lcg: u32,
    word: u32,
    left: u32,
    prev: u8,
}

impl Stream {
    fn new(key: u32) -> Stream {
        Stream {
            lcg: key,
            word: 0,
            left: 1,
            prev: !(key as u8),
        }
    }

    fn next_key_byte(&mut self) -> u8 {
        self.left -= 1;
        if self.left == 0 {
            self.lcg = self.lcg.wrapping_mul(0x41c6_4e6d).wrapping_add(0x3039);
            self.word = self.lcg;
            self.left = 4;
        } else {
            self.word >>= 8;
        }
        self.word as u8
    }
}

/// Undoes the scrambling in place.
pub fn unscramble(data: &mut [u8], key: u32) {
    let mut s = Stream::new(key);
    for b in data.iter_mut() {
        let k = s.next_key_byte();
        let stored = *b;
        *b = UNMIX[(s.prev ^ stored) as usize] ^ k;
        s.prev = stored;
    }
}

/// The plain byte at `i` of a scrambled region, without undoing what comes before it
/// (the key stream's word for a position is found by jumping the generator ahead).
pub fn unscrambled_at(data: &[u8], key: u32, i: usize) -> Option<u8> {
    let stored = *data.get(i)?;
    let prev = if i == 0 { !(key as u8) } else { data[i - 1] };
    // the generator's state after i/4 + 1 steps: x -> a*x + c composed by squaring
    let (mut mul, mut add) = (1u32, 0u32);
    let (mut a, mut c) = (0x41c6_4e6du32, 0x3039u32);
    let mut n = i / 4 + 1;
    while n > 0 {
        if n & 1 == 1 {
            mul = mul.wrapping_mul(a);
            add = add.wrapping_mul(a).wrapping_add(c);
        }
        c = c.wrapping_mul(a).wrapping_add(c);
        a = a.wrapping_mul(a);
        n >>= 1;
    }
    let word = key.wrapping_mul(mul).wrapping_add(add);
    let k = (word >> (8 * (i % 4))) as u8;
    Some(UNMIX[(prev ^ stored) as usize] ^ k)
}

/// Applies the scrambling in place (the inverse of [`unscramble`]); used by tests and
/// fuzz targets to build inputs in NVIDIA's form.
pub fn scramble(data: &mut [u8], key: u32) {
    let mut mix = [0u8; 256];
    for (i, &v) in UNMIX.iter().enumerate() {
        mix[v as usize] = i as u8;
    }
    let mut s = Stream::new(key);
    for b in data.iter_mut() {
        let k = s.next_key_byte();
        let stored = mix[(*b ^ k) as usize] ^ s.prev;
        *b = stored;
        s.prev = stored;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        let mut seen = [false; 256];
        for &v in UNMIX.iter() {
            assert!(!seen[v as usize]);
            seen[v as usize] = true;
        }
    }

    #[test]
    fn round_trip() {
        let plain: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for key in [0, 1, 0x22c4_7289, u32::MAX] {
            let mut d = plain.clone();
            scramble(&mut d, key);
            assert_ne!(d, plain);
            unscramble(&mut d, key);
            assert_eq!(d, plain);
        }
    }

    #[test]
    fn a_byte_anywhere_is_the_stream_s() {
        let plain: Vec<u8> = (0..5000u32).map(|i| (i * 13 + i / 7) as u8).collect();
        for key in [0, 0x22c4_7289, u32::MAX] {
            let mut d = plain.clone();
            scramble(&mut d, key);
            for i in [0, 1, 3, 4, 5, 1023, 4096, 4999] {
                assert_eq!(unscrambled_at(&d, key, i), Some(plain[i]), "{key:#x} {i}");
            }
            assert_eq!(unscrambled_at(&d, key, 5000), None);
        }
    }

    #[test]
    fn known_bytes() {
        // The first bytes of the IR region of a cicc 13.5 `.ltoir` (key 0x22c47289):
        // they must come back as the LLVM bitcode magic and header.
        let mut d = [0xaf, 0x1f, 0x6c, 0xe9, 0xc7, 0x10, 0x9d, 0xb2];
        unscramble(&mut d, 0x22c4_7289);
        assert_eq!(d, [0x42, 0x43, 0xc0, 0xde, 0x35, 0x14, 0x00, 0x00]);
    }
}
