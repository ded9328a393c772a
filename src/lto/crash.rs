//! A last word when libNVVM crashes in this process. libNVVM runs in the linker's own
//! process outside a split compile (as in nvlink, which then dies without a message);
//! while a [`Guard`] is held, a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT)
//! that is libNVVM's writes nvlink-style fatal lines naming the modules being compiled and
//! ends the process with exit status 1. A signal is libNVVM's when it arrives on a thread
//! that holds a guard (the one calling into libNVVM), or when the faulting instruction lies
//! in libNVVM's code (one of its own threads). Any other signal goes on to the handler
//! there was before (the host's own, as a JVM's that recovers from the faults it makes on
//! purpose; Rust's stack-overflow report; or the default action): the drop-in
//! libnvJitLink lives in processes that are not ours.

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

// Process-wide, not in the link's context: the signal handler reads them, and it has
// nothing else to read.
/// Guards held now (several links may compile at once in the daemon or the drop-in).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The message of the latest guard: a leaked, NUL-free byte string (for a signal in
/// libNVVM's code on a thread of its own).
static MESSAGE: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
/// The threads that hold a guard (their kernel thread ids; 0 for a free slot), each with
/// its guard's message. A thread that finds no free slot is covered by its code range only.
static THREADS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static MESSAGES: [AtomicPtr<Vec<u8>>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
const SLOTS: usize = 64;
/// libNVVM's executable segments (start, end), as many as were loaded (several toolkits
/// in a daemon's life).
static CODE: [(AtomicUsize, AtomicUsize); 8] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; 8];
/// The handlers there were before ours, by position in `SIGNALS`.
static PREVIOUS: [AtomicPtr<libc::sigaction>; 5] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 5];

/// While alive, a crash of libNVVM prints `message` as a fatal line of the program's name.
pub struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// A guard for the calling thread; `code` is an address in the library it calls (its
    /// entry point), whose executable segments are then covered on every thread.
    pub fn new(message: &str, code: Option<usize>) -> Guard {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(install);
        if let Some(addr) = code {
            cover_object_of(addr);
        }
        let tool = std::env::args_os()
            .next()
            .and_then(|a| {
                let p = std::path::PathBuf::from(a);
                p.file_name().map(|f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "nvlinkrs".into());
        let line = format!("{tool} fatal   : {message}");
        let text = Box::into_raw(Box::new(line.into_bytes()));
        // (a message a guard replaces is left allocated: a handler may be reading it)
        MESSAGE.store(text, Ordering::SeqCst);
        let tid = this_thread();
        let slot = (0..SLOTS).find(|&i| {
            THREADS[i]
                .compare_exchange(0, tid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        if let Some(i) = slot {
            MESSAGES[i].store(text, Ordering::SeqCst);
        }
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        Guard { slot }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            THREADS[i].store(0, Ordering::SeqCst);
        }
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The calling thread's kernel id (async-signal-safe).
fn this_thread() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Records the executable segments of the loaded object that holds `addr`.
fn cover_object_of(addr: usize) {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader hands a valid info for each object, `data` is our address.
        unsafe {
            let addr = *(data as *const usize);
            let info = &*info;
            let segs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            let base = info.dlpi_addr as usize;
            let range = |p: &libc::Elf64_Phdr| {
                let s = base + p.p_vaddr as usize;
                (s, s + p.p_memsz as usize)
            };
            let load = |p: &&libc::Elf64_Phdr| p.p_type == libc::PT_LOAD;
            if !segs
                .iter()
                .filter(load)
                .any(|p| (range(p).0..range(p).1).contains(&addr))
            {
                return 0;
            }
            for p in segs
                .iter()
                .filter(load)
                .filter(|p| p.p_flags & libc::PF_X != 0)
            {
                let (s, e) = range(p);
                let known = CODE
                    .iter()
                    .any(|(a, b)| a.load(Ordering::SeqCst) == s && b.load(Ordering::SeqCst) == e);
                if let Some((a, b)) = CODE
                    .iter()
                    .find(|(a, _)| !known && a.load(Ordering::SeqCst) == 0)
                {
                    b.store(e, Ordering::SeqCst);
                    a.store(s, Ordering::SeqCst);
                }
            }
            1
        }
    }
    let mut data = addr;
    // SAFETY: the callback reads only what the loader passes and our `data`.
    unsafe {
        libc::dl_iterate_phdr(Some(each), (&mut data as *mut usize).cast());
    }
}

/// The instruction a signal interrupted (0 where this target's context is not known).
fn faulting_pc(ctx: *mut libc::c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    // SAFETY: the kernel passes the interrupted context as a ucontext_t.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    unsafe {
        (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
    // SAFETY: as above.
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    unsafe {
        (*(ctx as *const libc::ucontext_t)).uc_mcontext.pc as usize
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    0
}

/// The message for a signal on this thread at `pc`, if it is libNVVM's.
fn message_for(pc: usize) -> *mut Vec<u8> {
    if ACTIVE.load(Ordering::SeqCst) == 0 {
        return std::ptr::null_mut();
    }
    let tid = this_thread();
    if let Some(i) = (0..SLOTS).find(|&i| THREADS[i].load(Ordering::SeqCst) == tid) {
        return MESSAGES[i].load(Ordering::SeqCst);
    }
    let in_code = CODE.iter().any(|(a, b)| {
        let (s, e) = (a.load(Ordering::SeqCst), b.load(Ordering::SeqCst));
        s != 0 && (s..e).contains(&pc)
    });
    if in_code {
        MESSAGE.load(Ordering::SeqCst)
    } else {
        std::ptr::null_mut()
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
    // only async-signal-safe calls from here on: gettid, write, _exit, sigaction
    let message = message_for(faulting_pc(ctx));
    if !message.is_null() {
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
