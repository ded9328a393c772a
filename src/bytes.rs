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
    /// The window's first byte (`owner`'s buffer at `start`): a read is a slice made from
    /// it, not a walk through the owner (names and sections are read in every step).
    ptr: *const u8,
}

// SAFETY: `ptr` points into the owner's buffer, which `owner` keeps alive and which is
// never written once the `Bytes` is made (a mapping is read-only, a vector is not handed
// out again); sharing or sending it is sharing `Arc<Owner>`, which is Send and Sync.
unsafe impl Send for Bytes {}
unsafe impl Sync for Bytes {}

impl Bytes {
    fn whole(owner: Owner) -> Bytes {
        let (ptr, end) = {
            let b = owner.as_slice();
            (b.as_ptr(), b.len())
        };
        Bytes {
            owner: Arc::new(owner),
            start: 0,
            end,
            ptr,
        }
    }

    pub fn from_map(map: memmap2::Mmap) -> Bytes {
        Bytes::whole(Owner::Map(map))
    }

    pub fn from_vec(v: Vec<u8>) -> Bytes {
        Bytes::whole(Owner::Vec(v))
    }

    pub fn from_static(s: &'static [u8]) -> Bytes {
        Bytes::whole(Owner::Static(s))
    }

    /// Whether the bytes are this process's own (not a file's mapping, which another
    /// process's writes to the file show through).
    pub fn is_in_memory(&self) -> bool {
        !matches!(*self.owner, Owner::Map(_))
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
            // (in bounds: checked above)
            ptr: self.ptr.wrapping_add(r.start),
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
        // SAFETY: `ptr` and the window's length lie inside the owner's buffer (checked
        // when the window was made), which lives and stays unchanged as long as `owner`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.end - self.start) }
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

/// A name read from an input's string table: a window into the input's bytes when they
/// are UTF-8 (no copy: a link reads tens of thousands of symbol and section names), else
/// the lossy copy a damaged name gets, held the same way. Reads as a `&str` everywhere a
/// `String` did; 24 bytes, as a `String`.
#[derive(Clone)]
pub struct Name {
    /// What holds the bytes `ptr` points into (kept, never read).
    _owner: Arc<Owner>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: as for `Bytes`: `ptr` points into `_owner`'s buffer, which `_owner` keeps alive
// and which never changes.
unsafe impl Send for Name {}
unsafe impl Sync for Name {}

impl Name {
    /// The name in `b`: shared when it is UTF-8, else copied with the bad bytes replaced.
    pub fn from_bytes(b: Bytes) -> Name {
        match std::str::from_utf8(&b) {
            Ok(_) => Name::window(b),
            Err(_) => Name::from(String::from_utf8_lossy(&b).into_owned()),
        }
    }

    /// `b` as a name (its bytes UTF-8, checked by the caller).
    fn window(b: Bytes) -> Name {
        Name {
            ptr: b.ptr,
            len: b.end - b.start,
            _owner: b.owner,
        }
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: the bytes lie in `_owner`'s buffer, alive and unchanged as long as it is,
        // and were checked to be UTF-8 when the name was made (or came from a `String`).
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.ptr, self.len)) }
    }
}

impl Default for Name {
    /// The empty name, shared: made for every section and symbol before its name is
    /// read, so it allocates nothing.
    fn default() -> Name {
        static EMPTY: std::sync::LazyLock<Arc<Owner>> =
            std::sync::LazyLock::new(|| Arc::new(Owner::Static(b"")));
        let owner = EMPTY.clone();
        Name {
            ptr: owner.as_slice().as_ptr(),
            len: 0,
            _owner: owner,
        }
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::from(s.to_owned())
    }
}

impl From<&Name> for Name {
    fn from(n: &Name) -> Name {
        n.clone()
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Name {
        Name::from(s.clone())
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name::window(Bytes::from_vec(s.into_bytes()))
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.as_str().to_owned()
    }
}

impl PartialEq for Name {
    fn eq(&self, o: &Name) -> bool {
        self.as_str() == o.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, o: &String) -> bool {
        self.as_str() == o.as_str()
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, o: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Name {
    fn cmp(&self, o: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(o.as_str())
    }
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn names_read_as_strings_shared_or_copied() {
        let b = Bytes::from_vec(b"_Z4kernPi\0bad\xff\xfename\0".to_vec());
        let good = Name::from_bytes(b.slice(0..9));
        assert_eq!(good.ptr, b.ptr, "a window, not a copy");
        assert_eq!(std::mem::size_of::<Name>(), std::mem::size_of::<String>());
        assert_eq!((good.as_str(), good.len()), ("_Z4kernPi", 9));
        assert_eq!(good, Name::from("_Z4kernPi"));
        // a damaged name: the bad bytes replaced, as the lossy conversion did
        let bad = Name::from_bytes(b.slice(10..19));
        assert_eq!(bad.as_str(), "bad\u{fffd}\u{fffd}name");
        assert_eq!(String::from(bad), "bad\u{fffd}\u{fffd}name");
        let mut set = std::collections::HashSet::new();
        set.insert(good);
        assert!(set.contains("_Z4kernPi"));
    }
}
