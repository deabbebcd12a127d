//! `pii-detector`: finds personal data and secrets — email addresses, phone numbers (valid in
//! their number plan: `phone.rs`), credit cards (brand, length, Luhn), IBANs (checksum-checked),
//! national ids (US social security numbers, UK National Insurance numbers, Spanish DNI/NIE with
//! their check letter), IP addresses, API keys and private keys — in the input and in the
//! streamed answer; blocks, warns or redacts. Look-alikes (dates, ISBNs, ids led by a year,
//! ranges of years) are found too, only to keep the number detectors off them.

use std::sync::{Arc, LazyLock};

use regex::{Regex, RegexSet};
use regex_automata::dfa::{StartKind, dense};
use serde::Deserialize;

use super::phone::{led_by_id_word, phone_valid};
use super::scan::{Finding, Findings, Redaction, Scanner, Strategy, open_at, open_tail_within};
use super::scanning::Scanning;
use crate::processor::{BuildError, Processor, parse_options};

pub(super) const KIND: &str = "pii-detector";

/// The longest text a detector matches, but for private keys; no more than this is held back
/// for them.
const MAX_MATCH: usize = 256;

/// The longest private key block held back whole on a stream (a 4096-bit RSA key is ~3.3 KB).
const MAX_KEY_BLOCK: usize = 16 * 1024;

/// How a private key block begins and ends.
const KEY_BEGIN: &str = "-----BEGIN ";
const KEY_END: &str = "PRIVATE KEY-----";

/// One kind of personal data, or of text that looks like some (a look-alike).
struct Detector {
    kind: &'static str,
    /// The pattern as written, with ASCII word boundaries (see [`detector`]).
    source: String,
    pattern: Regex,
    check: fn(&str) -> bool,
    /// False for a look-alike: found to keep the detectors after it off its text, never redacted.
    redacted: bool,
}

/// A detector of `kind` by `source`, whose `\b` are ASCII word boundaries: the DFAs decide those
/// on any text, where a Unicode `\b` beside a non-ASCII letter (`é`, `ü`, `€`) sends the search
/// to a slower engine — and every value detected is ASCII.
fn detector(kind: &'static str, source: &'static str, check: fn(&str) -> bool) -> Detector {
    let source = source.replace(r"\b", r"(?-u:\b)");
    let pattern = Regex::new(&source).expect("valid pattern");
    Detector { kind, source, pattern, check, redacted: true }
}

/// Numbers that are not personal data but would pass for some: claimed before the number
/// detectors (cards, national ids, phones) look at them.
fn look_alike(kind: &'static str, source: &'static str, check: fn(&str) -> bool) -> Detector {
    Detector { redacted: false, ..detector(kind, source, check) }
}

fn any(_: &str) -> bool {
    true
}

static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    vec![
        detector("email", r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}", any),
        // The whole block, BEGIN line to END line; cut short (no END), the base64 body after it.
        detector(
            "private-key",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----|[A-Za-z0-9+/=\r\n]*)",
            any,
        ),
        detector(
            "api-key",
            r"\b(?:sk-[A-Za-z0-9_\-]{20,}|sk_live_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{36}|AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{35})",
            any,
        ),
        detector("iban", r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b", iban_valid),
        detector(
            "ipv4",
            r"\b(?:(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\b",
            any,
        ),
        detector("ipv6", r"\b[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}\b", ipv6_valid),
        // Brand and Luhn checked: strict enough to go before the look-alikes.
        detector("credit-card", r"\b(?:[0-9][ \-]?){11,18}[0-9]\b", card_valid),
        // Look-alikes, before the number detectors: dates, ISBNs and EANs (checksum-checked),
        // ids led by a year (`2024-000123`), ranges of years.
        look_alike(
            "date",
            r"\b(?:[0-9]{1,2}[./\-][0-9]{1,2}[./\-](?:19|20)[0-9]{2}|(?:19|20)[0-9]{2}[./\-][0-9]{1,2}[./\-][0-9]{1,2})\b",
            any,
        ),
        look_alike("isbn", r"\b97[89](?:[ \-]{0,2}[0-9]){10}\b", ean_valid),
        look_alike("year-id", r"\b(?:19|20)[0-9]{2}[\-/][0-9]{3,8}\b", any),
        look_alike("years", r"\b(?:19|20)[0-9]{2} ?[\-–] ?(?:19|20)[0-9]{2}\b", any),
        detector("ssn", r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b", ssn_valid),
        detector(
            "uk-nino",
            r"\b[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]\b",
            nino_valid,
        ),
        detector("es-dni", r"\b(?:[0-9]{8}|[XYZ]-?[0-9]{7})-?[A-Z]\b", dni_valid),
        // Candidates only: a number is a phone when a number plan says it is valid (`phone_valid`).
        detector(
            "phone",
            r"(?:\+[1-9][0-9]{0,2}[ .\-]?(?:\(0\)[ .\-]?)?(?:\([0-9]{1,5}\)[ .\-]?)?|\([0-9]{1,5}\)[ .\-]?|\b)[0-9]{1,12}(?:[ .\-/][0-9]{1,12}){0,6}\b",
            phone_valid,
        ),
    ]
});

/// Every detector's kind, in the order they are tried.
fn kinds() -> Vec<&'static str> {
    DETECTORS.iter().filter(|detector| detector.redacted).map(|detector| detector.kind).collect()
}

/// A social security number as issued: area not 000, 666 or 900–999, group not 00, serial not
/// 0000.
fn ssn_valid(candidate: &str) -> bool {
    let part = |range: std::ops::Range<usize>| candidate.get(range).and_then(|part| part.parse::<u32>().ok());
    match (part(0..3), part(4..6), part(7..11)) {
        (Some(area), Some(group), Some(serial)) => {
            area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
        }
        _ => false,
    }
}

/// An EAN-13 (ISBN-13) check digit: weights 1 and 3 alternating.
fn ean_valid(candidate: &str) -> bool {
    let digits: Vec<u32> = candidate.chars().filter_map(|c| c.to_digit(10)).collect();
    let sum: u32 =
        digits.iter().enumerate().map(|(index, digit)| if index % 2 == 1 { digit * 3 } else { *digit }).sum();
    digits.len() == 13 && sum.is_multiple_of(10)
}

/// A card number of a brand issued today, at one of its lengths (no 13-digit Visa: those are
/// EAN barcodes), passing the Luhn check.
fn card_valid(candidate: &str) -> bool {
    let digits: String = candidate.chars().filter(char::is_ascii_digit).collect();
    let prefix =
        |length: usize| digits.get(..length).and_then(|prefix| prefix.parse::<u32>().ok()).unwrap_or(0);
    let length = digits.len();
    let brand = match prefix(1) {
        4 => matches!(length, 16 | 19),                          // Visa
        5 if (51..=55).contains(&prefix(2)) => length == 16,     // Mastercard
        2 if (2221..=2720).contains(&prefix(4)) => length == 16, // Mastercard
        3 if matches!(prefix(2), 34 | 37) => length == 15,       // Amex
        3 if prefix(2) == 35 => (16..=19).contains(&length),     // JCB
        3 if (300..=305).contains(&prefix(3)) || matches!(prefix(2), 36 | 38 | 39) => {
            (14..=19).contains(&length)
        } // Diners
        6 if prefix(4) == 6011 || prefix(2) == 65 || (644..=649).contains(&prefix(3)) => {
            (16..=19).contains(&length)
        } // Discover
        6 if prefix(2) == 62 => (16..=19).contains(&length),     // UnionPay
        5 | 6 if matches!(prefix(2), 50 | 56..=69) => length == 12 || (14..=19).contains(&length), // Maestro
        _ => false,
    };
    brand && luhn_valid(&digits)
}

fn luhn_valid(candidate: &str) -> bool {
    let digits: Vec<u32> = candidate.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(12..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(
            |(index, digit)| {
                if index % 2 == 1 { (digit * 2) % 9 + u32::from(*digit == 9) * 9 } else { *digit }
            },
        )
        .sum();
    sum.is_multiple_of(10)
}

fn iban_valid(candidate: &str) -> bool {
    let compact: String = candidate.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let rotated = format!("{}{}", &compact[4..], &compact[..4]);
    let mut remainder = 0u32;
    for c in rotated.chars() {
        let value = match c.to_digit(36) {
            Some(value) => value,
            None => return false,
        };
        for digit in value.to_string().chars() {
            remainder = (remainder * 10 + digit.to_digit(10).unwrap_or(0)) % 97;
        }
    }
    remainder == 1
}

/// UK National Insurance numbers: prefixes that are never issued are not numbers.
fn nino_valid(candidate: &str) -> bool {
    !["BG", "GB", "NK", "KN", "TN", "NT", "ZZ"].contains(&&candidate[..2])
}

/// Spanish DNI / NIE: the letter is the number's checksum (mod 23).
fn dni_valid(candidate: &str) -> bool {
    let compact: String = candidate.chars().filter(|c| *c != '-').collect();
    let (number, letter) = compact.split_at(compact.len() - 1);
    let number = number.replacen('X', "0", 1).replacen('Y', "1", 1).replacen('Z', "2", 1);
    let Ok(number) = number.parse::<usize>() else { return false };
    "TRWAGMYFPDXBNJZSQVHLCKE".as_bytes()[number % 23] == letter.as_bytes()[0]
}

fn ipv6_valid(candidate: &str) -> bool {
    candidate.matches(':').count() >= 2 && candidate.parse::<std::net::Ipv6Addr>().is_ok()
}

/// The enabled detectors, with one automaton for all their patterns (most text matches none of
/// them: one pass says so) and one anchored DFA of them all, which says whether a match starting
/// at some position could still be completed by text yet to come.
pub(super) struct PiiScanner {
    enabled: Vec<&'static Detector>,
    any: RegexSet,
    open: dense::DFA<Vec<u32>>,
}

impl PiiScanner {
    fn new(enabled: Vec<&'static Detector>) -> PiiScanner {
        let sources: Vec<&str> = enabled.iter().map(|detector| detector.source.as_str()).collect();
        let any = RegexSet::new(&sources).expect("valid patterns");
        // Word boundaries are ASCII (see `detector`): the DFA decides them on any text.
        let config = dense::Config::new().start_kind(StartKind::Anchored);
        let open =
            dense::Builder::new().configure(config).build_many(&sources).expect("the patterns build a DFA");
        PiiScanner { enabled, any, open }
    }

    /// The bytes from the start of a private key block not yet ended, when one is (held whole,
    /// up to [`MAX_KEY_BLOCK`]).
    fn open_key_block(&self, text: &str) -> usize {
        if !self.enabled.iter().any(|detector| detector.kind == "private-key") {
            return 0;
        }
        let mut window = text.len().saturating_sub(MAX_KEY_BLOCK);
        while !text.is_char_boundary(window) {
            window += 1;
        }
        let Some(begin) = text[window..].rfind(KEY_BEGIN).map(|at| window + at) else { return 0 };
        let block = &text[begin..];
        // A key's block has its BEGIN line's KEY_END, then the END line's: open until the second.
        if block.matches(KEY_END).count() >= 2 { 0 } else { block.len() }
    }
}

impl Scanner for PiiScanner {
    fn findings(&self, text: &str) -> Vec<Finding> {
        let mut findings = Findings::default();
        if self.any.is_match(text) {
            // A look-alike keeps later detectors off the text it holds whole; a longer match
            // around it (a phone number with a year-like group) still counts.
            let mut look_alikes: Vec<(usize, usize)> = Vec::new();
            for detector in &self.enabled {
                for found in detector.pattern.find_iter(text).filter(|found| (detector.check)(found.as_str()))
                {
                    let held_by_look_alike =
                        look_alikes.iter().any(|(start, end)| *start <= found.start() && found.end() <= *end);
                    let an_id = detector.kind == "phone" && led_by_id_word(&text[..found.start()]);
                    if !detector.redacted {
                        look_alikes.push((found.start(), found.end()));
                    } else if !held_by_look_alike && !an_id {
                        findings.offer(found, detector.kind);
                    }
                }
            }
        }
        findings.sorted()
    }

    fn open_tail(&self, text: &str, from: usize) -> usize {
        // The earliest start, within the longest match, from which a match is still possible.
        let open = open_tail_within(text, from, MAX_MATCH, |start| open_at(&self.open, text, start));
        open.max(self.open_key_block(text)).min(text.len() - from)
    }

    /// The id word before a phone number (24 bytes, see `phone::led_by_id_word`), with room for
    /// the word cut at the context's start.
    fn context_bytes(&self) -> usize {
        48
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    detectors: Option<Vec<String>>,
    #[serde(default)]
    strategy: Strategy,
    #[serde(default)]
    redaction: Redaction,
}

/// Builds a `pii-detector` from its options.
pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
    let options: Options = parse_options(options)?;
    let enabled = match options.detectors {
        None => DETECTORS.iter().collect(),
        Some(names) => {
            for (index, name) in names.iter().enumerate() {
                if !kinds().contains(&name.as_str()) {
                    return Err(format!(
                        "`detectors[{index}]`: unknown detector `{name}` (one of {})",
                        kinds().join(", ")
                    )
                    .into());
                }
            }
            // In their own order (it settles overlaps), look-alikes always.
            DETECTORS
                .iter()
                .filter(|detector| !detector.redacted || names.iter().any(|name| name == detector.kind))
                .collect()
        }
    };
    Ok(Arc::new(Scanning {
        id: id.to_owned(),
        report: "pii",
        scanner: PiiScanner::new(enabled),
        strategy: options.strategy,
        redaction: options.redaction,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanner() -> PiiScanner {
        PiiScanner::new(DETECTORS.iter().collect())
    }

    fn found(text: &str) -> Vec<String> {
        scanner().findings(text).into_iter().map(|finding| finding.kind).collect()
    }

    /// Each PII detector finds its own kind and rejects look-alikes that fail its checksum.
    #[test]
    fn each_detector_finds_its_kind_and_checks_it() {
        assert_eq!(found("mail ada@example.com now"), ["email"]);
        assert_eq!(found("card 4111 1111 1111 1111."), ["credit-card"]);
        assert!(found("card 4111 1111 1111 1112.").iter().all(|kind| kind != "credit-card"), "Luhn");
        assert_eq!(found("iban DE89 3704 0044 0532 0130 00 ok"), ["iban"]);
        assert_eq!(found("ssn 078-05-1120"), ["ssn"]);
        assert_eq!(found("NI number AB 12 34 56 C."), ["uk-nino"]);
        assert!(found("NI number GB 12 34 56 C.").is_empty(), "never issued");
        assert_eq!(found("DNI 12345678Z, NIE X1234567L"), ["es-dni", "es-dni"]);
        assert!(found("DNI 12345678A").iter().all(|kind| kind != "es-dni"), "checksum letter");
        assert_eq!(found("from 192.168.1.20 and 2001:db8::8a2e:370:7334"), ["ipv4", "ipv6"]);
        assert_eq!(found("key sk-abcdefghijklmnopqrstuvwx1234"), ["api-key"]);
        assert_eq!(found("call +1 415 555 0132 today"), ["phone"]);
        let key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49\n-----END EC PRIVATE KEY-----";
        let findings = scanner().findings(&format!("my key {key} ok"));
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].end - findings[0].start, key.len(), "the whole block, END line included");
        assert!(found("in 2024 we had 300 users").is_empty());
    }

    /// Streamed in deltas split any way, the answer comes out exactly as redacting the whole
    /// text would: nothing of a match reaches the client, whatever its shape.
    #[test]
    fn streams_are_redacted_as_the_whole_text_is() {
        let texts = [
            "Write to ada.lovelace@example.com or call +33 (0)5 47 72 13 05 before noon.",
            "NI number SK 13 01 19 C, phone (07646) 18428, card 4111 1111 1111 1111 — done.",
            "iban DE89 3704 0044 0532 0130 00, from 192.168.1.20 and 2001:db8::8a2e:370:7334.",
            "key sk-abcdefghijklmnopqrstuvwx1234 then DNI 12345678Z and ssn 078-05-1120!",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX\n-----END RSA PRIVATE KEY-----",
            "Here: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7 and that is all",
            "Ref. 355 643 667, llámame al 612 345 678; Bestellung 7187805464 or (0116) 4960157 on 03.12.1990.",
            "ISBN 978-3-16-148410-0, invoice 2021-613359, he lived 1965-2028, at 48.858370, 2.294481 — +49 (0) 6212 997220",
        ];
        for text in texts {
            super::super::scan::assert_stream_safe(&scanner(), text, 0..300);
        }
        // A 2048-bit key's block is far longer than any other match: it is held whole all the same.
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let body: Vec<String> = (0..26)
            .map(|line| (0..64).map(|at| char::from(alphabet[(line * 7 + at * 13) % 64])).collect())
            .collect();
        let long = format!(
            "Key:\n-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\nkeep it safe",
            body.join("\n")
        );
        super::super::scan::assert_stream_safe(&scanner(), &long, 0..6);
    }

    /// Phone numbers are those their number plan says are valid, written as it writes them; ids
    /// after an id word, dates, ISBNs, year-led ids and decimals are not phones, and cards are
    /// of a brand at one of its lengths.
    #[test]
    fn look_alikes_are_kept_apart_from_phones_and_cards() {
        for phone in [
            "+1-418-499-8809",
            "548 308 3968",
            "+33 (0)5 47 72 13 05",
            "(0116) 4960157",
            "(415)555-0132",
            "+55 98 5807-3021",
            "0492807302",
            "612 345 678",
        ] {
            assert_eq!(found(&format!("call {phone} now")), ["phone"], "{phone}");
        }
        for not_phone in [
            "ref. 355 643 667",
            "Bestellung 7187805464",
            "order #12345678",
            "on 03.12.1990",
            "on 2024-06-04",
            "invoice 2021-613359",
            "he lived 1965-2028",
            "at 48.858370",
            "number 116 531 720",
            "ISBN 978-3-16-148410-0",
        ] {
            assert!(found(not_phone).is_empty(), "{not_phone}: {:?}", found(not_phone));
        }
        assert_eq!(found("Amex 378282246310005, JCB 3530111333300000"), ["credit-card", "credit-card"]);
        assert!(found("EAN 4006381333932 (Luhn-valid, 13 digits)").is_empty());
        assert!(found("ISBN 978-84-7123-456-7 is no SSN").iter().all(|kind| kind != "ssn"), "area 9xx");
        assert!(found("SSN 666-12-3456 or 123-00-4567").iter().all(|kind| kind != "ssn"), "never issued");
    }

    /// Only the tail of a text that could still grow into a match is held back.
    #[test]
    fn the_open_tail_is_what_could_still_match() {
        let scanner = scanner();
        assert_eq!(scanner.open_tail("write to ada", 0), 3);
        assert_eq!(scanner.open_tail("card 4111 1111", 0), 9);
        assert_eq!(scanner.open_tail("done. ", 0), 0);
    }
}
