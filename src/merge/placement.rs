//! Where each input section went in the image (`Placement`): made by the sections step
//! (function sections one to one, shared names as pieces), extended by bank 2 (the device
//! functions' bank-2 pieces in their kernels' banks), then handed read-only to every step
//! after them, so the compiler checks that none reads it before it is made.

use super::SecKey;
use rustc_hash::FxHashMap as HashMap;

#[derive(Default)]
pub(super) struct Placement {
    /// Input section → (output section, offset of its piece).
    placed: HashMap<SecKey, (usize, u64)>,
}

impl Placement {
    /// Input section `k` goes at offset `at` of output section `id`.
    pub(super) fn place(&mut self, k: SecKey, id: usize, at: u64) {
        self.placed.insert(k, (id, at));
    }

    /// Where input section `k` went: (output section, offset of its piece).
    pub(super) fn of(&self, k: &SecKey) -> Option<&(usize, u64)> {
        self.placed.get(k)
    }

    /// Every input section placed, with where it went (in the map's order).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&SecKey, &(usize, u64))> {
        self.placed.iter()
    }
}
