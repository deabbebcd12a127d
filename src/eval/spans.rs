//! What a redacting processor found in a text, read back from what came out: the same text
//! redacted with `mask` (one `*` per character: where) and with `placeholder` (`[EMAIL]`: what).

use super::corpus::Span;

/// The findings in `input` (which holds no `[KIND]`-like tokens of its own), from its `masked`
/// and `placeholdered` redactions. Adjacent findings
/// merge in the mask; such a run takes the first kind the placeholders name for it.
pub(super) fn found_in(input: &str, masked: &str, placeholdered: &str) -> Result<Vec<Span>, String> {
    let runs = masked_runs(input, masked)?;
    let groups = placeholder_groups(placeholdered);
    if runs.len() != groups.len() {
        return Err(format!(
            "the mask shows {} redactions and the placeholders {} in {placeholdered:?}",
            runs.len(),
            groups.len()
        ));
    }
    Ok(runs
        .into_iter()
        .zip(groups)
        .map(|((start, end), kinds)| Span { start, end, kind: kinds[0].to_lowercase() })
        .collect())
}

/// Byte ranges of `input` that came out as `*` in `masked`.
fn masked_runs(input: &str, masked: &str) -> Result<Vec<(usize, usize)>, String> {
    if input.chars().count() != masked.chars().count() {
        return Err(format!("the masked text is not as long as the input: {masked:?}"));
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for ((at, original), out) in input.char_indices().zip(masked.chars()) {
        if out == '*' && original != '*' {
            let end = at + original.len_utf8();
            match runs.last_mut() {
                Some(run) if run.1 == at => run.1 = end,
                _ => runs.push((at, end)),
            }
        } else if out != original {
            return Err(format!("the masked text differs from the input beyond its masks: {masked:?}"));
        }
    }
    Ok(runs)
}

/// The kinds of `[KIND]` placeholders in order, those with nothing between them grouped.
fn placeholder_groups(text: &str) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut rest = text;
    let mut touching = false;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let name_len = after.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'));
        match name_len {
            Some(len) if len > 0 && after[len..].starts_with(']') => {
                let kind = after[..len].to_owned();
                match groups.last_mut() {
                    Some(group) if touching && open == 0 => group.push(kind),
                    _ => groups.push(vec![kind]),
                }
                rest = &after[len + 1..];
                touching = true;
            }
            _ => {
                rest = after;
                touching = false;
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where comes from the mask and what from the placeholders, merged runs taking one kind.
    #[test]
    fn findings_are_read_back_from_the_two_redactions() {
        let input = "mail ada@x.io or call 555 0132, [sic]";
        let masked = "mail ******** or call ********, [sic]";
        let placeholdered = "mail [EMAIL] or call [PHONE], [sic]";
        let found = found_in(input, masked, placeholdered).unwrap();
        let texts: Vec<&str> = found.iter().map(|span| &input[span.start..span.end]).collect();
        assert_eq!(texts, ["ada@x.io", "555 0132"]);
        assert_eq!(found[1].kind, "phone");
        let merged = found_in("ab cd", "*****", "[EMAIL][PHONE]").unwrap();
        assert_eq!((merged.len(), merged[0].kind.as_str()), (1, "email"));
        assert!(found_in("abc", "ab", "abc").is_err());
    }
}
