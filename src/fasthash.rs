//! A fast hasher for the linker's in-memory maps (symbol names, `(input, index)` keys).
//! The standard SipHash guards against keys chosen to collide, which a linker reading
//! its own user's files does not need, and it cost a tenth of a 128-unit link; this is
//! the multiply-rotate word hash rustc itself uses for its tables.

use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;
pub type HashSet<K> = std::collections::HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_work_and_distinguish_close_keys() {
        let mut m: HashMap<(usize, usize), u32> = HashMap::default();
        for i in 0..1000 {
            m.insert((i / 10, i % 10), i as u32);
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m[&(42, 7)], 427);
        let mut s: HashSet<String> = HashSet::default();
        s.insert("_Z4f1_2ii".into());
        assert!(s.contains("_Z4f1_2ii") && !s.contains("_Z4f1_2i"));
    }
}
