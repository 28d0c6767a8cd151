//! A REST commit as an effect: the grant that lets a session commit
//! (`World.Commit` on scope `log`), what a commit costs, the record that
//! names who committed it, and the names only the daemon may write under.
//! The debit and the journal item are written by the store in the commit's
//! own transaction (`world_store::CommitCharge`).

use world_store::canonical::FixedObject;
use world_store::{CommitCharge, Grant, NewObject, Ref, RestCommit, Session};

/// The effect a REST commit is: without a grant naming it, a session cannot commit.
pub const COMMIT_EFFECT: &str = "World.Commit";
/// The one scope of `World.Commit`: the log.
pub const COMMIT_SCOPE: &str = "log";
/// A commit costs one unit per started `COMMIT_UNIT_BYTES` of its objects'
/// payloads, and at least one: a budget bounds both how often and how much a
/// session may write.
pub const COMMIT_UNIT_BYTES: u64 = 1024;
/// The semantic id of a commit's record: the entry, its world, and who made it.
pub const COMMIT_RECORD: &str = "world/commit-record/v1";

/// Why a session may not commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitRefusal {
    #[error(
        "this session holds no {COMMIT_EFFECT}={COMMIT_SCOPE} grant: a REST commit needs one \
         (worldd session mint … --grant {COMMIT_EFFECT}={COMMIT_SCOPE}:BUDGET)"
    )]
    NotGranted,
    #[error(
        "this session's {COMMIT_EFFECT}={COMMIT_SCOPE} grant asks for approval, which a REST commit cannot \
         wait for: mint a session whose {COMMIT_EFFECT} grant does not ask"
    )]
    Asks,
    /// A field claims the daemon as its author or uses one of its semantic ids.
    #[error("{field}: {why}")]
    Reserved { field: String, why: String },
}

/// What `commit` pays and who makes it, under `session`'s grant: a refusal
/// when the session holds no grant for it (or one that asks), or when a field
/// claims what only the daemon writes.
pub fn charge(c: &RestCommit, credential: Ref, session: &Session, at: u64) -> Result<CommitCharge, CommitRefusal> {
    reserved_field(c)?;
    let grant = granted(&session.grants)?;
    let bytes: u64 = c.objects.iter().map(|o| o.payload.len() as u64).sum();
    let cost = bytes.div_ceil(COMMIT_UNIT_BYTES).max(1);
    let record = FixedObject::new()
        .uint("entryIndex", c.entry.header.entry_index)
        .reference("entryHash", &c.entry.entry_hash)
        .reference("worldRef", &c.next_world.world_ref)
        .str("writtenBy", &c.entry.header.written_by)
        .reference("credentialId", &credential)
        .str("episode", &session.episode)
        .str("effect", COMMIT_EFFECT)
        .str("scope", COMMIT_SCOPE)
        .uint("cost", cost)
        .uint("payloadBytes", bytes)
        .str("invocationId", c.invocation_id.as_deref().unwrap_or(""))
        .uint("at", at)
        .finish();
    Ok(CommitCharge {
        credential,
        episode: session.episode.clone(),
        effect: COMMIT_EFFECT.into(),
        scope: COMMIT_SCOPE.into(),
        cost,
        grant_budget: grant.budget,
        record: NewObject::derived(COMMIT_RECORD, super::BROKER_PROVENANCE, record),
        at,
    })
}

/// The grant that lets a session commit, if it holds one that does not ask.
fn granted(grants: &[Grant]) -> Result<&Grant, CommitRefusal> {
    match Session::grant_for(grants, COMMIT_EFFECT, COMMIT_SCOPE) {
        None => Err(CommitRefusal::NotGranted),
        Some(g) if g.ask.is_some() => Err(CommitRefusal::Asks),
        Some(g) => Ok(g),
    }
}

/// The first field of `c` that claims the daemon: an author label it writes
/// (`writtenBy`, an object's provenance) or a semantic id it writes under.
fn reserved_field(c: &RestCommit) -> Result<(), CommitRefusal> {
    let reserved = |field: String, why: String| Err(CommitRefusal::Reserved { field, why });
    let author = |label: &str| format!("{label:?} names the daemon as its author; a REST commit may not");
    if world_store::is_daemon_author(&c.entry.header.written_by) {
        return reserved("entry.header.writtenBy".into(), author(&c.entry.header.written_by));
    }
    for (i, o) in c.objects.iter().enumerate() {
        if world_store::is_daemon_semantic_id(&o.semantic_id) {
            let why = format!("{:?} is a semantic id only the daemon writes objects under", o.semantic_id);
            return reserved(format!("objects[{i}].semanticId"), why);
        }
        if world_store::is_daemon_author(&o.provenance) {
            return reserved(format!("objects[{i}].provenance"), author(&o.provenance));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use world_store::Approver;

    fn commit(written_by: &str, objects: &[(&str, &str, usize)]) -> RestCommit {
        let goal = NewObject::derived("demo/goal", "demo", b"goal".to_vec());
        let mut c = RestCommit::genesis(goal, Ref::of(b"fn"), Ref::of(b"interp"), 1, written_by);
        c.objects = objects.iter().map(|(id, by, n)| NewObject::derived(id, by, vec![7; *n])).collect();
        c
    }

    fn session(grants: Vec<Grant>) -> Session {
        Session { episode: "ep".into(), grants, created_at: 0, expires_at: u64::MAX }
    }

    #[test]
    fn a_commit_needs_a_commit_grant_that_does_not_ask() {
        let c = commit("me", &[("demo/x", "me", 10)]);
        let who = Ref::of(b"credential");
        let read_only = session(vec![Grant::new("Workspace.Read", "worktree", 1)]);
        assert_eq!(charge(&c, who, &read_only, 5).unwrap_err(), CommitRefusal::NotGranted);
        let other_scope = session(vec![Grant::new(COMMIT_EFFECT, "elsewhere", 10)]);
        assert_eq!(charge(&c, who, &other_scope, 5).unwrap_err(), CommitRefusal::NotGranted);
        let mut asking = Grant::new(COMMIT_EFFECT, COMMIT_SCOPE, 10);
        asking.ask = Some(Approver::Operator);
        assert_eq!(charge(&c, who, &session(vec![asking]), 5).unwrap_err(), CommitRefusal::Asks);
        let granted = charge(&c, who, &session(vec![Grant::new(COMMIT_EFFECT, COMMIT_SCOPE, 10)]), 5).unwrap();
        assert_eq!((granted.cost, granted.grant_budget, granted.credential), (1, 10, who));
        let record: serde_json::Value = serde_json::from_slice(&granted.record.payload).unwrap();
        assert_eq!(record["credentialId"], who.to_string());
        assert_eq!(record["entryHash"], c.entry.entry_hash.to_string());
    }

    #[test]
    fn a_commit_costs_a_unit_per_started_kib_and_at_least_one() {
        let grant = session(vec![Grant::new(COMMIT_EFFECT, COMMIT_SCOPE, 1 << 20)]);
        let cost = |sizes: &[usize]| {
            let objects: Vec<(&str, &str, usize)> = sizes.iter().map(|n| ("demo/x", "me", *n)).collect();
            charge(&commit("me", &objects), Ref::of(b"c"), &grant, 0).unwrap().cost
        };
        assert_eq!(cost(&[]), 1);
        assert_eq!(cost(&[1]), 1);
        assert_eq!(cost(&[1024]), 1);
        assert_eq!(cost(&[1025]), 2);
        assert_eq!(cost(&[1024, 1024, 1]), 3);
        assert_eq!(cost(&[5_500_000]), 5_372);
    }

    #[test]
    fn a_commit_may_not_claim_the_daemon_s_names() {
        let grant = session(vec![Grant::new(COMMIT_EFFECT, COMMIT_SCOPE, 100)]);
        let refused = |c: RestCommit| match charge(&c, Ref::of(b"c"), &grant, 0) {
            Err(CommitRefusal::Reserved { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(commit("coordinator:epb", &[])), "entry.header.writtenBy");
        assert_eq!(refused(commit("worldd/quickstart", &[])), "entry.header.writtenBy");
        for id in
            ["world/approval/v1", "world/effect-record/v3", "world/invocation-record/v2", "world/commit-record/v1"]
        {
            assert_eq!(refused(commit("me", &[("demo/x", "me", 1), (id, "me", 1)])), "objects[1].semanticId", "{id}");
        }
        assert_eq!(refused(commit("me", &[("demo/x", "host/approvals", 1)])), "objects[0].provenance");
        charge(&commit("me", &[("world/demo/genesis-goal", "rest", 1)]), Ref::of(b"c"), &grant, 0).unwrap();
    }
}
