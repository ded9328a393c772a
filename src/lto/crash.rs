//! A last word when libNVVM crashes in this process. libNVVM runs in the linker's own
//! process outside a split compile (as in nvlink, which then dies without a message);
//! while a [`Guard`] is held, a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT)
//! writes nvlink-style fatal lines naming the modules being compiled and ends the process
//! with exit status 1. Outside a guard the signal goes on to the handler there was before
//! (Rust's stack-overflow report, or the default action).

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

// Process-wide, not in the link's context: the signal handler reads them, and it has
// nothing else to read.
/// Guards held now (several links may compile at once in the daemon).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The message of the latest guard: a leaked, NUL-free byte string and its length.
static MESSAGE: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
/// The handlers there were before ours, by position in `SIGNALS`.
static PREVIOUS: [AtomicPtr<libc::sigaction>; 5] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 5];

/// While alive, a crash prints `message` as a fatal line of the program's name.
pub struct Guard {
    _private: (),
}

impl Guard {
    pub fn new(message: &str) -> Guard {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(install);
        let tool = std::env::args_os()
            .next()
            .and_then(|a| {
                let p = std::path::PathBuf::from(a);
                p.file_name().map(|f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "nvlinkrs".into());
        let line = format!("{tool} fatal   : {message}");
        let text = Box::into_raw(Box::new(line.into_bytes()));
        // (the message a guard replaces is left allocated: the handler may be reading it)
        MESSAGE.store(text, Ordering::SeqCst);
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        Guard { _private: () }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn install() {
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: plain sigaction calls with zeroed, then filled, structures; the old
        // action is kept for the handler to hand on to.
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = handler as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            let old = Box::into_raw(Box::new(std::mem::zeroed::<libc::sigaction>()));
            if libc::sigaction(sig, &new, old) == 0 {
                PREVIOUS[i].store(old, Ordering::SeqCst);
            }
        }
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // only async-signal-safe calls from here on: write, _exit, sigaction
    let message = MESSAGE.load(Ordering::SeqCst);
    if ACTIVE.load(Ordering::SeqCst) > 0 && !message.is_null() {
        // SAFETY: the message is never freed once stored.
        let text = unsafe { &*message };
        let what: &[u8] = match sig {
            libc::SIGSEGV => b" (SIGSEGV)\n",
            libc::SIGBUS => b" (SIGBUS)\n",
            libc::SIGILL => b" (SIGILL)\n",
            libc::SIGFPE => b" (SIGFPE)\n",
            _ => b" (SIGABRT)\n",
        };
        // SAFETY: writes of valid buffers to stderr, then the process ends.
        unsafe {
            libc::write(2, text.as_ptr().cast(), text.len());
            libc::write(2, what.as_ptr().cast(), what.len());
            libc::_exit(1);
        }
    }
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    let old = PREVIOUS[i].load(Ordering::SeqCst);
    // SAFETY: `old` was filled by sigaction; a handler there is called as the kernel
    // would have, else the default action is restored for the signal to take effect
    // when the faulting instruction runs again (or abort raises it again).
    unsafe {
        if !old.is_null() {
            let h = (*old).sa_sigaction;
            if h != libc::SIG_DFL && h != libc::SIG_IGN {
                if (*old).sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                    f(sig);
                }
                return;
            }
        }
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
}
