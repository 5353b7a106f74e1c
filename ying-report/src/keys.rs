//! The keys that ying's inputs take (the attribute's arguments, the configuration's keys), and the one way an
//! unknown key is answered: with the closest known one.

/// The known key closest to `key` in spelling, when one is close enough to be a slip (at most 3 edits).
///
/// ```
/// assert_eq!(ying_report::closest_key("max_retain", &["max_retained", "max_peak"]), Some("max_retained"));
/// assert_eq!(ying_report::closest_key("colour", &["max_retained", "max_peak"]), None);
/// ```
pub fn closest_key<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|name| (edit_distance(key, name), *name))
        .min()
        .filter(|&(distance, _)| distance <= 3)
        .map(|(_, name)| name)
}

/// Levenshtein distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, &cb) in b.iter().enumerate() {
            current.push((previous[j] + usize::from(ca != cb)).min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edits_are_counted() {
        assert_eq!(edit_distance("max_retain", "max_retained"), 2);
        assert_eq!(edit_distance("jbos", "jobs"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
