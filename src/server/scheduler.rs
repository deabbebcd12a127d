//! The tokio runtime the server runs on: fair to every task it serves.
//!
//! A tokio worker takes tasks from its own queue and looks at the runtime's shared queue only
//! every so many polls (by default a count tuned to ~200 µs of work: up to 127 polls of a gateway's
//! short tasks). Tasks a worker's queue cannot hold, and those woken from another thread, wait in
//! the shared queue. At 512 concurrent streams (the bench's G2) those tasks waited so long that the
//! streams stalled for over 50 ms about six times each, and their first tokens came 2× later than a
//! bare tonic stream's; looking at the shared queue before every poll ended nearly all of it (one
//! run, 512 streams: 15,852 stalls → 215, first token +92 ms → +27 ms) at no cost measurable at 1
//! or 32 clients (BENCHMARKS.md).

use tokio::runtime::Builder;

/// How many tasks a worker polls between two looks at the shared queue: every one.
const GLOBAL_QUEUE_INTERVAL: u32 = 1;

/// A multi-thread runtime builder, I/O and timers on, that takes from the shared queue as often
/// as from a worker's own; callers add their thread count and name.
pub fn serving_runtime() -> Builder {
    let mut builder = Builder::new_multi_thread();
    builder.enable_all().global_queue_interval(GLOBAL_QUEUE_INTERVAL);
    builder
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;

    use super::*;

    /// On a one-worker runtime from `builder`: a task spawns chains of tasks (each spawns its
    /// successor when polled), then waits while a task is spawned from outside the runtime (into
    /// the shared queue); how many links are polled before that task runs.
    fn links_polled_before_an_outside_task(mut builder: Builder) -> usize {
        let runtime = builder.worker_threads(1).build().expect("a runtime");
        let links = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        fn link(links: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
            links.fetch_add(1, Ordering::SeqCst);
            if !stop.load(Ordering::SeqCst) {
                tokio::spawn(async move { link(links, stop) });
            }
        }
        let (chains_spawned, spawn_outside) = mpsc::channel();
        let (outside_spawned, resume) = mpsc::channel::<()>();
        let (first_links, first_stop) = (Arc::clone(&links), Arc::clone(&stop));
        runtime.spawn(async move {
            for _ in 0..8 {
                let (links, stop) = (Arc::clone(&first_links), Arc::clone(&first_stop));
                tokio::spawn(async move { link(links, stop) });
            }
            let _ = chains_spawned.send(());
            // The worker stays in this task until the outside task is queued.
            let _ = resume.recv();
        });
        spawn_outside.recv().expect("the chains were spawned");
        let (ran, waited) = mpsc::channel();
        let outside_links = Arc::clone(&links);
        runtime.spawn(async move {
            let _ = ran.send(outside_links.load(Ordering::SeqCst));
        });
        let _ = outside_spawned.send(());
        let polled = waited.recv().expect("the outside task ran");
        stop.store(true, Ordering::SeqCst);
        polled
    }

    /// A task queued from outside the workers (a wake from another thread, or a task a worker's
    /// queue had no room for) runs within a few polls on the serving runtime, where tokio's
    /// default lets a busy worker poll its own tasks first (239 here; a builder without
    /// `global_queue_interval` fails this).
    #[test]
    fn a_task_in_the_shared_queue_waits_no_more_than_a_few_polls() {
        let trials = 10;
        let serving = (0..trials).map(|_| links_polled_before_an_outside_task(serving_runtime())).max();
        let by_default = (0..trials)
            .map(|_| {
                let mut builder = Builder::new_multi_thread();
                builder.enable_all();
                links_polled_before_an_outside_task(builder)
            })
            .max();
        let (serving, by_default) = (serving.unwrap_or(usize::MAX), by_default.unwrap_or(0));
        assert!(serving <= 4, "the outside task waited for {serving} polls on the serving runtime");
        assert!(by_default > serving, "tokio's default: {by_default} polls, the serving runtime {serving}");
    }
}
