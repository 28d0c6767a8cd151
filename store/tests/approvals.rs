//! What `verify` proves of approvals: an effect that ran under a grant that
//! asks names a decision that approved exactly its request, and a one-time
//! approval never serves twice. Each scenario writes through the public API
//! what a daemon would (or a daemon gone wrong would), then verifies.

mod common;

use common::task;
use world_store::canonical::{FixedObject, approval_digest, request_bytes};
use world_store::verify::{FaultKind, Options, Report, verify};
use world_store::*;

const EFFECT: &str = "Workspace.Write";
const SCOPE: &str = "worktree";
const PAYLOAD: &[u8] = br#"{"content":"one","op":"write","path":"notes.txt"}"#;

fn credential() -> Ref {
    Ref::of(b"token")
}

fn digest(payload: &[u8]) -> Ref {
    approval_digest(&credential(), "tool", EFFECT, SCOPE, 1, payload)
}

/// A store whose session `credential()` has a grant that asks for `EFFECT`
/// on `SCOPE`, with a world and the echo registry.
fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&dir.path().join("world.db"), 1).unwrap();
    let grant = Grant { ask: Some(Approver::Anyone), ..Grant::new(EFFECT, SCOPE, 10) };
    let session = Session { episode: task("-").episode, grants: vec![grant], created_at: 1, expires_at: 1000 };
    store.call(Op::MintSession { credential_id: credential(), session }).unwrap();
    // A world and the registry a call commits under.
    store.call(Op::CommitWorld(common::genesis())).unwrap();
    common::publish_echo(&store);
    (dir, store)
}

/// Asks for and decides approval `id` of `PAYLOAD`; answers the decision object.
fn decided(store: &Store, id: &str, decision: &str, state: ApprovalState) -> Ref {
    store.call(common::ask_approval(id, &task("-").episode, credential(), digest(PAYLOAD), (1, 100))).unwrap();
    let bytes = FixedObject::new()
        .str("approvalId", id)
        .str("credentialId", &credential().to_string())
        .str("transition", "tool")
        .str("effect", EFFECT)
        .str("scope", SCOPE)
        .uint("cost", 1)
        .str("requestDigest", &digest(PAYLOAD).to_string())
        .str("decision", decision)
        .finish();
    let object = NewObject::derived("world/approval/v1", "host/approvals", bytes);
    let hash = object.hash;
    let decision = ApprovalDecision { state, for_session: false, object, at: 2, use_by: 50 };
    store.call(Op::DecideApproval { id: id.into(), decision }).unwrap();
    hash
}

/// One effect of task `t` run (or denied) under `approval`, its request
/// carrying `payload`: the intent (using `using`, if any) and its v3 record
/// (or, with no approval, a record naming none).
fn ran(store: &Store, t: &str, payload: &[u8], approval: Option<Ref>, allowed: bool, using: Option<&str>) -> Ref {
    let key = task(t);
    store.call(Op::begin_task(key.clone(), Ref::of(t.as_bytes()), 3)).unwrap();
    let request =
        NewObject::derived("world/effect-request/v1", "host/broker", request_bytes(EFFECT, SCOPE, 1, 3, payload));
    let record = FixedObject::new()
        .str("effect", EFFECT)
        .str("scope", SCOPE)
        .uint("cost", 1)
        .bool("allowed", allowed)
        .str("denial", if allowed { "" } else { "denied:approval" })
        .str("requestRef", &request.hash.to_string())
        .str("invocationId", &key.invocation_id());
    let record = match approval {
        Some(a) => NewObject::derived(
            "world/effect-record/v3",
            "host/broker",
            record.str("approvalRef", &a.to_string()).finish(),
        ),
        None => NewObject::derived("world/effect-record/v2", "host/broker", record.finish()),
    };
    let hash = record.hash;
    if allowed {
        let mut i = common::intent(&key, 0, EFFECT, 10, b"");
        i.request = request;
        i.at = 3;
        i.approval = using.map(|id| ApprovalUse { id: id.into(), digest: digest(PAYLOAD) });
        i.credential = Some(credential());
        store.call(Op::RecordIntent(i)).unwrap();
        let outcome = OutcomeRequest { task: key, ordinal: 0, status: OutcomeStatus::Ok, record, result: None, at: 4 };
        store.call(Op::RecordOutcome(outcome)).unwrap();
    } else {
        // A denial travels with its call's commit, which tells it.
        let mut commit = common::invocation(&key, common::echo_registry().entries[0].1, t.as_bytes());
        commit.objects.extend([request, record]);
        commit.effects = vec![CallEffect {
            id: "e1".into(),
            effect: EFFECT.into(),
            scope: SCOPE.into(),
            cost: 1,
            status: EffectStatus::Denied,
            denial: Some("denied:approval".into()),
            budget_before: 10,
            budget_after: 10,
            record: Some(hash),
            request: None,
        }];
        store.call(Op::CommitInvocation(commit)).unwrap();
    }
    hash
}

fn report(store: &Store) -> Report {
    verify(&store.snapshot().unwrap(), &Options::default())
}

fn faults_of(r: &Report, kind: FaultKind, needle: &str) -> usize {
    r.faults.iter().filter(|f| f.kind == kind && f.detail.contains(needle)).count()
}

#[test]
fn an_effect_run_once_under_its_own_approval_verifies_clean() {
    let (_dir, store) = store();
    let yes = decided(&store, "ap-1", "approved", ApprovalState::Approved);
    ran(&store, "t1", PAYLOAD, Some(yes), true, Some("ap-1"));
    let no = decided(&store, "ap-2", "denied", ApprovalState::Denied);
    ran(&store, "t2", PAYLOAD, Some(no), false, None);
    let r = report(&store);
    assert!(r.is_clean(), "{:#?}", r.faults);
}

#[test]
fn a_one_time_approval_that_served_twice_is_reported() {
    let (_dir, store) = store();
    let yes = decided(&store, "ap-1", "approved", ApprovalState::Approved);
    ran(&store, "t1", PAYLOAD, Some(yes), true, Some("ap-1"));
    // A second effect claiming the same decision, behind the store's back.
    ran(&store, "t2", PAYLOAD, Some(yes), true, None);
    let r = report(&store);
    assert_eq!(faults_of(&r, FaultKind::Mismatch, "a one-time approval ran 2 effects"), 1, "{:#?}", r.faults);
}

#[test]
fn an_effect_whose_request_is_not_the_approved_one_is_reported() {
    let (_dir, store) = store();
    let yes = decided(&store, "ap-1", "approved", ApprovalState::Approved);
    ran(&store, "t1", br#"{"content":"rm -rf","op":"write","path":"notes.txt"}"#, Some(yes), true, None);
    let r = report(&store);
    assert_eq!(faults_of(&r, FaultKind::Mismatch, "approved another request"), 1, "{:#?}", r.faults);
}

#[test]
fn an_effect_that_ran_under_a_denial_is_reported() {
    let (_dir, store) = store();
    let no = decided(&store, "ap-1", "denied", ApprovalState::Denied);
    ran(&store, "t1", PAYLOAD, Some(no), true, None);
    let r = report(&store);
    assert_eq!(
        faults_of(&r, FaultKind::Mismatch, "ran under approval ap-1 whose decision is denied"),
        1,
        "{:#?}",
        r.faults
    );
}

#[test]
fn an_effect_run_under_a_grant_that_asks_without_an_approval_is_reported() {
    let (_dir, store) = store();
    ran(&store, "t1", PAYLOAD, None, true, None);
    let r = report(&store);
    assert_eq!(faults_of(&r, FaultKind::Mismatch, "ran under a grant that asks, but its record"), 1, "{:#?}", r.faults);
}
