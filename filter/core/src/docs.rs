//! Comments from `source_code_info`, looked up by descriptor path, to describe tools,
//! messages and fields in words a model can use.

use std::collections::HashMap;

use prost_reflect::{DescriptorPool, FieldDescriptor, MessageDescriptor, MethodDescriptor};

/// Comments of every commented element in a pool, keyed by file name and element path.
#[derive(Debug, Default)]
pub struct Docs {
    by_file: HashMap<String, HashMap<Vec<i32>, String>>,
}

impl Docs {
    pub fn from_pool(pool: &DescriptorPool) -> Self {
        let by_file = pool
            .files()
            .map(|file| {
                let locations = file
                    .file_descriptor_proto()
                    .source_code_info
                    .iter()
                    .flat_map(|info| info.location.iter())
                    .filter_map(|location| {
                        let text = location
                            .leading_comments
                            .as_deref()
                            .or(location.trailing_comments.as_deref())
                            .map(normalize)?;
                        (!text.is_empty()).then(|| (location.path.clone(), text))
                    })
                    .collect();
                (file.name().to_owned(), locations)
            })
            .collect();
        Docs { by_file }
    }

    fn lookup(&self, file: &str, path: &[i32]) -> Option<&str> {
        self.by_file.get(file)?.get(path).map(String::as_str)
    }

    pub fn method(&self, method: &MethodDescriptor) -> Option<&str> {
        self.lookup(method.parent_file().name(), method.path())
    }

    pub fn message(&self, message: &MessageDescriptor) -> Option<&str> {
        self.lookup(message.parent_file().name(), message.path())
    }

    pub fn field(&self, field: &FieldDescriptor) -> Option<&str> {
        self.lookup(field.parent_file().name(), field.path())
    }
}

/// Joins comment lines into one paragraph-preserving string without comment indentation.
fn normalize(comment: &str) -> String {
    let lines: Vec<&str> = comment.lines().map(str::trim).collect();
    let mut text = String::new();
    for line in lines {
        if line.is_empty() {
            if !text.is_empty() && !text.ends_with("\n\n") {
                text.push_str("\n\n");
            }
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push(' ');
            }
            text.push_str(line);
        }
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_joins_lines_and_keeps_paragraphs() {
        assert_eq!(
            normalize(" Search the catalog.\n Results are paged.\n"),
            "Search the catalog. Results are paged."
        );
        assert_eq!(normalize(" One.\n\n Two.\n"), "One.\n\nTwo.");
    }
}
