//! The job pool of a link and its progress line. Jobs (ptxas runs, the LLVM engine's split
//! parts) run on at most N workers, the largest first, and their results come back in job
//! order whatever order they finish in. Under GNU make's jobserver every job beyond the one
//! this process may always run holds a token from make. On a terminal, a phase that lasts
//! longer than a moment shows one status line on stderr (the phase, and jobs done of N);
//! elsewhere (ninja, a log) plain lines with the elapsed time, when asked for.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a phase runs before the status line appears.
const QUIET_FOR: Duration = Duration::from_millis(1500);

/// A link's job pool: make's jobserver, when the process was handed one, and the most
/// jobs each pool phase ran at once (for `--report-json`). Each link has its own
/// ([`crate::context::LinkContext`]); the jobserver client is the process's, made once
/// by [`connect_jobserver`] and cloned into each.
#[derive(Default)]
pub struct Jobs {
    jobserver: Option<jobserver::Client>,
    /// The most jobs each phase ran at once, in the order the phases first ran.
    peaks: Mutex<Vec<(String, usize)>>,
}

/// Connects to the jobserver GNU make names in `MAKEFLAGS`, if there is one. Called first
/// thing in `main`, so that the descriptors make passed down are taken before this process
/// opens any file of its own.
pub fn connect_jobserver() -> Option<jobserver::Client> {
    // SAFETY: runs at the start of `main`, before any file is opened, so descriptors
    // named in MAKEFLAGS can only be the ones make passed; they are also checked to be
    // pipes or a FIFO (`check_pipe`) before they are used.
    let found = unsafe { jobserver::Client::from_env_ext(true) };
    found.client.ok()
}

impl Jobs {
    /// A pool taking its tokens from `jobserver` (make's), or from nobody.
    pub fn new(jobserver: Option<jobserver::Client>) -> Jobs {
        Jobs {
            jobserver,
            peaks: Mutex::default(),
        }
    }

    /// Whether make's jobserver was found (for `--report-json`).
    pub fn has_jobserver(&self) -> bool {
        self.jobserver.is_some()
    }

    /// make's jobserver, for an engine whose helper process runs a pool of its own.
    pub fn jobserver(&self) -> Option<&jobserver::Client> {
        self.jobserver.as_ref()
    }

    /// The most jobs each pool phase of this link ran at once (for `--report-json`).
    pub fn peaks(&self) -> Vec<(String, usize)> {
        self.peaks.lock().unwrap().clone()
    }

    fn record_peak(&self, phase: &str, peak: usize) {
        let mut peaks = self.peaks.lock().unwrap();
        match peaks.iter_mut().find(|(p, _)| p == phase) {
            Some((_, n)) => *n = (*n).max(peak),
            None => peaks.push((phase.to_string(), peak)),
        }
    }

    /// Runs `f` on every item on at most `threads` workers (0: one per core), starting
    /// the items with the largest `size` first; the results are in item order. `phase`
    /// names the work on the status line.
    pub fn run_all<T: Sync, R: Send>(
        &self,
        phase: &str,
        items: &[T],
        threads: usize,
        size: impl Fn(&T) -> usize,
        f: impl Fn(&T) -> R + Sync,
    ) -> Vec<R> {
        let (results, peak) = run_with(self.jobserver.as_ref(), phase, items, threads, size, f);
        self.record_peak(phase, peak);
        results
    }
}

/// When progress goes out as plain lines (`--progress`, `NVLINKRS_PROGRESS=1`): the
/// start of the process, which their times count from. A display setting of the process
/// (as stderr is the process's), not state of a link, so it stays process-wide.
static PLAIN_PROGRESS: OnceLock<Instant> = OnceLock::new();

/// Turns plain progress lines on (for stderr that is not a terminal: ninja's, a log).
pub fn plain_progress(started: Instant) {
    let _ = PLAIN_PROGRESS.set(started);
}

/// No status line in this process: set by a library caller whose stderr is its host
/// program's (the drop-in libnvJitLink). A display setting of the process, as above.
static NO_STATUS_LINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the status line off for the rest of the process.
pub fn no_status_line() {
    NO_STATUS_LINE.store(true, Ordering::Relaxed);
}

/// A plain progress line for a stage starting (`took` none) or done.
pub fn progress_line(stage: &str, took: Option<Duration>) {
    let Some(start) = PLAIN_PROGRESS.get() else {
        return;
    };
    let at = start.elapsed().as_secs_f64();
    let line = match took {
        None => format!("nvlinkrs: [{at:7.2} s] {stage}\n"),
        Some(d) => format!(
            "nvlinkrs: [{at:7.2} s] {stage} done in {:.2} s\n",
            d.as_secs_f64()
        ),
    };
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Hands make's jobserver to a helper process, whose pools then take their tokens from
/// it too; the helper inherits MAKEFLAGS with the environment.
pub fn pass_jobserver(jobserver: Option<&jobserver::Client>, cmd: &mut std::process::Command) {
    if let Some(js) = jobserver {
        js.configure(cmd);
    }
}

/// The number of workers for `threads` (0: one per core) and `jobs` jobs, at most
/// `NVLINKRS_JOBS` when that is set (a `-j` for the whole link, helper processes included).
pub fn workers(threads: usize, jobs: usize) -> usize {
    let t = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let cap = std::env::var("NVLINKRS_JOBS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(usize::MAX);
    t.min(cap).clamp(1, jobs.max(1))
}

/// The pool itself: the results in item order, and the most jobs that ran at once.
fn run_with<T: Sync, R: Send>(
    tokens: Option<&jobserver::Client>,
    phase: &str,
    items: &[T],
    threads: usize,
    size: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> R + Sync,
) -> (Vec<R>, usize) {
    let n = items.len();
    let mut order: Vec<usize> = (0..n).collect();
    // stable: equal sizes keep item order, so the start order is fixed too
    order.sort_by_key(|&i| std::cmp::Reverse(size(&items[i])));
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let (running, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let status = Status::new(phase, n);
    let w = workers(threads, n);
    // make's tokens come through a helper thread (a blocking read of make's pipe cannot be
    // given up otherwise); a worker asks for one before it takes a job, so waiting never
    // holds a job back from the first worker, and it stops waiting once the jobs are done
    let (sender, tokens_in) = mpsc::channel::<jobserver::Acquired>();
    let helper = tokens.filter(|_| w > 1).map(|js| {
        js.clone().into_helper_thread(move |t| {
            if let Ok(t) = t {
                let _ = sender.send(t); // when nobody waits any more, the token goes back
            }
        })
    });
    let tokens_in = Mutex::new(tokens_in);
    // (each worker thread records on a lane of the link's trace of its own)
    let trace = crate::trace::current();
    let worker = |own_token: bool| {
        let _lane = crate::trace::lane(&trace);
        loop {
            // The first worker runs on the token every make child has; the others take
            // one from make per job (when make shares its jobserver), and give it back.
            let mut token = None;
            if !own_token {
                match &helper {
                    None => {}
                    Some(Err(_)) => return, // no helper thread: the first worker goes on
                    Some(Ok(h)) => {
                        let _wait = crate::trace::span("jobserver", "waiting for a make token");
                        h.request_token();
                        loop {
                            if next.load(Ordering::SeqCst) >= n {
                                return;
                            }
                            let got = tokens_in
                                .lock()
                                .unwrap()
                                .recv_timeout(Duration::from_millis(10));
                            match got {
                                Ok(t) => break token = Some(t),
                                Err(mpsc::RecvTimeoutError::Timeout) => {}
                                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                            }
                        }
                    }
                }
            }
            let k = next.fetch_add(1, Ordering::SeqCst);
            let Some(&i) = order.get(k) else { break };
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let r = f(&items[i]);
            running.fetch_sub(1, Ordering::SeqCst);
            drop(token);
            results.lock().unwrap()[i] = Some(r);
            status.done();
        }
    };
    if w == 1 {
        worker(true);
    } else {
        std::thread::scope(|s| {
            for _ in 1..w {
                s.spawn(|| worker(false));
            }
            worker(true);
        });
    }
    status.finish();
    let results = results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect();
    (results, peak.into_inner())
}

/// Runs `f`, showing `phase` on the status line if it takes long.
pub fn phase<R>(phase: &str, f: impl FnOnce() -> R) -> R {
    let status = Status::new(phase, 0);
    let (stop, stopped) = mpsc::channel::<()>();
    let r = std::thread::scope(|s| {
        if status.enabled {
            let status = &status;
            s.spawn(move || {
                // wakes when the phase ends (the sender is dropped) or when it is time to show it
                if stopped.recv_timeout(QUIET_FOR) == Err(mpsc::RecvTimeoutError::Timeout) {
                    status.show();
                }
            });
        }
        let r = f();
        drop(stop);
        r
    });
    status.finish();
    r
}

/// One line on stderr, rewritten in place: `nvlinkrs: <phase> <done>/<total>`.
struct Status {
    enabled: bool,
    phase: String,
    total: usize,
    done: AtomicUsize,
    started: Instant,
    shown: Mutex<bool>,
}

impl Status {
    fn new(phase: &str, total: usize) -> Status {
        Status {
            enabled: !NO_STATUS_LINE.load(Ordering::Relaxed) && std::io::stderr().is_terminal(),
            phase: phase.to_string(),
            total,
            done: AtomicUsize::new(0),
            started: Instant::now(),
            shown: Mutex::new(false),
        }
    }

    fn done(&self) {
        let d = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if self.enabled && self.started.elapsed() >= QUIET_FOR {
            self.show();
        } else if self.total > 1 {
            progress_line(&format!("{} {d}/{}", self.phase, self.total), None);
        }
    }

    fn show(&self) {
        let mut shown = self.shown.lock().unwrap();
        let line = if self.total > 0 {
            let d = self.done.load(Ordering::Relaxed);
            format!("nvlinkrs: {} {d}/{}", self.phase, self.total)
        } else {
            format!("nvlinkrs: {}...", self.phase)
        };
        let _ = write!(std::io::stderr(), "\r\x1b[K{line}");
        *shown = true;
    }

    /// Clears the line if it was shown.
    fn finish(&self) {
        if *self.shown.lock().unwrap() {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_item_order() {
        // the items finish in reverse order of start (the largest first sleeps longest)
        let items: Vec<u64> = (0..12).collect();
        for threads in [0, 1, 3, 16] {
            let got = Jobs::default().run_all(
                "test",
                &items,
                threads,
                |&i| i as usize,
                |&i| {
                    std::thread::sleep(Duration::from_millis(i));
                    i * 10
                },
            );
            assert_eq!(
                got,
                (0..12).map(|i| i * 10).collect::<Vec<_>>(),
                "{threads}"
            );
        }
    }

    /// The most jobs that ran at once, as the pool records it for the report.
    fn peak(tokens: Option<&jobserver::Client>, threads: usize, jobs: usize) -> usize {
        let pool = Jobs::new(tokens.cloned());
        let items = vec![0u8; jobs];
        pool.run_all(
            "test",
            &items,
            threads,
            |_| 1,
            |_| std::thread::sleep(Duration::from_millis(5)),
        );
        pool.peaks()
            .into_iter()
            .find(|(p, _)| *p == "test")
            .unwrap()
            .1
    }

    #[test]
    fn at_most_the_asked_number_of_jobs_run_at_once() {
        assert_eq!(peak(None, 3, 20), 3);
        assert_eq!(workers(0, 1), 1);
        assert_eq!(workers(8, 2), 2);
    }

    #[test]
    fn a_jobserver_with_one_free_token_allows_two_jobs() {
        // make's rule: one job on the token every child has, one more per token taken
        let make = jobserver::Client::new(1).unwrap();
        assert_eq!(peak(Some(&make), 4, 12), 2);
        // every token went back
        assert_eq!(make.available().unwrap(), 1);
        // no free token (every other job slot busy): one job at a time, and the waiting
        // workers give up when the jobs are done
        let busy = jobserver::Client::new(0).unwrap();
        assert_eq!(peak(Some(&busy), 4, 6), 1);
    }

    /// The trace recorder on the pool's workers: each job on a lane of its own (the
    /// caller's thread the first), nested in its phase, lanes given back between pools.
    mod traced {
        use std::collections::BTreeSet;
        use std::time::Duration;

        use serde_json::Value;

        use crate::trace::testing::{inside, spans};
        use crate::trace::{Trace, arg, install, on, span, span_with, to_json};

        #[test]
        fn workers_record_on_lanes_of_their_own_nested_in_the_phase() {
            let t = Trace::new(Duration::ZERO);
            {
                let _i = install(t.clone());
                let pool = super::super::Jobs::default();
                for phase in ["one", "two"] {
                    let _p = span("phase", phase);
                    pool.run_all(
                        phase,
                        &[1u64, 2, 3, 4, 5, 6],
                        3,
                        |_| 1,
                        |&i| {
                            let _j = span_with("job", || format!("job {i}"));
                            arg("i", || i.into());
                            std::thread::sleep(Duration::from_millis(3));
                        },
                    );
                }
            }
            assert!(
                !on(),
                "the trace stays on the link's thread only while installed"
            );
            let doc = to_json(&t, 7, "p", Value::Null);
            let ev = doc["traceEvents"].as_array().unwrap().clone();
            for e in &ev {
                for k in ["ph", "ts", "dur", "pid", "tid"] {
                    assert!(!e[k].is_null(), "{k} missing in {e}");
                }
            }
            for phase in ["one", "two"] {
                let p = spans(&ev, phase)[0];
                assert_eq!(p["tid"], 0);
                let jobs: Vec<&Value> = ev
                    .iter()
                    .filter(|e| e["cat"] == "job" && inside(e, p))
                    .collect();
                assert_eq!(jobs.len(), 6, "{doc:#}");
                let lanes: BTreeSet<u64> =
                    jobs.iter().map(|j| j["tid"].as_u64().unwrap()).collect();
                // the caller's thread is the first worker; the others took lanes 1 and 2, and
                // gave them back for the second pool
                assert_eq!(lanes, BTreeSet::from([0, 1, 2]), "{doc:#}");
            }
            assert_eq!(spans(&ev, "job 3")[0]["args"]["i"], 3);
            // one name per lane used
            let names: Vec<&Value> = ev.iter().filter(|e| e["name"] == "thread_name").collect();
            assert_eq!(names.len(), 3);
            // spans on one lane never overlap but by nesting
            for a in ev.iter().filter(|e| e["ph"] == "X") {
                for b in ev.iter().filter(|e| e["ph"] == "X" && e["tid"] == a["tid"]) {
                    let (a0, b0) = (a["ts"].as_u64().unwrap(), b["ts"].as_u64().unwrap());
                    let (a1, b1) = (
                        a0 + a["dur"].as_u64().unwrap(),
                        b0 + b["dur"].as_u64().unwrap(),
                    );
                    assert!(
                        a1 <= b0 || b1 <= a0 || inside(a, b) || inside(b, a),
                        "{a} {b}"
                    );
                }
            }
        }
    }
}
