//! What `pii-detector` takes for a phone number: a number its number plan says is valid (the
//! `phonenumber` crate's copy of libphonenumber's metadata), written as that plan writes its
//! numbers, and not an id (a number after `order`, `ref.`, `#` …).

use std::ops::RangeInclusive;
use std::sync::LazyLock;

use phonenumber::country::Id;
use regex::{Regex, RegexBuilder};

/// The number plans a phone number without a country code is tried in, in order, each with
/// whether its numbers are written with the trunk prefix 0 at home (`020 7946 0958`, not
/// `20 7946 0958`) and how many digits they have as written there (trunk prefix included).
const PHONE_REGIONS: [(Id, bool, RangeInclusive<usize>); 8] = [
    (Id::US, false, 10..=11),
    (Id::GB, true, 10..=11),
    (Id::DE, true, 6..=15),
    (Id::FR, true, 10..=10),
    (Id::ES, false, 9..=9),
    (Id::IT, false, 6..=11),
    (Id::NL, true, 10..=10),
    (Id::BR, false, 10..=12),
];

/// One number plan's patterns, compiled once: libphonenumber's metadata (through the
/// `phonenumber` crate) for the national significant number, in general and per type (fixed
/// line, mobile, toll free, …), each with its possible lengths. The crate's own validation
/// shares a 100-regex cache behind one lock, which the plans of code 1 alone overflow: tens of
/// microseconds a number, against under one here.
struct Plan {
    code: u16,
    trunk: bool,
    lengths: RangeInclusive<usize>,
    general: Pattern,
    types: Vec<Pattern>,
}

struct Pattern {
    regex: Regex,
    lengths: Vec<u16>,
}

impl Pattern {
    fn of(descriptor: &phonenumber::metadata::Descriptor) -> Option<Pattern> {
        let source = format!("^(?:{})$", descriptor.national_number().as_str());
        let regex = RegexBuilder::new(&source).ignore_whitespace(true).build().ok()?;
        Some(Pattern { regex, lengths: descriptor.possible_length().to_vec() })
    }

    fn matches(&self, national: &str) -> bool {
        (self.lengths.is_empty() || self.lengths.contains(&u16::try_from(national.len()).unwrap_or(0)))
            && self.regex.is_match(national)
    }
}

static PLANS: LazyLock<Vec<Plan>> = LazyLock::new(|| {
    PHONE_REGIONS
        .iter()
        .filter_map(|(region, trunk, lengths)| {
            let meta = phonenumber::metadata::DATABASE.by_id(region.as_ref())?;
            let descriptors = meta.descriptors();
            let types = [
                descriptors.fixed_line(),
                descriptors.mobile(),
                descriptors.toll_free(),
                descriptors.premium_rate(),
                descriptors.shared_cost(),
                descriptors.personal_number(),
                descriptors.voip(),
                descriptors.pager(),
                descriptors.uan(),
                descriptors.voicemail(),
            ];
            Some(Plan {
                code: meta.country_code(),
                trunk: *trunk,
                lengths: lengths.clone(),
                general: Pattern::of(descriptors.general())?,
                types: types.into_iter().flatten().filter_map(Pattern::of).collect(),
            })
        })
        .collect()
});

impl Plan {
    /// True when `national` (digits only, no trunk prefix) is a number of this plan.
    fn holds(&self, national: &str) -> bool {
        self.general.matches(national) && self.types.iter().any(|pattern| pattern.matches(national))
    }

    /// The national significant number of `digits` written at home, if written as this plan
    /// writes them: the trunk prefix 0 where it has one, a leading 1 dropped in the US plan.
    fn national_of<'a>(&self, digits: &'a str) -> Option<&'a str> {
        if !self.lengths.contains(&digits.len()) {
            return None;
        }
        match (self.trunk, self.code) {
            (true, _) => digits.strip_prefix('0'),
            (false, 1) if digits.len() == 11 => digits.strip_prefix('1'),
            (false, 55) => Some(digits.strip_prefix('0').unwrap_or(digits)),
            _ => Some(digits),
        }
    }
}

/// A phone number valid in its number plan: with `+` (or `00`) and a country code in that
/// country's, else in one of [`PHONE_REGIONS`] (and written as that plan writes them). Digit runs
/// that read as something else are not tried: a decimal (`48.858370`: one `.` and nothing else
/// between digits); dates, ISBNs and ids led by a year are look-alikes, and a number after a
/// word such as `order` or `ref.` is an id (see `ID_WORDS`).
pub(super) fn phone_valid(candidate: &str) -> bool {
    let digits: String = candidate.chars().filter(char::is_ascii_digit).collect();
    if !(7..=15).contains(&digits.len()) {
        return false;
    }
    let separators: Vec<char> = candidate.chars().filter(|c| !c.is_ascii_digit() && *c != ' ').collect();
    let groups = candidate.split(|c: char| !c.is_ascii_digit()).filter(|group| !group.is_empty()).count();
    if separators == ['.'] && groups == 2 {
        return false;
    }
    if candidate.starts_with('+') {
        return international_valid(candidate, &digits);
    }
    if let Some(international) = digits.strip_prefix("00") {
        return international_valid(&format!("+{international}"), international);
    }
    PLANS.iter().any(|plan| {
        plan.national_of(&digits).is_some_and(|national| {
            // Code 1 is shared by 25 plans (Canada, the Caribbean): the crate knows them all.
            plan.holds(national) || (plan.code == 1 && crate_valid(Some(Id::US), candidate))
        })
    })
}

/// The `phonenumber` crate's own parse and validation: every plan, but slower.
fn crate_valid(region: Option<Id>, candidate: &str) -> bool {
    phonenumber::parse(region, candidate).is_ok_and(|number| phonenumber::is_valid(&number))
}

/// `+` and a country code: checked against that country's plan when it is one of ours (a `(0)`
/// or a trunk 0 after the code tolerated), else (and for code 1 beyond the US) by the
/// `phonenumber` crate.
fn international_valid(candidate: &str, digits: &str) -> bool {
    for plan in PLANS.iter() {
        let code = plan.code.to_string();
        if let Some(rest) = digits.strip_prefix(code.as_str()) {
            let national =
                if plan.trunk || plan.code == 55 { rest.strip_prefix('0').unwrap_or(rest) } else { rest };
            return plan.holds(national) || (plan.code == 1 && crate_valid(None, candidate));
        }
    }
    crate_valid(None, candidate)
}

/// Words that say the number after them is an id, not a phone number (`ref. 355 643 667`,
/// `Bestellung 7187805464`), in the languages of the evaluation corpus.
const ID_WORDS: [&str; 35] = [
    "ref",
    "reference",
    "referenz",
    "référence",
    "referencia",
    "riferimento",
    "referência",
    "kenmerk",
    "aktenzeichen",
    "order",
    "bestellung",
    "commande",
    "pedido",
    "ordine",
    "bestelling",
    "invoice",
    "rechnung",
    "facture",
    "factura",
    "fattura",
    "factuur",
    "fatura",
    "id",
    "nr",
    "n°",
    "nº",
    "sku",
    "ean",
    "isbn",
    "barcode",
    "strichcode",
    "barres",
    "barras",
    "barre",
    "streepjescode",
];

/// True when the last word before a number (within 24 bytes: no more than a stream keeps as
/// context) is one of [`ID_WORDS`], or the number follows `#` or `№`.
pub(super) fn led_by_id_word(before: &str) -> bool {
    let mut start = before.len().saturating_sub(24);
    while !before.is_char_boundary(start) {
        start += 1;
    }
    let window =
        before[start..].trim_end_matches(|c: char| c.is_whitespace() || matches!(c, ':' | '.' | '=' | '-'));
    if window.ends_with(['#', '№']) {
        return true;
    }
    let word =
        window.rsplit(|c: char| !(c.is_alphanumeric() || matches!(c, '°' | 'º'))).next().unwrap_or_default();
    ID_WORDS.contains(&word.to_lowercase().as_str())
}
