//! Approvals, checked offline: each row is consistent with its decision and
//! with the index of open approvals; each effect record that names a decision
//! (`world/effect-record/v3`) names its approval row's own decision, one that
//! decided exactly its request (the digest recomputed from the record's
//! request object), an effect ran only under a yes, and no one-time approval
//! served twice; every A2A task's wait names an approval of its own
//! session; and every decision, question and REST commit record is named
//! by the row that made it (`owned_objects`).

use super::redb::{Step, Verifier};
use super::report::FaultKind;
use crate::canonical::{approval_digest, parse_request};
use crate::model::*;
use crate::refs::Ref;
use crate::rows;
use crate::tables::{APPROVAL_WAITS, APPROVALS, INTENTS, OPEN_APPROVALS, OUTCOMES, SESSIONS};
use crate::view::View;
use redb::ReadableTable;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};

const EFFECT_RECORD_V3: &str = "world/effect-record/v3";
const APPROVAL: &str = "world/approval/v1";
const APPROVAL_REQUEST: &str = "world/approval-request/v1";
const COMMIT_RECORD: &str = "world/commit-record/v1";

/// The fields of a v3 effect record the check reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordFields {
    effect: String,
    scope: String,
    cost: u64,
    allowed: bool,
    denial: String,
    request_ref: String,
    approval_ref: String,
}

/// The fields of a `world/approval/v1` object the check reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Decision {
    approval_id: String,
    credential_id: String,
    transition: String,
    effect: String,
    scope: String,
    cost: u64,
    request_digest: String,
    decision: String,
}

impl Verifier<'_> {
    /// Every approval row, and the index of the open ones.
    pub(super) fn approval_rows(&self) -> Step {
        let Some(t) = self.table(APPROVALS)? else { return Ok(()) };
        let open = self.table(OPEN_APPROVALS)?;
        let fault = |id: &str, kind, detail: String| self.sink.push("approvals", id, kind, detail);
        for item in t.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let id = k.value();
            let row: ApprovalRow = match rows::decode("approvals", &id, v.value()) {
                Ok(r) => r,
                Err(c) => {
                    self.sink.corrupt(c);
                    continue;
                }
            };
            if !self.has_object(&row.shown) {
                fault(id, FaultKind::Dangling, format!("shown {} names no object", row.shown));
            }
            let decided = row.state != ApprovalState::Pending;
            match row.decision {
                Some(d) if !decided => fault(id, FaultKind::Mismatch, format!("pending, yet decided by {d}")),
                Some(d) if !self.has_object(&d) => {
                    fault(id, FaultKind::Dangling, format!("decision {d} names no object"))
                }
                None if decided => fault(id, FaultKind::Missing, format!("{} without a decision", row.state.as_str())),
                _ => {}
            }
            if row.uses > 0 && row.state != ApprovalState::Approved {
                fault(id, FaultKind::Mismatch, format!("used {} time(s) but {}", row.uses, row.state.as_str()));
            }
            if row.uses > 1 && !row.for_session {
                fault(id, FaultKind::Mismatch, format!("a one-time approval used {} times", row.uses));
            }
            let indexed = match &open {
                Some(o) => o.get((row.credential.0, row.digest.0)).map_err(|e| e.to_string())?.map(|v| v.value() == id),
                None => None,
            };
            match (row.closed, indexed) {
                (false, Some(true)) | (true, None | Some(false)) => {}
                (false, _) => fault(id, FaultKind::Missing, "open, but not in the index of open approvals".into()),
                (true, Some(true)) => {
                    fault(id, FaultKind::Mismatch, "closed, but still in the index of open approvals".into())
                }
            }
        }
        let Some(open) = open else { return Ok(()) };
        for item in open.iter().map_err(|e| e.to_string())? {
            let (_, v) = item.map_err(|e| e.to_string())?;
            let id = v.value();
            if t.get(id).map_err(|e| e.to_string())?.is_none() {
                self.sink.push("open_approvals", id, FaultKind::Dangling, "names an approval that has no row");
            }
        }
        Ok(())
    }

    /// Every row of the waits index names an approval that exists, asked
    /// by the same session (so of the same episode).
    pub(super) fn approval_waits(&self) -> Step {
        let Some(waits) = self.table(APPROVAL_WAITS)? else { return Ok(()) };
        let approvals = self.table(APPROVALS)?;
        for item in waits.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let ((credential, task), id) = (k.value(), v.value());
            let key = format!("{} {task}", Ref(credential));
            let found = match &approvals {
                Some(t) => t.get(id).map_err(|e| e.to_string())?,
                None => None,
            };
            let Some(found) = found else {
                self.sink.push(
                    "approval_waits",
                    key,
                    FaultKind::Dangling,
                    format!("names approval {id}, which has no row"),
                );
                continue;
            };
            match rows::decode::<ApprovalRow>("approvals", &id, found.value()) {
                Ok(row) if row.credential.0 != credential => self.sink.push(
                    "approval_waits",
                    key,
                    FaultKind::Mismatch,
                    format!("names approval {id}, asked by another session ({})", row.credential),
                ),
                // A row that does not decode is reported by `approval_rows`.
                Ok(_) | Err(_) => {}
            }
        }
        Ok(())
    }

    /// Every effect that ran under a grant that asks names a decision: its
    /// intent names the session, whose grants say whether it asks, and its
    /// outcome's record must then be one decided under an approval. (An
    /// effect of a revoked session, whose grants are gone, cannot be told.)
    pub(super) fn asked_intents(&self) -> Step {
        let (Some(intents), Some(sessions)) = (self.table(INTENTS)?, self.table(SESSIONS)?) else { return Ok(()) };
        let Some(outcomes) = self.table(OUTCOMES)? else { return Ok(()) };
        for item in intents.iter().map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let (inv, ord) = k.value();
            let key = format!("{inv}#{ord}");
            let Ok(intent) = rows::decode::<EffectIntent>("intents", &key, v.value()) else { continue };
            let Some(credential) = intent.credential else { continue };
            let Some(row) = sessions.get(credential.0).map_err(|e| e.to_string())? else { continue };
            let Ok(session) = rows::decode::<Session>("sessions", &credential, row.value()) else { continue };
            let asks =
                Session::grant_for(&session.grants, &intent.effect, &intent.scope).is_some_and(|g| g.ask.is_some());
            if !asks {
                continue;
            }
            let Some(outcome) = outcomes.get((inv, ord)).map_err(|e| e.to_string())? else { continue };
            let Ok(outcome) = rows::decode::<EffectOutcome>("outcomes", &key, outcome.value()) else { continue };
            let Some(record) = outcome.record_ref else { continue };
            let kind = self.snap.object_meta(&record).map_err(|e| e.to_string())?.map(|m| m.semantic_id);
            if kind.as_deref() != Some(EFFECT_RECORD_V3) {
                let detail = format!(
                    "ran under a grant that asks, but its record {record} names no approval ({})",
                    kind.unwrap_or_else(|| "absent".into())
                );
                self.sink.push("intents", key, FaultKind::Mismatch, detail);
            }
        }
        Ok(())
    }

    /// Every effect record decided under an approval.
    pub(super) fn approved_records(&self) -> Step {
        let mut ran: BTreeMap<String, (u64, bool)> = BTreeMap::new();
        self.snap
            .each_object_of(EFFECT_RECORD_V3, |record, _| {
                if let Some((id, once)) = self.approved_record(&record).map_err(crate::error::ReadError::Storage)? {
                    let used = ran.entry(id).or_insert((0, once));
                    used.0 += 1;
                }
                Ok::<(), crate::error::ReadError>(())
            })
            .map_err(|e| e.to_string())?;
        for (id, (runs, once)) in ran {
            if once && runs > 1 {
                let detail = format!("a one-time approval ran {runs} effects");
                self.sink.push("approvals", id, FaultKind::Mismatch, detail);
            }
        }
        Ok(())
    }

    /// Every object under an approval's or a REST commit's semantic id is
    /// named by the row that made it: a decision or a question by its
    /// approval row, a commit record by its journal item. Anything else was
    /// written by someone posing as the daemon.
    pub(super) fn owned_objects(&self) -> Step {
        let mut named = HashSet::new();
        if let Some(t) = self.table(APPROVALS)? {
            for item in t.iter().map_err(|e| e.to_string())? {
                let (k, v) = item.map_err(|e| e.to_string())?;
                // A row that does not decode is reported by `approval_rows`.
                if let Ok(row) = rows::decode::<ApprovalRow>("approvals", &k.value(), v.value()) {
                    named.insert(row.shown);
                    named.extend(row.decision);
                }
            }
        }
        let forged = |object: &Ref, what: &str| {
            self.sink.push("objects", object, FaultKind::Forged, format!("a {what} that no row of the daemon's names"));
        };
        for semantic_id in [APPROVAL, APPROVAL_REQUEST, COMMIT_RECORD] {
            let mut objects = vec![];
            self.snap
                .each_object_of(semantic_id, |object, _| {
                    objects.push(object);
                    Ok::<(), crate::error::ReadError>(())
                })
                .map_err(|e| e.to_string())?;
            for object in objects {
                let owned = match semantic_id {
                    COMMIT_RECORD => self
                        .snap
                        .record_journal(&object)
                        .map_err(|e| e.to_string())?
                        .is_some_and(|k| k.invocation_id.starts_with(COMMIT_JOURNAL_PREFIX)),
                    _ => named.contains(&object),
                };
                if !owned {
                    forged(&object, semantic_id);
                }
            }
        }
        Ok(())
    }

    /// Checks one v3 record; an effect that ran answers its approval's id
    /// and whether that approval serves once.
    fn approved_record(&self, record: &Ref) -> Result<Option<(String, bool)>, String> {
        let fault = |kind, detail: String| {
            self.sink.push("objects", record, kind, detail);
            Ok(None)
        };
        let Some(fields) = self.json::<RecordFields>(record)? else {
            return fault(FaultKind::Decode, "not an effect record naming an approval".into());
        };
        let Ok(approval) = Ref::parse(&fields.approval_ref) else {
            return fault(FaultKind::Decode, format!("approvalRef {:?} is not a ref", fields.approval_ref));
        };
        match self.snap.object_meta(&approval).map_err(|e| e.to_string())? {
            Some(m) if m.semantic_id == APPROVAL => {}
            Some(m) => return fault(FaultKind::Mismatch, format!("approvalRef {approval} is a {}", m.semantic_id)),
            None => return fault(FaultKind::Dangling, format!("approvalRef {approval} names no object")),
        }
        let Some(d) = self.json::<Decision>(&approval)? else {
            return fault(FaultKind::Decode, format!("approval {approval} does not decode"));
        };
        let row = self.snap.approval(&d.approval_id).map_err(|e| e.to_string())?;
        if row.as_ref().and_then(|r| r.decision) != Some(approval) {
            let detail = format!("approvalRef {approval} is no approval row's decision (approval {})", d.approval_id);
            return fault(FaultKind::Forged, detail);
        }
        if (d.effect.as_str(), d.scope.as_str(), d.cost) != (fields.effect.as_str(), fields.scope.as_str(), fields.cost)
        {
            return fault(
                FaultKind::Mismatch,
                format!("approval {} is for another effect, scope or cost", d.approval_id),
            );
        }
        if !self.binds(&fields, &d)? {
            return fault(FaultKind::Mismatch, format!("approval {} approved another request", d.approval_id));
        }
        let yes = matches!(d.decision.as_str(), "approved" | "approved-for-session");
        let told = match (fields.allowed, d.decision.as_str(), fields.denial.as_str()) {
            (true, _, _) => yes,
            (false, "denied", "denied:approval") | (false, "expired", "denied:approval-expired") => true,
            // Approved, then refused by the budget when it came to run.
            (false, _, "denied:budget") => yes,
            _ => false,
        };
        if !told {
            let detail = format!(
                "{} under approval {} whose decision is {}",
                if fields.allowed { "ran" } else { "denied" },
                d.approval_id,
                d.decision
            );
            return fault(FaultKind::Mismatch, detail);
        }
        Ok(fields.allowed.then_some((d.approval_id, d.decision == "approved")))
    }

    /// Whether the decision's digest is the record's own request.
    fn binds(&self, fields: &RecordFields, d: &Decision) -> Result<bool, String> {
        let (Ok(request), Ok(credential)) = (Ref::parse(&fields.request_ref), Ref::parse(&d.credential_id)) else {
            return Ok(false);
        };
        let Some(bytes) = self.snap.payload(&request).map_err(|e| e.to_string())? else { return Ok(false) };
        let Some(r) = parse_request(&bytes) else { return Ok(false) };
        let digest = approval_digest(&credential, &d.transition, r.effect, r.scope, r.cost, r.payload);
        Ok(digest.to_string() == d.request_digest)
    }

    fn json<T: serde::de::DeserializeOwned>(&self, r: &Ref) -> Result<Option<T>, String> {
        let Some(bytes) = self.snap.payload(r).map_err(|e| e.to_string())? else { return Ok(None) };
        Ok(serde_json::from_slice(&bytes).ok())
    }
}
