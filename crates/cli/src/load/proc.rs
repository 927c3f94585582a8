//! What `/proc` says of a process (Linux): its resident memory (`VmRSS` in `/proc/PID/status`) and its
//! CPU time (user + system in `/proc/PID/stat`), for the server under load and for the generator itself.
//! A sampler thread reads the server's memory once a second, so that a long run shows whether it stays
//! flat.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Resident memory of process `pid` in KiB, or None once it is gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time (user + system, all threads) of process `pid`, or of this process when None.
pub fn cpu_time(pid: Option<u32>) -> Option<Duration> {
    let path = pid.map_or_else(|| "/proc/self/stat".to_string(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the fields after its last ')' start at
    // field 3, so utime (field 14) and stime (field 15) are the 12th and 13th of them.
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let ticks: u64 = rest.next()?.parse::<u64>().ok()? + rest.next()?.parse::<u64>().ok()?;
    // USER_HZ, in which /proc counts, is 100 on every Linux architecture warpsearch builds for.
    Some(Duration::from_millis(ticks * 10))
}

/// CPU times of the server (when its pid is known) and of the generator at one instant.
#[derive(Clone, Copy)]
pub struct CpuMark {
    at: Instant,
    server: Option<Duration>,
    generator: Option<Duration>,
}

impl CpuMark {
    pub fn now(server_pid: Option<u32>) -> CpuMark {
        CpuMark {
            at: Instant::now(),
            server: server_pid.and_then(|p| cpu_time(Some(p))),
            generator: cpu_time(None),
        }
    }

    /// Cores busy on average from `self` to `later`: (server, generator).
    pub fn cores_until(&self, later: &CpuMark) -> (Option<f64>, Option<f64>) {
        let wall = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let cores =
            |a: Option<Duration>, b: Option<Duration>| Some(b?.saturating_sub(a?).as_secs_f64() / wall);
        (
            cores(self.server, later.server),
            cores(self.generator, later.generator),
        )
    }
}

/// Reads a process's resident memory every second until finished.
pub struct RssSampler {
    stop: Sender<()>,
    thread: JoinHandle<Vec<(f64, u64)>>,
}

impl RssSampler {
    /// Starts sampling `pid` now (the first sample at once); times are seconds from `origin`.
    pub fn start(pid: u32, origin: Instant) -> RssSampler {
        let (stop, stopped) = channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            // Until the process is gone or the sampler is finished.
            while let Some(kib) = rss_kib(pid) {
                samples.push((origin.elapsed().as_secs_f64(), kib));
                let waited = stopped.recv_timeout(Duration::from_secs(1));
                if !matches!(waited, Err(RecvTimeoutError::Timeout)) {
                    break;
                }
            }
            samples
        });
        RssSampler { stop, thread }
    }

    /// Stops; the samples as (seconds from the origin, KiB), one more taken now.
    pub fn finish(self, pid: u32, origin: Instant) -> Vec<(f64, u64)> {
        let _ = self.stop.send(());
        let mut samples = self.thread.join().expect("the sampler does not panic");
        if let Some(kib) = rss_kib(pid) {
            samples.push((origin.elapsed().as_secs_f64(), kib));
        }
        samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu_time() {
        let me = std::process::id();
        assert!(rss_kib(me).unwrap() > 0);
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        assert!(cpu_time(Some(me)).unwrap() > Duration::ZERO);
        assert!(cpu_time(None).is_some());
        assert_eq!(rss_kib(u32::MAX), None);
    }
}
