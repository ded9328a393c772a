//! The merge state (`Merger`): what every step reads, the inputs, their parsed parts, the
//! options, the message sink and the resolution, held by shared reference behind
//! accessors (so no step can re-point one: the fields are private to this file), the
//! code graph (`code`, whose own fields are private to functions.rs) and the one thing
//! the steps write, the image's sections as they are built (`out`). Made only by
//! `Merger::with_functions` (functions.rs), through `new`.

use super::{Input, MergeOptions, Parsed, functions, output, resolve};
use crate::diag::Diagnostics;

pub(super) struct Merger<'a> {
    inputs: &'a [Input],
    parsed: &'a [Parsed],
    opts: &'a MergeOptions,
    diag: &'a Diagnostics,
    /// Each global name's definition, each input symbol's global (`resolve.rs`).
    res: &'a resolve::Resolution<'a>,
    /// The functions, which are live, the kernels (`functions.rs`; the kernels' call
    /// trees are the `CallTrees` product). Only functions.rs can make a `CodeGraph` (it
    /// has no public constructor and no `Default`), so no step can replace it.
    pub(super) code: functions::CodeGraph,
    /// The image as it is built: its sections (`output.rs`).
    pub(super) out: output::Output,
}

impl<'a> Merger<'a> {
    /// The merge state over what the spine made, with `code` to be completed by the
    /// functions step and no section yet.
    pub(super) fn new(
        (inputs, parsed, opts, diag): (
            &'a [Input],
            &'a [Parsed],
            &'a MergeOptions,
            &'a Diagnostics,
        ),
        res: &'a resolve::Resolution<'a>,
        code: functions::CodeGraph,
    ) -> Merger<'a> {
        Merger {
            inputs,
            parsed,
            opts,
            diag,
            res,
            code,
            out: Default::default(),
        }
    }

    /// The input cubins, in command-line order.
    pub(super) fn inputs(&self) -> &'a [Input] {
        self.inputs
    }

    /// What the steps read of each input more than once, parsed once.
    pub(super) fn parsed(&self) -> &'a [Parsed] {
        self.parsed
    }

    pub(super) fn opts(&self) -> &'a MergeOptions {
        self.opts
    }

    /// Where the steps' messages go, in the spine's order.
    pub(super) fn diag(&self) -> &'a Diagnostics {
        self.diag
    }

    /// Each global name's definition (the resolve step's product).
    pub(super) fn res(&self) -> &'a resolve::Resolution<'a> {
        self.res
    }
}
