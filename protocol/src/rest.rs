//! The REST error envelope `{"error":{"class":…,"message":…}}` of the `/v1`
//! routes and the agent card.

use crate::{CONTENT_TYPE_JSON, HttpReply, json};
use serde_json::Value;

/// The fixed, cause-free message of every `Internal` error (the cause goes to
/// stderr, never to the client).
pub const INTERNAL_MESSAGE: &str = "internal store failure";

/// Every error class of the REST envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RestClass {
    BadRequest,
    InvalidSession,
    SessionAbsent,
    SessionUnknown,
    SessionExpired,
    NotFound,
    HeadConflict,
    PayloadTooLarge,
    /// The session holds no grant for what it asked (a REST commit needs `World.Commit`).
    NotGranted,
    /// The grant's budget does not cover the request.
    BudgetExhausted,
    /// Reads are private and this one is the operator's alone.
    OperatorOnly,
    /// Reads are private and a session reads its own episode only.
    OtherEpisode,
    Internal,
    Timeout,
    CommitUncertain,
    LookupIndexUnavailable,
    ProjectionUnavailable,
    ProjectionDeadlineExceeded,
}

impl RestClass {
    /// Every class, for exhaustive tests and docs.
    pub const ALL: [RestClass; 18] = [
        RestClass::BadRequest,
        RestClass::InvalidSession,
        RestClass::SessionAbsent,
        RestClass::SessionUnknown,
        RestClass::SessionExpired,
        RestClass::NotFound,
        RestClass::HeadConflict,
        RestClass::PayloadTooLarge,
        RestClass::NotGranted,
        RestClass::BudgetExhausted,
        RestClass::OperatorOnly,
        RestClass::OtherEpisode,
        RestClass::Internal,
        RestClass::Timeout,
        RestClass::CommitUncertain,
        RestClass::LookupIndexUnavailable,
        RestClass::ProjectionUnavailable,
        RestClass::ProjectionDeadlineExceeded,
    ];

    /// The class name as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            RestClass::BadRequest => "BadRequest",
            RestClass::InvalidSession => "InvalidSession",
            RestClass::SessionAbsent => "SessionAbsent",
            RestClass::SessionUnknown => "SessionUnknown",
            RestClass::SessionExpired => "SessionExpired",
            RestClass::NotFound => "NotFound",
            RestClass::HeadConflict => "HeadConflict",
            RestClass::PayloadTooLarge => "PayloadTooLarge",
            RestClass::NotGranted => "NotGranted",
            RestClass::BudgetExhausted => "BudgetExhausted",
            RestClass::OperatorOnly => "OperatorOnly",
            RestClass::OtherEpisode => "OtherEpisode",
            RestClass::Internal => "Internal",
            RestClass::Timeout => "Timeout",
            RestClass::CommitUncertain => "CommitUncertain",
            RestClass::LookupIndexUnavailable => "LookupIndexUnavailable",
            RestClass::ProjectionUnavailable => "ProjectionUnavailable",
            RestClass::ProjectionDeadlineExceeded => "ProjectionDeadlineExceeded",
        }
    }

    /// The HTTP status of the class.
    pub fn status(self) -> u16 {
        match self {
            RestClass::BadRequest | RestClass::InvalidSession => 400,
            RestClass::SessionAbsent | RestClass::SessionUnknown | RestClass::SessionExpired => 401,
            RestClass::NotGranted | RestClass::BudgetExhausted | RestClass::OperatorOnly | RestClass::OtherEpisode => {
                403
            }
            RestClass::NotFound => 404,
            RestClass::HeadConflict => 409,
            RestClass::PayloadTooLarge => 413,
            RestClass::Internal => 500,
            RestClass::Timeout
            | RestClass::CommitUncertain
            | RestClass::LookupIndexUnavailable
            | RestClass::ProjectionUnavailable => 503,
            RestClass::ProjectionDeadlineExceeded => 504,
        }
    }
}

impl std::fmt::Display for RestClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One REST error. `extra` members follow `class` and `message` inside the
/// `error` object, in the given order (e.g. `observedHead`, `selectedHead`).
#[derive(Debug, Clone, PartialEq)]
pub struct RestError {
    pub class: RestClass,
    pub message: String,
    pub extra: Vec<(String, Value)>,
}

impl RestError {
    pub fn new(class: RestClass, message: impl Into<String>) -> Self {
        RestError { class, message: message.into(), extra: Vec::new() }
    }

    /// `500 Internal` with its fixed message.
    pub fn internal() -> Self {
        RestError::new(RestClass::Internal, INTERNAL_MESSAGE)
    }

    /// `409 HeadConflict`, carrying both heads inside the error object.
    pub fn head_conflict(
        message: impl Into<String>,
        observed_head: impl Into<String>,
        selected_head: impl Into<String>,
    ) -> Self {
        let mut e = RestError::new(RestClass::HeadConflict, message);
        e.extra.push(("observedHead".to_owned(), Value::String(observed_head.into())));
        e.extra.push(("selectedHead".to_owned(), Value::String(selected_head.into())));
        e
    }

    pub fn status(&self) -> u16 {
        self.class.status()
    }

    /// The wire message; `Internal` never reveals anything but the fixed text.
    pub fn wire_message(&self) -> &str {
        if self.class == RestClass::Internal { INTERNAL_MESSAGE } else { &self.message }
    }

    /// The JSON body, ending with a newline.
    pub fn body(&self) -> Vec<u8> {
        // Written by hand so the member order is class, message, extras.
        let mut out = Vec::with_capacity(96);
        out.extend_from_slice(b"{\"error\":{\"class\":");
        out.extend_from_slice(&json::to_vec(self.class.as_str()));
        out.extend_from_slice(b",\"message\":");
        out.extend_from_slice(&json::to_vec(self.wire_message()));
        for (k, v) in &self.extra {
            if k == "class" || k == "message" {
                continue; // a duplicate member would make the JSON ambiguous
            }
            out.push(b',');
            out.extend_from_slice(&json::to_vec(k.as_str()));
            out.push(b':');
            out.extend_from_slice(&json::to_vec(v));
        }
        out.extend_from_slice(b"}}\n");
        out
    }

    pub fn into_reply(self) -> HttpReply {
        HttpReply::new(self.status(), CONTENT_TYPE_JSON, self.body())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_its_documented_status() {
        let expected = [
            ("BadRequest", 400),
            ("InvalidSession", 400),
            ("SessionAbsent", 401),
            ("SessionUnknown", 401),
            ("SessionExpired", 401),
            ("NotFound", 404),
            ("HeadConflict", 409),
            ("PayloadTooLarge", 413),
            ("NotGranted", 403),
            ("BudgetExhausted", 403),
            ("OperatorOnly", 403),
            ("OtherEpisode", 403),
            ("Internal", 500),
            ("Timeout", 503),
            ("CommitUncertain", 503),
            ("LookupIndexUnavailable", 503),
            ("ProjectionUnavailable", 503),
            ("ProjectionDeadlineExceeded", 504),
        ];
        for (class, (name, status)) in RestClass::ALL.iter().zip(expected) {
            assert_eq!(class.as_str(), name);
            assert_eq!(class.status(), status, "{name}");
        }
    }

    #[test]
    fn envelope_is_class_then_message() {
        let r = RestError::new(RestClass::NotFound, "log entry not found").into_reply();
        assert_eq!(r.status, 404);
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
        assert_eq!(r.body_text(), "{\"error\":{\"class\":\"NotFound\",\"message\":\"log entry not found\"}}\n");
    }

    #[test]
    fn internal_always_says_internal_store_failure() {
        let leaky = RestError::new(RestClass::Internal, "disk /var/x exploded");
        assert_eq!(
            String::from_utf8(leaky.body()).unwrap(),
            "{\"error\":{\"class\":\"Internal\",\"message\":\"internal store failure\"}}\n"
        );
        assert_eq!(RestError::internal().status(), 500);
    }

    #[test]
    fn head_conflict_carries_both_heads_inside_the_error() {
        let e = RestError::head_conflict("head moved", "sha256:aa", "sha256:bb");
        assert_eq!(e.status(), 409);
        assert_eq!(
            String::from_utf8(e.body()).unwrap(),
            "{\"error\":{\"class\":\"HeadConflict\",\"message\":\"head moved\",\"observedHead\":\"sha256:aa\",\"selectedHead\":\"sha256:bb\"}}\n"
        );
    }

    #[test]
    fn messages_are_go_escaped() {
        let e = RestError::new(RestClass::BadRequest, "bad <ref> & more");
        assert_eq!(
            String::from_utf8(e.body()).unwrap(),
            "{\"error\":{\"class\":\"BadRequest\",\"message\":\"bad \\u003cref\\u003e \\u0026 more\"}}\n"
        );
    }
}
