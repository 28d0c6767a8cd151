//! What claims the daemon, against the rows of the daemon's that own it. An
//! entry whose `writtenBy` claims the daemon is named by the committed task
//! that wrote it (the genesis `worldd quickstart` commits aside:
//! `model::is_quickstart_genesis`); an invocation record is the record of an
//! entry a committed task names; an effect record is carried by a journal
//! outcome (the object pass keeps only the others: `Held`), named by its
//! task, or listed by such an invocation record (a denial travels with its
//! commit and is journaled nowhere). Anything else was written by someone
//! posing as the daemon (a REST commit, before the daemon's names were
//! reserved), and is reported `forged`.

use super::redb::{Held, Step, Verifier};
use super::report::FaultKind;
use crate::model::TaskKey;
use crate::read::PAGE_MAX;
use crate::refs::Ref;
use crate::tables::REFERRER_OBJECT;
use crate::view::View;
use serde::Deserialize;

/// The field of an effect record naming its invocation (v2 and v3).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Invocation {
    invocation_id: String,
}

impl Verifier<'_> {
    /// Each entry claiming the daemon (`claimed`, by index) that no
    /// committed task names (`committed`, by index).
    pub(super) fn forged_entries(&self, claimed: &[u64], committed: &[bool]) {
        for &index in claimed {
            let named = usize::try_from(index).ok().and_then(|at| committed.get(at)).copied().unwrap_or(false);
            if !named {
                let detail = "claims the daemon as its author (writtenBy), but no committed task names it";
                self.sink.push("log", index, FaultKind::Forged, detail);
            }
        }
    }

    /// Each invocation record the object pass found that no committed
    /// task's entry carries (`trusted`, object numbers ascending), and each
    /// effect record no journal outcome carries that neither its task nor
    /// a trusted invocation record names.
    pub(super) fn owned_records(&self, held: &Held, trusted: &[u64]) -> Step {
        for &seq in &held.invocations {
            if trusted.binary_search(&seq).is_err() {
                let r = self.snap.object_at(seq).map_err(|e| e.to_string())?;
                let key = r.map_or_else(|| format!("object {seq}"), |r| r.to_string());
                let detail = "an invocation record that no committed task's entry carries";
                self.sink.push("objects", key, FaultKind::Forged, detail);
            }
        }
        for record in &held.effects {
            if !self.task_names(record)? && !self.trusted_names(record, trusted)? {
                let detail = "an effect record that no journal outcome, task or committed invocation record names";
                self.sink.push("objects", record, FaultKind::Forged, detail);
            }
        }
        Ok(())
    }

    /// Whether the task the record names as its invocation lists it.
    fn task_names(&self, record: &Ref) -> Result<bool, String> {
        let Some(bytes) = self.snap.payload(record).map_err(|e| e.to_string())? else { return Ok(false) };
        let Ok(Invocation { invocation_id }) = serde_json::from_slice(&bytes) else { return Ok(false) };
        let Some(key) = TaskKey::from_invocation_id(&invocation_id) else { return Ok(false) };
        let Some(task) = self.snap.task(&key).map_err(|e| e.to_string())? else { return Ok(false) };
        Ok(task.effects.iter().any(|e| e.record == Some(*record)) || task.effect_records.contains(record))
    }

    /// Whether an object naming `record` is a trusted invocation record.
    /// Referrers come objects first, so the walk ends at the first other.
    fn trusted_names(&self, record: &Ref, trusted: &[u64]) -> Result<bool, String> {
        let mut after = None;
        loop {
            let page = self.snap.referrers(record, after, PAGE_MAX).map_err(|e| e.to_string())?;
            for r in page.iter().take_while(|r| r.kind == REFERRER_OBJECT) {
                let seq = self.snap.object_seq(&r.referrer).map_err(|e| e.to_string())?;
                if seq.is_some_and(|seq| trusted.binary_search(&seq).is_ok()) {
                    return Ok(true);
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE_MAX && last.kind == REFERRER_OBJECT => {
                    after = Some((last.kind, last.referrer))
                }
                _ => return Ok(false),
            }
        }
    }
}
