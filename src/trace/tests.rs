//! The recorder: nothing without a trace, lanes per worker (taken back and reused),
//! spans nested as calls are, the granularity, and Chrome's event fields.

use super::testing::spans;
use super::*;

fn events(doc: &Value) -> Vec<Value> {
    doc["traceEvents"].as_array().unwrap().clone()
}

#[test]
fn without_a_trace_nothing_is_recorded_or_made() {
    assert!(!on() && current().is_none());
    let _s = span_with("x", || panic!("a name made without a trace"));
    arg("k", || panic!("an argument made without a trace"));
    event("x", "e", Instant::now(), Instant::now(), || {
        panic!("arguments made without a trace")
    });
    let _l = lane(&None);
    assert!(!on());
}

#[test]
fn spans_shorter_than_the_granularity_are_left_out() {
    let t = Trace::new(Duration::from_millis(5));
    {
        let _i = install(t.clone());
        let _long = span("x", "long");
        std::thread::sleep(Duration::from_millis(6));
        drop(span("x", "short"));
    }
    let ev = events(&to_json(&t, 1, "p", Value::Null));
    assert_eq!(spans(&ev, "long").len(), 1);
    assert!(spans(&ev, "short").is_empty());
}

#[test]
fn a_trace_can_start_at_an_earlier_time() {
    let now = micros_since_epoch(SystemTime::now());
    let t = Trace::starting_at(Duration::ZERO, now - 20_000);
    {
        let _i = install(t.clone());
        let at = t.instant_of(now - 10_000);
        event("daemon", "queued", at, Instant::now(), Vec::new);
    }
    let ev = events(&to_json(&t, 1, "p", Value::Null));
    let q = spans(&ev, "queued")[0];
    let ts = q["ts"].as_u64().unwrap();
    assert!((9_000..=11_000).contains(&ts), "{q}");
    assert!(q["dur"].as_u64().unwrap() >= 9_000, "{q}");
    // a time beyond belief (the future, or a day ago) starts the trace now
    let t = Trace::starting_at(Duration::ZERO, now + 10_000_000);
    assert!(origin_unix_us(&t) >= now);
}
