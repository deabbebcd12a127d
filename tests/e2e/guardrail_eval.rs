//! `agentwire eval guardrails --quick` in the test suite: a quarter of the labelled PII corpus
//! through a real in-process server, in Generate and in Stream, and the whole prompt-injection
//! corpus on both paths (the user's input, a remote tool's result), must hold every quality
//! floor (per entity type F2, overall precision, streams redacted exactly as the whole text;
//! balanced accuracy and precision per path, recall per language) — what CI fails on when a
//! detector gets worse.

use agentwire::eval::{EvalOptions, MODES, below_floors, render, run};

fn corpora() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpora")
}

/// The quick evaluation scores every entity type in both modes, and no figure is under its floor.
#[test]
fn the_quick_evaluation_holds_every_floor() {
    let report =
        run(&EvalOptions { corpora: corpora(), quick: true, misses: 3 }).expect("the evaluation runs");
    assert_eq!(report.pii.modes.len(), 2);
    assert_eq!(report.pii.modes[1].mode, MODES[3].name);
    for figures in &report.pii.modes {
        assert_eq!(figures.cases, report.pii_corpus.0);
        for kind in
            ["email", "phone", "credit-card", "iban", "private-key", "api-key", "ssn", "uk-nino", "es-dni"]
        {
            assert!(figures.by_kind.get(kind).is_some_and(|tally| tally.planted > 0), "{kind} not planted");
        }
    }
    let (texts, languages, _) = report.injection_corpus;
    assert_eq!(languages, 9);
    let whole = &report.injection.detectors[0];
    for path in ["direct", "tool"] {
        let confusion = whole.by_path[path];
        assert!(confusion.attacks() > 0 && confusion.benign() > 0, "{path}: both classes are run");
    }
    let run: u64 = whole.by_path.values().map(|confusion| confusion.attacks() + confusion.benign()).sum();
    assert_eq!(run as usize, texts, "every text of the injection corpus is run");
    let below = below_floors(&report);
    assert!(below.is_empty(), "under their floors:\n{}\n\n{}", below.join("\n"), render(&report));
}
