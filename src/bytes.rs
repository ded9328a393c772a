//! Shared, cheaply sliced byte buffers. An input file is memory-mapped once; every
//! archive member, fatbin container and uncompressed device-code member is a `Bytes`
//! window into that mapping (no copy). Decompressed members own their buffer.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

enum Owner {
    Map(memmap2::Mmap),
    Vec(Vec<u8>),
    Static(&'static [u8]),
}

impl Owner {
    fn as_slice(&self) -> &[u8] {
        match self {
            Owner::Map(m) => m,
            Owner::Vec(v) => v,
            Owner::Static(s) => s,
        }
    }
}

#[derive(Clone)]
pub struct Bytes {
    owner: Arc<Owner>,
    start: usize,
    end: usize,
}

impl Bytes {
    pub fn from_map(map: memmap2::Mmap) -> Bytes {
        let end = map.len();
        Bytes {
            owner: Arc::new(Owner::Map(map)),
            start: 0,
            end,
        }
    }

    pub fn from_vec(v: Vec<u8>) -> Bytes {
        let end = v.len();
        Bytes {
            owner: Arc::new(Owner::Vec(v)),
            start: 0,
            end,
        }
    }

    pub fn from_static(s: &'static [u8]) -> Bytes {
        Bytes {
            owner: Arc::new(Owner::Static(s)),
            start: 0,
            end: s.len(),
        }
    }

    /// A window of this buffer. Panics if `r` is out of bounds: callers check bounds
    /// against `len()` first (parsers return errors, never rely on this panic).
    pub fn slice(&self, r: Range<usize>) -> Bytes {
        assert!(
            r.start <= r.end && r.end <= self.len(),
            "Bytes::slice out of bounds"
        );
        Bytes {
            owner: self.owner.clone(),
            start: self.start + r.start,
            end: self.start + r.end,
        }
    }

    /// Like `slice`, but `None` when the range does not fit.
    pub fn get(&self, start: usize, len: usize) -> Option<Bytes> {
        let end = start.checked_add(len)?;
        (end <= self.len()).then(|| self.slice(start..end))
    }

    /// Lets the kernel drop the pages of this window that came from a file mapping (whole
    /// pages inside the window only): they stop counting in the process's memory, and a
    /// later read faults them in again from the file. Buffers this process owns are left
    /// alone (dropping their pages would zero them).
    pub fn release(&self) {
        let Owner::Map(map) = &*self.owner else {
            return;
        };
        const PAGE: usize = 4096;
        let from = self.start.next_multiple_of(PAGE);
        let to = self.end / PAGE * PAGE;
        if to > from {
            // SAFETY: the mapping is a read-only shared file mapping; MADV_DONTNEED on it
            // only discards resident pages, which later reads fault in again from the
            // file, so no borrowed byte changes.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
            };
        }
    }

    /// True when the bytes are borrowed from a file mapping (zero-copy).
    pub fn is_mapped(&self) -> bool {
        matches!(*self.owner, Owner::Map(_))
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.owner.as_slice()[self.start..self.end]
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.len())
    }
}

/// Little-endian field readers that never panic: `None` past the end.
pub trait Le {
    fn u8_at(&self, off: usize) -> Option<u8>;
    fn u16_at(&self, off: usize) -> Option<u16>;
    fn u32_at(&self, off: usize) -> Option<u32>;
    fn u64_at(&self, off: usize) -> Option<u64>;
}

impl Le for [u8] {
    fn u8_at(&self, off: usize) -> Option<u8> {
        self.get(off).copied()
    }
    fn u16_at(&self, off: usize) -> Option<u16> {
        Some(u16::from_le_bytes(
            self.get(off..off.checked_add(2)?)?.try_into().ok()?,
        ))
    }
    fn u32_at(&self, off: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            self.get(off..off.checked_add(4)?)?.try_into().ok()?,
        ))
    }
    fn u64_at(&self, off: usize) -> Option<u64> {
        Some(u64::from_le_bytes(
            self.get(off..off.checked_add(8)?)?.try_into().ok()?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_the_owner_and_check_bounds() {
        let b = Bytes::from_vec((0u8..16).collect());
        let s = b.slice(4..8);
        assert_eq!(&*s, &[4, 5, 6, 7]);
        assert_eq!(&*s.slice(1..3), &[5, 6]);
        assert!(s.get(2, 3).is_none());
        assert_eq!(s.u32_at(0), Some(0x0706_0504));
        assert_eq!(s.u32_at(1), None);
        assert_eq!(s.u64_at(usize::MAX), None);
    }
}
