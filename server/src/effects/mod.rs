//! The effect broker's pure parts: the decision law, the request encoding and
//! the effect record; a REST commit as an effect (`commit`); what a worktree
//! holds, as the digest a command's approval binds (`state`); and the handlers
//! (`worktree`, with its paths opened `beneath` the worktree and its disk `quota`).

mod beneath;
pub mod commit;
pub mod quota;
pub mod state;
pub mod worktree;

use world_store::canonical::FixedObject;
use world_store::{Grant, Ref, refs};

pub const EFFECT_REQUEST: &str = "world/effect-request/v1";
/// The effect record written today: the v1 fields, then the decision's
/// identity (`invocationId`, `ordinal`, `effectId`), so that no two decisions
/// ever share one record, even with the same request, budget and second.
pub const EFFECT_RECORD: &str = "world/effect-record/v2";
/// Records written before they named their invocation; still read and walked.
pub const EFFECT_RECORD_V1: &str = "world/effect-record/v1";
/// The record of an effect decided under a grant that asks: the v2 fields,
/// then `approvalRef`, the `world/approval/v1` decision it ran (or was
/// denied) under.
pub const EFFECT_RECORD_V3: &str = "world/effect-record/v3";
pub const EFFECT_RESULT: &str = "world/effect-result/v1";
pub const BROKER_PROVENANCE: &str = "host/broker";

pub const DENIED_EFFECT_NAME: &str = "denied:effect-name";
pub const DENIED_SCOPE: &str = "denied:scope";
pub const DENIED_EXPIRED: &str = "denied:expired";
pub const DENIED_BUDGET: &str = "denied:budget";

/// The broker's decision before budget; the budget check runs inside the
/// store's intent transaction, where it cannot race.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A live grant for exactly this effect and scope; its budget, and who
    /// must approve first if the grant asks.
    Allow {
        grant_budget: u64,
        ask: Option<world_store::Approver>,
    },
    Deny {
        label: &'static str,
        grant_budget: Option<u64>,
    },
}

/// Effect name, then exact scope, then liveness (`0 <= now < expiresAt`).
pub fn decide(grants: &[Grant], expires_at: u64, now: u64, effect: &str, scope: &str) -> Decision {
    let named: Vec<&Grant> = grants.iter().filter(|g| g.effect == effect).collect();
    if named.is_empty() {
        return Decision::Deny { label: DENIED_EFFECT_NAME, grant_budget: None };
    }
    let Some(g) = world_store::Session::grant_for(grants, effect, scope) else {
        return Decision::Deny { label: DENIED_SCOPE, grant_budget: None };
    };
    if now >= expires_at {
        return Decision::Deny { label: DENIED_EXPIRED, grant_budget: Some(g.budget) };
    }
    Decision::Allow { grant_budget: g.budget, ask: g.ask }
}

/// What an agent is told of a denied effect: the label, and the reason in
/// words with its figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub label: &'static str,
    pub reason: String,
}

/// One effect the broker denied, with what the reason's figures come from.
pub struct Denied<'a> {
    pub label: &'static str,
    pub effect: &'a str,
    pub scope: &'a str,
    pub cost: u64,
    pub episode: &'a str,
    /// The budget of the grant that names the effect and scope, if one does.
    pub budget: Option<u64>,
    /// What the episode has left of it.
    pub remaining: u64,
    /// What the episode has spent on the effect and scope, across its
    /// sessions (it may pass this grant's budget: another session's grant
    /// may be larger).
    pub spent: u64,
    /// When the session expires (Unix seconds).
    pub expires_at: u64,
}

/// Said of every denial: what it did not do.
const NOTHING_RAN: &str = "Nothing ran and nothing was debited.";

impl Denied<'_> {
    /// The label and the reason: which grant, what was spent of its budget
    /// (an episode's, shared by all of its sessions), or when the session ended.
    pub fn told(&self) -> Denial {
        let (effect, scope, episode) = (self.effect, self.scope, self.episode);
        let reason = match self.label {
            DENIED_BUDGET => {
                let (budget, spent) = (self.budget.unwrap_or(self.remaining), self.spent);
                format!(
                    "{effect} on {scope}: {spent} of {budget} spent in episode {episode}, across its sessions; \
                     this call costs {} and {} remain. {NOTHING_RAN}",
                    self.cost, self.remaining
                )
            }
            DENIED_EFFECT_NAME => format!("this session holds no grant for {effect}. {NOTHING_RAN}"),
            DENIED_SCOPE => {
                format!("this session's grants for {effect} do not cover the scope {scope}. {NOTHING_RAN}")
            }
            DENIED_EXPIRED => {
                format!("this session expired at {} UTC. {NOTHING_RAN}", crate::clock::utc(self.expires_at))
            }
            other => format!("{effect} on {scope} was denied ({other}). {NOTHING_RAN}"),
        };
        Denial { label: self.label, reason }
    }
}

// The request encoding is the store's (its verifier reads requests back).
pub use world_store::canonical::{parse_request, request_bytes};

/// One effect's decision and accounting, in the record's fixed field order,
/// and the decision it records: the journal key `(invocation_id, ordinal)`
/// is unique in a store, so the record is too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub invocation_id: &'a str,
    pub ordinal: u32,
    pub effect_id: &'a str,
    pub effect: &'a str,
    pub scope: &'a str,
    pub cost: u64,
    pub budget_before: u64,
    pub budget_after: u64,
    pub allowed: bool,
    pub failed: bool,
    pub denial: &'a str,
    pub request_ref: Ref,
    pub result_ref: Option<Ref>,
    /// The approval decision it was decided under (a grant that asks).
    pub approval: Option<Ref>,
}

impl Record<'_> {
    pub fn semantic_id(&self) -> &'static str {
        if self.approval.is_some() { EFFECT_RECORD_V3 } else { EFFECT_RECORD }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let fields = FixedObject::new()
            .str("effect", self.effect)
            .str("scope", self.scope)
            .uint("cost", self.cost)
            .uint("budgetBefore", self.budget_before)
            .uint("budgetAfter", self.budget_after)
            .bool("allowed", self.allowed)
            .bool("failed", self.failed)
            .str("denial", self.denial)
            .reference("requestRef", &self.request_ref)
            .str("resultRef", &refs::optional_text(self.result_ref))
            .str("invocationId", self.invocation_id)
            .uint("ordinal", u64::from(self.ordinal))
            .str("effectId", self.effect_id);
        match self.approval {
            Some(a) => fields.reference("approvalRef", &a).finish(),
            None => fields.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use world_store::canonical::ParsedRequest;

    fn g(effect: &str, scope: &str, budget: u64) -> Grant {
        Grant::new(effect, scope, budget)
    }

    fn denied(label: &'static str, budget: Option<u64>, remaining: u64) -> Denial {
        let spent = budget.unwrap_or(0).saturating_sub(remaining);
        spent_of(label, budget, remaining, spent)
    }

    fn spent_of(label: &'static str, budget: Option<u64>, remaining: u64, spent: u64) -> Denial {
        let d = Denied {
            label,
            effect: "Workspace.Write",
            scope: "worktree",
            cost: 1,
            episode: "demo",
            budget,
            remaining,
            spent,
            expires_at: 86_400,
        };
        d.told()
    }

    #[test]
    fn a_denial_says_its_label_and_its_reason_with_the_figures() {
        let spent = denied(DENIED_BUDGET, Some(5), 0);
        assert_eq!(spent.label, "denied:budget");
        assert_eq!(
            spent.reason,
            "Workspace.Write on worktree: 5 of 5 spent in episode demo, across its sessions; \
             this call costs 1 and 0 remain. Nothing ran and nothing was debited."
        );
        // Another session's larger grant spent past this one's budget: the episode's spend, as it is.
        let past = spent_of(DENIED_BUDGET, Some(5), 0, 12);
        assert!(
            past.reason.starts_with("Workspace.Write on worktree: 12 of 5 spent in episode demo"),
            "{}",
            past.reason
        );
        let named = denied(DENIED_EFFECT_NAME, None, 0);
        assert!(named.reason.starts_with("this session holds no grant for Workspace.Write."), "{}", named.reason);
        let scope = denied(DENIED_SCOPE, None, 0);
        assert!(scope.reason.contains("do not cover the scope worktree"), "{}", scope.reason);
        let expired = denied(DENIED_EXPIRED, Some(5), 5);
        assert!(expired.reason.starts_with("this session expired at 1970-01-02 00:00:00 UTC."), "{}", expired.reason);
    }

    #[test]
    fn the_decision_law_checks_name_then_scope_then_liveness() {
        let grants = [g("Workspace.Read", "worktree", 5)];
        assert_eq!(
            decide(&grants, 10, 1, "Workspace.Write", "worktree").clone(),
            Decision::Deny { label: DENIED_EFFECT_NAME, grant_budget: None }
        );
        assert_eq!(
            decide(&grants, 10, 1, "Workspace.Read", "other"),
            Decision::Deny { label: DENIED_SCOPE, grant_budget: None }
        );
        assert_eq!(
            decide(&grants, 10, 10, "Workspace.Read", "worktree"),
            Decision::Deny { label: DENIED_EXPIRED, grant_budget: Some(5) }
        );
        assert_eq!(
            decide(&grants, 10, 9, "Workspace.Read", "worktree"),
            Decision::Allow { grant_budget: 5, ask: None }
        );
        // A second grant of the same size never skips the asking one.
        let asks = Grant { ask: Some(world_store::Approver::Operator), ..g("Workspace.Read", "worktree", 5) };
        for pair in [[grants[0].clone(), asks.clone()], [asks.clone(), grants[0].clone()]] {
            let d = decide(&pair, 10, 9, "Workspace.Read", "worktree");
            assert_eq!(d, Decision::Allow { grant_budget: 5, ask: Some(world_store::Approver::Operator) });
        }
    }

    #[test]
    fn the_request_is_length_prefixed() {
        assert_eq!(request_bytes("A.B", "w", 1, 7, b"{}"), b"3:A.B1:w1:7:{}".to_vec());
    }

    #[test]
    fn a_request_reads_back_what_was_encoded() {
        let payload = br#"{"content":"a:1\n","op":"write","path":"x:y"}"#;
        let bytes = request_bytes("Workspace.Write", "work:tree", 12, 1_796_418_679, payload);
        let r = parse_request(&bytes).unwrap();
        assert_eq!(
            r,
            ParsedRequest { effect: "Workspace.Write", scope: "work:tree", cost: 12, at: 1_796_418_679, payload }
        );
        for bad in
            [&b""[..], b"3:A.B", b"3:A.B1:w", b"3:A.B1:w1:", b"9:A.B1:w1:7:{}", b"x:A.B1:w1:7:{}", b"3:A.B1:w+1:7:{}"]
        {
            assert_eq!(parse_request(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_record_has_the_fixed_field_order() {
        let r = Record {
            invocation_id: "a2a:demo:t1",
            ordinal: 0,
            effect_id: "read",
            effect: "Workspace.Read",
            scope: "worktree",
            cost: 1,
            budget_before: 50,
            budget_after: 49,
            allowed: true,
            failed: false,
            denial: "",
            request_ref: Ref::of(b"q"),
            result_ref: None,
            approval: None,
        };
        assert_eq!(r.semantic_id(), EFFECT_RECORD);
        let text = String::from_utf8(r.to_bytes()).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"effect\":\"Workspace.Read\",\"scope\":\"worktree\",\"cost\":1,\"budgetBefore\":50,\"budgetAfter\":49,\"allowed\":true,\"failed\":false,\"denial\":\"\",\"requestRef\":\"{}\",\"resultRef\":\"\",\"invocationId\":\"a2a:demo:t1\",\"ordinal\":0,\"effectId\":\"read\"}}",
                Ref::of(b"q")
            )
        );
        // Decided under an approval: v3, the v2 fields and then the decision's ref.
        let approved = Record { approval: Some(Ref::of(b"a")), ..r };
        assert_eq!(approved.semantic_id(), EFFECT_RECORD_V3);
        let v3 = String::from_utf8(approved.to_bytes()).unwrap();
        assert_eq!(v3, format!("{},\"approvalRef\":\"{}\"}}", text.strip_suffix('}').unwrap(), Ref::of(b"a")));
    }
}
