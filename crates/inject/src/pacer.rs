use std::fmt;
use std::time::{Duration, Instant};

use crate::{InjectError, SendStats};
use sluice_units::{self as rate, Rate};

/// When each frame is due, counted from the first frame.
///
/// Every due time is computed from the start and the frames before it (not
/// from the previous due time), so rounding never accumulates: frame `k` at
/// `r` packets per second is due at exactly `floor(k / r)` ns, however long
/// the run. At a bit rate, a frame is due when the frames before it have
/// had their time on the wire (bytes * 8 / r); the first is due at once.
#[derive(Clone, Debug)]
pub struct Pacer {
    rate: Option<Rate>,
    /// Packets or bits (as the rate counts) of the frames already scheduled.
    scheduled: u128,
}

impl Pacer {
    /// Without a rate, every frame is due at once.
    pub fn new(rate: Option<Rate>) -> Pacer {
        Pacer { rate, scheduled: 0 }
    }

    /// When the next frame, of `len` bytes, is due.
    pub fn next_due(&mut self, len: usize) -> Duration {
        let (per_second, units) = match self.rate {
            None => return Duration::ZERO,
            Some(Rate::PacketsPerSec(r)) => (r, 1),
            Some(Rate::BitsPerSec(r)) => (r, len as u128 * 8),
        };
        let due = self.scheduled * 1_000_000_000 / u128::from(per_second);
        self.scheduled += units;
        Duration::from_nanos(u64::try_from(due).unwrap_or(u64::MAX))
    }
}

/// A source of time for the [`PacedSender`]; tests give it one that only
/// moves when told.
pub trait Clock {
    /// Time since the clock's own origin.
    fn now(&self) -> Duration;
    /// Returns at `t` (as `now` counts) or later.
    fn sleep_until(&mut self, t: Duration);
}

/// Monotonic wall time. Waits sleep until shortly before they end and then
/// spin, since a sleep overshoots by tens of microseconds (about 15 µs with
/// a 1 ns timer slack, 70 µs with Linux's default 50 µs), more than the gap
/// between frames at a few tens of thousands of packets per second.
pub struct SystemClock {
    origin: Instant,
}

/// How long before a due time a wait stops sleeping and spins: above the
/// usual sleep overshoot with a 1 ns timer slack (measured: median 15 µs,
/// 99th percentile 50 µs on a loaded 2-core VM).
const SPIN: Duration = Duration::from_micros(60);

impl SystemClock {
    /// Also sets the calling thread's timer slack to 1 ns (it is the thread
    /// that will wait), so that its sleeps end when asked.
    pub fn new() -> SystemClock {
        crate::socket::precise_timers();
        SystemClock { origin: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep_until(&mut self, t: Duration) {
        let now = self.now();
        if t > now + SPIN {
            std::thread::sleep(t - now - SPIN);
        }
        // Not yield_now: a yield gives the rest of the time slice to any
        // other runnable thread, and the frames then leave in bursts (on a
        // 2-core VM with both cores busy, 5 kpps came out with a median gap
        // of 1.6 µs instead of 200). The scheduler still preempts a spinning
        // thread for a woken one, such as the capture under test.
        while self.now() < t {
            std::hint::spin_loop();
        }
    }
}

/// Where a [`PacedSender`] sends its batches: an [`crate::Injector`], or in
/// tests something that records when each batch went.
pub trait Transmit {
    /// Sends every frame (waiting out back-pressure), or fails.
    fn send_batch(&mut self, frames: &[&[u8]]) -> Result<(), InjectError>;
    fn stats(&self) -> SendStats;
}

/// When to stop sending, whichever comes first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub packets: Option<u64>,
    /// Wall time from the first frame; frames due at or after it are not
    /// sent.
    pub duration: Option<Duration>,
}

/// Frames sent in one `sendmmsg` call at most: enough to make the system
/// call's cost small beside the frames' (about 1 % at 64), few enough that
/// a batch leaves within microseconds of its first frame's due time.
pub(crate) const BATCH: usize = 64;

/// Sends frames on a schedule: each frame waits until the [`Pacer`] says it
/// is due; frames that are due together go out in one batch.
///
/// A sender that falls behind (a stall, or a rate above what the link
/// takes) sends the overdue frames back to back until it is on schedule
/// again, so the average rate over a run is the one asked for.
pub struct PacedSender<T, C> {
    tx: T,
    clock: C,
    pacer: Pacer,
    limits: Limits,
    /// When the first frame came, on `clock`.
    start: Option<Duration>,
    accepted: u64,
    batch: Vec<u8>,
    /// Where each frame of `batch` ends.
    ends: Vec<usize>,
    done: bool,
}

/// What a [`PacedSender`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub stats: SendStats,
    /// From the first frame's due time to the return of the last batch.
    pub elapsed: Duration,
    pub rate: Option<Rate>,
}

impl<T: Transmit, C: Clock> PacedSender<T, C> {
    pub fn new(tx: T, rate: Option<Rate>, limits: Limits, clock: C) -> Self {
        PacedSender {
            tx,
            clock,
            pacer: Pacer::new(rate),
            limits,
            start: None,
            accepted: 0,
            batch: Vec::with_capacity(BATCH * 1518),
            ends: Vec::with_capacity(BATCH),
            done: false,
        }
    }

    /// Takes the next frame, sending it when it is due. Returns whether to
    /// go on: false once a limit is reached (the frame that reaches the
    /// packet limit is sent; one due after the duration is not), and for
    /// every frame after that.
    pub fn push(&mut self, frame: &[u8]) -> Result<bool, InjectError> {
        if self.done {
            return Ok(false);
        }
        let now = self.clock.now();
        let start = *self.start.get_or_insert(now);
        let due = self.pacer.next_due(frame.len());
        if let Some(limit) = self.limits.duration
            && (due >= limit || now - start >= limit)
        {
            self.done = true;
            self.flush()?;
            return Ok(false);
        }
        if start + due > now {
            // What is queued was due already: it leaves now, not after the wait.
            self.flush()?;
            self.clock.sleep_until(start + due);
        }
        self.batch.extend_from_slice(frame);
        self.ends.push(self.batch.len());
        self.accepted += 1;
        if self.ends.len() == BATCH {
            self.flush()?;
        }
        if self.limits.packets.is_some_and(|n| self.accepted >= n) {
            self.done = true;
            self.flush()?;
        }
        Ok(!self.done)
    }

    /// Sends what is still queued and tells what was sent.
    pub fn finish(mut self) -> Result<Report, InjectError> {
        self.flush()?;
        let elapsed = match self.start {
            Some(start) => self.clock.now() - start,
            None => Duration::ZERO,
        };
        Ok(Report {
            stats: self.tx.stats(),
            elapsed,
            rate: self.pacer.rate,
        })
    }

    fn flush(&mut self) -> Result<(), InjectError> {
        if self.ends.is_empty() {
            return Ok(());
        }
        let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
        let mut begin = 0;
        for (slot, &end) in frames.iter_mut().zip(&self.ends) {
            *slot = &self.batch[begin..end];
            begin = end;
        }
        let result = self.tx.send_batch(&frames[..self.ends.len()]);
        self.batch.clear();
        self.ends.clear();
        result
    }
}

impl fmt::Display for Report {
    /// `20000 frames, 14.1 MB in 1.000 s: 20.0 kpps, 113 Mbit/s (asked: 20.0
    /// kpps); 0 back-pressure retries, 0 errors, 0 dropped by the interface`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let seconds = self.elapsed.as_secs_f64();
        write!(
            f,
            "{} frames, {}B in {seconds:.3} s",
            s.frames,
            rate::si(s.bytes as f64)
        )?;
        // A rate over one frame, or no time, means nothing.
        if s.frames > 1 && seconds > 0.0 {
            write!(
                f,
                ": {}pps, {}bit/s",
                rate::si(s.frames as f64 / seconds),
                rate::si(s.bytes as f64 * 8.0 / seconds)
            )?;
        }
        match self.rate {
            Some(rate) => write!(f, " (asked: {rate})")?,
            None => write!(f, " (as fast as the interface takes them)")?,
        }
        write!(
            f,
            "; {} back-pressure retries, {} errors",
            s.backpressure_retries, s.errors
        )?;
        if let Some(dropped) = s.interface_tx_dropped {
            write!(f, ", {dropped} dropped by the interface")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// Time moves only when the sender waits, by exactly as much as it asks
    /// (plus `overshoot`, as a real sleep would), or when a test says so.
    #[derive(Clone, Default)]
    struct FakeClock {
        now: Rc<RefCell<Duration>>,
        overshoot: Duration,
    }

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            *self.now.borrow()
        }

        fn sleep_until(&mut self, t: Duration) {
            let mut now = self.now.borrow_mut();
            if t > *now {
                *now = t + self.overshoot;
            }
        }
    }

    /// Records each batch: when it was sent and the frames in it. Sending
    /// takes `cost` of clock time per frame.
    struct Recorder {
        clock: FakeClock,
        cost: Duration,
        batches: Vec<(Duration, Vec<Vec<u8>>)>,
    }

    impl Transmit for &mut Recorder {
        fn send_batch(&mut self, frames: &[&[u8]]) -> Result<(), InjectError> {
            let at = self.clock.now();
            self.batches.push((at, frames.iter().map(|f| f.to_vec()).collect()));
            *self.clock.now.borrow_mut() += self.cost * frames.len() as u32;
            Ok(())
        }

        fn stats(&self) -> SendStats {
            let frames = self.batches.iter().map(|(_, b)| b.len() as u64).sum();
            SendStats {
                frames,
                ..SendStats::default()
            }
        }
    }

    fn recorder(clock: &FakeClock) -> Recorder {
        Recorder {
            clock: clock.clone(),
            cost: Duration::ZERO,
            batches: Vec::new(),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Each frame of `sizes` in turn, until the sender says stop; returns
    /// how many it took.
    fn feed(sender: &mut PacedSender<&mut Recorder, FakeClock>, sizes: impl IntoIterator<Item = usize>) -> usize {
        let mut taken = 0;
        for (i, size) in sizes.into_iter().enumerate() {
            let frame = vec![i as u8; size];
            if !sender.push(&frame).unwrap() {
                return taken;
            }
            taken += 1;
        }
        taken
    }

    fn send_times(rec: &Recorder) -> Vec<Duration> {
        rec.batches
            .iter()
            .flat_map(|(t, b)| b.iter().map(move |_| *t))
            .collect()
    }

    #[test]
    fn packet_rate_due_times_are_exact_from_the_start() {
        let mut pacer = Pacer::new(Some(Rate::PacketsPerSec(3)));
        let due: Vec<_> = (0..4).map(|_| pacer.next_due(100)).collect();
        assert_eq!(
            due,
            [0, 333_333_333, 666_666_666, 1_000_000_000].map(Duration::from_nanos)
        );
        // A million frames later, still no drift: frame k is due at k/3 s.
        for _ in 4..3_000_000 {
            pacer.next_due(100);
        }
        assert_eq!(pacer.next_due(100), Duration::from_secs(1_000_000));
    }

    #[test]
    fn bit_rate_spaces_frames_by_their_own_length() {
        // 8 Mbit/s: one byte per µs.
        let mut pacer = Pacer::new(Some(Rate::BitsPerSec(8_000_000)));
        let due: Vec<_> = [100, 1500, 64, 64].map(|len| pacer.next_due(len)).to_vec();
        assert_eq!(due, [0, 100, 1600, 1664].map(Duration::from_micros));
        assert_eq!(Pacer::new(None).next_due(1500), Duration::ZERO);
    }

    #[test]
    fn frames_leave_at_their_due_times() {
        let clock = FakeClock::default();
        let mut rec = recorder(&clock);
        let mut sender = PacedSender::new(&mut rec, "1kpps".parse().ok(), Limits::default(), clock.clone());
        assert_eq!(feed(&mut sender, [64; 5]), 5);
        let report = sender.finish().unwrap();
        assert_eq!(send_times(&rec), (0..5).map(ms).collect::<Vec<_>>());
        assert_eq!(report.elapsed, ms(4));
        assert_eq!(report.stats.frames, 5);
        assert_eq!(rec.batches[2].1, [vec![2u8; 64]], "frames go out whole and in order");
    }

    #[test]
    fn a_late_wakeup_sends_what_came_due_in_one_batch_and_catches_up() {
        // Every wait ends 3.5 ms late: the frames due meanwhile go together,
        // and the schedule does not slip.
        let clock = FakeClock {
            overshoot: Duration::from_micros(3500),
            ..FakeClock::default()
        };
        let mut rec = recorder(&clock);
        let mut sender = PacedSender::new(&mut rec, "1kpps".parse().ok(), Limits::default(), clock.clone());
        feed(&mut sender, [64; 1000]);
        let report = sender.finish().unwrap();
        let sizes: Vec<_> = rec.batches.iter().map(|(_, b)| b.len()).collect();
        assert_eq!(sizes[..4], [1, 4, 4, 4]);
        assert_eq!(sizes.iter().sum::<usize>(), 1000);
        for (i, t) in send_times(&rec).into_iter().enumerate() {
            assert!(
                t >= ms(i as u64) && t <= ms(i as u64) + Duration::from_micros(3500),
                "frame {i} at {t:?}"
            );
        }
        assert!(report.elapsed <= ms(999) + Duration::from_micros(3500));
    }

    #[test]
    fn without_a_rate_frames_go_in_full_batches() {
        let clock = FakeClock::default();
        let mut rec = recorder(&clock);
        let mut sender = PacedSender::new(&mut rec, None, Limits::default(), clock.clone());
        feed(&mut sender, [64; 200]);
        sender.finish().unwrap();
        let sizes: Vec<_> = rec.batches.iter().map(|(_, b)| b.len()).collect();
        assert_eq!(sizes, [BATCH, BATCH, BATCH, 200 - 3 * BATCH]);
    }

    #[test]
    fn a_sender_that_cannot_keep_up_sends_back_to_back() {
        // Sending takes 2 ms a frame, at 1 kpps: every frame is overdue when
        // its turn comes, so none waits.
        let clock = FakeClock::default();
        let mut rec = recorder(&clock);
        rec.cost = ms(2);
        let mut sender = PacedSender::new(&mut rec, "1kpps".parse().ok(), Limits::default(), clock.clone());
        feed(&mut sender, [64; 10]);
        let report = sender.finish().unwrap();
        assert_eq!(report.stats.frames, 10);
        assert_eq!(report.elapsed, ms(2 * 10));
    }

    #[test]
    fn the_duration_stops_before_the_first_frame_due_at_or_after_it() {
        let clock = FakeClock::default();
        let mut rec = recorder(&clock);
        let limits = Limits {
            duration: Some(ms(10)),
            ..Limits::default()
        };
        let mut sender = PacedSender::new(&mut rec, "1kpps".parse().ok(), limits, clock.clone());
        assert_eq!(feed(&mut sender, [64; 100]), 10, "frames due at 0..=9 ms");
        assert!(!sender.push(&[0; 64]).unwrap(), "and nothing after");
        let report = sender.finish().unwrap();
        assert_eq!(report.stats.frames, 10);
        assert_eq!(send_times(&rec).last(), Some(&ms(9)));
    }

    #[test]
    fn the_duration_stops_an_unpaced_sender_by_wall_time() {
        let clock = FakeClock::default();
        let mut rec = recorder(&clock);
        rec.cost = ms(1);
        let limits = Limits {
            duration: Some(ms(100)),
            ..Limits::default()
        };
        let mut sender = PacedSender::new(&mut rec, None, limits, clock.clone());
        // Full batches of 64 take 64 ms each: the second ends past 100 ms,
        // and the frame pushed then is refused.
        assert_eq!(feed(&mut sender, [64; 1000]), 128);
        assert_eq!(sender.finish().unwrap().stats.frames, 128);
    }

    #[test]
    fn the_packet_limit_sends_exactly_that_many() {
        let clock = FakeClock::default();
        let mut rec = recorder(&clock);
        let limits = Limits {
            packets: Some(70),
            duration: Some(Duration::from_secs(3600)),
        };
        let mut sender = PacedSender::new(&mut rec, None, limits, clock.clone());
        assert_eq!(feed(&mut sender, [64; 1000]), 69, "the 70th is sent, and says stop");
        let report = sender.finish().unwrap();
        assert_eq!(report.stats.frames, 70);
        let sizes: Vec<_> = rec.batches.iter().map(|(_, b)| b.len()).collect();
        assert_eq!(
            sizes,
            [BATCH, 70 - BATCH],
            "the last batch leaves without waiting for more"
        );
    }
}
