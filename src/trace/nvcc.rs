//! The output of the nvcc that runs this link. nvcc hands its device link a temporary
//! output (`/tmp/tmpxft_<nvcc's pid, 8 hex digits>_<n>-<k>_<stem>.sm_XX.cubin`, `<stem>`
//! starting with the name of nvcc's own `-o` without its extension) and deletes it; a
//! build tool (ninja, and ninjatracing after it) knows nvcc's output only. When the
//! output is named so and that process is an nvcc whose `-o` has that stem, the trace
//! goes beside nvcc's output instead (read from `/proc/<pid>`: its command line and its
//! working directory).

use std::path::{Path, PathBuf};

/// nvcc's pid and output, for a link whose output is one of nvcc's temporary files.
pub fn output_of_parent(output: &Path) -> Option<(u32, PathBuf)> {
    // SAFETY: getppid(2) cannot fail.
    output_of(output, unsafe { libc::getppid() } as u32)
}

/// As [`output_of_parent`], the parent being `parent`: the nvcc that runs a link is its
/// parent, so a name alone never sends the trace beside another process's output.
fn output_of(output: &Path, parent: u32) -> Option<(u32, PathBuf)> {
    let (pid, stem) = temporary_name(output.file_name()?.to_str()?)?;
    if pid != parent {
        return None;
    }
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let cmdline = std::fs::read(proc.join("cmdline")).ok()?;
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let out = nvcc_output(&args)?;
    let out_stem = Path::new(&out).file_stem()?.to_str()?.to_string();
    if !stem.starts_with(&out_stem) {
        return None;
    }
    let cwd = std::fs::read_link(proc.join("cwd")).ok()?;
    Some((pid, cwd.join(out)))
}

/// The pid and the rest of the name after its counters, for a name nvcc gives its
/// temporary files (`tmpxft_0000376c_00000000-19_app_dlink.sm_90.cubin`).
fn temporary_name(name: &str) -> Option<(u32, &str)> {
    let rest = name.strip_prefix("tmpxft_")?;
    let (pid, rest) = rest.split_at_checked(8)?;
    let pid = u32::from_str_radix(pid, 16).ok().filter(|&p| p > 0)?;
    let rest = rest.strip_prefix('_')?;
    let (_, stem) = rest.split_once('_')?;
    Some((pid, stem))
}

/// nvcc's output (`-o F`, `-o=F`, `--output-file F`, `--output-file=F`; the last one),
/// when `args` is an nvcc command line.
fn nvcc_output(args: &[String]) -> Option<String> {
    let program = Path::new(args.first()?).file_name()?.to_str()?;
    if program != "nvcc" {
        return None;
    }
    let mut found = None;
    let mut words = args[1..].iter();
    while let Some(a) = words.next() {
        match a.as_str() {
            "-o" | "--output-file" => found = words.next().cloned(),
            _ => {
                if let Some(v) = a
                    .strip_prefix("-o=")
                    .or_else(|| a.strip_prefix("--output-file="))
                {
                    found = Some(v.to_string());
                }
            }
        }
    }
    found.filter(|f| !f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvcc_temporary_names_and_outputs() {
        assert_eq!(
            temporary_name("tmpxft_0000376c_00000000-19_app_dlink.sm_90.cubin"),
            Some((0x376c, "app_dlink.sm_90.cubin"))
        );
        assert_eq!(
            temporary_name("tmpxft_00000fb6_00000000-5_cmake_device_link.sm_90.cubin"),
            Some((0xfb6, "cmake_device_link.sm_90.cubin"))
        );
        assert_eq!(temporary_name("app.cubin"), None);
        assert_eq!(temporary_name("tmpxft_zz_00000000-5_a.cubin"), None);
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            nvcc_output(&words(
                "/usr/local/cuda/bin/nvcc -dlink a.o -o CMakeFiles/x.dir/cmake_device_link.o"
            )),
            Some("CMakeFiles/x.dir/cmake_device_link.o".into())
        );
        assert_eq!(
            nvcc_output(&words("nvcc -o=a --output-file=b x.cu")),
            Some("b".into())
        );
        assert_eq!(nvcc_output(&words("g++ -o app x.o")), None);
        assert_eq!(nvcc_output(&words("nvcc -dlink x.o")), None);
    }

    #[test]
    fn the_output_of_a_running_nvcc_is_found_through_proc() {
        // a process whose command line is nvcc's: a shell copied as `nvcc`, waiting
        let dir = tempfile::tempdir().unwrap();
        let nvcc = dir.path().join("nvcc");
        std::fs::copy("/bin/sh", &nvcc).unwrap();
        let mut child = std::process::Command::new(&nvcc)
            .args(["-c", "sleep 30; true", "-dlink", "a.o", "-o", "sub/dlink.o"])
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let pid = child.id();
        let tmp =
            std::env::temp_dir().join(format!("tmpxft_{pid:08x}_00000000-5_dlink.sm_90.cubin"));
        let mut found = None;
        for _ in 0..200 {
            found = output_of(&tmp, pid);
            if found.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let other =
            std::env::temp_dir().join(format!("tmpxft_{pid:08x}_00000000-5_other.sm_90.cubin"));
        let not_its_own = output_of(&other, pid);
        // (nvcc's name in a link that is not its child: nothing)
        let not_the_parent = output_of_parent(&tmp);
        child.kill().unwrap();
        child.wait().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(found, Some((pid, real.join("sub/dlink.o"))));
        assert_eq!(not_its_own, None);
        assert_eq!(not_the_parent, None);
    }
}
