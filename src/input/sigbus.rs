//! A mapped input another process cuts short while the link reads it (`cp` over an object
//! that a parallel build rewrites): the pages past the file's new end are a SIGBUS. The
//! nvlinkrs command catches it ([`install`]) and stops as nvlink stops on a file it cannot
//! read, naming the file, exit 1, its output untouched; any other SIGBUS is left to the
//! system. The mappings are noted as they are made ([`watch`]), in a table the handler
//! reads without a lock or an allocation. (Attacker review of 2026-12-01: 140 of 200 links
//! racing such a writer died on the signal without a word. Reading every input into
//! memory instead cost 27 ms of a 0.1 s link of 52 MB of cubins.)

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Mappings noted; later ones are not (their SIGBUS is then the system's).
const SLOTS: usize = 4096;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    name: AtomicPtr<u8>,
    name_len: AtomicUsize,
}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        name: AtomicPtr::new(std::ptr::null_mut()),
        name_len: AtomicUsize::new(0),
    }
}; SLOTS];
static USED: AtomicUsize = AtomicUsize::new(0);

/// A place in the table for one mapping, while there is one (past [`SLOTS`] inputs are
/// read into memory instead: one cut short then gives fewer bytes, which its reader
/// refuses, never a SIGBUS; attacker review of 2026-12-01, 5,000 inputs).
pub fn slot() -> Option<usize> {
    let i = USED.fetch_add(1, Ordering::AcqRel);
    if i < SLOTS {
        Some(i)
    } else {
        USED.store(SLOTS, Ordering::Release);
        None
    }
}

/// Notes in `slot` ([`slot`]) that `data` maps the input shown as `shown`.
pub fn watch(slot: usize, data: &[u8], shown: &str) {
    let Some(slot) = TABLE.get(slot) else {
        return;
    };
    // (kept for the process's life: the handler may read it at any time)
    let name: &'static [u8] = Box::leak(shown.as_bytes().to_vec().into_boxed_slice());
    slot.name_len.store(name.len(), Ordering::Release);
    slot.name.store(name.as_ptr().cast_mut(), Ordering::Release);
    let start = data.as_ptr() as usize;
    slot.end.store(start + data.len(), Ordering::Release);
    slot.start.store(start, Ordering::Release);
}

/// The name of the noted mapping holding `addr`, the latest first.
fn name_at(addr: usize) -> Option<&'static [u8]> {
    let used = USED.load(Ordering::Acquire).min(SLOTS);
    TABLE[..used].iter().rev().find_map(|s| {
        let (start, end) = (
            s.start.load(Ordering::Acquire),
            s.end.load(Ordering::Acquire),
        );
        let name = s.name.load(Ordering::Acquire);
        (start <= addr && addr < end && !name.is_null()).then(|| {
            // SAFETY: a leaked buffer of this length, stored before the range
            unsafe { std::slice::from_raw_parts(name, s.name_len.load(Ordering::Acquire)) }
        })
    })
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler
    let addr = unsafe { (*info).si_addr() } as usize;
    let Some(name) = name_at(addr) else {
        // not an input's page: the system's SIGBUS, as if no handler were set
        // SAFETY: async-signal-safe calls only
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    };
    let write = |b: &[u8]| {
        // SAFETY: write(2) is async-signal-safe; a short write loses part of the message
        unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
    };
    write(b"nvlinkrs fatal   : Could not read file '");
    write(name);
    write(b"'\n  it was cut short while the link read it (another process rewrote it)\n");
    // SAFETY: _exit is async-signal-safe; the output's temporary file is left to be
    // reclaimed as a killed link's is
    unsafe { libc::_exit(1) }
}

/// Catches the SIGBUS of a noted mapping for the rest of the process (the nvlinkrs
/// command, the daemon's link processes; not the drop-in library, whose inputs are its
/// own private copies).
pub fn install() {
    // SAFETY: a handler that only reads atomics and calls async-signal-safe functions
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    /// A mapped input cut short, then read: the handler's message naming it, exit 1. Run
    /// in a child (this test binary again, the test alone), since the handler ends the
    /// process.
    #[test]
    fn a_mapped_input_cut_short_is_an_error_naming_it() {
        const CHILD: &str = "NVLINKRS_TEST_SIGBUS_INPUT";
        if let Some(path) = std::env::var_os(CHILD) {
            super::install();
            let o = crate::input::Opened::default();
            let path = std::path::PathBuf::from(path);
            let b = o.open(&path, "cut.o").unwrap();
            assert!(!b.is_in_memory(), "mapped");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
            let sum: u64 = b.iter().map(|&x| x as u64).sum();
            eprintln!("read {sum} without a signal");
            std::process::exit(3);
        }
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("cut.o");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "input::sigbus::tests::a_mapped_input_cut_short_is_an_error_naming_it",
                "--nocapture",
            ])
            .env(CHILD, &path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("nvlinkrs fatal   : Could not read file 'cut.o'")
                && err.contains("cut short"),
            "{err}"
        );
    }
}
