//! The tree of messages under a schema's root, read from the descriptors before anything is
//! built: what decides the schema's layout ([`super::message_schema`]).

use std::collections::HashMap;

use prost_reflect::{Kind, MessageDescriptor};

use super::{written_message, Layout, MAX_INLINE_DEPTH};
use crate::proto_json::Form;

/// The tree of messages under a schema's root, read from the descriptors without building
/// anything: which messages are recursive, how often each is used, and how many fields the
/// inline layout writes. Linear in the messages and fields reachable from the root, times
/// the inline depth at most.
pub(super) struct Shape {
    /// Every message reachable from the root (index 0), by full name.
    index: HashMap<String, usize>,
    /// Per message: whether it reaches itself through its fields.
    recursive: Vec<bool>,
    /// Per message: how many places in the tree write it (each written message's fields
    /// counted once; the root's twice when it is recursive, since it is then also a `$def`).
    uses: Vec<usize>,
    /// How many fields the inline layout writes, saturating.
    pub(super) inline_fields: u64,
}

impl Shape {
    pub(super) fn of(root: &MessageDescriptor) -> Shape {
        // A well-known root (a Timestamp, say) is written as a value, with no objects.
        if !matches!(Form::of(&Kind::Message(root.clone())), Form::Message(_)) {
            return Shape {
                index: HashMap::new(),
                recursive: Vec::new(),
                uses: Vec::new(),
                inline_fields: 0,
            };
        }
        let mut index = HashMap::from([(root.full_name().to_owned(), 0)]);
        let mut messages = vec![root.clone()];
        let mut children = Vec::new();
        let mut field_counts = Vec::new();
        // Breadth first: `messages` grows as new ones are found.
        while let Some(message) = messages.get(children.len()).cloned() {
            let mut written = Vec::new();
            let mut fields = 0u64;
            for field in message.fields() {
                fields += 1;
                if let Some(child) = written_message(&field) {
                    let id = match index.get(child.full_name()) {
                        Some(&known) => known,
                        None => {
                            let id = messages.len();
                            index.insert(child.full_name().to_owned(), id);
                            messages.push(child);
                            id
                        }
                    };
                    written.push(id);
                }
            }
            children.push(written);
            field_counts.push(fields);
        }
        let recursive = in_cycles(&children);
        let mut uses = vec![0usize; children.len()];
        let root_writes = usize::from(recursive.first().copied().unwrap_or(false));
        for (parent, written) in children.iter().enumerate() {
            for &child in written {
                if let Some(count) = uses.get_mut(child) {
                    *count += if parent == 0 { 1 + root_writes } else { 1 };
                }
            }
        }
        let inline_fields = inline_fields_of(&children, &recursive, &field_counts);
        Shape {
            index,
            recursive,
            uses,
            inline_fields,
        }
    }

    /// Whether `message` may be written where it is used (within the depth, which the builder
    /// keeps): not when it is recursive, nor, shared, when it is used more than once.
    pub(super) fn may_inline(&self, message: &MessageDescriptor, layout: Layout) -> bool {
        // Every message the builder meets is in the tree; one that were not goes behind a `$ref`.
        let Some(&id) = self.index.get(message.full_name()) else {
            return false;
        };
        let recursive = self.recursive.get(id).copied().unwrap_or(true);
        let uses = self.uses.get(id).copied().unwrap_or(usize::MAX);
        !recursive && (layout == Layout::Inline || uses <= 1)
    }
}

/// Which messages reach themselves through their fields: those with a field of their own type,
/// or in a strongly connected component of more than one (Tarjan's algorithm, iteratively, so
/// a long chain of messages does not deepen the stack).
fn in_cycles(children: &[Vec<usize>]) -> Vec<bool> {
    const UNSEEN: usize = usize::MAX;
    let count = children.len();
    let mut order = vec![UNSEEN; count];
    let mut low = vec![0; count];
    let mut on_stack = vec![false; count];
    let mut stack = Vec::new();
    let mut recursive = vec![false; count];
    let mut next_order = 0;
    for start in 0..count {
        if order[start] != UNSEEN {
            continue;
        }
        // (message, how many of its children have been looked at)
        let mut walk = vec![(start, 0usize)];
        order[start] = next_order;
        low[start] = next_order;
        next_order += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some((node, position)) = walk.last_mut() {
            let node = *node;
            if let Some(&child) = children[node].get(*position) {
                *position += 1;
                if child == node {
                    recursive[node] = true;
                } else if order[child] == UNSEEN {
                    order[child] = next_order;
                    low[child] = next_order;
                    next_order += 1;
                    stack.push(child);
                    on_stack[child] = true;
                    walk.push((child, 0));
                } else if on_stack[child] {
                    low[node] = low[node].min(order[child]);
                }
                continue;
            }
            walk.pop();
            if let Some(&(parent, _)) = walk.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == order[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    for member in component {
                        recursive[member] = true;
                    }
                }
            }
        }
    }
    recursive
}

/// How many fields the inline layout writes: the root's tree, and the tree of each message
/// behind a `$ref` (recursive, or deeper than [`MAX_INLINE_DEPTH`]), which is built once
/// from depth 0. Memoized per message and depth, so it is linear in the tree's messages and
/// fields however many paths lead to each; saturating.
fn inline_fields_of(children: &[Vec<usize>], recursive: &[bool], field_counts: &[u64]) -> u64 {
    let levels = MAX_INLINE_DEPTH + 1;
    let inlined = |child: usize, depth: usize| depth < MAX_INLINE_DEPTH && !recursive[child];
    // Which messages the builder puts behind a `$ref`: walk (message, depth) once each.
    let mut seen = vec![false; children.len() * levels];
    let mut referenced = vec![false; children.len()];
    let mut walk = vec![(0usize, 0usize)];
    seen[0] = true;
    while let Some((node, depth)) = walk.pop() {
        for &child in &children[node] {
            let next = if inlined(child, depth) {
                (child, depth + 1)
            } else if !referenced[child] {
                referenced[child] = true;
                (child, 0)
            } else {
                continue;
            };
            let slot = next.0 * levels + next.1;
            if !seen[slot] {
                seen[slot] = true;
                walk.push(next);
            }
        }
    }
    let mut memo: Vec<Option<u64>> = vec![None; children.len() * levels];
    let mut total = tree_fields(0, 0, children, &inlined, field_counts, &mut memo);
    for (message, _) in referenced.iter().enumerate().filter(|(_, referenced)| **referenced) {
        total = total.saturating_add(tree_fields(message, 0, children, &inlined, field_counts, &mut memo));
    }
    total
}

/// The fields of `message`'s object written at `depth`, with those of the objects inlined in
/// it. Recurses at most [`MAX_INLINE_DEPTH`] deep.
fn tree_fields(
    message: usize,
    depth: usize,
    children: &[Vec<usize>],
    inlined: &impl Fn(usize, usize) -> bool,
    field_counts: &[u64],
    memo: &mut [Option<u64>],
) -> u64 {
    let slot = message * (MAX_INLINE_DEPTH + 1) + depth;
    if let Some(known) = memo[slot] {
        return known;
    }
    let mut total = field_counts[message];
    for &child in &children[message] {
        if inlined(child, depth) {
            total = total.saturating_add(tree_fields(child, depth + 1, children, inlined, field_counts, memo));
        }
    }
    memo[slot] = Some(total);
    total
}
