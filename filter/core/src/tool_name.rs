//! What a tool's name may be: the catalog refuses any other, and a task id, which carries one,
//! is read within the same bound.

/// The longest tool name, in bytes (all of them ASCII).
pub const MAX_LEN: usize = 64;

/// [`is_valid`] as a regular expression, for the configuration's JSON Schema.
#[cfg(any(feature = "schema", test))]
pub const PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

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

    #[test]
    fn the_pattern_says_what_is_valid_says() {
        let schema = serde_json::json!({"type": "string", "pattern": PATTERN});
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        for name in [
            "a",
            "CatalogService_GetItem",
            "a-b_C9",
            &"x".repeat(MAX_LEN),
            &"x".repeat(MAX_LEN + 1),
            "",
            "a.b",
            "é",
        ] {
            assert_eq!(validator.is_valid(&serde_json::json!(name)), is_valid(name), "{name:?}");
        }
    }
}
