//! The wheel (`scripts/wheel.sh`, which `scripts/test.sh` runs before the tests and names
//! in `NVLINKRS_WHEEL`) installed as a user installs it: into a fresh virtual environment
//! by pip, its dependencies taken only from NVIDIA's wheels (`NVLINKRS_WHEELHOUSE`,
//! downloaded by `scripts/setup.sh`: pip `--no-index`, as from PyPI), then used with no
//! `CUDA_HOME` and a `PATH` of the venv and the system only: the installed `nvlinkrs`
//! links the example's `-dlto` and `-rdc` objects to the bytes of the venv's own nvlink
//! on the same command lines, and the installed drop-in (`python -m nvlinkrs preload`)
//! links LTO IR in process to the bytes of NVIDIA's libnvJitLink from the same venv.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn env_path(var: &str) -> PathBuf {
    PathBuf::from(std::env::var_os(var).unwrap_or_else(|| panic!("{var}: run scripts/test.sh")))
}

/// `program` with a user's bare environment: the venv's and the system's programs on
/// `PATH`, `HOME` in `home`, nothing of the toolkit the tests use.
fn user(program: impl AsRef<std::ffi::OsStr>, venv: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    let path = format!("{}:/usr/bin:/bin", venv.join("bin").display());
    cmd.env_clear().env("PATH", path).env("HOME", home);
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_wheel_installs_and_links_with_nvidia_wheels_alone() {
    let wheel = env_path("NVLINKRS_WHEEL");
    let wheelhouse = env_path("NVLINKRS_WHEELHOUSE");
    let fixtures = env_path("NVLINKRS_FIXTURES");
    let tmp = tempfile::tempdir().unwrap();
    let (venv, home, out) = (tmp.path().join("venv"), tmp.path().join("home"), tmp.path());
    std::fs::create_dir(&home).unwrap();
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    ok(&made, "python3 -m venv");
    let python = venv.join("bin/python");
    let pip = run(user(&python, &venv, &home)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(["--no-index", "--find-links"])
        .arg(&wheelhouse)
        .arg(&wheel));
    ok(&pip, "pip install the wheel");
    // what the wheel put where: nvlinkrs on the venv's PATH, the drop-in in the package
    let program = ok(
        &run(user(&python, &venv, &home).args(["-m", "nvlinkrs", "program"])),
        "python -m nvlinkrs program",
    );
    assert_eq!(PathBuf::from(&program), venv.join("bin/nvlinkrs"));
    // a stray dist-info in the current directory (first on sys.path under `python -m`)
    // names no other program
    let stray = out.join("stray");
    let info = stray.join("nvlinkrs-9.9.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("METADATA"),
        "Metadata-Version: 2.1\nName: nvlinkrs\nVersion: 9.9\n",
    )
    .unwrap();
    std::fs::write(info.join("RECORD"), "/bin/true,,\n").unwrap();
    let named = ok(
        &run(user(&python, &venv, &home)
            .current_dir(&stray)
            .args(["-m", "nvlinkrs", "program"])),
        "python -m nvlinkrs program, from a folder with a stray dist-info",
    );
    assert_eq!(named, program);
    let drop_in = ok(
        &run(user(&python, &venv, &home).args(["-m", "nvlinkrs", "preload"])),
        "python -m nvlinkrs preload",
    );
    assert!(
        drop_in.ends_with("site-packages/nvlinkrs/lib/libnvJitLink.so.13"),
        "{drop_in}"
    );
    assert!(Path::new(&drop_in).starts_with(&venv), "{drop_in}");
    let version = ok(
        &run(user(&program, &venv, &home).arg("--version")),
        "--version",
    );
    // (site-packages/nvlinkrs/lib/libnvJitLink.so.13 -> site-packages/nvidia/cu13)
    let site = Path::new(&drop_in).ancestors().nth(3).unwrap();
    let cu13 = site.join("nvidia/cu13");
    assert!(
        version.contains(&format!(
            "toolkit:  {} (found via the CUDA wheels",
            cu13.display()
        )),
        "{version}"
    );
    // stripped: no symbol table left in the program or the drop-in
    for f in [&program, &drop_in] {
        let sections = Command::new("readelf")
            .args(["-S", "-W", f.as_str()])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&sections.stdout).contains(" .symtab "),
            "{f} is not stripped"
        );
    }
    let fx = |n: &str| fixtures.join(n).to_string_lossy().into_owned();
    // an LTO link as a user of the wheels runs it, nothing made by hand: libNVVM found in
    // the wheels (nvlink needs -nvvmpath and a nvvm/lib64/libnvvm.so the wheels lack)
    let dlto = [fx("saxpy_dlto.o"), fx("scale_dlto.o"), fx("main_dlto.o")];
    let plain = out.join("plain.cubin");
    let linked = run(user(&program, &venv, &home)
        .args(["-arch=sm_90", "-dlto"])
        .args(&dlto)
        .arg(format!("-L{}", cu13.join("lib").display()))
        .args(["-lcudadevrt", "-o"])
        .arg(&plain));
    ok(&linked, "an LTO link without -nvvmpath");
    // the installed nvlinkrs against the venv's nvlink, the same command lines (nvlink's
    // libNVVM link made as scripts/setup.sh makes it for the toolkit)
    std::fs::create_dir_all(cu13.join("nvvm/lib64")).unwrap();
    std::os::unix::fs::symlink("../../lib/libnvvm.so.4", cu13.join("nvvm/lib64/libnvvm.so"))
        .unwrap();
    let common = [
        "-arch=sm_90".to_string(),
        format!("-L{}", cu13.join("lib").display()),
        format!("-nvvmpath={}", cu13.join("nvvm").display()),
    ];
    let links: [(&str, Vec<String>); 2] = [
        (
            "dlto",
            [vec!["-dlto".into()], common.to_vec(), dlto.to_vec()].concat(),
        ),
        (
            "rdc",
            [common.to_vec(), vec![fx("saxpy_dc.o"), fx("scale_dc.o")]].concat(),
        ),
    ];
    for (name, args) in links {
        let ours = out.join(format!("{name}.nvlinkrs.cubin"));
        let theirs = out.join(format!("{name}.nvlink.cubin"));
        let mut a = args.clone();
        a.extend(["-lcudadevrt".into(), "-o".into()]);
        ok(&run(user(&program, &venv, &home).args(&a).arg(&ours)), name);
        ok(
            &run(user(cu13.join("bin/nvlink"), &venv, &home)
                .args(&a)
                .arg(&theirs)),
            name,
        );
        assert!(
            std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap(),
            "{name}: the installed nvlinkrs' image is not the venv's nvlink's"
        );
    }
    // (nvlinkrs fills in the -nvvmpath nvlink must be given, and its note records it as
    // nvlink's does: the same image)
    assert!(
        std::fs::read(&plain).unwrap() == std::fs::read(out.join("dlto.nvlink.cubin")).unwrap(),
        "the link without -nvvmpath is not nvlink's with it"
    );
    // the installed drop-in, in process, against NVIDIA's library of the same venv; a
    // toolkit under ~/.local (another pip install --user) is not the venv's: its ptxas
    // must not run for the drop-in
    let python_dir = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .unwrap()
        .file_name();
    let local = home
        .join(".local/lib")
        .join(python_dir)
        .join("site-packages/nvidia/cu13/bin");
    std::fs::create_dir_all(&local).unwrap();
    let marker = out.join("local-ptxas-ran");
    std::fs::write(
        local.join("ptxas"),
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        local.join("ptxas"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wheel/jitlink_once.py");
    let log = out.join("jitlink.log");
    let inputs = [fx("saxpy.ltoir"), fx("scale.ltoir")];
    for (lib, image) in [
        (drop_in.clone(), "dropin.cubin"),
        (
            cu13.join("lib/libnvJitLink.so.13").display().to_string(),
            "nvidia.cubin",
        ),
    ] {
        let linked = run(user(&python, &venv, &home)
            .arg(&script)
            .arg(&lib)
            .arg(out.join(image))
            .arg("sm_90")
            .args(&inputs)
            .env("NVLINKRS_JITLINK_LOG", &log));
        ok(&linked, image);
    }
    assert!(
        std::fs::read(out.join("dropin.cubin")).unwrap()
            == std::fs::read(out.join("nvidia.cubin")).unwrap(),
        "the installed drop-in's image is not NVIDIA's libnvJitLink's"
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("nvlinkrs: linked"),
        "the drop-in handed the link over: {said}"
    );
    assert!(
        !marker.exists(),
        "the drop-in ran ~/.local's ptxas, not its venv's"
    );
}
