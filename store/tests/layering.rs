//! The store's modules form layers, and every import points down: the
//! shared reader (tests/common/layering.rs) reads the imports of `store/src`,
//! this file says where each module sits.

#[path = "../../tests/common/layering.rs"]
mod layering;

use layering::{Graph, ROOT, imports};
use std::collections::BTreeSet;
use std::path::Path;

/// The store's layers, bottom to top, one module each. A module sits in the
/// layer of its longest entry (`ops` holds `ops::apply`), so one module's
/// parts may sit apart: `export::stream` (the stream format) and `export`
/// (which streams a snapshot through its engine's own walk) lie below the
/// engines, `export::redb` (the embedded engine's tables) among them. The
/// crate root is above every layer.
const LAYERS: &[&[&str]] = &[
    &["keys"],
    &["refs"],
    &["rows"],
    &["tables"],
    &["media"],
    &["payloads"],
    &["histogram"],
    &["bloom"],
    &["model"],
    &["canonical"],
    &["error"],
    &["tiered"],
    &["referrers"],
    &["ops"],
    &["wal"],
    &["export::stream"],
    &["verify::report"],
    &["view"],
    &["export"],
    &["verify"],
    &["backend"],
    &["engine"],
    &["writer"],
    &["read"],
    &["export::redb"],
    &["embedded"],
    &["verify::derived"],
    &["verify::redb", "verify::approvals", "verify::owners"],
    &["verify::objects"],
    &["postgres"],
    &["fuzz"],
    &["sample"],
];

fn store() -> Graph {
    Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn the_store_has_no_import_circle() {
    let graph = store();
    let circles: Vec<String> = graph.circles().iter().map(|c| graph.spell(c)).collect();
    assert!(circles.is_empty(), "import circles in store/src:\n{}", circles.join("\n"));
}

#[test]
fn every_import_in_the_store_points_down() {
    let wrong = store().upward(LAYERS);
    assert!(wrong.is_empty(), "imports pointing up in store/src:\n{}", wrong.join("\n"));
}

// The shared reader's own test: here, so that it runs once.
#[test]
fn the_import_reader_sees_grouped_and_inline_paths_and_skips_tests() {
    let modules: BTreeSet<String> = ["a", "a::b", "c", "d", "e", "f", "g"].iter().map(|m| m.to_string()).collect();
    let src = r#"
        //! Names crate::g in a comment only.
        use crate::{a::{self, X}, c::{Y, Z as W}};
        use super::*;
        pub(crate) fn f() -> u8 { let s = "crate::g"; crate::d::call(s) + crate::Loose }
        #[cfg(test)]
        #[allow(dead_code)]
        mod tests { use crate::e::T; }
        #[cfg(test)]
        use crate::f::U;
    "#;
    let found: BTreeSet<String> = imports(src, "a::b", &modules).into_keys().collect();
    let expected: BTreeSet<String> = ["c", "d", ROOT].iter().map(|m| m.to_string()).collect();
    assert_eq!(found, expected, "`a` is an ancestor of `a::b`, `e` and `f` are test code, `g` a comment and a string");
}
