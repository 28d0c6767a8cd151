//! Which module of a crate imports which, read from its sources, so that a
//! test can hold the layers in place: no import circle, and no import from a
//! lower layer up to a higher one. Shared by the crates' layering tests.
//!
//! A module is a file (`a/b.rs` and `a/b/mod.rs` are `a::b`); an import is a
//! `crate::`, `super::` or `self::` path outside `#[cfg(test)]` code, in a
//! `use` or inline, naming the longest known module it starts with. A module
//! and its own submodules may name each other: a folder is one unit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The import graph of one crate: module → the modules it names.
pub struct Imports {
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

impl Imports {
    /// Reads every `.rs` file under `src`.
    pub fn of(src: &Path) -> Imports {
        let mut files = BTreeMap::new();
        read_tree(src, src, &mut files);
        let known: BTreeSet<String> = files.keys().cloned().collect();
        let mut edges = BTreeMap::new();
        for (module, text) in &files {
            let named =
                paths(text).filter_map(|p| resolve(&p, module, &known)).filter(|t| !related(t, module)).collect();
            edges.insert(module.clone(), named);
        }
        Imports { edges }
    }

    /// An import circle, if there is one: the modules on it, in order.
    pub fn circle(&self) -> Option<Vec<String>> {
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        let mut stack = vec![];
        self.edges.keys().find_map(|m| self.visit(m, &mut state, &mut stack))
    }

    fn visit<'a>(
        &'a self,
        m: &'a str,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(2) => return None,
            Some(_) => {
                let at = stack.iter().position(|s| *s == m).unwrap_or(0);
                return Some(stack[at..].iter().chain([&m]).map(|s| s.to_string()).collect());
            }
            None => {}
        }
        state.insert(m, 1);
        stack.push(m);
        for next in self.edges.get(m).into_iter().flatten() {
            if let Some(c) = self.visit(next, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(m, 2);
        None
    }

    /// Every import that points up: `layers` lists module prefixes from the
    /// top layer down; a module belongs to the layer of its longest listed
    /// prefix. Modules no layer lists are reported too.
    pub fn upward(&self, layers: &[&[&str]]) -> Vec<String> {
        let layer_of = |m: &str| {
            let mut best: Option<(usize, usize)> = None;
            for (i, prefixes) in layers.iter().enumerate() {
                for p in prefixes.iter().filter(|p| m == **p || m.starts_with(&format!("{p}::"))) {
                    if best.is_none_or(|(len, _)| p.len() > len) {
                        best = Some((p.len(), i));
                    }
                }
            }
            best.map(|(_, i)| i)
        };
        let mut out = vec![];
        for (from, targets) in &self.edges {
            let Some(a) = layer_of(from) else {
                out.push(format!("{from} is in no layer"));
                continue;
            };
            for to in targets {
                match layer_of(to) {
                    Some(b) if b >= a => {}
                    _ => out.push(format!("{from} (layer {a}) imports {to}, a higher layer")),
                }
            }
        }
        out
    }
}

fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut items: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    items.sort();
    for path in items {
        if path.is_dir() {
            read_tree(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            let module = match parts.as_slice() {
                [one] if one == "main" || one == "lib" => "crate".to_string(),
                _ => parts.join("::"),
            };
            out.insert(module, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The paths a file names outside its tests and comments, with `use` groups
/// (`a::{b, c::{d}}`) expanded.
fn paths(text: &str) -> impl Iterator<Item = String> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = vec![];
    let mut rest = code.as_str();
    while let Some(at) = rest.find("use ") {
        let boundary = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric() && rest.as_bytes()[at - 1] != b'_';
        let tail = &rest[at + 4..];
        let end = tail.find(';').unwrap_or(tail.len());
        if boundary {
            let tree: String = tail[..end].chars().filter(|c| !c.is_whitespace()).collect();
            expand("", &tree, &mut out);
        }
        rest = &tail[end.min(tail.len())..];
    }
    for word in code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        if word.starts_with("crate::") || word.starts_with("super::") {
            out.push(word.trim_end_matches(':').to_string());
        }
    }
    out.into_iter()
}

fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        out.push(format!("{prefix}{path}"));
        return;
    };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let head = format!("{prefix}{}", &tree[..open]);
    let (mut depth, mut start) = (0, open + 1);
    for (i, c) in tree.char_indices().take(close).skip(open + 1) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&head, &tree[start..i], out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < close {
        expand(&head, &tree[start..close], out);
    }
}

/// The module a path names: the longest known module it starts with.
fn resolve(path: &str, from: &str, known: &BTreeSet<String>) -> Option<String> {
    let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
    let mut base: Vec<&str> = if from == "crate" { vec![] } else { from.split("::").collect() };
    match parts.first() {
        Some(&"crate") => {
            parts.remove(0);
            base.clear();
        }
        Some(&"super") | Some(&"self") => {
            while parts.first() == Some(&"super") {
                parts.remove(0);
                base.pop();
            }
            if parts.first() == Some(&"self") {
                parts.remove(0);
            }
        }
        _ => return None,
    }
    let full: Vec<&str> = base.into_iter().chain(parts).collect();
    (1..=full.len()).rev().map(|n| full[..n].join("::")).find(|m| known.contains(m))
}

/// A module and its ancestors or descendants are one unit.
fn related(a: &str, b: &str) -> bool {
    a == b || a == "crate" || b == "crate" || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}
