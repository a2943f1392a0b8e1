//! What each thread of a run did with its time: the CPU it used and how long
//! it stood waiting for another thread, reported per thread so that an
//! operator sees which stage bounds the rate (reading, a worker, the
//! record writer) and whether more workers would help.

use std::sync::Barrier;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, unbounded};
use serde::Serialize;

/// Lets a run's threads start only once all of them exist. A thread can
/// fail to start (a limit on processes such as `ulimit -u` or a cgroup's
/// `pids.max`, no memory for its stack); the threads made before it must
/// then leave without having read any input or waited at a barrier for
/// the one that is missing, so that the run can end with an error rather
/// than a panic or a hang. Dropping the gate unopened sends them away.
pub(crate) struct StartGate {
    open: Sender<()>,
    wait: Receiver<()>,
}

impl StartGate {
    pub(crate) fn new() -> Self {
        let (open, wait) = unbounded();
        StartGate { open, wait }
    }

    /// `work`, run once the gate opens; `None` if it is abandoned.
    pub(crate) fn hold<T, W: FnOnce() -> T>(&self, work: W) -> impl FnOnce() -> Option<T> + use<T, W> {
        let wait = self.wait.clone();
        move || {
            wait.recv().ok()?;
            Some(work())
        }
    }

    /// Starts the `threads` held.
    pub(crate) fn open(self, threads: usize) {
        for _ in 0..threads {
            self.open.send(()).expect("the gate's own receiver is alive");
        }
    }
}

/// One thread's time, as `summary.json` (`threads`) reports it.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ThreadTime {
    /// CPU seconds, user and system.
    pub cpu_seconds: f64,
    /// Times the thread had to stop for another: a worker for packets
    /// while another read, for room in another's queue while it read, for
    /// room in the record writer's queue or, at the end, for the other
    /// workers; the record writer for records.
    pub waits: u64,
    /// Seconds those waits took in all.
    pub wait_seconds: f64,
    /// Seconds a worker spent reading the input for all workers, its waits
    /// while reading included; absent for threads that never read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reading_seconds: Option<f64>,
}

/// Counts a thread's waits as it goes; its time at the end.
#[derive(Default)]
pub(crate) struct Waits {
    waits: u64,
    wait_seconds: f64,
    reading_seconds: Option<f64>,
}

impl Waits {
    /// Runs `wait` (a blocking send or receive that a non-blocking try
    /// could not do) and counts it.
    pub(crate) fn time<T>(&mut self, wait: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let result = wait();
        self.waits += 1;
        self.wait_seconds += start.elapsed().as_secs_f64();
        result
    }

    /// Runs `read` (a turn at reading the input) and adds its time to the
    /// thread's reading.
    pub(crate) fn reading<T>(&mut self, read: impl FnOnce(&mut Self) -> T) -> T {
        let start = Instant::now();
        let result = read(self);
        *self.reading_seconds.get_or_insert(0.0) += start.elapsed().as_secs_f64();
        result
    }

    /// The thread's time so far, with `cpu_before` seconds of CPU (spent
    /// before the work this reports) left out.
    pub(crate) fn report(&self, cpu_before: f64) -> ThreadTime {
        ThreadTime {
            cpu_seconds: thread_cpu_seconds() - cpu_before,
            waits: self.waits,
            wait_seconds: self.wait_seconds,
            reading_seconds: self.reading_seconds,
        }
    }
}

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

/// A worker's place at the end-of-input barrier. A worker that panics
/// still takes it on the way out, so that the others are not left waiting
/// for it forever and the run can report the panic.
pub(crate) struct Arrival<'a> {
    barrier: &'a Barrier,
    arrived: bool,
}

impl<'a> Arrival<'a> {
    pub(crate) fn new(barrier: &'a Barrier) -> Self {
        Arrival {
            barrier,
            arrived: false,
        }
    }

    pub(crate) fn wait(&mut self) {
        if !self.arrived {
            self.arrived = true;
            self.barrier.wait();
        }
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Waits, thread_cpu_seconds};

    #[test]
    fn a_thread_is_charged_for_its_work_and_not_for_its_sleep() {
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

    #[test]
    fn waits_are_counted_with_their_time_and_not_charged_as_cpu() {
        let mut waits = Waits::default();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(40));
            tx.send(7).unwrap();
        });
        assert_eq!(waits.time(|| rx.recv().unwrap()), 7);
        waits.time(|| ());
        let report = waits.report(thread_cpu_seconds());
        assert_eq!(report.waits, 2);
        assert!(report.wait_seconds >= 0.035, "{report:?}");
        assert!(report.cpu_seconds.abs() < 0.01, "{report:?}");
        assert_eq!(report.reading_seconds, None);
    }

    #[test]
    fn reading_is_timed_with_the_waits_inside_it() {
        let mut waits = Waits::default();
        waits.reading(|waits| waits.time(|| std::thread::sleep(Duration::from_millis(20))));
        let report = waits.report(thread_cpu_seconds());
        assert_eq!(report.waits, 1);
        let reading = report.reading_seconds.expect("a turn at reading");
        assert!(
            reading >= report.wait_seconds && report.wait_seconds >= 0.015,
            "{report:?}"
        );
    }
}
