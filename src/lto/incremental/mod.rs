//! Incremental device LTO (`--incremental`, `NVLINKRS_INCREMENTAL=1`): a `-dlto` link as
//! partitions, each one libNVVM program over every module with the kernels of one unit as
//! its roots, assembled by ptxas and merged; after an edit only the partitions whose
//! reachable code changed are compiled again. `bitstream` and `summary` read each
//! module's functions and what they refer to without LLVM.

pub mod bitstream;
pub mod summary;
