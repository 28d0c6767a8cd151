//! The agent card, and its errors.

use super::*;

/// What the agent card is built from.
#[derive(Debug, Clone, Copy)]
pub struct CardInput<'a> {
    /// `scheme://host[:port]` as the client reached the daemon.
    pub base_url: &'a str,
    pub name: &'a str,
    pub description: &'a str,
    pub version: &'a str,
    /// The session's visible transitions, in registry byte order.
    pub skills: &'a [ToolView],
}

/// The session's card for `/.well-known/agent.json` and
/// `/.well-known/agent-card.json`, readable by A2A 1.0 and 0.3 clients alike.
///
/// 1.0 clients pick a transport from `supportedInterfaces` (JSON-RPC at 1.0,
/// listed first, and at 0.3, both on `<base>/a2a/`) and read the bearer scheme
/// from `securitySchemes` / `securityRequirements`; 0.3 clients read `url`,
/// `protocolVersion`, `preferredTransport`, `additionalInterfaces` and
/// `security`. Each security scheme carries both generations' members (0.3's
/// `type` and `scheme`, 1.0's `httpAuthSecurityScheme`), which each client
/// reads while ignoring the other's.
pub fn agent_card(input: CardInput<'_>) -> Value {
    let skills: Vec<Value> = input
        .skills
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "name": s.title,
                "description": s.description,
                "tags": [],
                "examples": [],
            })
        })
        .collect();
    let url = format!("{}{}", input.base_url.trim_end_matches('/'), A2A_PATH);
    let interface = |version: &str| json!({"url": url, "protocolBinding": CARD_BINDING, "protocolVersion": version});
    json!({
        "name": input.name,
        "description": input.description,
        "url": url,
        "version": input.version,
        "protocolVersion": CARD_PROTOCOL_VERSION,
        "preferredTransport": CARD_BINDING,
        "additionalInterfaces": [{"url": url, "transport": CARD_BINDING}],
        "supportedInterfaces": [interface(CARD_INTERFACE_VERSIONS[0]), interface(CARD_INTERFACE_VERSIONS[1])],
        // What is served: streams (server-sent events), no push
        // notifications; the extended card is this card (behind the session
        // already), by JSON-RPC too.
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "stateTransitionHistory": false,
            "extendedAgentCard": true,
        },
        "supportsAuthenticatedExtendedCard": true,
        "securitySchemes": {
            CARD_SECURITY_SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": CARD_BEARER_FORMAT,
                "description": CARD_BEARER_DESCRIPTION,
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "bearerFormat": CARD_BEARER_FORMAT,
                    "description": CARD_BEARER_DESCRIPTION,
                },
            },
        },
        "security": [{CARD_SECURITY_SCHEME: []}],
        "securityRequirements": [{"schemes": {CARD_SECURITY_SCHEME: {"list": []}}}],
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": skills,
    })
}

/// The card as an HTTP 200 reply (sorted keys, Go escaping).
pub fn agent_card_reply(input: CardInput<'_>) -> HttpReply {
    card_reply(&agent_card(input))
}

/// A built card as the HTTP 200 reply.
pub fn card_reply(card: &Value) -> HttpReply {
    HttpReply::new(200, CONTENT_TYPE_JSON, json::to_line(card))
}

/// A call refused because the store's disk is full.
pub const MSG_OUT_OF_SPACE: &str =
    "store is out of space; the invocation was not committed; send the same task id again once space is freed";
/// Message of the card's 503.
pub const MSG_CARD_UNAVAILABLE: &str = "agent card unavailable: a registry read failed";
/// Message of the card's 504.
pub const MSG_CARD_DEADLINE: &str = "agent card unavailable: the registry read deadline was exceeded";

/// `503 ProjectionUnavailable`: a registry read failed.
pub fn card_unavailable() -> RestError {
    RestError::new(RestClass::ProjectionUnavailable, MSG_CARD_UNAVAILABLE)
}

/// `504 ProjectionDeadlineExceeded`: the read deadline was hit.
pub fn card_deadline_exceeded() -> RestError {
    RestError::new(RestClass::ProjectionDeadlineExceeded, MSG_CARD_DEADLINE)
}
