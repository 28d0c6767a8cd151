//! The effect broker's pure parts: the decision law, the request encoding and
//! the effect record; and the handlers (`worktree`, with its paths opened
//! `beneath` the worktree and its disk `quota`).

mod beneath;
pub mod quota;
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
    /// A live grant for exactly this effect and scope; its budget.
    Allow {
        grant_budget: u64,
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
    let Some(g) = named.iter().filter(|g| g.scope == scope).max_by_key(|g| g.budget) else {
        return Decision::Deny { label: DENIED_SCOPE, grant_budget: None };
    };
    if now >= expires_at {
        return Decision::Deny { label: DENIED_EXPIRED, grant_budget: Some(g.budget) };
    }
    Decision::Allow { grant_budget: g.budget }
}

/// `"<len(effect)>:<effect><len(scope)>:<scope><cost>:<now>:" + payload`, the
/// request encoding of the reference system.
pub fn request_bytes(effect: &str, scope: &str, cost: u64, now: u64, payload_canonical: &[u8]) -> Vec<u8> {
    let mut out = format!("{}:{effect}{}:{scope}{cost}:{now}:", effect.len(), scope.len()).into_bytes();
    out.extend_from_slice(payload_canonical);
    out
}

/// A request object read back: effect, scope, cost, when, and the canonical
/// JSON payload (the inverse of [`request_bytes`]); `None` if it is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedRequest<'a> {
    pub effect: &'a str,
    pub scope: &'a str,
    pub cost: u64,
    pub at: u64,
    pub payload: &'a [u8],
}

pub fn parse_request(bytes: &[u8]) -> Option<ParsedRequest<'_>> {
    // `<digits>:` then the rest.
    fn number(b: &[u8]) -> Option<(u64, &[u8])> {
        let colon = b.iter().position(|c| *c == b':')?;
        let digits = &b[..colon];
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some((std::str::from_utf8(digits).ok()?.parse().ok()?, &b[colon + 1..]))
    }
    fn sized(b: &[u8]) -> Option<(&str, &[u8])> {
        let (len, rest) = number(b)?;
        let len = usize::try_from(len).ok().filter(|l| *l <= rest.len())?;
        Some((std::str::from_utf8(&rest[..len]).ok()?, &rest[len..]))
    }
    let (effect, rest) = sized(bytes)?;
    let (scope, rest) = sized(rest)?;
    let (cost, rest) = number(rest)?;
    let (at, payload) = number(rest)?;
    Some(ParsedRequest { effect, scope, cost, at, payload })
}

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
}

impl Record<'_> {
    pub fn to_bytes(&self) -> Vec<u8> {
        FixedObject::new()
            .str("effect", self.effect)
            .str("scope", self.scope)
            .uint("cost", self.cost)
            .uint("budgetBefore", self.budget_before)
            .uint("budgetAfter", self.budget_after)
            .bool("allowed", self.allowed)
            .bool("failed", self.failed)
            .str("denial", self.denial)
            .str("requestRef", &self.request_ref.to_string())
            .str("resultRef", &refs::optional_text(self.result_ref))
            .str("invocationId", self.invocation_id)
            .uint("ordinal", u64::from(self.ordinal))
            .str("effectId", self.effect_id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(effect: &str, scope: &str, budget: u64) -> Grant {
        Grant { effect: effect.into(), scope: scope.into(), budget }
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
        assert_eq!(decide(&grants, 10, 9, "Workspace.Read", "worktree"), Decision::Allow { grant_budget: 5 });
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
        };
        let text = String::from_utf8(r.to_bytes()).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"effect\":\"Workspace.Read\",\"scope\":\"worktree\",\"cost\":1,\"budgetBefore\":50,\"budgetAfter\":49,\"allowed\":true,\"failed\":false,\"denial\":\"\",\"requestRef\":\"{}\",\"resultRef\":\"\",\"invocationId\":\"a2a:demo:t1\",\"ordinal\":0,\"effectId\":\"read\"}}",
                Ref::of(b"q")
            )
        );
    }
}
