//! How much CPU time a thread has used: where a run's time went, reported
//! per thread so that an operator sees which stage bounds the rate (the
//! reader, a worker, the record writer) and whether more workers would help.

/// CPU seconds, user and system, the calling thread has used since it began.
#[allow(unsafe_code)]
pub(crate) fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a plain system call writing into a timespec that lives for
    // the call. CLOCK_THREAD_CPUTIME_ID is supported by every Linux and BSD
    // this builds for; on failure `t` stays zero and the report says 0.
    let _ = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::thread_cpu_seconds;

    #[test]
    fn a_thread_is_charged_for_its_work_and_not_for_its_sleep() {
        use std::time::{Duration, Instant};
        let (spun_for, asleep) = std::thread::scope(|s| {
            let busy = s.spawn(|| {
                let start = Instant::now();
                let mut x = 0u64;
                while thread_cpu_seconds() < 0.03 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    assert!(start.elapsed() < Duration::from_secs(20), "the clock does not advance");
                }
                start.elapsed()
            });
            let asleep = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                thread_cpu_seconds()
            });
            (busy.join().unwrap(), asleep.join().unwrap())
        });
        // One thread cannot use more CPU time than passes.
        assert!(spun_for >= Duration::from_millis(25), "30 ms of CPU in {spun_for:?}");
        assert!(asleep < 0.01, "{asleep} s of CPU for a sleep");
    }
}
