//! The option tags of cicc's NVVM container (seed 000): the name of each tag number,
//! and for the tags whose value is an offset into the container's blob region, how long
//! the data there is. Names only: what a tag does to compilation is cicc's business.

/// How the data a blob tag points at is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blob {
    /// Always this many bytes.
    Fixed(u32),
    /// A NUL-terminated string.
    Str,
    /// A count (`count_bytes` wide, little-endian) then `per` bytes per counted entry.
    Counted { count_bytes: u8, per: u32 },
    /// A fixed head of `head` bytes whose first 32-bit word counts `per`-byte entries
    /// that follow it.
    Headed { head: u32, per: u32 },
    /// A 4-byte length, then that many bytes.
    Prefixed,
}

/// The blob shape of `tag`, `None` for a scalar (or unknown) tag. Tags 401 and 402 are
/// blobs only when tag 301 selects them (1 and 4); the caller checks that.
pub fn blob(tag: u16) -> Option<Blob> {
    use Blob::*;
    Some(match tag {
        201 | 202 => Fixed(24),
        203 => Fixed(40),
        204 => Fixed(48),
        // the table's header; its entry count's place is not documented
        205 => Fixed(24),
        206 | 207 | 214 | 215 => Counted {
            count_bytes: 4,
            per: 4,
        },
        208 => Counted {
            count_bytes: 8,
            per: 8,
        },
        209 | 210 | 213 | 216 | 217 => Str,
        211 => Fixed(8),
        212 => Fixed(12),
        218 => Prefixed,
        351..=353 => Fixed(8),
        401 => Headed { head: 44, per: 16 },
        402 => Headed { head: 32, per: 12 },
        _ => return None,
    })
}

/// The tags the seed lists and their names, by tag.
const NAMES: &[(u16, &str)] = &[
    (1, "SmMajor"),
    (2, "SmMinor"),
    (3, "NumRegs"),
    (4, "NumBarriers"),
    (5, "SharedMemorySize"),
    (6, "VertexMode"),
    (7, "ReserveLocalAddressZero"),
    (8, "FastMath.IgnoreInf"),
    (9, "FastMath.IgnoreNaN"),
    (10, "FastMath.IgnoreSignedZero"),
    (11, "FastMath.ReorderFloat"),
    (12, "FastMath.ReorderHalf"),
    (13, "FastMath.Ftz"),
    (14, "FastMath.FastSqrt"),
    (15, "FastMath.Fmad"),
    (16, "FastMath.AllowRcpRsqToSqrt"),
    (17, "FastMath.CanReorderFloatDistribute"),
    (18, "FastMath.Reserved"),
    (19, "MaxRRegsAllowed"),
    (20, "SchedRegTarget"),
    (21, "UnrollControl"),
    (22, "AcceleratedArch"),
    (23, "StdELF"),
    (24, "MaxRRegsAllowed2"),
    (25, "SchedRegTarget2"),
    (26, "FastMath.ReassociateFloatAddOverMad"),
    (27, "ForceImmediateConstants"),
    (28, "HideFunctions"),
    (29, "UseDX10AddressInRange"),
    (30, "UnrollControl2"),
    (31, "FastMath.NoFloatMAD"),
    (32, "AcceleratedArch2"),
    (33, "FastMath.LaxFP16ApproximateDivision"),
    (34, "StdELF2"),
    (35, "ShaderCodegenSelMask"),
    (36, "OmegaPtxErrorHandling"),
    (37, "FDLInsertMode"),
    (38, "IsPIC"),
    (39, "NoSpillsConstraint"),
    (99, "CompressAlgoId"),
    (101, "HasTextureOps"),
    (102, "HasSurfaceOps"),
    (103, "HasAtomics"),
    (104, "HasVote"),
    (105, "MaxThreadsPerBlock"),
    (106, "PreferL1SizeFlag"),
    (107, "HasWarpShuffle"),
    (108, "HasFunnelShift"),
    (109, "CBankOfstLow"),
    (110, "CBankOfstHi"),
    (111, "CBankSize"),
    (112, "Bit0_68"),
    (113, "Bit1_68"),
    (114, "Bit2_68"),
    (115, "Bit3_68"),
    (116, "Bit4_68"),
    (117, "Bit5_68"),
    (118, "Bit7_68"),
    (119, "EnableCoalesce"),
    (120, "EnableVectorize"),
    (121, "CompactionMode"),
    (122, "StackFrameSize"),
    (123, "StackAlignment"),
    (124, "ParamSpaceSize"),
    (125, "ParamAlignment"),
    (126, "LocalMemSize"),
    (127, "SharedBankConfig"),
    (128, "MinGridSize"),
    (129, "MaxGridDimX"),
    (130, "SharedMemPerBlock"),
    (131, "WarpScheduleMode"),
    (132, "EnablePrefetch"),
    (133, "Bit4_70"),
    (134, "Bit5_70"),
    (135, "Bit6_70"),
    (136, "Bit7_70"),
    (137, "MaxDynShared"),
    (138, "HasLDG"),
    (139, "Bit1_71"),
    (140, "Bit2_71"),
    (141, "HasBarrierReduce"),
    (142, "CacheConfig"),
    (143, "Bit6_68"),
    (144, "Bit3_71"),
    (145, "Bit0_71"),
    (146, "ConstBankSize"),
    (147, "ShMemBankStride"),
    (148, "ScheduleMode2"),
    (149, "Bit6_71"),
    (150, "Bit7_71"),
    (151, "LocalMemAlignment"),
    (152, "EnableBarrierOpt"),
    (153, "Bit0_72"),
    (154, "Bit6_69"),
    (155, "Bit7_69"),
    (156, "Bit1_72"),
    (157, "HasDP4A"),
    (158, "Bit3_72"),
    (159, "ConstBankSize2"),
    (160, "MaxRegsPerThread"),
    (161, "ClusterSize"),
    (162, "Bit4_72"),
    (163, "Bit5_72"),
    (164, "Bit6_72"),
    (165, "Bit7_72"),
    (166, "MaxCTAPerSM"),
    (167, "TexIndirectLimit"),
    (168, "Bit0_432"),
    (169, "Bit1_432"),
    (170, "Bit2_432"),
    (171, "HasTMAOps"),
    (172, "Bit3_70"),
    (173, "HasTCGen05"),
    (201, "MemoryWindowCBank"),
    (202, "MemoryWindowLocal"),
    (203, "MemoryWindowShared"),
    (204, "MultiViewOptions"),
    (205, "TargetResourceTable"),
    (206, "PerKernelCBankOffsets"),
    (207, "PerKernelStackSizes"),
    (208, "PerKernelSMEMSizes"),
    (209, "TargetFuncName"),
    (210, "TargetEntryName"),
    (211, "PerKernelQWORD"),
    (212, "ExtraMemParams"),
    (213, "AuxString1"),
    (214, "PerKernelRegisters"),
    (215, "PerKernelBarriers"),
    (216, "AuxString2"),
    (217, "AuxString3"),
    (218, "AuxByteArray"),
    (301, "ExtOpt.Field344"),
    (302, "ExtOpt.Field348"),
    (303, "ExtOpt.Field352"),
    (304, "ExtOpt.Field356"),
    (305, "ExtOpt.Field360"),
    (306, "ExtOpt.Field400"),
    (307, "ExtOpt.Field364"),
    (308, "ExtOpt.Field368"),
    (309, "ExtOpt.Field372"),
    (351, "ExtOpt.QWord376"),
    (352, "ExtOpt.QWord384"),
    (353, "ExtOpt.QWord392"),
    (401, "TMADescriptor"),
    (402, "TCGen05Config"),
];

/// The name of `tag`, `None` when the seed does not list it (an unknown tag is skipped,
/// as cicc skips it: newer writers may add tags).
pub fn name(tag: u16) -> Option<&'static str> {
    NAMES
        .binary_search_by_key(&tag, |&(t, _)| t)
        .ok()
        .map(|i| NAMES[i].1)
}

/// The name of an IR level (header offset 0x0C).
pub fn ir_level(level: u16) -> Option<&'static str> {
    Some(match level {
        0 => "NVVM_IR_LEVEL_UNIFIED_AFTER_DCI",
        1 => "NVVM_IR_LEVEL_LTO",
        2 => "NVVM_IR_LEVEL_OPTIX",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_the_seed_ranges() {
        // 38 + 1 + 73 + 18 + 9 + 3 + 2 named tags (the seed counts 38 in 1..39 but
        // names all 39)
        let named = (0..=u16::MAX).filter(|&t| name(t).is_some()).count();
        assert_eq!(named, 39 + 1 + 73 + 18 + 9 + 3 + 2);
        assert_eq!(name(13), Some("FastMath.Ftz"));
        assert_eq!(name(303), Some("ExtOpt.Field352"));
        assert_eq!(name(0), None);
        assert_eq!(name(40), None);
        // (looked up by binary search: in tag order, each once)
        assert!(NAMES.windows(2).all(|w| w[0].0 < w[1].0));
        // every blob tag has a name
        assert!((0..=u16::MAX).all(|t| blob(t).is_none() || name(t).is_some()));
        assert_eq!(blob(209), Some(Blob::Str));
        assert_eq!(blob(19), None);
    }
}
