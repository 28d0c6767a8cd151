//! The fuzz targets' seed corpora (`fuzz/corpus/<target>/`), run as ordinary tests
//! so CI exercises every target on stable, through the same code the targets call
//! (`world_store::fuzz`). Seeds named `valid-*` must be accepted (and round-trip),
//! `invalid-*` refused; any other file (one the fuzzer added) must merely not panic.
//!
//! The seeds are generated here. To rewrite them after a format change:
//! `WORLD_STORE_WRITE_CORPUS=1 cargo test -p world-store --test fuzz_corpus -- --test-threads=1`.

use ciborium::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use world_store::*;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

fn header(index: u64, written_by: &str) -> EntryHeader {
    EntryHeader {
        entry_index: index,
        semantics_epoch: 1,
        transition_fn: Ref::of(b"fn"),
        interpreter: Ref::of(b"interp"),
        prev_entry_hash: Ref::of(b"prev"),
        written_by: written_by.into(),
    }
}

fn entry(index: u64, written_by: &str) -> LogEntry {
    let header = header(index, written_by);
    let transition_ref = Ref::of(b"record");
    LogEntry { entry_hash: canonical::entry_hash(&header, &transition_ref), header, transition_ref }
}

/// Valid rows of each target, by seed name.
fn valid_rows() -> BTreeMap<&'static str, Vec<(&'static str, Vec<u8>)>> {
    let meta = ObjectRow {
        hash: Ref::of(b"a note"),
        interface_hash: Ref::of(b"world/note/v1"),
        semantic_id: "world/note/v1".into(),
        provenance: "coordinator:mcp".into(),
        size: 42,
        seq: 9,
        at: 4096,
    };
    let root = Ref::of(b"root");
    let e = entry(7, "coordinator:a2a");
    let world = World {
        world_ref: canonical::world_ref(7, &root, &e.entry_hash),
        revision: 7,
        state_root: root,
        log_head: e.entry_hash,
    };
    let grant = |budget| Grant::new("Workspace.Write", "worktree", budget);
    let session = Session {
        episode: "ep1".into(),
        grants: vec![grant(5), grant(0)],
        created_at: 1_700_000_000,
        expires_at: 1_700_003_600,
    };
    let committed =
        Committed { entry_index: 7, entry_hash: e.entry_hash, world_ref: world.world_ref, output_ref: root };
    let task = |state, committed| Task {
        request_digest: Ref::of(b"request"),
        state,
        started_at: 5,
        committed,
        effect_records: vec![Ref::of(b"record 0"), Ref::of(b"record 1")],
        transition: "tools.echo".into(),
        ended_at: Some(6),
        effects: vec![CallEffect {
            id: "e1".into(),
            effect: "Workspace.Write".into(),
            scope: "worktree".into(),
            cost: 2,
            status: EffectStatus::Denied,
            denial: Some("denied:budget".into()),
            budget_before: 1,
            budget_after: 1,
            record: Some(Ref::of(b"record 0")),
            request: Some(Ref::of(b"request")),
        }],
        context: None,
        message_id: None,
        run: None,
    };
    let intent = EffectIntent {
        episode: "ep1".into(),
        effect_id: "a2a:ep1:t1#0".into(),
        effect: "Workspace.Write".into(),
        scope: "worktree".into(),
        cost: 2,
        request_ref: Ref::of(b"request"),
        budget_before: 5,
        budget_after: 3,
        at: 9,
        credential: None,
    };
    let outcome = |status, record_ref, result_ref| EffectOutcome { status, record_ref, result_ref, at: 10 };
    let enc = rows::encode::<ObjectRow>;
    BTreeMap::from([
        (
            "row_object_meta",
            vec![
                ("valid-note", enc(&meta)),
                (
                    "valid-empty-strings",
                    rows::encode(&ObjectRow {
                        semantic_id: String::new(),
                        provenance: String::new(),
                        size: 0,
                        ..meta.clone()
                    }),
                ),
            ],
        ),
        (
            "row_log_entry",
            vec![
                ("valid-coordinator-entry", rows::encode(&e)),
                ("valid-genesis-entry", rows::encode(&entry(0, "quickstart"))),
            ],
        ),
        ("row_world", vec![("valid-world", rows::encode(&world))]),
        (
            "row_session",
            vec![
                ("valid-two-grants", rows::encode(&session)),
                ("valid-no-grants", rows::encode(&Session { grants: vec![], ..session.clone() })),
            ],
        ),
        (
            "row_task",
            vec![
                ("valid-started", rows::encode(&task(TaskState::Started, None))),
                ("valid-committed", rows::encode(&task(TaskState::Committed, Some(committed.clone())))),
                ("valid-uncertain", rows::encode(&task(TaskState::Uncertain, None))),
                (
                    "valid-a2a-context-and-message",
                    rows::encode(&Task {
                        context: Some("ctx-1".into()),
                        message_id: Some("m-1".into()),
                        ..task(TaskState::Committed, Some(committed))
                    }),
                ),
            ],
        ),
        ("row_effect_intent", vec![("valid-intent", rows::encode(&intent))]),
        (
            "row_effect_outcome",
            vec![
                (
                    "valid-ok-with-result",
                    rows::encode(&outcome(OutcomeStatus::Ok, Some(Ref::of(b"rec")), Some(Ref::of(b"res")))),
                ),
                ("valid-indeterminate", rows::encode(&outcome(OutcomeStatus::Indeterminate, None, None))),
            ],
        ),
        (
            "row_receipt",
            vec![
                (
                    "valid-resolved",
                    rows::encode(&Receipt { request_digest: Ref::of(b"d"), result_ref: Some(world.world_ref) }),
                ),
                ("valid-journaled", rows::encode(&Receipt { request_digest: Ref::of(b"d"), result_ref: None })),
            ],
        ),
    ])
}

/// The row's CBOR body with the first byte string (a ref) cut to 31 bytes, or
/// the first text string replaced by a number when the row has no byte string.
fn break_a_field(row: &[u8]) -> Vec<u8> {
    fn walk(v: &mut Value, done: &mut bool, bytes_only: bool) {
        if *done {
            return;
        }
        match v {
            Value::Bytes(b) if bytes_only => {
                b.truncate(31);
                *done = true;
            }
            Value::Text(_) if !bytes_only => {
                *v = Value::Integer(7.into());
                *done = true;
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, done, bytes_only)),
            Value::Map(pairs) => pairs.iter_mut().for_each(|(_, i)| walk(i, done, bytes_only)),
            _ => {}
        }
    }
    let mut value: Value = ciborium::from_reader(&row[1..]).unwrap();
    let mut done = false;
    walk(&mut value, &mut done, true);
    if !done {
        walk(&mut value, &mut done, false);
    }
    assert!(done, "the row has a field to break");
    let mut out = vec![row[0]];
    ciborium::into_writer(&value, &mut out).unwrap();
    out
}

fn preimage_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let good = canonical::entry_preimage(&header(3, "coordinator:mcp"), &Ref::of(b"record"));
    let text = String::from_utf8(good.clone()).unwrap();
    let escaped = canonical::entry_preimage(&header(4, "a<b>&\u{2028}\"é\n"), &Ref::of(b"record"));
    let fields: serde_json::Value = serde_json::from_slice(&good).unwrap();
    let sorted = canonical::to_vec(&fields); // keys in sorted order, not the fixed one
    let unescaped = String::from_utf8(escaped.clone()).unwrap().replace("\\u003c", "<");
    let fn_hex = Ref::of(b"fn").hex();
    vec![
        ("valid-coordinator-entry", good.clone()),
        ("valid-escaped-writer", escaped),
        ("valid-genesis-index", canonical::entry_preimage(&header(0, "quickstart"), &Ref::of(b"goal"))),
        ("invalid-spaced", text.replacen(':', ": ", 1).into_bytes()),
        ("invalid-empty-object", b"{}".to_vec()),
        ("invalid-unknown-field", text.replacen('}', ",\"extra\":1}", 1).into_bytes()),
        ("invalid-sorted-keys", sorted),
        ("invalid-uppercase-ref", text.replace(&fn_hex, &fn_hex.to_uppercase()).into_bytes()),
        ("invalid-unescaped-less-than", unescaped.into_bytes()),
        ("invalid-negative-index", text.replacen("\"entryIndex\":3", "\"entryIndex\":-3", 1).into_bytes()),
        ("invalid-not-json", b"not json at all".to_vec()),
        ("invalid-truncated", good[..good.len() - 1].to_vec()),
    ]
}

/// Every seed of every target, generated.
fn seeds() -> BTreeMap<&'static str, Vec<(String, Vec<u8>)>> {
    let valid = valid_rows();
    let mut out: BTreeMap<&'static str, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    let targets: Vec<&'static str> = valid.keys().copied().collect();
    for (i, target) in targets.iter().enumerate() {
        let rows = &valid[target];
        let seeds = out.entry(target).or_default();
        for (name, bytes) in rows {
            seeds.push((name.to_string(), bytes.clone()));
        }
        let row = &rows[0].1;
        let other = &valid[targets[(i + 1) % targets.len()]][0].1;
        let mut wrong_version = row.clone();
        wrong_version[0] = 9;
        let mut trailing = row.clone();
        trailing.push(0);
        let invalid = [
            ("invalid-empty", vec![]),
            ("invalid-version-only", vec![rows::ROW_VERSION]),
            ("invalid-unknown-version", wrong_version),
            ("invalid-truncated", row[..row.len() - 1].to_vec()),
            ("invalid-trailing-byte", trailing),
            ("invalid-not-cbor", vec![rows::ROW_VERSION, 0xff, 0xff, 0xff]),
            ("invalid-another-rows-type", other.clone()),
            ("invalid-broken-field", break_a_field(row)),
            ("invalid-huge-length", vec![rows::ROW_VERSION, 0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        ];
        seeds.extend(invalid.into_iter().map(|(n, b)| (n.to_string(), b)));
    }
    out.insert("preimage", preimage_seeds().into_iter().map(|(n, b)| (n.to_string(), b)).collect());
    out.insert("export_frames", export_seeds());
    out
}

fn export_seeds() -> Vec<(String, Vec<u8>)> {
    use world_store::export::{Record, encode_records};
    let header = Record::Header { format: 1, created_at: 7, with_sessions: false };
    let object = Record::Object {
        hash: Ref::of(b"{}"),
        meta: ObjectMeta {
            interface_hash: Ref::of(b"x"),
            semantic_id: "world/x".into(),
            provenance: "p".into(),
            size: 2,
        },
        payload: b"{}".to_vec(),
    };
    let minimal = encode_records(&[header.clone(), Record::End { records: 2 }]);
    let with_object = encode_records(&[header.clone(), object, Record::End { records: 3 }]);
    let mut flipped = with_object.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    let mut bad_magic = minimal.clone();
    bad_magic[0] = b'X';
    vec![
        ("valid-minimal".into(), minimal.clone()),
        ("valid-object".into(), with_object.clone()),
        ("invalid-truncated".into(), with_object[..with_object.len() - 3].to_vec()),
        ("invalid-bit-flip".into(), flipped),
        ("invalid-magic".into(), bad_magic),
        ("invalid-count".into(), encode_records(&[header.clone(), Record::End { records: 5 }])),
        ("invalid-no-header".into(), encode_records(&[Record::End { records: 1 }])),
        ("invalid-trailing".into(), [minimal, vec![0]].concat()),
    ]
}

#[test]
fn the_committed_seed_corpus_holds_every_generated_seed_and_a_dir_per_target() {
    let dir = corpus_dir();
    let generated = seeds();
    if std::env::var_os("WORLD_STORE_WRITE_CORPUS").is_some() {
        for (target, seeds) in &generated {
            std::fs::create_dir_all(dir.join(target)).unwrap();
            for (name, bytes) in seeds {
                std::fs::write(dir.join(target).join(name), bytes).unwrap();
            }
        }
    }
    let names: Vec<&str> = generated.keys().copied().collect();
    let mut targets = fuzz::TARGETS.to_vec();
    targets.sort_unstable();
    assert_eq!(names, targets, "a seed set per fuzz target");
    for (target, seeds) in &generated {
        for (name, bytes) in seeds {
            let path = dir.join(target).join(name);
            let on_disk = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (regenerate with WORLD_STORE_WRITE_CORPUS=1)", path.display()));
            assert_eq!(&on_disk, bytes, "{} is stale (regenerate with WORLD_STORE_WRITE_CORPUS=1)", path.display());
        }
    }
}

#[test]
fn every_corpus_file_runs_through_its_target_valid_seeds_are_accepted_and_invalid_refused() {
    let dir = corpus_dir();
    let mut ran = 0;
    let mut per_target: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for target_dir in std::fs::read_dir(&dir).unwrap() {
        let target_dir = target_dir.unwrap().path();
        let target = target_dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(fuzz::TARGETS.contains(&target.as_str()), "{} names no fuzz target", target_dir.display());
        for file in std::fs::read_dir(&target_dir).unwrap() {
            let path = file.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let accepted = std::panic::catch_unwind(|| fuzz::run(&target, &bytes))
                .unwrap_or_else(|_| panic!("target {target} panicked on {}", path.display()))
                .expect("a known target");
            let counts = per_target.entry(target.clone()).or_default();
            if name.starts_with("valid-") {
                assert!(accepted, "{} was refused", path.display());
                counts.0 += 1;
            } else if name.starts_with("invalid-") {
                assert!(!accepted, "{} was accepted", path.display());
                counts.1 += 1;
            }
            ran += 1;
        }
    }
    for target in fuzz::TARGETS {
        let (valid, invalid) = per_target.get(*target).copied().unwrap_or_default();
        assert!(valid >= 1 && invalid >= 1, "{target} has {valid} valid and {invalid} invalid seeds");
    }
    assert!(ran >= fuzz::TARGETS.len() * 2);
}

#[test]
fn each_row_target_refuses_rows_that_are_damaged_at_any_single_byte_without_panicking() {
    // Beyond the seeds: every one-byte corruption and every prefix of every valid row.
    for (target, rows) in valid_rows() {
        for (_, row) in rows {
            for cut in 0..row.len() {
                assert!(!fuzz::run(target, &row[..cut]).unwrap(), "{target}: a {cut}-byte prefix was accepted");
            }
            for i in 0..row.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut b = row.clone();
                    b[i] ^= flip;
                    let _ = fuzz::run(target, &b).unwrap();
                }
            }
        }
    }
}
