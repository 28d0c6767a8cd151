//! Stores written by an earlier format open with this binary: upgraded in
//! place by the first writer, then read and verified as if written today.

mod common;

use world_store::tables::REFERRER_OBJECT;
use world_store::*;

/// A format 3 store (referrers keyed by target hash) written by the binary of
/// that format: a genesis, the echo registry and twelve calls whose outputs
/// name earlier objects, the latest entry and world, and a ref never stored;
/// then compacted. Beside it, what that binary answered, page by page (two
/// per page), for who names each of them.
const FORMAT3_STORE: &str = "tests/fixtures/format3.db";
const FORMAT3_REFERRERS: &str = "tests/fixtures/format3.referrers.txt";

/// Who names each target, as the fixture's listing spells it.
fn listing(snap: &dyn View, targets: &[Ref]) -> String {
    let mut out = String::new();
    for target in targets {
        let mut after = None;
        loop {
            let page = snap.referrers(target, after, 2).unwrap();
            for r in &page {
                out.push_str(&format!("{target} {} {} {:?}\n", r.kind, r.referrer, r.entry_index));
            }
            match page.last() {
                Some(r) if page.len() == 2 => after = Some((r.kind, r.referrer)),
                _ => break,
            }
        }
    }
    out
}

/// Every object, entry hash and world ref of the store, and a ref it never held.
fn targets(snap: &dyn View) -> Vec<Ref> {
    let mut targets = vec![Ref::of(b"never stored")];
    targets.extend((0..).map_while(|seq| snap.object_at(seq).unwrap()));
    targets.extend(snap.log_range(0, PAGE_MAX).unwrap().iter().map(|e| e.entry_hash));
    targets.extend((0..).map_while(|revision| snap.world_at(revision).unwrap()));
    targets
}

fn fixture_copy(dir: &std::path::Path) -> std::path::PathBuf {
    copy_of(FORMAT3_STORE, dir)
}

/// A copy of `fixture` in `dir`, which a reader refuses as a store of
/// `format`, opened by a writer that upgrades it with nothing to recover.
fn upgraded(fixture: &str, format: u64, dir: &std::path::Path) -> (std::path::PathBuf, Store) {
    let path = copy_of(fixture, dir);
    let told = ReadOnlyStore::open(&path).err().expect("an older format is not read as it is").to_string();
    assert!(told.contains(&format!("has format {format}")) && told.contains("upgrade it in place"), "{told}");
    let (store, report) = Store::open(&path, 1).unwrap();
    assert!(report.is_empty(), "{report:?}");
    (path, store)
}

/// A text kept beside the fixtures.
fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

/// The rows of table `def` in the store at `path` (closed), read raw;
/// `None` when the table does not exist.
fn table_rows<K: redb::Key + 'static, V: redb::Value + 'static>(
    path: &std::path::Path,
    def: redb::TableDefinition<K, V>,
) -> Option<u64> {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    match txn.open_table(def) {
        Ok(t) => Some(t.len().unwrap()),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => panic!("{e}"),
    }
}

/// The format the closed store at `path` says it has.
fn stored_format(path: &std::path::Path) -> u64 {
    use redb::ReadableDatabase;
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    txn.open_table(world_store::tables::META).unwrap().get("format").unwrap().expect("a format").value()
}

/// A copy of `fixture`, with its payload file and log where it has them.
fn copy_of(fixture: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = dir.join("world.db");
    std::fs::copy(root.join(fixture), &path).unwrap();
    let payloads = world_store::media::payloads_path(&root.join(fixture));
    if payloads.exists() {
        std::fs::copy(payloads, world_store::media::payloads_path(&path)).unwrap();
    }
    let wal = world_store::media::wal_path(&root.join(fixture));
    if wal.exists() {
        std::fs::copy(wal, world_store::media::wal_path(&path)).unwrap();
    }
    path
}

/// A format 4 store (objects, worlds and entries keyed by ref) written by
/// the binary of that format: the format 3 fixture upgraded, then four calls
/// of a second episode whose outputs name an old object, an entry, a world
/// and a ref never stored; then compacted. Beside it, what that binary
/// answered for where each ref sits and who names it, and for each semantic
/// id's objects, page by page.
const FORMAT4_STORE: &str = "tests/fixtures/format4.db";
const FORMAT4_PLACES: &str = "tests/fixtures/format4.places.txt";

/// Everything a reader can ask of where refs sit, for each target.
fn places_listing(snap: &dyn View, targets: &[Ref]) -> String {
    let mut out = String::new();
    for target in targets {
        let meta = snap.object_meta(target).unwrap();
        let seq = snap.object_seq(target).unwrap();
        let payload = snap.payload(target).unwrap().map(|p| Ref::of(&p));
        let world = snap.world(target).unwrap().map(|w| (w.revision, w.state_root, w.log_head));
        let entry = snap.entry_index_of(target).unwrap();
        out.push_str(&format!(
            "{target} meta {meta:?} seq {seq:?} payload {payload:?} world {world:?} entry {entry:?}\n"
        ));
        let mut after = None;
        loop {
            let page = snap.referrers(target, after, 2).unwrap();
            for r in &page {
                out.push_str(&format!("{target} {} {} {:?}\n", r.kind, r.referrer, r.entry_index));
            }
            match page.last() {
                Some(r) if page.len() == 2 => after = Some((r.kind, r.referrer)),
                _ => break,
            }
        }
    }
    for sid in
        ["world/transition-source/v1", "world/transition-registry/v1", "world/invocation-record/v1", "test/output"]
    {
        let mut after = None;
        loop {
            let page = snap.objects_by_semantic_id(sid, after, 3).unwrap();
            for (r, m) in &page {
                out.push_str(&format!("{sid} {r} {}\n", m.size));
            }
            match page.last() {
                Some((r, _)) if page.len() == 3 => after = Some(*r),
                _ => break,
            }
        }
    }
    out
}

#[test]
fn a_format_3_store_is_upgraded_at_open_and_names_the_same_referrers() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT3_STORE, 3, dir.path());
    let snap = store.snapshot().unwrap();
    let targets = targets(snap.as_ref());
    assert_eq!(targets.len(), 1 + 27 + 13 + 13, "the fixture's objects, entries and worlds");
    let expected = fixture_text(FORMAT3_REFERRERS);
    assert_eq!(listing(snap.as_ref(), &targets), expected);
    // Its calls read back in the order made.
    let calls = snap.episode_calls("ep1", 0, PAGE_MAX).unwrap();
    let ids: Vec<String> = calls.iter().map(|(_, key, _)| key.task_id.clone()).collect();
    assert_eq!(ids, (0..12).map(|i| format!("t{i}")).collect::<Vec<_>>());
    for (position, key, task) in &calls {
        assert_eq!(task.state, TaskState::Committed, "{key:?}");
        assert_eq!(snap.task(key).unwrap().as_ref(), Some(task), "{key:?} at {position}");
    }
    assert_eq!(snap.episode("ep1").unwrap().unwrap().calls, 12);
    common::assert_verifies(&store);
    drop(snap);
    drop(store);

    // Upgraded once: a reader takes it as it is now.
    let read_only = ReadOnlyStore::open(&path).unwrap();
    assert_eq!(listing(read_only.snapshot().unwrap().as_ref(), &targets), expected);
}

#[test]
fn an_upgraded_store_goes_on_indexing_who_names_its_old_objects() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture_copy(dir.path());
    let (store, _) = Store::open(&path, 1).unwrap();
    let (old, f) = {
        let snap = store.snapshot().unwrap();
        (
            snap.object_at(5).unwrap().unwrap(),
            snap.registry_entry("world/transition-registry/v1", "tools.echo").unwrap(),
        )
    };
    let f = f.expect("the fixture's echo registry");
    let before = store.snapshot().unwrap().referrers(&old, None, PAGE_MAX).unwrap().len();
    let output = format!("{{\"again\":\"{old}\"}}");
    common::begin_and_commit(&store, &common::task("after-upgrade"), f, output.as_bytes());
    let snap = store.snapshot().unwrap();
    let now = snap.referrers(&old, None, PAGE_MAX).unwrap();
    // The new output and its invocation record both spell the old ref.
    assert_eq!(now.len(), before + 2, "{now:?}");
    common::assert_verifies(&store);
}

#[test]
fn a_format_4_store_is_upgraded_at_open_and_finds_every_ref_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT4_STORE, 4, dir.path());
    let snap = store.snapshot().unwrap();
    let targets = targets(snap.as_ref());
    assert_eq!(targets.len(), 1 + 35 + 17 + 17, "the fixture's objects, entries and worlds");
    let expected = fixture_text(FORMAT4_PLACES);
    assert_eq!(places_listing(snap.as_ref(), &targets), expected);
    assert_eq!(snap.episode("ep2").unwrap().unwrap().calls, 4);
    common::assert_verifies(&store);
    drop(snap);

    // New calls are placed beside the moved rows.
    let f = store.snapshot().unwrap().registry_entry("world/transition-registry/v1", "tools.echo").unwrap().unwrap();
    let c = common::begin_and_commit(&store, &common::task("after-upgrade"), f, b"{\"after\":1}");
    let snap = store.snapshot().unwrap();
    assert!(snap.world(&c.world_ref).unwrap().is_some());
    common::assert_verifies(&store);
    drop(snap);
    drop(store);

    let read_only = ReadOnlyStore::open(&path).unwrap();
    let snap = read_only.snapshot().unwrap();
    let old: Vec<Ref> = targets.iter().filter(|t| snap.has_object(t).unwrap()).copied().collect();
    assert_eq!(old.len(), 35, "the fixture's objects");
    assert!(snap.has_object(&c.output_ref).unwrap());
    assert_eq!(snap.entry_index_of(&c.entry_hash).unwrap(), Some(c.entry_index));
}

/// A format 5 store (the record journal keyed by the record's hash) written
/// by the binary of that format: the format 4 fixture upgraded, then four
/// calls of a third episode with two effects each, whose records are
/// journaled (one record carried by two outcomes); then compacted. Beside
/// it, what that binary answered for each object's journal key.
const FORMAT5_STORE: &str = "tests/fixtures/format5.db";
const FORMAT5_JOURNAL: &str = "tests/fixtures/format5.journal.txt";

/// For each object of the store: what `record_journal` answers.
fn journal_listing(snap: &dyn View) -> String {
    let mut out = String::new();
    for r in (0..).map_while(|seq| snap.object_at(seq).unwrap()) {
        out.push_str(&format!("{r} {:?}\n", snap.record_journal(&r).unwrap()));
    }
    out
}

#[test]
fn a_format_5_store_is_upgraded_at_open_and_maps_every_record_to_the_outcome_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT5_STORE, 5, dir.path());
    let snap = store.snapshot().unwrap();
    let expected = fixture_text(FORMAT5_JOURNAL);
    assert_eq!(journal_listing(snap.as_ref()), expected);
    assert_eq!(expected.matches("Some(").count(), 7, "the fixture's records");
    common::assert_verifies(&store);
    drop(snap);
    drop(store);

    // Every row moved under its record's number: the store holds each record.
    assert_eq!(table_rows(&path, world_store::tables::RECORD_JOURNAL), Some(7));
    assert_eq!(table_rows(&path, world_store::tables::RECORD_JOURNAL_OF_ABSENT), Some(0));

    // A record journaled after the upgrade is found beside the moved ones.
    let (store, _) = Store::open(&path, 1).unwrap();
    let key = TaskKey { surface: Surface::A2a, episode: "ep3".into(), task_id: "after-upgrade".into() };
    common::begin(&store, &key);
    store.call(Op::RecordIntent(common::intent(&key, 0, "Workspace.Read", 100, b"after"))).unwrap();
    let record = NewObject::derived("world/effect-record/v1", "host/broker", b"after upgrade".to_vec());
    store.call(Op::RecordOutcome(common::outcome(&key, 0, record.clone()))).unwrap();
    let snap = store.snapshot().unwrap();
    let found = snap.record_journal(&record.hash).unwrap();
    assert_eq!(found, Some(JournalKey { invocation_id: key.invocation_id(), ordinal: 0 }));
    assert_eq!(journal_listing(snap.as_ref()).matches("Some(").count(), 8);
    common::assert_verifies(&store);
}

/// A format 6 store (task rows keyed by episode before task id) written by
/// the binary of that format: the format 5 fixture upgraded, then in each of
/// two new episodes three MCP calls with rising task ids, an A2A call and a
/// call left started (ended by the recovery of the compaction that
/// followed). Beside it, what that binary answered for each episode's calls
/// and for each call's task row, looked up by its key.
const FORMAT6_STORE: &str = "tests/fixtures/format6.db";
const FORMAT6_TASKS: &str = "tests/fixtures/format6.tasks.txt";

/// Each episode's calls in order, and each one's task row found by its key.
fn tasks_listing(snap: &dyn View) -> String {
    let mut out = String::new();
    for (episode, _) in snap.episodes(None, PAGE_MAX).unwrap() {
        for (seq, key, task) in snap.episode_calls(&episode, 0, PAGE_MAX).unwrap() {
            let found = snap.task(&key).unwrap().map(|t| format!("{:?} {}", t.state, t.request_digest));
            out.push_str(&format!("{episode} {seq} {} {} {:?}\n", key.surface.as_str(), key.task_id, task.state));
            out.push_str(&format!("  {}\n", found.unwrap_or_default()));
        }
    }
    out
}

#[test]
fn a_format_6_store_is_upgraded_at_open_and_finds_every_task_by_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT6_STORE, 6, dir.path());
    let snap = store.snapshot().unwrap();
    let expected = fixture_text(FORMAT6_TASKS);
    assert_eq!(tasks_listing(snap.as_ref()), expected);
    let calls = expected.lines().filter(|l| !l.starts_with(' ')).count();
    assert_eq!(calls, 30, "the fixture's calls");
    common::assert_verifies(&store);
    drop(snap);
    drop(store);

    // Every row moved to the table keyed by task id; the old one is gone.
    assert_eq!(table_rows(&path, world_store::tables::TASKS), Some(calls as u64));
    assert_eq!(table_rows(&path, world_store::tables::FORMAT6_TASKS), None);

    // An old task id is still taken, and a new call is found beside the moved ones.
    let (store, _) = Store::open(&path, 1).unwrap();
    let f = common::echo_registry().entries[0].1;
    let old = TaskKey { surface: Surface::Mcp, episode: "ep4".into(), task_id: "zz-open-0".into() };
    let again = store.call(Op::begin_task(old, Ref::of(b"d"), 2)).unwrap();
    assert!(matches!(again, Reply::Begun(BeginOutcome::Existing(_))), "{again:?}");
    let new = TaskKey { surface: Surface::Mcp, episode: "ep4".into(), task_id: "after-upgrade".into() };
    common::begin_and_commit(&store, &new, f, b"{\"out\":\"after\"}");
    let snap = store.snapshot().unwrap();
    assert_eq!(snap.task(&new).unwrap().map(|t| t.state), Some(TaskState::Committed));
    assert_eq!(tasks_listing(snap.as_ref()).lines().filter(|l| !l.starts_with(' ')).count(), calls + 1);
    common::assert_verifies(&store);
}

/// A format 7 store (payloads as rows of the database) written by the
/// binary of that format: the format 6 fixture upgraded, then in a new
/// episode eight MCP calls whose outputs are 30,000 bytes, 1 byte, 60,000
/// bytes, the first again (stored once), 4,000 bytes and three small JSON
/// objects, each with its record, and a call left started (ended by the
/// recovery of the compaction that followed). Beside it, what that binary
/// answered for every object and for each episode's calls.
const FORMAT7_STORE: &str = "tests/fixtures/format7.db";
const FORMAT7_OBJECTS: &str = "tests/fixtures/format7.objects.txt";
const FORMAT7_TASKS: &str = "tests/fixtures/format7.tasks.txt";

/// Every object by sequence number: its ref, semantic id, provenance and
/// size, and whether its payload hashes to its ref.
fn objects_listing(snap: &dyn View) -> String {
    let mut out = String::new();
    for seq in 0.. {
        let Some(r) = snap.object_at(seq).unwrap() else { break };
        let meta = snap.object_meta(&r).unwrap().unwrap();
        let payload = snap.payload(&r).unwrap().unwrap();
        let sound = Ref::of(&payload) == r && payload.len() as u64 == meta.size;
        out.push_str(&format!("{seq} {r} {} {} {} {sound}\n", meta.semantic_id, meta.provenance, payload.len()));
    }
    out
}

#[test]
fn a_format_7_store_is_upgraded_at_open_and_reads_every_payload_from_the_payload_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT7_STORE, 7, dir.path());
    let snap = store.snapshot().unwrap();
    let expected = fixture_text(FORMAT7_OBJECTS);
    assert_eq!(objects_listing(snap.as_ref()), expected);
    assert_eq!(expected.lines().count(), 96, "the fixture's objects");
    assert!(expected.lines().all(|l| l.ends_with(" true")));
    assert_eq!(tasks_listing(snap.as_ref()), fixture_text(FORMAT7_TASKS));
    common::assert_verifies(&store);
    drop(snap);
    drop(store);

    // The payload rows are gone; the file holds each payload once, back to back.
    assert_eq!(table_rows(&path, world_store::tables::FORMAT7_PAYLOADS), None);
    let sizes: u64 = expected.lines().map(|l| l.split(' ').nth(4).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(std::fs::metadata(world_store::media::payloads_path(&path)).unwrap().len(), sizes);

    // New payloads go after the moved ones.
    let (store, _) = Store::open(&path, 1).unwrap();
    let f = common::echo_registry().entries[0].1;
    let new = TaskKey { surface: Surface::Mcp, episode: "ep7".into(), task_id: "after-upgrade".into() };
    let committed = common::begin_and_commit(&store, &new, f, b"{\"out\":\"after\"}");
    let snap = store.snapshot().unwrap();
    assert_eq!(snap.payload(&committed.output_ref).unwrap().as_deref(), Some(&b"{\"out\":\"after\"}"[..]));
    assert_eq!(objects_listing(snap.as_ref()).lines().count(), 96 + 2, "the new output and its record");
    common::assert_verifies(&store);
}

/// A format 8 store (every referrer row written in its referrer's
/// transaction) written by the binary of that format: the echo registry and
/// twelve calls whose outputs name earlier objects, the selected world and a
/// ref never stored, closed cleanly; its payload file beside it. Beside them,
/// what that binary answered for who names each target, page by page (two per
/// page).
const FORMAT8_STORE: &str = "tests/fixtures/format8.db";
const FORMAT8_REFERRERS: &str = "tests/fixtures/format8.referrers.txt";

#[test]
fn a_format_8_store_is_upgraded_at_open_with_its_referrer_index_whole_and_names_new_referrers_before_and_after_indexing()
 {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT8_STORE, 8, dir.path());
    let snap = store.snapshot().unwrap();
    let expected = fixture_text(FORMAT8_REFERRERS);
    assert_eq!(listing(snap.as_ref(), &targets(snap.as_ref())), expected);
    assert_eq!(expected.lines().count(), 181, "the fixture's referrer rows");
    common::assert_verifies(&store);
    let indexed = table_rows_open(&store);

    // A new call naming an old object is named at once, from its own rows.
    let old = snap.object_at(3).unwrap().unwrap();
    drop(snap);
    let f = common::echo_registry().entries[0].1;
    let new = TaskKey { surface: Surface::Mcp, episode: "ep8".into(), task_id: "after-upgrade".into() };
    let committed = common::begin_and_commit(&store, &new, f, format!("{{\"names\":\"{old}\"}}").as_bytes());
    let named = |store: &dyn WorldStore| {
        let page = store.snapshot().unwrap().referrers(&old, None, PAGE_MAX).unwrap();
        page.iter().any(|r| r.kind == REFERRER_OBJECT && r.referrer == committed.output_ref)
    };
    assert!(named(&store), "the output names {old}");
    assert_eq!(table_rows_open(&store), indexed, "one call leaves the index behind");
    drop(store);

    // A clean close indexes what waited: the same answers, from the index.
    let (store, _) = Store::open(&path, 1).unwrap();
    assert!(named(&store));
    assert!(table_rows_open(&store) > indexed, "the close indexed the call's referrers");
    common::assert_verifies(&store);
}

/// The rows of the referrer index (targets the store holds), as `verify` counts them.
fn table_rows_open(store: &dyn WorldStore) -> u64 {
    let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
    report.tables.iter().find(|t| t.table == "referrers_by_target").map_or(0, |t| t.rows)
}

/// A format 9 store (each object's semantic row written in the object's own
/// transaction) written by the binary of that format: the echo registry and
/// twelve calls in three episodes, closed cleanly; its payload file beside
/// it. Beside them, what that binary answered for each semantic id's objects
/// (and one no object has), page by page (two per page).
const FORMAT9_STORE: &str = "tests/fixtures/format9.db";
const FORMAT9_SEMANTIC: &str = "tests/fixtures/format9.semantic.txt";

/// Each semantic id's objects, as the fixture's listing spells it.
fn semantic_listing(snap: &dyn View) -> String {
    let mut ids = vec!["world/never-written/v1".to_string()];
    for seq in 0.. {
        let Some(r) = snap.object_at(seq).unwrap() else { break };
        ids.push(snap.object_meta(&r).unwrap().unwrap().semantic_id);
    }
    ids.sort();
    ids.dedup();
    let mut out = String::new();
    for id in ids {
        let mut after = None;
        loop {
            let page = snap.objects_by_semantic_id(&id, after, 2).unwrap();
            for (r, meta) in &page {
                out.push_str(&format!("{id} {r} {} {}\n", meta.size, meta.provenance));
            }
            match page.last() {
                Some((r, _)) if page.len() == 2 => after = Some(*r),
                _ => break,
            }
        }
    }
    out
}

/// The rows of the semantic index's young table, as `verify` counts them.
fn semantic_young_rows(store: &dyn WorldStore) -> u64 {
    let report = world_store::verify::verify(&store.snapshot().unwrap(), &Default::default());
    report.tables.iter().find(|t| t.table == "semantic_young").map_or(0, |t| t.rows)
}

#[test]
fn a_format_9_store_is_upgraded_at_open_and_lists_each_semantic_ids_objects_before_and_after_indexing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT9_STORE, world_store::tables::STORE_FORMAT_BEFORE_SEMANTIC_BEHIND, dir.path());
    let expected = fixture_text(FORMAT9_SEMANTIC);
    assert_eq!(semantic_listing(store.snapshot().unwrap().as_ref()), expected);
    assert_eq!(expected.lines().count(), 27, "the fixture's objects");
    common::assert_verifies(&store);
    let indexed = semantic_young_rows(&store);

    // A new call's objects are listed at once, from their own rows.
    let f = common::echo_registry().entries[0].1;
    let new = TaskKey { surface: Surface::Mcp, episode: "ep9".into(), task_id: "after-upgrade".into() };
    let committed = common::begin_and_commit(&store, &new, f, b"{\"out\":\"after\"}");
    let listed = |store: &dyn WorldStore| {
        let page = store.snapshot().unwrap().objects_by_semantic_id("world/invocation-output/v1", None, PAGE_MAX);
        page.unwrap().iter().any(|(r, _)| *r == committed.output_ref)
    };
    assert!(listed(&store));
    assert_eq!(semantic_young_rows(&store), indexed, "one call leaves the semantic index behind");
    common::assert_verifies(&store);
    drop(store);

    // A clean close indexes what waited: the same answers, from the index.
    let (store, _) = Store::open(&path, 1).unwrap();
    assert!(listed(&store));
    assert_eq!(semantic_young_rows(&store), indexed + 2, "the close indexed the output and its record");
    let listing = semantic_listing(store.snapshot().unwrap().as_ref());
    assert_eq!(listing.lines().count(), 27 + 2);
    common::assert_verifies(&store);
    drop(store);

    // Objects with a row in the index and past its mark (as a format 9
    // store's unindexed objects are) are listed once and verify.
    {
        use redb::ReadableTable;
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(world_store::tables::META).unwrap();
            let objects = meta.get("referrers_indexed_objects").unwrap().unwrap().value();
            meta.insert("referrers_indexed_objects", objects - 6).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = ReadOnlyStore::open(&path).unwrap();
    let snap = store.snapshot().unwrap();
    assert_eq!(semantic_listing(snap.as_ref()), listing);
    let report = world_store::verify::verify(&snap, &Default::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
}

/// A format 10 store (each row's place written in the row's own
/// transaction) written by the binary of that format: the echo registry and
/// twelve calls in three episodes whose outputs name the previous output,
/// the selected world, the latest entry or a ref never stored, closed
/// cleanly; its payload file beside it. Beside them, what that binary
/// answered for where each ref sits and who names it.
const FORMAT10_STORE: &str = "tests/fixtures/format10.db";
const FORMAT10_PLACES: &str = "tests/fixtures/format10.places.txt";

/// Moves the referrer mark of the closed store at `path` back by `by` rows of
/// each kind: the rows past it have their places in the index, as those of a
/// format 10 store that stopped before its index pass do.
fn mark_back(path: &std::path::Path, by: u64) {
    use redb::ReadableTable;
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut meta = txn.open_table(world_store::tables::META).unwrap();
        for key in ["referrers_indexed_objects", "referrers_indexed_entries", "referrers_indexed_worlds"] {
            let at = meta.get(key).unwrap().unwrap().value();
            meta.insert(key, at - by).unwrap();
        }
    }
    txn.commit().unwrap();
}

#[test]
fn a_format_10_store_is_upgraded_at_open_and_finds_every_ref_where_it_was_with_places_past_the_mark_written_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT10_STORE, world_store::tables::STORE_FORMAT_BEFORE_PLACES_BEHIND, dir.path());
    let expected = fixture_text(FORMAT10_PLACES);
    let listed = |snap: &dyn View| places_listing(snap, &targets(snap));
    let clean = |snap: &Snapshot| {
        let report = world_store::verify::verify(snap, &Default::default());
        assert!(report.is_clean(), "{:#?}", report.faults);
    };
    assert_eq!(listed(store.snapshot().unwrap().as_ref()), expected);
    assert_eq!(expected.lines().count(), 143, "the fixture's listing");
    common::assert_verifies(&store);
    drop(store);

    // Rows past the mark whose places the index holds already: read once,
    // and placed again by the index pass, which changes no answer.
    mark_back(&path, 5);
    let snap = ReadOnlyStore::open(&path).unwrap().snapshot().unwrap();
    assert_eq!(listed(snap.as_ref()), expected);
    clean(&snap);
    drop(snap);
    let (store, _) = Store::open(&path, 1).unwrap();
    let snap = store.snapshot().unwrap();
    let last = (0..).map_while(|seq| snap.object_at(seq).unwrap()).last().unwrap();
    drop(snap);
    let f = common::echo_registry().entries[0].1;
    let new = TaskKey { surface: Surface::Mcp, episode: "ep10".into(), task_id: "after-upgrade".into() };
    let committed = common::begin_and_commit(&store, &new, f, format!("{{\"names\":\"{last}\"}}").as_bytes());
    let named = |snap: &dyn View| {
        let page = snap.referrers(&last, None, PAGE_MAX).unwrap();
        page.iter().any(|r| r.kind == REFERRER_OBJECT && r.referrer == committed.output_ref)
    };
    let snap = store.snapshot().unwrap();
    assert!(named(snap.as_ref()));
    let before_close = listed(snap.as_ref());
    drop((snap, store));
    let snap = ReadOnlyStore::open(&path).unwrap().snapshot().unwrap();
    assert!(named(snap.as_ref()), "the close indexed the new call");
    assert_eq!(listed(snap.as_ref()), before_close, "the index answers as the rows did");
    clean(&snap);
}

/// A format 11 store (each object's ref in a table of its own, `object_seq`)
/// written by the binary of that format: the format 10 fixture upgraded,
/// then four MCP calls of a new episode whose outputs name an old object,
/// the selected world, the latest entry and a ref never stored, and two A2A
/// calls with an effect each, whose records are journaled; closed cleanly,
/// its payload file beside it. Beside them, what that binary answered for
/// where each ref sits and who names it, and for each object's journal key.
const FORMAT11_STORE: &str = "tests/fixtures/format11.db";
const FORMAT11_PLACES: &str = "tests/fixtures/format11.places.txt";

#[test]
fn a_format_11_store_is_upgraded_at_open_with_each_objects_ref_moved_into_its_row() {
    use world_store::tables::{FORMAT11_OBJECT_SEQ, OBJECT_ROWS, STORE_FORMAT_BEFORE_OBJECT_HASHES};
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = upgraded(FORMAT11_STORE, STORE_FORMAT_BEFORE_OBJECT_HASHES, dir.path());
    let expected = fixture_text(FORMAT11_PLACES);
    let listed = |snap: &dyn View| places_listing(snap, &targets(snap)) + &journal_listing(snap);
    assert_eq!(listed(store.snapshot().unwrap().as_ref()), expected);
    assert_eq!(expected.lines().count(), 250, "the fixture's listing");
    assert_eq!(expected.matches("Some(JournalKey").count(), 2, "the fixture's records");
    common::assert_verifies(&store);
    drop(store);

    // The table of refs is gone: each object's row holds its ref.
    assert_eq!(table_rows(&path, FORMAT11_OBJECT_SEQ), None);
    let objects = table_rows(&path, OBJECT_ROWS).unwrap();
    assert_eq!(objects, 43, "the fixture's objects");

    // Rows past the mark are placed from the refs their rows hold, by a
    // reader and by a writer.
    mark_back(&path, 5);
    let snap = ReadOnlyStore::open(&path).unwrap().snapshot().unwrap();
    assert_eq!(listed(snap.as_ref()), expected);
    let report = world_store::verify::verify(&snap, &Default::default());
    assert!(report.is_clean(), "{:#?}", report.faults);
    drop(snap);
    let (store, _) = Store::open(&path, 1).unwrap();
    let last = store.snapshot().unwrap().object_at(objects - 1).unwrap().expect("the last object");
    let f = common::echo_registry().entries[0].1;
    let new = TaskKey { surface: Surface::Mcp, episode: "ep12".into(), task_id: "after-upgrade".into() };
    let committed = common::begin_and_commit(&store, &new, f, format!("{{\"names\":\"{last}\"}}").as_bytes());
    let snap = store.snapshot().unwrap();
    // Numbered after the last row, and found by its ref and its number.
    assert_eq!(snap.object_seq(&committed.output_ref).unwrap(), Some(objects));
    assert_eq!(snap.object_at(objects).unwrap(), Some(committed.output_ref));
    let named = snap.referrers(&last, None, PAGE_MAX).unwrap();
    assert!(named.iter().any(|r| r.kind == REFERRER_OBJECT && r.referrer == committed.output_ref), "{named:?}");
    common::assert_verifies(&store);
}

/// The files a format 11 daemon killed mid-run leaves: the format 11
/// fixture opened by that binary, then three MCP calls naming an old
/// object, an A2A call with a journaled effect and a call begun and never
/// committed; the database, its log (cut after its last frame) and its
/// payload file copied as they stood: the database at its last durable
/// commit, the new calls in the log alone.
/// Beside them, what that binary answered once it reopened them (the log
/// replayed, the open call ended): where each ref sits, who names it, each
/// object's journal key, each episode's calls.
const FORMAT11_KILLED: &str = "tests/fixtures/format11-killed.db";
const FORMAT11_KILLED_LISTING: &str = "tests/fixtures/format11-killed.listing.txt";

#[test]
fn a_killed_format_11_store_is_upgraded_then_replays_its_log_into_the_new_rows() {
    use world_store::tables::{FORMAT11_OBJECT_SEQ, STORE_FORMAT_BEFORE_OBJECT_HASHES};
    // As the files stand: format 11, its refs in their own table.
    let as_left = tempfile::tempdir().unwrap();
    let copy = copy_of(FORMAT11_KILLED, as_left.path());
    assert_eq!(stored_format(&copy), STORE_FORMAT_BEFORE_OBJECT_HASHES);
    assert!(table_rows(&copy, FORMAT11_OBJECT_SEQ).is_some_and(|n| n > 0));
    assert_eq!(table_rows(&copy, world_store::tables::OBJECT_ROWS), Some(43), "the format 11 fixture's objects alone");

    let dir = tempfile::tempdir().unwrap();
    let path = copy_of(FORMAT11_KILLED, dir.path());
    let (store, report) = Store::open(&path, 1).unwrap();
    // The call left open is ended as that binary ended it; nothing else.
    assert_eq!(report.tasks, vec![("mcp:ep13:open".to_string(), TaskState::NotCommitted)], "{report:?}");
    assert!(report.indeterminate_effects.is_empty(), "{report:?}");
    let expected = fixture_text(FORMAT11_KILLED_LISTING);
    let snap = store.snapshot().unwrap();
    let listed = places_listing(snap.as_ref(), &targets(snap.as_ref()))
        + &journal_listing(snap.as_ref())
        + &tasks_listing(snap.as_ref());
    assert_eq!(listed, expected);
    assert_eq!(expected.lines().filter(|l| l.starts_with("ep13 ")).count(), 5, "the calls after the fixture");
    common::assert_verifies(&store);
    drop((snap, store));
    assert_eq!(table_rows(&path, FORMAT11_OBJECT_SEQ), None);
}
