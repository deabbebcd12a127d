//! What the bench reads off the server (Linux `/proc`): its CPU time — everything but the bench's
//! own client threads, in this process and in the server's when it runs in one of its own — and
//! its resident memory with its peak.

use std::time::Duration;

/// The kernel's clock ticks per second for `/proc` CPU times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// Where the server under test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Watched {
    /// In the bench's process, on threads of its own.
    InProcess,
    /// In the process with this id (`agentwire serve`).
    Child(u32),
}

impl Watched {
    /// The `/proc` file `name` of the server's process.
    fn proc_file(self, name: &str) -> String {
        match self {
            Watched::InProcess => format!("/proc/self/{name}"),
            Watched::Child(pid) => format!("/proc/{pid}/{name}"),
        }
    }
}

/// CPU time used so far.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Cpu {
    /// The bench's whole process, exited threads included.
    process: u64,
    /// Its threads named `client`.
    client: u64,
    /// The server's process, when it runs in one of its own.
    child: u64,
}

impl Cpu {
    /// The CPU time of the bench's process, of its threads named `client` (the load generator)
    /// and of the server's process when it is another. `None` where `/proc` cannot tell.
    pub(super) fn now(client: &str, watched: Watched) -> Option<Cpu> {
        let process = ticks_of(&std::fs::read_to_string("/proc/self/stat").ok()?)?.1;
        let child = match watched {
            Watched::InProcess => 0,
            Watched::Child(_) => ticks_of(&std::fs::read_to_string(watched.proc_file("stat")).ok()?)?.1,
        };
        let mut client_ticks = 0;
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
            if let Some((name, ticks)) = ticks_of(&stat)
                && name == client
            {
                client_ticks += ticks;
            }
        }
        Some(Cpu { process, client: client_ticks, child })
    }

    /// The CPU time everything but the client used since `earlier`: the server, and the floors
    /// and fake provider (a floor's row, and a gateway scenario's direct row, measure those).
    pub(super) fn server_since(self, earlier: Cpu) -> Duration {
        let process = self.process.saturating_sub(earlier.process);
        let client = self.client.saturating_sub(earlier.client);
        let child = self.child.saturating_sub(earlier.child);
        Duration::from_millis((process.saturating_sub(client) + child) * 1000 / TICKS_PER_SECOND)
    }
}

/// The CPU time this whole process has used so far (every thread), from `/proc`.
pub fn process_cpu() -> Option<Duration> {
    let ticks = ticks_of(&std::fs::read_to_string("/proc/self/stat").ok()?)?.1;
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}

/// A `stat` line's command name and its user + system ticks.
fn ticks_of(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = &stat[open + 1..close];
    // After the name: state (field 3) ... utime (14) and stime (15).
    let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// The server's resident memory now and its peak since the last [`reset_peak`], in bytes.
pub(super) fn resident(watched: Watched) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(watched.proc_file("status")).ok()?;
    Some((status_bytes(&status, "VmRSS:")?, status_bytes(&status, "VmHWM:")?))
}

/// The resident memory of process `pid` now, in bytes (Linux).
pub fn resident_of(pid: u32) -> Option<u64> {
    status_bytes(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?, "VmRSS:")
}

/// A `/proc/<pid>/status` field in kB, as bytes.
fn status_bytes(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(name))?;
    let kilobytes: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kilobytes * 1024)
}

/// Starts a new peak: the server's next [`resident`] peak counts from now.
pub(super) fn reset_peak(watched: Watched) {
    // Writing 5 to clear_refs resets the peak resident set size (Linux 4.0 and later).
    let _ = std::fs::write(watched.proc_file("clear_refs"), "5");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /proc stat line is read correctly when the thread name holds spaces.
    #[test]
    fn stat_lines_are_read_past_names_with_spaces() {
        let stat = "42 (aw bench) S 1 42 42 0 -1 4194304 100 0 0 0 250 30 0 0 20 0 3 0 1 2 3";
        assert_eq!(ticks_of(stat), Some(("aw bench", 280)));
    }

    /// This process's CPU time and resident memory (now and peak) can be read.
    #[test]
    fn this_process_can_be_read() {
        assert!(Cpu::now("nobody", Watched::InProcess).is_some());
        let (now, peak) = resident(Watched::InProcess).expect("resident memory");
        assert!(now > 0 && peak >= now);
    }
}
