//! Which module of a crate uses which, read from its sources, so that each
//! crate's layering test (the store's and the daemon's) holds its layers in
//! place with one reader: no import circle, and every import pointing down.
//!
//! The imports are read from the sources, as paths: a `use` of `crate::…`,
//! `super::…` or `self::…` (grouped uses included) or such a path written
//! inline, outside `#[cfg(test)]` items. A module is a file (an inline module
//! counts as part of its file; `a/mod.rs` is `a`, `lib.rs` or `main.rs` the
//! root). A path names the deepest module it goes through; a path that names
//! no module names the crate root. A module's own ancestors are not counted (a
//! parent declares and re-exports its children, children use their parent's
//! items), except the crate root: it only declares and re-exports, so nothing
//! below it uses it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// The crate root (`lib.rs` or `main.rs`), named as in a path.
pub const ROOT: &str = "crate";

/// Which module uses which, each edge with one path that makes it.
pub struct Graph {
    pub edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    /// Reads every `.rs` file under `src`, a crate's source folder.
    pub fn of(src: &Path) -> Graph {
        let mut files = BTreeMap::new();
        read_dir(src, src, &mut files);
        let modules: BTreeSet<String> = files.keys().cloned().collect();
        let edges = files.iter().map(|(module, text)| (module.clone(), imports(text, module, &modules))).collect();
        Graph { edges }
    }

    /// One circle through each group of modules that reach each other.
    pub fn circles(&self) -> Vec<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut circles = vec![];
        for start in self.edges.keys() {
            if seen.contains(start) {
                continue;
            }
            if let Some(circle) = self.shortest_way(start, start) {
                seen.extend(self.edges.keys().filter(|m| self.reaches(start, m) && self.reaches(m, start)).cloned());
                circles.push(circle);
            }
        }
        circles
    }

    /// The modules on a shortest way from `from` to `to` (both included), by at least one edge.
    fn shortest_way(&self, from: &str, to: &str) -> Option<Vec<String>> {
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue: VecDeque<&str> = VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            for next in self.edges.get(at).into_iter().flat_map(|e| e.keys()) {
                if next == to {
                    let mut way = vec![to.to_string(), at.to_string()];
                    let mut back = at;
                    while back != from {
                        back = came_from[back];
                        way.push(back.to_string());
                    }
                    way.reverse();
                    return Some(way);
                }
                if next != from && !came_from.contains_key(next.as_str()) {
                    came_from.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
        None
    }

    fn reaches(&self, from: &str, to: &str) -> bool {
        from == to || self.shortest_way(from, to).is_some()
    }

    /// `a -> b (crate::b::X) -> a (super::a::Y)`.
    pub fn spell(&self, circle: &[String]) -> String {
        let mut out = circle[0].clone();
        for pair in circle.windows(2) {
            out.push_str(&format!(" -> {} ({})", pair[1], self.edges[&pair[0]][&pair[1]]));
        }
        out
    }

    /// Every import that points up, and every module in no layer. `layers`
    /// lists groups of modules, bottom to top; a module sits in the layer of
    /// its longest listed entry that is the module or one of its ancestors
    /// (`ops` holds `ops::apply`), so one module's parts may sit apart. The
    /// crate root is above every layer.
    pub fn upward(&self, layers: &[&[&str]]) -> Vec<String> {
        let mut wrong = vec![];
        for module in self.edges.keys() {
            if layer(module, layers).is_none() {
                wrong.push(format!("{module} is in no layer: place it in the crate's LAYERS"));
            }
        }
        for (from, tos) in &self.edges {
            for (to, path) in tos {
                if let (Some((below, _)), Some((above, entry))) = (layer(from, layers), layer(to, layers))
                    && below < above
                {
                    wrong.push(format!("{from} uses {to} (layer `{entry}`, above its own) through `{path}`"));
                }
            }
        }
        wrong
    }
}

/// The layer a module sits in: its index in `layers` and the entry that places it.
fn layer<'a>(module: &str, layers: &[&[&'a str]]) -> Option<(usize, &'a str)> {
    if module == ROOT {
        return Some((layers.len(), ROOT));
    }
    layers
        .iter()
        .enumerate()
        .flat_map(|(i, group)| group.iter().map(move |entry| (i, *entry)))
        .filter(|(_, entry)| module == *entry || module.starts_with(&format!("{entry}::")))
        .max_by_key(|(_, entry)| entry.len())
}

/// Every `.rs` file under `dir`, by module path (`ops/mod.rs` is `ops`, `lib.rs` or `main.rs` the root).
fn read_dir(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("read the crate's sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            read_dir(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src").with_extension("");
            let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            let module = match parts.as_slice() {
                [only] if only == "lib" || only == "main" => ROOT.to_string(),
                [dirs @ .., last] if last == "mod" => dirs.join("::"),
                all => all.join("::"),
            };
            files.insert(module, std::fs::read_to_string(&path).expect("read a source file"));
        }
    }
}

/// The modules `module`'s source uses, each with one path that names it.
pub fn imports(src: &str, module: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let code = without_test_items(&code_only(src));
    let mut paths = vec![];
    let mut rest = String::new();
    let mut at = 0;
    while let Some(start) = find_word(&code, "use", at) {
        let end = start + code[start..].find(';').expect("a use ends with ;");
        rest.push_str(&code[at..start]);
        let tree: String = code[start + 3..end].split_whitespace().collect::<Vec<_>>().join(" ");
        expand("", &tree.replace(" :: ", "::").replace(":: ", "::"), &mut paths);
        at = end + 1;
    }
    rest.push_str(&code[at..]);
    paths.extend(inline_paths(&rest));

    let mut found = BTreeMap::new();
    for path in paths {
        let Some(target) = resolve(&path, module, modules) else { continue };
        let own = target == module || (target != ROOT && module.starts_with(&format!("{target}::")));
        if !own {
            found.entry(target).or_insert(path);
        }
    }
    found
}

/// The deepest module a path goes through, the root if none; `None` when
/// the path does not start in this crate.
fn resolve(path: &str, module: &str, modules: &BTreeSet<String>) -> Option<String> {
    let segments: Vec<&str> = path.split("::").collect();
    let mut absolute: Vec<&str> = match segments[0] {
        "crate" => vec![],
        "super" | "self" if module == ROOT => vec![],
        "super" | "self" => module.split("::").collect(),
        _ => return None,
    };
    let mut rest = &segments[..];
    if rest[0] == "crate" || rest[0] == "self" {
        rest = &rest[1..];
    }
    while rest.first() == Some(&"super") {
        absolute.pop();
        rest = &rest[1..];
    }
    absolute.extend(rest.iter().filter(|s| **s != "self"));
    (1..=absolute.len())
        .rev()
        .map(|n| absolute[..n].join("::"))
        .find(|m| modules.contains(m))
        .or_else(|| Some(ROOT.to_string()))
}

/// The paths of one use tree: `crate::{a::X, b::{self, Y as Z}}` gives
/// `crate::a::X`, `crate::b::self`, `crate::b::Y`.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        out.push(format!("{prefix}{path}"));
        return;
    };
    let close = tree.rfind('}').expect("a use group closes");
    let prefix = format!("{prefix}{}", &tree[..open]);
    let (mut depth, mut from) = (0, open + 1);
    for (i, c) in tree.char_indices().take(close).skip(open + 1) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&prefix, &tree[from..i], out);
                from = i + 1;
            }
            _ => {}
        }
    }
    if !tree[from..close].trim().is_empty() {
        expand(&prefix, &tree[from..close], out);
    }
}

/// Paths starting at `crate::`, `super::` or `self::` written in code.
fn inline_paths(code: &str) -> Vec<String> {
    let mut out = vec![];
    for head in ["crate::", "super::", "self::"] {
        let mut at = 0;
        while let Some(start) = find_word(code, head.trim_end_matches(':'), at) {
            at = start + 1;
            if !code[start..].starts_with(head) || code[..start].ends_with('$') {
                continue;
            }
            let mut end = start;
            loop {
                let ident = code[end..].find(|c: char| !is_ident(c)).map_or(code.len(), |n| end + n);
                end = ident;
                if code[end..].starts_with("::") && code[end + 2..].starts_with(is_ident) {
                    end += 2;
                } else {
                    break;
                }
            }
            out.push(code[start..end].to_string());
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where `word` next starts at or after `from`, as a whole word.
fn find_word(text: &str, word: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(n) = text[at..].find(word) {
        let start = at + n;
        let before = text[..start].chars().next_back();
        let after = text[start + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
            return Some(start);
        }
        at = start + word.len();
    }
    None
}

/// The source without comments and without the text of string and character
/// literals (their quotes stay), so that only code is read.
fn code_only(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (at(i + 1) == '"' || at(i + 1) == '#') && !is_ident(at(i.wrapping_sub(1))) {
            let mut hashes = 0;
            let mut j = i + 1;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() && !(chars[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#')) {
                j += 1;
            }
            out.push_str("\"\"");
            i = j + 1 + hashes;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A character literal; a lifetime has no closing quote.
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("' '");
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The code without the items marked `#[cfg(test)]`.
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    while let Some(n) = code[at..].find("#[cfg(test)]") {
        let start = at + n;
        out.push_str(&code[at..start]);
        let bytes = code.as_bytes();
        let (mut i, mut depth) = (start, 0i32);
        // The attributes, then the item: up to its `;`, or its closing brace.
        loop {
            match bytes[i] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    let mut braces = 0;
                    loop {
                        match bytes[i] {
                            b'{' => braces += 1,
                            b'}' => braces -= 1,
                            _ => {}
                        }
                        if braces == 0 {
                            break;
                        }
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        at = i + 1;
    }
    out.push_str(&code[at..]);
    out
}
