//! What a tool's name may be: the catalog refuses any other, and a task id, which carries one,
//! is read within the same bound.

/// The longest tool name, in bytes (all of them ASCII).
pub const MAX_LEN: usize = 64;

/// Whether `name` is 1 to [`MAX_LEN`] characters of `[A-Za-z0-9_-]`.
pub fn is_valid(name: &str) -> bool {
    (1..=MAX_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_words_of_letters_digits_underscores_and_dashes() {
        assert!(is_valid("CatalogService_GetItem"));
        assert!(is_valid("a-b_C9"));
        assert!(is_valid(&"x".repeat(MAX_LEN)));
        assert!(!is_valid(""));
        assert!(!is_valid("a.b"));
        assert!(!is_valid(&"x".repeat(MAX_LEN + 1)));
    }
}
