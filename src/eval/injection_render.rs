//! The `prompt-injection-detector` part of the report, in Markdown.

use std::fmt::Write as _;

use super::injection::{Confusion, InjectionReport};
use super::{EvalReport, micros};

/// Appends the injection figures to `out`.
pub(super) fn render(out: &mut String, report: &EvalReport) {
    let (texts, languages, attacks) = report.injection_corpus;
    let injection: &InjectionReport = &report.injection;
    let _ = writeln!(out, "\n## prompt-injection-detector\n");
    let _ = writeln!(
        out,
        "`{}`: {texts} texts in {languages} languages, {attacks} of them injections; `direct`: the user's input of a Generate, `tool`: the result of a remote tool the agent calls (processToolResult). Blocked means the run ended in the detector's tripwire.\n",
        report.options.corpora.join("injection.jsonl").display()
    );
    let _ = writeln!(
        out,
        "| detector | path | injections | benign | precision | recall | specificity | balanced accuracy |\n|---|---|---:|---:|---:|---:|---:|---:|"
    );
    for figures in &injection.detectors {
        for (path, confusion) in &figures.by_path {
            let _ = writeln!(out, "| {} | {path} |{}", figures.detector, row(confusion));
        }
    }
    let Some(whole) = injection.detectors.first() else { return };
    for (title, by_lang) in [("direct", &whole.by_lang), ("tool", &whole.by_lang_tool)] {
        let _ = writeln!(out, "\nPer language, {title} path ({}):\n", whole.detector);
        let _ = writeln!(
            out,
            "| language | injections | benign | precision | recall | specificity | balanced accuracy |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        for (lang, confusion) in by_lang {
            let _ = writeln!(out, "| {lang} |{}", row(confusion));
        }
    }
    let _ = writeln!(
        out,
        "\nPer category, both paths (share blocked; for benign categories, lower is better):\n"
    );
    let mut header = String::from("| category | texts |");
    let mut rule = String::from("|---|---:|");
    for figures in &injection.detectors {
        header += &format!(" {} |", figures.detector);
        rule += "---:|";
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for (category, confusion) in &whole.by_category {
        let mut line = format!("| {category} | {} |", confusion.attacks() + confusion.benign());
        for figures in &injection.detectors {
            let share = figures.by_category.get(category).map(blocked_share).unwrap_or_default();
            line += &format!(" {share:.3} |");
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "\nLatency added (p50 per text, over texts spread across each path, one run at a time, with and without the detector, alternating):\n"
    );
    let _ = writeln!(out, "| path | with | without | added |\n|---|---:|---:|---:|");
    for (path, (with, without)) in [("direct", injection.direct_p50), ("tool", injection.tool_p50)] {
        let added = micros(with.saturating_sub(without));
        let _ = writeln!(out, "| {path} | {} | {} | {added} |", micros(with), micros(without));
    }
    if report.options.misses > 0 && !whole.misses.is_empty() {
        let _ = writeln!(
            out,
            "\nWhat it gets wrong ({}, {} of {}; up to {} per category):\n",
            whole.detector,
            whole.misses.len().min(report.options.misses * whole.by_category.len()),
            whole.misses.len(),
            report.options.misses
        );
        let _ = writeln!(out, "| case | category | text |\n|---|---|---|");
        let mut shown: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for (id, category, text) in &whole.misses {
            let count = shown.entry(category).or_default();
            *count += 1;
            if *count > report.options.misses {
                continue;
            }
            let text: String = text.replace('\n', "⏎").replace('|', "\\|").chars().take(90).collect();
            let _ = writeln!(out, "| {id} | {category} | `{text}` |");
        }
    }
}

fn row(confusion: &Confusion) -> String {
    format!(
        " {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
        confusion.attacks(),
        confusion.benign(),
        confusion.precision(),
        confusion.recall(),
        confusion.specificity(),
        confusion.balanced_accuracy()
    )
}

fn blocked_share(confusion: &Confusion) -> f64 {
    let blocked = confusion.caught + confusion.false_alarms;
    let all = confusion.attacks() + confusion.benign();
    if all == 0 { 0.0 } else { blocked as f64 / all as f64 }
}
