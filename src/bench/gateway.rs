//! The gateway scenarios' figures: what agentwire adds between a client and a provider (G1, G2,
//! G3), read against the floor of one more gRPC hop measured in the same run.

use std::time::Duration;

use super::fixtures::STREAM_CHUNKS;
use super::{Report, micros};

/// The added latency a gateway may have at p50 and p99, as multiples of the floor's.
const ADDED_P50_OVER_FLOOR: f64 = 1.2;
const ADDED_P99_OVER_FLOOR: f64 = 1.5;
/// The fastest gateways' added p99 on a neutral 4-vCPU board.
const BOARD_ADDED_P99: &str = "107 µs";
/// G1's throughput target at concurrency 32.
const RUNS_PER_SECOND_AT_32: f64 = 5_000.0;
/// G2's targets: added time to first token over the floor's, and added time per token.
const ADDED_FIRST_TOKEN_OVER_FLOOR: f64 = 1.5;
const ADDED_PER_TOKEN_US: f64 = 1.0;
/// G3's target: what the guard pipeline may add to G1 at p50.
const GUARDS_ADDED_P50_US: f64 = 50.0;

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}

fn ratio(value: Duration, floor: Duration) -> f64 {
    value.as_secs_f64() / floor.as_secs_f64().max(1e-9)
}

/// The figures of the G rows that ran.
pub(super) fn derived(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    let measured =
        |scenario: &str, concurrency: usize| report.row(scenario, concurrency).map(|row| &row.measured);
    let mut concurrencies: Vec<usize> =
        report.rows.iter().filter(|row| row.scenario == "G1").map(|row| row.concurrency).collect();
    concurrencies.dedup();
    for &clients in &concurrencies {
        let (Some(through), Some(direct)) = (measured("G1", clients), measured("G1 direct", clients)) else {
            continue;
        };
        let added = |quantile| through.percentile(quantile).saturating_sub(direct.percentile(quantile));
        let (p50, p99) = (added(0.5), added(0.99));
        let mut line =
            format!("G1 at {clients}: agentwire adds {} at p50 and {} at p99", micros(p50), micros(p99));
        if let Some(floor) = measured("G1 floor", clients) {
            let (floor50, floor99) = (floor.percentile(0.5), floor.percentile(0.99));
            line.push_str(&format!(
                ", next to a bare tonic round trip of {} / {}: {:.2}× / {:.2}×",
                micros(floor50),
                micros(floor99),
                ratio(p50, floor50),
                ratio(p99, floor99)
            ));
            if clients == 1 {
                line.push_str(&format!(
                    " (targets ≤ {ADDED_P50_OVER_FLOOR}× / ≤ {ADDED_P99_OVER_FLOOR}×: {} / {}; the board's best add {BOARD_ADDED_P99} at p99)",
                    verdict(ratio(p50, floor50) <= ADDED_P50_OVER_FLOOR),
                    verdict(ratio(p99, floor99) <= ADDED_P99_OVER_FLOOR),
                ));
            }
        }
        if let (Some(cpu), Some(fake)) = (through.cpu_per_request(), direct.cpu_per_request()) {
            line.push_str(&format!(
                "; agentwire's CPU per request: {:.3} ms",
                cpu.saturating_sub(fake).as_secs_f64() * 1e3
            ));
        }
        if clients == 32 {
            line.push_str(&format!(
                "; {:.0} runs/s (target ≥ {RUNS_PER_SECOND_AT_32:.0}: {})",
                through.rate(),
                verdict(through.rate() >= RUNS_PER_SECOND_AT_32)
            ));
        }
        lines.push(line);
    }
    let mut streamed: Vec<usize> =
        report.rows.iter().filter(|row| row.scenario == "G2").map(|row| row.concurrency).collect();
    streamed.dedup();
    for &clients in &streamed {
        let (Some(through), Some(direct)) = (measured("G2", clients), measured("G2 direct", clients)) else {
            continue;
        };
        let (Some(first), Some(direct_first)) = (through.first_token(0.5), direct.first_token(0.5)) else {
            continue;
        };
        let added_first = first.saturating_sub(direct_first);
        // After the first token: the rest of the stream, through agentwire and directly.
        let rest = through.percentile(0.5).saturating_sub(first);
        let direct_rest = direct.percentile(0.5).saturating_sub(direct_first);
        let per_token = rest.saturating_sub(direct_rest).as_secs_f64() * 1e6 / (STREAM_CHUNKS - 1) as f64;
        let mut line = format!("G2 at {clients}: agentwire adds {} to the first token", micros(added_first));
        if let Some(floor_first) = measured("G2 floor", clients).and_then(|floor| floor.first_token(0.5)) {
            let times = ratio(added_first, floor_first);
            line.push_str(&format!(
                " (a bare tonic stream's first message: {}, {times:.2}×; target ≤ {ADDED_FIRST_TOKEN_OVER_FLOOR}×: {})",
                micros(floor_first),
                verdict(times <= ADDED_FIRST_TOKEN_OVER_FLOOR)
            ));
        }
        // Per token only where streams do not queue for the cores: at more clients the rest of
        // a stream measures the machine's throughput, not what a token costs.
        if clients == 1 {
            line.push_str(&format!(
                " and {per_token:.2} µs per token (target ≤ {ADDED_PER_TOKEN_US} µs: {})",
                verdict(per_token <= ADDED_PER_TOKEN_US)
            ));
        }
        line.push_str(&format!(
            "; {:.0} streams/s (direct: {:.0}); stalls over {}: {} in {} streams (direct: {} in {})",
            through.rate(),
            direct.rate(),
            micros(super::fake_provider::STALL),
            through.stalls,
            through.requests,
            direct.stalls,
            direct.requests,
        ));
        if clients >= 512 {
            line.push_str(&format!(" (target 0: {})", verdict(through.stalls == 0)));
        }
        lines.push(line);
    }
    if let (Some(plain), Some(guarded)) = (measured("G1", 1), measured("G3", 1)) {
        let p50 = |measured: &super::Measured| measured.percentile(0.5);
        let added = p50(guarded).saturating_sub(p50(plain));
        let mut line = format!(
            "G3: the guard pipeline adds {} to G1 at p50 (target ≤ {GUARDS_ADDED_P50_US:.0} µs: {})",
            micros(added),
            verdict(added.as_secs_f64() * 1e6 <= GUARDS_ADDED_P50_US)
        );
        // A guard on the stream has the provider stream the answer; G1+s measures that alone,
        // and the direct client streaming the same answer what the provider's frames cost anyone.
        if let Some(streamed) = measured("G1+s", 1) {
            let guards = p50(guarded).saturating_sub(p50(streamed));
            line.push_str(&format!(
                ": {} of it is the stream a guard on it needs (G1+s)",
                micros(p50(streamed).saturating_sub(p50(plain)))
            ));
            if let (Some(direct), Some(direct_streamed)) =
                (measured("G1 direct", 1), measured("G1+s direct", 1))
            {
                line.push_str(&format!(
                    ", of which the provider's frames cost a direct client {} too",
                    micros(p50(direct_streamed).saturating_sub(p50(direct)))
                ));
            }
            line.push_str(&format!(
                "; the four guards' own work, over G1+s: {} (≤ {GUARDS_ADDED_P50_US:.0} µs: {})",
                micros(guards),
                verdict(guards.as_secs_f64() * 1e6 <= GUARDS_ADDED_P50_US)
            ));
        }
        lines.push(line);
    }
    lines
}
