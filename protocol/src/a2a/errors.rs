//! The refusals: the seed's error table, the A2A 0.3/1.0 errors, and the
//! `error.data` that says why (A2A 1.0 §9.5).

use super::*;

/// Every row of the seed's A2A error table (session denials are
/// [`crate::auth::a2a_denial`]), plus the A2A 0.3/1.0 errors the newer
/// methods answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum A2aError {
    /// -32600: bad envelope, `jsonrpc` not "2.0", bad id.
    InvalidRequest,
    /// -32601: not a served method.
    MethodNotFound,
    /// -32602: bad params, wrong part shape, bad `transition_fn`.
    InvalidParams,
    /// -32602: skill unknown, not visible to the session, or access denied.
    NotAuthorized,
    /// -32602: the `transition_fn` pin does not match.
    ProposalMismatch,
    /// -32602: task id reused for a different call, or still in flight.
    TaskIdReused,
    /// -32603: an effect ran and was recorded, then a post-effect step
    /// failed. Holds the effect record refs. Checked first, whatever the cause.
    EffectsUnrecorded(Vec<String>),
    /// -32603: R8, an effect with no handler in this daemon or episode.
    NoEffectHandler,
    /// -32603: no genesis commit yet.
    NoWorldSelected,
    /// -32603: incompatible transition source.
    CallingConvention,
    /// -32603: the capsule run failed.
    ExecutionFailed,
    /// -32603: the output was not a JSON object.
    OutputNotObject,
    /// -32603: the 20 s deadline; the connection is closed.
    DeadlineExceeded,
    /// -32603: commit outcome uncertain; resend the same task id.
    OutcomeUnconfirmed,
    /// -32603: known not committed.
    NotCommitted,
    /// -32603: head conflict on a pure transition.
    HeadMoved,
    /// -32603: no coordinator, registry read or integrity failure.
    Unavailable,
    /// -32603: the store's disk is full; nothing of the call was committed.
    OutOfSpace,
    /// -32001: no such task in the caller's episode.
    TaskNotFound,
    /// -32002: the task cannot be canceled (ended, or running its effect).
    TaskNotCancelable,
    /// -32003: push notifications are not offered.
    PushNotificationNotSupported,
    /// -32004: not offered (streaming), or a message to a task that ended.
    UnsupportedOperation,
    /// -32005: a part this agent cannot take (text, file).
    ContentTypeNotSupported,
    /// -32009: an `A2A-Version` this agent does not serve.
    VersionNotSupported,
}

impl A2aError {
    pub fn code(&self) -> i64 {
        match self {
            A2aError::InvalidRequest => CODE_INVALID_REQUEST,
            A2aError::MethodNotFound => CODE_METHOD_NOT_FOUND,
            A2aError::InvalidParams | A2aError::NotAuthorized | A2aError::ProposalMismatch | A2aError::TaskIdReused => {
                CODE_INVALID_PARAMS
            }
            A2aError::TaskNotFound => CODE_SESSION_OR_TASK_NOT_FOUND,
            A2aError::TaskNotCancelable => CODE_TASK_NOT_CANCELABLE,
            A2aError::PushNotificationNotSupported => CODE_PUSH_NOTIFICATION_NOT_SUPPORTED,
            A2aError::UnsupportedOperation => CODE_UNSUPPORTED_OPERATION,
            A2aError::ContentTypeNotSupported => CODE_CONTENT_TYPE_NOT_SUPPORTED,
            A2aError::VersionNotSupported => CODE_VERSION_NOT_SUPPORTED,
            _ => CODE_INTERNAL_ERROR,
        }
    }

    pub fn message(&self) -> String {
        let fixed = match self {
            A2aError::InvalidRequest => "invalid JSON-RPC request",
            A2aError::MethodNotFound => "method not found",
            A2aError::InvalidParams => "invalid params",
            A2aError::NotAuthorized => "not authorized",
            A2aError::ProposalMismatch => "proposal does not match the registered transition",
            A2aError::TaskIdReused => "task id already used in this session",
            A2aError::EffectsUnrecorded(refs) => {
                return format!(
                    "effects were requested but the invocation was not confirmed committed; effect records: {}",
                    refs.join(" ")
                );
            }
            A2aError::NoEffectHandler => "transition declares an effect this daemon has no handler for",
            A2aError::NoWorldSelected => "no world is selected; commit a genesis world first",
            A2aError::CallingConvention => "transition does not implement the invocation calling convention",
            A2aError::ExecutionFailed => "transition execution failed",
            A2aError::OutputNotObject => "transition output is not a JSON object",
            A2aError::DeadlineExceeded => "invocation exceeded its deadline",
            A2aError::OutcomeUnconfirmed => "invocation outcome is not confirmed; resend the same task id",
            A2aError::NotCommitted => "invocation was not committed; send a new task id",
            A2aError::HeadMoved => "world head moved during invocation; not committed; send a new task id",
            A2aError::Unavailable => "transition invocation is not available in this daemon",
            A2aError::OutOfSpace => MSG_OUT_OF_SPACE,
            A2aError::TaskNotFound => "task not found",
            A2aError::TaskNotCancelable => "task cannot be canceled",
            A2aError::PushNotificationNotSupported => "push notifications are not supported",
            A2aError::UnsupportedOperation => "this operation is not supported",
            A2aError::ContentTypeNotSupported => "incompatible content types",
            A2aError::VersionNotSupported => "this A2A version is not supported",
        };
        fixed.to_owned()
    }

    /// `ErrorInfo.reason`: the A2A error's name in UPPER_SNAKE_CASE without
    /// "Error" (A2A 1.0 §9.5); the JSON-RPC ones as the reference SDK names them.
    pub fn reason(&self) -> &'static str {
        match self {
            A2aError::InvalidRequest => "INVALID_REQUEST",
            A2aError::MethodNotFound => "METHOD_NOT_FOUND",
            A2aError::InvalidParams | A2aError::NotAuthorized | A2aError::ProposalMismatch | A2aError::TaskIdReused => {
                "INVALID_PARAMS"
            }
            A2aError::TaskNotFound => "TASK_NOT_FOUND",
            A2aError::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            A2aError::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2aError::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            A2aError::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            A2aError::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            _ => "INTERNAL_ERROR",
        }
    }

    /// The reply for request `jsonrpc_id`, as the seed's table has it (no `data`).
    pub fn reply(&self, jsonrpc_id: &RpcId) -> A2aReply {
        let mut r = error(jsonrpc_id, self.code(), &self.message());
        r.close_connection = matches!(self, A2aError::DeadlineExceeded);
        r
    }

    /// This error refusing a request of `flavor`, for the reason `why`.
    pub fn because(self, why: Why) -> Refusal {
        Refusal { error: self, why, beyond_the_seed: false }
    }
}

/// Why a request was refused, as `error.data` tells it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Why {
    /// The parameter at fault, as a path under `params` (`message.role`).
    pub parameter: Option<String>,
    /// What was expected, or what to do instead, in a sentence.
    pub detail: String,
    /// Further context (`taskId`, `state`), in this order.
    pub context: Vec<(&'static str, String)>,
}

impl Why {
    pub fn new(detail: impl Into<String>) -> Why {
        Why { parameter: None, detail: detail.into(), context: vec![] }
    }
    pub fn parameter(parameter: &str, detail: impl Into<String>) -> Why {
        Why { parameter: Some(parameter.to_owned()), detail: detail.into(), context: vec![] }
    }
    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> Why {
        self.context.push((key, value.into()));
        self
    }
}

/// A refusal with its reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub error: A2aError,
    pub why: Why,
    /// Refuses what the seed's `tasks/send` does not define (a continuation
    /// of a task waiting for approval): `data` says why there too.
    pub beyond_the_seed: bool,
}

impl Refusal {
    /// The reply to a request of `flavor`: the seed's `tasks/send` gets its
    /// table's code and message (a part it cannot take is `invalid params`
    /// there), with `data` saying why for a -32602 (its table's message alone
    /// does not say which parameter, or what to send instead) and for what
    /// the seed does not define; the 0.3 and 1.0 methods always get `data`.
    pub fn reply(&self, jsonrpc_id: &RpcId, flavor: Flavor) -> A2aReply {
        let mut r = if flavor == Flavor::Legacy01 {
            let seed = match &self.error {
                A2aError::ContentTypeNotSupported => &A2aError::InvalidParams,
                e => e,
            };
            seed.reply(jsonrpc_id)
        } else {
            self.error.reply(jsonrpc_id)
        };
        let told = self.beyond_the_seed || r.error_code() == Some(CODE_INVALID_PARAMS);
        if flavor == Flavor::Legacy01 && !told {
            return r;
        }
        if let Err(e) = &mut r.outcome {
            e.data = Some(self.data());
        }
        r
    }

    /// This refusal of what the seed's `tasks/send` does not define: it keeps
    /// the table's code and message there, and says why in `data`.
    pub fn beyond_the_seed(mut self) -> Refusal {
        self.beyond_the_seed = true;
        self
    }

    /// As [`Refusal::reply`], for a refusal [beyond the seed](Refusal::beyond_the_seed).
    pub fn reply_explained(&self, jsonrpc_id: &RpcId, flavor: Flavor) -> A2aReply {
        self.clone().beyond_the_seed().reply(jsonrpc_id, flavor)
    }

    /// `error.data`: the ErrorInfo, then a BadRequest when a parameter is named.
    pub fn data(&self) -> Value {
        let mut metadata = Map::new();
        metadata.insert("detail".into(), json!(self.why.detail));
        if let Some(p) = &self.why.parameter {
            metadata.insert("parameter".into(), json!(p));
        }
        for (k, v) in &self.why.context {
            metadata.insert((*k).into(), json!(v));
        }
        let mut details = vec![json!({
            "@type": ERROR_INFO_TYPE,
            "reason": self.error.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": metadata,
        })];
        if let Some(p) = &self.why.parameter {
            details.push(json!({
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": p, "description": self.why.detail}],
            }));
        }
        Value::Array(details)
    }
}

/// `effects were requested …; effect records: <refs space-separated>`.
pub fn effects_unrecorded<S: AsRef<str>>(jsonrpc_id: &RpcId, refs: &[S]) -> A2aReply {
    A2aError::EffectsUnrecorded(refs.iter().map(|r| r.as_ref().to_owned()).collect()).reply(jsonrpc_id)
}

/// The body exceeded [`A2A_BODY_MAX`]: answered as a bad envelope with
/// `id: null` (the body was never parsed, so no id is known).
pub fn body_too_large() -> A2aReply {
    A2aError::InvalidRequest.reply(&RpcId::Null)
}

/// Whether `s` is a task id: 1–128 characters of `A-Z a-z 0-9 . _ -`.
pub fn is_task_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= TASK_ID_MAX
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `s` is a `sha256:<64 lowercase hex>` ref.
pub fn is_transition_fn(s: &str) -> bool {
    s.strip_prefix(TRANSITION_FN_PREFIX).is_some_and(|h| {
        h.len() == TRANSITION_FN_HEX_LEN && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
