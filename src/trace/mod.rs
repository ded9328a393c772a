//! The time trace of a link (`--time-trace[=FILE]`, `NVLINKRS_TIME_TRACE=1`): what ran
//! when, on which worker, as Chrome trace events that Perfetto, chrome://tracing and
//! ninjatracing read ([`file`] writes them and chooses where).
//!
//! A link that traces makes one [`Trace`] and installs it on its own thread (lane 0,
//! "link"). Work recorded on a thread goes to that thread's lane: a pool's worker, or a
//! rayon task the link hands work to, takes a free lane for as long as it works
//! ([`lane`]), so that a lane is one worker and its spans nest as its calls do. What is
//! recorded: [`span`]s (a phase, a merge step, a ptxas job, a cache lookup), timed from
//! creation to drop, with arguments added while they are open ([`arg`]); and [`event`]s
//! whose times are known afterwards (the merge's laps, the daemon's queueing). Spans
//! shorter than the granularity are left out (as lld's `--time-trace-granularity`).
//!
//! When no trace is installed every call is one thread-local read and nothing else: the
//! names and arguments are closures that never run.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

pub mod file;
pub mod nvcc;

/// One link's trace: its origin and the events recorded so far.
pub struct Trace {
    /// Time zero of the trace (the link's start, or its daemon client's request).
    origin: Instant,
    /// The same instant on the wall clock, in microseconds since the epoch (to place
    /// another process's times, and to join two traces written to one file).
    origin_unix_us: u64,
    granularity: Duration,
    events: Mutex<Vec<Event>>,
    lanes: Mutex<Lanes>,
}

/// A complete event: a span of time on one lane.
struct Event {
    name: Cow<'static, str>,
    cat: &'static str,
    start: Duration,
    end: Duration,
    lane: u32,
    args: Vec<(&'static str, Value)>,
}

/// Which worker lanes are taken (lane 0 is the link's own thread).
#[derive(Default)]
struct Lanes {
    free: BTreeSet<u32>,
    next: u32,
    used: BTreeMap<u32, &'static str>,
}

/// What a thread records into: its trace, its lane, and the arguments of its open spans.
struct Here {
    trace: Arc<Trace>,
    lane: u32,
    open: Vec<Vec<(&'static str, Value)>>,
}

thread_local! {
    static HERE: RefCell<Option<Here>> = const { RefCell::new(None) };
}

fn micros_since_epoch(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Trace {
    /// A trace starting now, keeping spans of at least `granularity`.
    pub fn new(granularity: Duration) -> Arc<Trace> {
        Trace::with_origin(
            granularity,
            Instant::now(),
            micros_since_epoch(SystemTime::now()),
        )
    }

    fn with_origin(granularity: Duration, origin: Instant, origin_unix_us: u64) -> Arc<Trace> {
        Arc::new(Trace {
            origin,
            origin_unix_us,
            granularity,
            events: Mutex::default(),
            lanes: Mutex::new(Lanes {
                next: 1,
                ..Default::default()
            }),
        })
    }

    /// A trace whose time zero is the earlier wall-clock time `unix_us` (a daemon
    /// client's request; one more than an hour ago, or later than now, is not believed:
    /// the trace then starts now).
    pub fn starting_at(granularity: Duration, unix_us: u64) -> Arc<Trace> {
        let (now, now_us) = (Instant::now(), micros_since_epoch(SystemTime::now()));
        let before = now_us.checked_sub(unix_us).filter(|&b| b <= 3_600_000_000);
        match before.and_then(|b| Some((now.checked_sub(Duration::from_micros(b))?, b))) {
            Some((origin, b)) => Trace::with_origin(granularity, origin, now_us - b),
            None => Trace::with_origin(granularity, now, now_us),
        }
    }

    /// The instant of the wall-clock time `unix_us` (clamped to the trace's start).
    pub fn instant_of(&self, unix_us: u64) -> Instant {
        let after = Duration::from_micros(unix_us.saturating_sub(self.origin_unix_us));
        self.origin + after
    }

    fn push(&self, e: Event) {
        if e.end - e.start >= self.granularity {
            self.events
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(e);
        }
    }

    fn since(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.origin)
    }

    fn take_lane(&self) -> u32 {
        let mut l = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let lane = match l.free.pop_first() {
            Some(lane) => lane,
            None => {
                l.next += 1;
                l.next - 1
            }
        };
        l.used.entry(lane).or_insert("worker");
        lane
    }

    fn give_lane(&self, lane: u32) {
        let mut l = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        l.free.insert(lane);
    }
}

/// The trace installed on this thread until dropped (the one before comes back).
pub struct Installed {
    before: Option<Here>,
    _not_send: PhantomData<*const ()>,
}

/// Installs `trace` on this thread, on lane 0 (the link's own).
pub fn install(trace: Arc<Trace>) -> Installed {
    trace
        .lanes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .used
        .insert(0, "link");
    let here = Here {
        trace,
        lane: 0,
        open: Vec::new(),
    };
    Installed {
        before: HERE.with(|h| h.borrow_mut().replace(here)),
        _not_send: PhantomData,
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let before = self.before.take();
        HERE.with(|h| *h.borrow_mut() = before);
    }
}

/// Whether this thread records (the tests' question).
#[cfg(test)]
pub(crate) fn on() -> bool {
    HERE.with(|h| h.borrow().is_some())
}

/// The trace this thread records into, to hand to the workers it starts ([`lane`]).
pub fn current() -> Option<Arc<Trace>> {
    HERE.with(|h| h.borrow().as_ref().map(|h| Arc::clone(&h.trace)))
}

/// A worker's lane for as long as it is kept (see [`lane`]).
pub struct Lane {
    taken: Option<(Arc<Trace>, u32)>,
    _not_send: PhantomData<*const ()>,
}

/// Gives this thread a lane of `trace` (what the thread that handed it work had from
/// [`current`]) until the result is dropped; nothing when there is no trace, or when the
/// thread records already (a pool's first worker is the caller's own thread).
pub fn lane(trace: &Option<Arc<Trace>>) -> Lane {
    let Some(t) = trace else {
        return Lane {
            taken: None,
            _not_send: PhantomData,
        };
    };
    let taken = HERE.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_some() {
            return None;
        }
        let lane = t.take_lane();
        *h = Some(Here {
            trace: Arc::clone(t),
            lane,
            open: Vec::new(),
        });
        Some((Arc::clone(t), lane))
    });
    Lane {
        taken,
        _not_send: PhantomData,
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        if let Some((t, lane)) = self.taken.take() {
            HERE.with(|h| *h.borrow_mut() = None);
            t.give_lane(lane);
        }
    }
}

/// An open span, recorded when dropped.
pub struct Span {
    open: Option<(Instant, Cow<'static, str>, &'static str)>,
    _not_send: PhantomData<*const ()>,
}

fn open(cat: &'static str, name: impl FnOnce() -> Cow<'static, str>) -> Span {
    let open = HERE.with(|h| {
        let mut h = h.borrow_mut();
        let here = h.as_mut()?;
        here.open.push(Vec::new());
        Some((Instant::now(), name(), cat))
    });
    Span {
        open,
        _not_send: PhantomData,
    }
}

/// A span named `name` in category `cat`, open until dropped.
pub fn span(cat: &'static str, name: &'static str) -> Span {
    open(cat, || Cow::Borrowed(name))
}

/// A span whose name is made only when the thread records.
pub fn span_with(cat: &'static str, name: impl FnOnce() -> String) -> Span {
    open(cat, || Cow::Owned(name()))
}

impl Drop for Span {
    fn drop(&mut self) {
        let Some((start, name, cat)) = self.open.take() else {
            return;
        };
        let end = Instant::now();
        HERE.with(|h| {
            let mut h = h.borrow_mut();
            let Some(here) = h.as_mut() else { return };
            let args = here.open.pop().unwrap_or_default();
            let t = &here.trace;
            t.push(Event {
                name,
                cat,
                start: t.since(start),
                end: t.since(end),
                lane: here.lane,
                args,
            });
        });
    }
}

/// Adds an argument to this thread's innermost open span (`value` is made only when the
/// thread records).
pub fn arg(key: &'static str, value: impl FnOnce() -> Value) {
    HERE.with(|h| {
        if let Some(here) = h.borrow_mut().as_mut()
            && let Some(top) = here.open.last_mut()
        {
            top.push((key, value()));
        }
    });
}

/// Records a span whose times are known (`start` to `end`) on this thread's lane.
pub fn event(
    cat: &'static str,
    name: &'static str,
    start: Instant,
    end: Instant,
    args: impl FnOnce() -> Vec<(&'static str, Value)>,
) {
    HERE.with(|h| {
        let h = h.borrow();
        let Some(here) = h.as_ref() else { return };
        let t = &here.trace;
        t.push(Event {
            name: Cow::Borrowed(name),
            cat,
            start: t.since(start),
            end: t.since(end.max(start)),
            lane: here.lane,
            args: args(),
        });
    });
}

/// The trace's events as Chrome's trace format (the JSON object form): a name for the
/// process and each lane used, then every span as a complete event (`ph` "X"), times in
/// whole microseconds since the trace's start (a span's start and end rounded down, so
/// that a span inside another stays inside it), sorted by start, the longer first.
/// `other` goes into `otherData`.
pub fn to_json(trace: &Trace, pid: u32, process: &str, other: Value) -> Value {
    let us = |d: Duration| d.as_micros() as u64;
    let mut events = std::mem::take(&mut *trace.events.lock().unwrap_or_else(|e| e.into_inner()));
    events.sort_by_key(|e| (e.start, std::cmp::Reverse(e.end), e.lane));
    let meta = |name: &str, tid: u32, value: Value| {
        serde_json::json!({"name": name, "ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": tid,
            "cat": "__metadata", "args": {"name": value}})
    };
    let mut out = vec![meta("process_name", 0, process.into())];
    let used = trace
        .lanes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .used
        .clone();
    for (lane, kind) in used {
        let name = match lane {
            0 => kind.to_string(),
            n => format!("{kind} {n}"),
        };
        out.push(meta("thread_name", lane, name.into()));
    }
    for e in events {
        let (ts, end) = (us(e.start), us(e.end));
        let mut ev = serde_json::json!({
            "name": e.name, "cat": e.cat, "ph": "X", "ts": ts, "dur": end - ts,
            "pid": pid, "tid": e.lane,
        });
        if !e.args.is_empty() {
            let args: serde_json::Map<String, Value> = e
                .args
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            ev["args"] = Value::Object(args);
        }
        out.push(ev);
    }
    serde_json::json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": other,
    })
}

/// The wall-clock start of the trace, in microseconds since the epoch.
pub fn origin_unix_us(trace: &Trace) -> u64 {
    trace.origin_unix_us
}

#[cfg(test)]
mod tests;

/// What the trace's tests, and the job pool's, read of a trace's events.
#[cfg(test)]
pub(crate) mod testing {
    use serde_json::Value;

    pub(crate) fn spans<'a>(doc: &'a [Value], name: &str) -> Vec<&'a Value> {
        doc.iter().filter(|e| e["name"] == name).collect()
    }

    pub(crate) fn inside(child: &Value, parent: &Value) -> bool {
        let (c0, p0) = (
            child["ts"].as_u64().unwrap(),
            parent["ts"].as_u64().unwrap(),
        );
        let c1 = c0 + child["dur"].as_u64().unwrap();
        let p1 = p0 + parent["dur"].as_u64().unwrap();
        p0 <= c0 && c1 <= p1
    }
}
