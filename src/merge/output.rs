//! The image as the steps build it (`Output`): its sections in the order they are made,
//! which of them get a section symbol, and the input of each section that is a
//! function's own (where each input section went is the `Placement` product,
//! placement.rs). The sections step makes most of it; the notes (first), bank 2, shared
//! memory, the call-graph tables, `.nv.info`, the Mercury step and `finish` add sections
//! (bank 2 also fills the kernels' banks, whose bytes were the input's until then); the
//! relocations patch them, or edit those still written from an input. A section is only ever added
//! by `push`, so every section has its symbol flag; the steps read and change the
//! sections themselves as a slice.

use std::ops::{Deref, DerefMut};

use crate::elf::write::OutSection;
use rustc_hash::FxHashMap as HashMap;

#[derive(Default)]
pub(super) struct Output {
    sections: Vec<OutSection>,
    /// Output section → whether it gets a section symbol.
    symbol: Vec<bool>,
    /// The input of each output section that is a function's own (its code, bank, its
    /// capsule), by output section (`Merger::creation_rank_of`).
    function_input: HashMap<usize, usize>,
}

impl Output {
    /// Adds section `s` (with a section symbol when `symbol`); its id.
    pub(super) fn push(&mut self, s: OutSection, symbol: bool) -> usize {
        self.sections.push(s);
        self.symbol.push(symbol);
        self.sections.len() - 1
    }

    /// Adds section `s`, a function's own from input `input`; its id.
    pub(super) fn push_function(&mut self, s: OutSection, symbol: bool, input: usize) -> usize {
        let id = self.push(s, symbol);
        self.function_input.insert(id, input);
        id
    }

    /// Whether section `id` gets a section symbol.
    pub(super) fn has_symbol(&self, id: usize) -> bool {
        self.symbol[id]
    }

    /// Section `id` gets a section symbol (an input section placed in it has one).
    pub(super) fn give_symbol(&mut self, id: usize) {
        self.symbol[id] = true;
    }

    /// The input whose function section `id` is, if it is one.
    pub(super) fn function_input(&self, id: usize) -> Option<usize> {
        self.function_input.get(&id).copied()
    }

    /// The sections, moved out to be put in their final order (`finish`).
    pub(super) fn take_sections(&mut self) -> Vec<OutSection> {
        std::mem::take(&mut self.sections)
    }
}

impl Deref for Output {
    type Target = [OutSection];
    fn deref(&self) -> &[OutSection] {
        &self.sections
    }
}

impl DerefMut for Output {
    fn deref_mut(&mut self) -> &mut [OutSection] {
        &mut self.sections
    }
}
