//! The approval law: a grant that asks keeps one open approval per session
//! and exact request; a person (or the clock) decides it once; an effect's
//! intent uses an approved one up, in the same transaction as its debit, so
//! an approval serves once (or, for the session, until it expires).

use super::*;

type R<T> = Result<T, WriteError>;

/// The rows of approvals, as an engine offers them inside its write
/// transaction.
pub(crate) trait ApprovalRows {
    fn approval(&mut self, id: &str) -> R<Option<ApprovalRow>>;
    /// The open approval of one session's exact request, by id.
    fn open_approval(&mut self, credential: &Ref, digest: &Ref) -> R<Option<String>>;
    fn open_approvals(&mut self) -> R<u64>;
    /// How many approvals session `credential` holds open, counted up to `max`.
    fn open_approvals_of(&mut self, credential: &Ref, max: u64) -> R<u64>;
    /// A new approval row (open unless it is closed already).
    fn insert_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()>;
    /// An existing approval row; a closed one is no longer open.
    fn update_approval(&mut self, id: &str, approval: &ApprovalRow) -> R<()>;
    /// An object an approval request carries (what was shown, the decision).
    fn insert_approval_object(&mut self, o: &NewObject) -> R<()>;
    /// The store's secrets (the key that seals approval questions).
    fn secret(&mut self, name: &str) -> R<Option<Vec<u8>>>;
    fn insert_secret(&mut self, name: &str, value: &[u8]) -> R<()>;
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

/// The open approval of the same session and request, or `approval` as new.
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
    check_objects(std::slice::from_ref(shown))?;
    if let Some(open) = rows.open_approval(&approval.credential, &approval.digest)? {
        let row = existing(rows, &open)?;
        return Ok(reply(&open, row));
    }
    if let Some(row) = rows.approval(id)? {
        return Err(refused(id, &row, "the id names another approval"));
    }
    let open = rows.open_approvals()?;
    if open >= APPROVALS_OPEN_MAX {
        return Err(WriteError::ApprovalsFull(open));
    }
    let held = rows.open_approvals_of(&approval.credential, APPROVALS_OPEN_PER_SESSION_MAX)?;
    if held >= APPROVALS_OPEN_PER_SESSION_MAX {
        return Err(WriteError::SessionApprovalsFull(held));
    }
    // Checked above, before any lookup.
    rows.insert_approval_object(shown)?;
    rows.insert_approval(id, &approval)?;
    Ok(reply(id, approval))
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
            return Err(refused(id, &row, format!("it expired at {} (unix seconds)", row.expires_at)));
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

/// Closes an approval that serves nobody any more: denied, expired, or
/// approved past its use-by time. Closing a closed one changes nothing.
pub(super) fn close(rows: &mut impl ApprovalRows, id: &str, at: u64) -> R<Reply> {
    let mut row = existing(rows, id)?;
    if row.closed {
        return Ok(reply(id, row));
    }
    let spent = match row.state {
        ApprovalState::Denied | ApprovalState::Expired => true,
        ApprovalState::Approved => at >= row.expires_at,
        ApprovalState::Pending => false,
    };
    if !spent {
        return Err(refused(id, &row, "it can still serve"));
    }
    row.closed = true;
    rows.update_approval(id, &row)?;
    Ok(reply(id, row))
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
