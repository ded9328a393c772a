//! Kernels whose code nvlink's finalizer rewrites at sm_100 and later, which nvlinkrs takes
//! from libnvJitLink's (`src/finalize`): where two kernels of a unit have frames alike but
//! for their advances, each function's frame is the finalized one of its own name. Found by
//! the second attacker review; the sources are compiled here with the pinned nvcc.

use super::identical_all as identical;
use super::review::compiled;

/// A `__cluster_dims__` kernel waiting on the cluster barrier and a plain kernel updating
/// memory, in one unit: nvlink's image has the finalizer's barrier (`MEMBAR.ALL.GPU`, no
/// `@!PT LDS` padding, 0x180 bytes where ptxas wrote 0x200) and its frame. Was: ptxas's
/// code kept (two finalized frames matched the cluster kernel's, so none was taken), at
/// every target from sm_100 to sm_121a; also with cooperative groups' `cluster.sync()` and
/// in the final link of an `-r` output.
#[test]
fn a_cluster_kernel_beside_a_plain_one_gets_the_finalized_code() {
    let barrier = "__global__ void __cluster_dims__(2,1,1) cchild() { asm volatile(\
                   \"barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;\"\
                   ::: \"memory\"); }\n__global__ void child(float *p) { p[threadIdx.x] += 1; }\n";
    let groups = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
                  __global__ void __cluster_dims__(2,1,1) cchild(int *p) { cg::this_cluster().sync(); \
                  p[0] = 1; }\n__global__ void child(float *p) { p[threadIdx.x] += 1; }\n";
    let dir = tempfile::tempdir().unwrap();
    let mut links = Vec::new();
    for sm in ["sm_100a", "sm_103a", "sm_110a", "sm_120a", "sm_121a"] {
        let o = compiled(dir.path(), "barrier", barrier, sm, &[]);
        links.push((
            format!("barrier {sm}"),
            vec![format!("-arch={sm}"), o.display().to_string()],
        ));
    }
    let o = compiled(dir.path(), "groups", groups, "sm_100a", &[]);
    links.push((
        "cluster.sync() sm_100a".into(),
        vec!["-arch=sm_100a".into(), o.display().to_string()],
    ));
    // (the final link of nvlink's `-r` output of the same unit)
    let o = compiled(dir.path(), "barrier", barrier, "sm_100", &[]);
    let part = dir.path().join("part.o");
    let r = std::process::Command::new(super::cuda().join("bin/nvlink"))
        .args(["-arch=sm_100", "-r", "-o"])
        .arg(&part)
        .arg(&o)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    links.push((
        "final link of -r sm_100".into(),
        vec!["-arch=sm_100".into(), part.display().to_string()],
    ));
    let failures = identical(&links);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
