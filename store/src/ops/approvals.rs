//! The approval law: a grant that asks keeps one open approval per session
//! and exact request, within its session's, episode's and store's room; a
//! person (or the clock) decides it once; an effect's intent uses an
//! approved one up, in the same transaction as its debit, so an approval
//! serves once (or, for the session, until it expires). Past its expiry an
//! approval serves nobody: it closes (a pending one decided expired by the
//! clock) and holds no room. An A2A task that waits on an approval (asked
//! it, or found it open) is indexed by its session and task id in the ask's
//! transaction, so it stays findable however the approval ends.

use super::*;
use serde_json::{Value, json};

type R<T> = Result<T, WriteError>;

/// A decision, as the chain keeps it; the effect record of an effect run
/// (or denied) under it names it.
pub const APPROVAL_DECISION: &str = "world/approval/v1";
/// The provenance of approvals' objects.
pub const APPROVALS_PROVENANCE: &str = "host/approvals";
/// Open approvals a pass reads to find the lapsed ones: all of them (a
/// store holds `APPROVALS_OPEN_MAX`, and PostgreSQL nodes asking at once
/// may pass it by one each).
const OPEN_READ_MAX: usize = 2 * APPROVALS_OPEN_MAX as usize;
/// The bounds an ask must fit: its session's, its episode's, the store's.
const BOUNDS: usize = 3;

/// The rows of approvals, as an engine offers them inside its write
/// transaction.
pub(crate) trait ApprovalRows {
    fn approval(&mut self, id: &str) -> R<Option<ApprovalRow>>;
    /// The open approval of one session's exact request, by id.
    fn open_approval(&mut self, credential: &Ref, digest: &Ref) -> R<Option<String>>;
    fn open_approvals(&mut self) -> R<u64>;
    /// How many approvals session `credential` holds open, counted up to `max`.
    fn open_approvals_of(&mut self, credential: &Ref, max: u64) -> R<u64>;
    /// How many approvals the sessions of `episode` hold open, counted up to
    /// `max` (all the approvals of a session are of one episode: `ask`).
    fn open_approvals_in(&mut self, episode: &str, max: u64) -> R<u64>;
    /// Up to `limit` open approvals (of session `credential`, or of all) in
    /// (credential, request digest) order.
    fn open_approval_rows(&mut self, credential: Option<&Ref>, limit: usize) -> R<Vec<(String, ApprovalRow)>>;
    /// A new approval row (open unless it is closed already).
    fn insert_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()>;
    /// An existing approval row; a closed one is no longer open.
    fn update_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()>;
    /// Approval `id` is the one session `credential`'s A2A task `task_id`
    /// waits on (replacing the one it waited on before, if any).
    fn put_approval_wait(&mut self, credential: &Ref, task_id: &str, id: &str) -> R<()>;
    /// An object an approval request carries (what was shown, the decision).
    fn insert_approval_object(&mut self, o: &NewObject) -> R<()>;
    /// The store's secrets (the key that seals approval questions).
    fn secret(&mut self, name: &str) -> R<Option<Vec<u8>>>;
    fn insert_secret(&mut self, name: &str, value: &[u8]) -> R<()>;
}

/// The fields of a `world/approval/v1` object: one decision on approval `id`.
pub struct DecisionOf<'a> {
    pub id: &'a str,
    pub row: &'a ApprovalRow,
    /// `approved`, `approved-for-session`, `denied` or `expired`.
    pub decision: &'a str,
    /// Who decided and how they were known to be who they are.
    pub decided_by: &'a Value,
    /// The same, in words.
    pub decided_by_text: &'a str,
    pub note: &'a str,
    pub at: u64,
    /// Until when it serves: an approved effect must run before it.
    pub expires_at: u64,
}

impl DecisionOf<'_> {
    pub fn object(&self) -> NewObject {
        let r = self.row;
        let bytes = canonical::FixedObject::new()
            .str("approvalId", self.id)
            .str("episode", &r.episode)
            .reference("credentialId", &r.credential)
            .str("transition", &r.transition)
            .str("effect", &r.effect)
            .str("scope", &r.scope)
            .uint("cost", r.cost)
            .reference("requestDigest", &r.digest)
            .reference("shownRef", &r.shown)
            .str("approver", r.approver.as_str())
            .str("decision", self.decision)
            .value("decidedBy", self.decided_by)
            .str("decidedByText", self.decided_by_text)
            .str("note", self.note)
            .uint("requestedAt", r.requested_at)
            .uint("decidedAt", self.at)
            .uint("expiresAt", self.expires_at)
            .finish();
        NewObject::derived(APPROVAL_DECISION, APPROVALS_PROVENANCE, bytes)
    }
}

/// Why a pending approval lapsed with nobody's word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lapse {
    /// Its time ran out.
    Clock,
    /// Its session was revoked.
    Revocation,
}

impl Lapse {
    /// Who decided, as a decision object names them, and in words.
    pub fn decided_by(self) -> (Value, &'static str) {
        match self {
            Lapse::Clock => (json!({"via": "clock"}), "nobody: it expired"),
            Lapse::Revocation => (json!({"via": "revocation"}), "nobody: its session was revoked"),
        }
    }

    /// The decision that pending approval `id` (`row`) expired at `at`.
    pub fn decision(self, id: &str, row: &ApprovalRow, at: u64) -> ApprovalDecision {
        let (by, text) = self.decided_by();
        let object = DecisionOf {
            id,
            row,
            decision: ApprovalState::Expired.as_str(),
            decided_by: &by,
            decided_by_text: text,
            note: "",
            at,
            expires_at: row.expires_at,
        }
        .object();
        ApprovalDecision { state: ApprovalState::Expired, for_session: false, object, at, use_by: at }
    }
}

/// The secret `name`, made `value` if there is none.
pub(super) fn ensure_secret(rows: &mut impl ApprovalRows, name: &str, value: Vec<u8>) -> R<Vec<u8>> {
    if name.is_empty() || name.len() > SECRET_NAME_MAX || value.is_empty() || value.len() > SECRET_BYTES_MAX {
        return Err(WriteError::InvalidCommit(format!(
            "a secret has a 1-{SECRET_NAME_MAX} byte name and a 1-{SECRET_BYTES_MAX} byte value"
        )));
    }
    if let Some(existing) = rows.secret(name)? {
        return Ok(existing);
    }
    rows.insert_secret(name, &value)?;
    Ok(value)
}

fn write_object(rows: &mut impl ApprovalRows, o: &NewObject) -> R<()> {
    check_objects(std::slice::from_ref(o))?;
    rows.insert_approval_object(o)
}

fn refused(id: &str, row: &ApprovalRow, why: impl Into<String>) -> WriteError {
    WriteError::ApprovalRefused { id: id.to_string(), state: row.state.as_str(), why: why.into() }
}

fn existing(rows: &mut impl ApprovalRows, id: &str) -> R<ApprovalRow> {
    rows.approval(id)?.ok_or_else(|| WriteError::NoApproval(id.to_string()))
}

fn reply(id: &str, row: ApprovalRow) -> Reply {
    Reply::Approval(id.to_string(), Box::new(row))
}

/// The open approval of the same session and request, or `approval` as new
/// if its session, episode and store have room.
pub(super) fn ask(rows: &mut impl ApprovalRows, id: &str, approval: ApprovalRow, shown: &NewObject) -> R<Reply> {
    if id.is_empty() || id.len() > APPROVAL_ID_MAX {
        return Err(WriteError::InvalidCommit(format!("an approval id must be 1-{APPROVAL_ID_MAX} bytes")));
    }
    if approval.state != ApprovalState::Pending || approval.closed || approval.uses != 0 || approval.decision.is_some()
    {
        return Err(WriteError::InvalidCommit("a new approval is pending, open, unused and undecided".into()));
    }
    if shown.hash != approval.shown {
        return Err(WriteError::InvalidCommit("an approval's shown object must come with it".into()));
    }
    if approval.task.as_ref().is_some_and(|t| t.is_empty() || t.len() > APPROVAL_TASK_ID_MAX) {
        return Err(WriteError::InvalidCommit(format!("a waiting task's id must be 1-{APPROVAL_TASK_ID_MAX} bytes")));
    }
    check_objects(std::slice::from_ref(shown))?;
    if let Some(open) = rows.open_approval(&approval.credential, &approval.digest)? {
        let row = existing(rows, &open)?;
        waits(rows, &approval, &open)?;
        return Ok(reply(&open, row));
    }
    if let Some(row) = rows.approval(id)? {
        return Err(refused(id, &row, "the id names another approval"));
    }
    // One episode per session: a bound counts an episode's approvals by its sessions.
    if let Some((_, held)) = rows.open_approval_rows(Some(&approval.credential), 1)?.first()
        && held.episode != approval.episode
    {
        return Err(WriteError::InvalidCommit("a session's approvals are all of its own episode".into()));
    }
    make_room(rows, &approval)?;
    // Checked above, before any lookup.
    rows.insert_approval_object(shown)?;
    rows.insert_approval(id, &approval)?;
    waits(rows, &approval, id)?;
    Ok(reply(id, approval))
}

/// The A2A task that asked `asked` (if one did) waits on approval `id`,
/// found open or asked anew: its index row, in the ask's own transaction.
fn waits(rows: &mut impl ApprovalRows, asked: &ApprovalRow, id: &str) -> R<()> {
    match &asked.task {
        Some(task) => rows.put_approval_wait(&asked.credential, task, id),
        None => Ok(()),
    }
}

/// A pending approval decided: approved or denied before it expires, or
/// expired by the clock once it has.
pub(super) fn decide(rows: &mut impl ApprovalRows, id: &str, d: ApprovalDecision) -> R<Reply> {
    let mut row = existing(rows, id)?;
    if row.state != ApprovalState::Pending || row.closed {
        return Err(refused(id, &row, "it was decided already"));
    }
    let expired = d.at >= row.expires_at;
    match d.state {
        ApprovalState::Pending => return Err(WriteError::InvalidCommit("a decision is not pending".into())),
        ApprovalState::Expired if !expired => return Err(refused(id, &row, "it has not expired yet")),
        ApprovalState::Approved | ApprovalState::Denied if expired => {
            return Err(WriteError::ApprovalExpired { id: id.to_string(), expired_at: row.expires_at });
        }
        _ => {}
    }
    write_object(rows, &d.object)?;
    row.state = d.state;
    row.for_session = d.state == ApprovalState::Approved && d.for_session;
    row.decision = Some(d.object.hash);
    row.decided_at = d.at;
    if d.state == ApprovalState::Approved {
        row.expires_at = d.use_by;
    }
    rows.update_approval(id, &row)?;
    Ok(reply(id, row))
}

/// Closes an approval that serves nobody any more: denied, expired, or past
/// its expiry (a pending one then decided expired by the clock). Closing a
/// closed one changes nothing.
pub(super) fn close(rows: &mut impl ApprovalRows, id: &str, at: u64) -> R<Reply> {
    let row = existing(rows, id)?;
    if row.closed {
        return Ok(reply(id, row));
    }
    let spent = matches!(row.state, ApprovalState::Denied | ApprovalState::Expired) || at >= row.expires_at;
    if !spent {
        return Err(refused(id, &row, "it can still serve"));
    }
    Ok(reply(id, lapse(rows, id, row, at, Lapse::Clock)?))
}

/// One pass: closes up to `APPROVALS_EXPIRED_PER_PASS` open approvals past
/// their expiry at `at`.
pub(super) fn expire(rows: &mut impl ApprovalRows, at: u64) -> R<Reply> {
    expire_within(rows, at, Within::Store).map(Reply::ApprovalsClosed)
}

/// Closes every open approval of session `credential`, revoked at `at`.
pub(super) fn revoked(rows: &mut impl ApprovalRows, credential: &Ref, at: u64) -> R<()> {
    for (id, row) in rows.open_approval_rows(Some(credential), OPEN_READ_MAX)? {
        let why = if at >= row.expires_at { Lapse::Clock } else { Lapse::Revocation };
        lapse(rows, &id, row, at, why)?;
    }
    Ok(())
}

/// Closes open approval `id` (`row`); a pending one is first decided
/// expired, `why` saying why nobody decided it.
fn lapse(rows: &mut impl ApprovalRows, id: &str, mut row: ApprovalRow, at: u64, why: Lapse) -> R<ApprovalRow> {
    if row.state == ApprovalState::Pending {
        let decision = why.decision(id, &row, at);
        write_object(rows, &decision.object)?;
        row.state = ApprovalState::Expired;
        row.for_session = false;
        row.decision = Some(decision.object.hash);
        row.decided_at = at;
    }
    row.closed = true;
    rows.update_approval(id, &row)?;
    Ok(row)
}

/// The approvals a bound counts.
#[derive(Clone, Copy)]
enum Within<'a> {
    Session(&'a Ref),
    Episode(&'a str),
    Store,
}

impl Within<'_> {
    fn holds(self, row: &ApprovalRow) -> bool {
        match self {
            Within::Session(c) => row.credential == *c,
            Within::Episode(e) => row.episode == e,
            Within::Store => true,
        }
    }
}

/// Closes up to `APPROVALS_EXPIRED_PER_PASS` open approvals `within` a
/// bound that are past their expiry at `at`; answers their ids.
fn expire_within(rows: &mut impl ApprovalRows, at: u64, within: Within<'_>) -> R<Vec<String>> {
    let of = match within {
        Within::Session(c) => Some(c),
        _ => None,
    };
    let open = rows.open_approval_rows(of, OPEN_READ_MAX)?;
    let lapsed = open.into_iter().filter(|(_, r)| within.holds(r) && at >= r.expires_at);
    let mut closed = vec![];
    for (id, row) in lapsed.take(APPROVALS_EXPIRED_PER_PASS) {
        lapse(rows, &id, row, at, Lapse::Clock)?;
        closed.push(id);
    }
    Ok(closed)
}

/// Whether `a` fits its session's bound, its episode's and the store's;
/// the first one full is the refusal, and the approvals it counts.
fn room<'a>(rows: &mut impl ApprovalRows, a: &'a ApprovalRow) -> R<Result<(), (WriteError, Within<'a>)>> {
    let held = rows.open_approvals_of(&a.credential, APPROVALS_OPEN_PER_SESSION_MAX)?;
    if held >= APPROVALS_OPEN_PER_SESSION_MAX {
        return Ok(Err((WriteError::SessionApprovalsFull(held), Within::Session(&a.credential))));
    }
    let open = rows.open_approvals()?;
    // An episode holds no more than the store: counted only if it could be full.
    if open >= APPROVALS_OPEN_PER_EPISODE_MAX {
        let in_episode = rows.open_approvals_in(&a.episode, APPROVALS_OPEN_PER_EPISODE_MAX)?;
        if in_episode >= APPROVALS_OPEN_PER_EPISODE_MAX {
            return Ok(Err((WriteError::EpisodeApprovalsFull(in_episode), Within::Episode(&a.episode))));
        }
    }
    if open >= APPROVALS_OPEN_MAX {
        return Ok(Err((WriteError::ApprovalsFull(open), Within::Store)));
    }
    Ok(Ok(()))
}

/// Room for `a`. Approvals past their expiry hold none: a full bound first
/// closes its own lapsed ones, then counts again.
fn make_room(rows: &mut impl ApprovalRows, a: &ApprovalRow) -> R<()> {
    for _ in 0..BOUNDS {
        let Err((full, within)) = room(rows, a)? else { return Ok(()) };
        if expire_within(rows, a.requested_at, within)?.is_empty() {
            return Err(full);
        }
    }
    room(rows, a)?.map_err(|(full, _)| full)
}

/// An intent may run under `u` at `at`: it binds this request and episode,
/// and is approved, unexpired and unused (or for the session).
pub(super) fn check_use(rows: &mut impl ApprovalRows, u: &ApprovalUse, episode: &str, at: u64) -> R<()> {
    let row = existing(rows, &u.id)?;
    if row.digest != u.digest || row.episode != episode {
        return Err(refused(&u.id, &row, "it approves another request"));
    }
    if row.state != ApprovalState::Approved {
        return Err(refused(&u.id, &row, "only an approved request runs"));
    }
    if at >= row.expires_at {
        return Err(refused(&u.id, &row, format!("it had to be used before {} (unix seconds)", row.expires_at)));
    }
    if row.closed || (!row.for_session && row.uses > 0) {
        return Err(refused(&u.id, &row, "it was used already"));
    }
    Ok(())
}

/// Counts one use; a one-time approval closes with it.
pub(super) fn use_once(rows: &mut impl ApprovalRows, u: &ApprovalUse) -> R<()> {
    let mut row = existing(rows, &u.id)?;
    row.uses += 1;
    row.closed = !row.for_session;
    rows.update_approval(&u.id, &row)
}
