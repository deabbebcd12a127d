//! `agentwire bench --smoke` in the test suite, so that the bench cannot rot: every scenario
//! runs against a real server — `agentwire serve` in a process of its own, as the command runs
//! it, or one in the test's process — at two concurrencies, and checks its own answers.

use agentwire::bench::{BenchOptions, render, run};

fn binary() -> Option<std::path::PathBuf> {
    Some(std::path::PathBuf::from(env!("CARGO_BIN_EXE_agentwire")))
}

/// `agentwire bench` runs every scenario end to end against `agentwire serve` in a process of
/// its own, reads that process's CPU time and memory, its aborted runs save nothing, and it
/// measures an idle `agentwire serve` too.
#[test]
fn every_scenario_runs_and_aborted_runs_save_nothing() {
    let report =
        run(&BenchOptions { server_binary: binary(), ..BenchOptions::smoke() }).expect("the bench runs");
    for scenario in [
        "S1",
        "S1 floor",
        "S2a",
        "S2b",
        "S3",
        "S4",
        "S4+p",
        "S4 floor",
        "S5",
        "S6 300",
        "S6 300 control",
        "R1",
        "R1 floor",
        "R2",
        "G1 direct",
        "G1",
        "G1 floor",
        "G1+s direct",
        "G1+s",
        "G2 direct",
        "G2",
        "G2 floor",
        "G3",
    ] {
        for concurrency in [1, 4] {
            let row =
                report.row(scenario, concurrency).unwrap_or_else(|| panic!("{scenario} at {concurrency}"));
            assert!(row.measured.requests > 0, "{scenario} at {concurrency} completed nothing");
            assert!(
                row.measured.server_cpu.is_some() && row.measured.peak_rss.is_some(),
                "{scenario}: usage read"
            );
        }
    }
    let (runs, threads) = report.aborted_runs.expect("S5 checked the store");
    assert!(runs > 0);
    assert_eq!(threads, 0, "a tripped run left a thread behind");
    for streamed in ["G2", "G2 direct", "G2 floor"] {
        let row = report.row(streamed, 1).expect("streamed at 1");
        assert!(row.measured.first_token(0.5).is_some(), "{streamed}: first tokens timed");
        assert_eq!(row.measured.tokens, row.measured.requests * agentwire::bench::STREAM_CHUNKS);
    }
    let idle = report.idle_server_rss.expect("the idle server measured");
    assert!(idle > 1_048_576, "a started server holds more than a megabyte: {idle}");
    let rss = report.server_rss.expect("the server's memory read before and after");
    assert!(
        rss.alone && rss.ended > 1_048_576 && rss.settled > 1_048_576,
        "the server alone was measured, as the load ended and once settled: {rss:?}"
    );
    let rendered = render(&report);
    assert!(
        rendered.contains("Idle RSS of `agentwire serve` alone")
            && rendered.contains("| S6 300 | semantic recall")
            && rendered.contains("ms for the same bytes over bare tonic")
            && rendered.contains("R1: a blocking remote processInput adds")
            && rendered.contains("G1 at 1: agentwire adds")
            && rendered.contains("G2 at 1: agentwire adds")
            && rendered.contains("G3: the guard pipeline adds")
            && rendered.contains("the provider's frames cost a direct client")
            && rendered.contains("RSS of `agentwire serve`: ")
    );
}

/// Without a binary to start, the server runs in the bench's process: the same scenarios, its
/// CPU time and memory read off this process.
#[test]
fn a_server_in_the_bench_process_is_measured_too() {
    let only = ["S1", "S4", "S6", "R1", "G1"].map(String::from).to_vec();
    let report = run(&BenchOptions { only, ..BenchOptions::smoke() }).expect("the bench runs");
    for scenario in ["S1", "S4", "S6 300", "R1", "G1"] {
        let row = report.row(scenario, 1).unwrap_or_else(|| panic!("{scenario} ran"));
        assert!(row.measured.requests > 0 && row.measured.server_cpu.is_some(), "{scenario}");
    }
    assert!(report.recall[0].1 >= 0.95, "recall in process: {}", report.recall[0].1);
    assert!(!report.server_rss.expect("memory read").alone);
}

/// With `--data-dir` the store is kept: the bench fills it, closes it, and the server it starts
/// opens it; a second bench finds the recall resource filled by the first and measures it
/// without filling it again.
#[test]
fn a_kept_data_directory_is_filled_once() {
    let data = tempfile::tempdir().expect("temp dir");
    let options = BenchOptions {
        only: vec!["S6".into()],
        data_dir: Some(data.path().to_owned()),
        server_binary: binary(),
        ..BenchOptions::smoke()
    };
    let first = run(&options).expect("the first bench runs");
    assert!(first.recall_loads[0].filled.is_some(), "the first run fills the resource");
    assert!(data.path().join("store").is_dir(), "the store is kept");
    let second = run(&options).expect("the second bench runs");
    assert_eq!(second.recall_loads[0].filled, None, "the second finds it filled");
    assert!(second.row("S6 300", 1).expect("measured").measured.requests > 0);
    assert!(second.recall[0].1 >= 0.95, "recall over the reopened store: {}", second.recall[0].1);
}
