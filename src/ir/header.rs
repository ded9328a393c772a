//! The 24-byte header both of cicc's IR containers start with (the LTO IR container and
//! the NVVM container), read in one place; `container` and `nvvm_container` give its
//! fields their meaning and check them.

use crate::bytes::Le;

/// The header's size.
pub(crate) const HEADER: usize = 24;

/// The 24 bytes both containers (the LTO IR container and cicc's NVVM container) start
/// with, from their magic: four (major, minor) versions (container, NVVM IR, debug,
/// LLVM), two 16-bit fields (the header size and the IR level, in the order each
/// container keeps them) and two 32-bit offsets (the end of the option pairs, then the IR's
/// or the blob region's end). Read in one place; each container gives them its meaning.
pub(crate) struct RawHeader {
    pub versions: [(u8, u8); 4],
    pub halves: [u16; 2],
    pub words: [u32; 2],
}

impl RawHeader {
    /// `None` when fewer than 24 bytes are there.
    pub(crate) fn read(h: &[u8]) -> Option<RawHeader> {
        let h = h.get(..HEADER)?;
        let pair = |i: usize| (h[i], h[i + 1]);
        Some(RawHeader {
            versions: [pair(4), pair(6), pair(8), pair(10)],
            halves: [h.u16_at(0x0C)?, h.u16_at(0x0E)?],
            words: [h.u32_at(0x10)?, h.u32_at(0x14)?],
        })
    }
}
