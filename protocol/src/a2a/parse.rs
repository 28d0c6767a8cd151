//! The requests: the envelope, then each method's params, refused with the
//! parameter at fault.

use super::*;

type Bad = Refusal;

fn invalid(parameter: &str, detail: impl Into<String>) -> Bad {
    A2aError::InvalidParams.because(Why::parameter(parameter, detail))
}

fn object<'a>(v: Option<&'a Value>, parameter: &str, what: &str) -> Result<&'a Map<String, Value>, Bad> {
    v.and_then(Value::as_object).ok_or_else(|| invalid(parameter, format!("required: {what}")))
}

const TASK_ID_GRAMMAR: &str = "1 to 128 characters of A-Z a-z 0-9 . _ -";

fn task_id(v: Option<&Value>, parameter: &str) -> Result<String, Bad> {
    match v {
        Some(Value::String(s)) if is_task_id(s) => Ok(s.clone()),
        _ => Err(invalid(parameter, format!("a task id: {TASK_ID_GRAMMAR}"))),
    }
}

/// A metadata string looked up in each place in turn; the first place that
/// has the key decides (so a bad value is not skipped over).
fn metadata_str<'a>(places: &[(&str, Option<&'a Value>)], key: &str) -> Result<Option<&'a str>, Bad> {
    for (name, place) in places {
        let Some(place) = place else { continue };
        let Some(meta) = place.as_object() else {
            return Err(invalid(name, "an object"));
        };
        match meta.get(key) {
            None => continue,
            Some(Value::String(s)) => return Ok(Some(s)),
            Some(_) => return Err(invalid(&format!("{name}.{key}"), "a string")),
        }
    }
    Ok(None)
}

fn skill_and_pin(places: &[(&str, Option<&Value>)]) -> Result<(String, Option<String>), Bad> {
    let skill = metadata_str(places, "skill_id")?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("metadata.skill_id", SKILL_ID_REQUIRED))?;
    let pin = places
        .iter()
        .find_map(|(name, p)| p.and_then(|p| p.get("transition_fn")).filter(|v| !v.is_null()).map(|v| (*name, v)));
    let pin = match pin {
        None => None,
        Some((_, Value::String(s))) if is_transition_fn(s) => Some(s.clone()),
        Some((name, _)) => {
            return Err(invalid(
                &format!("{name}.transition_fn"),
                "sha256:<64 lowercase hex>: the transitionFn the skill must have",
            ));
        }
    };
    Ok((skill.to_owned(), pin))
}

/// The one part's `data` object; `tag` is the discriminator member
/// (`type` in 0.1, `kind` in 0.3, none in 1.0). A part of another kind is
/// ContentTypeNotSupported; a data part that is not one object, -32602.
fn single_data_part(message: &Map<String, Value>, tag: Option<&str>) -> Result<Value, Bad> {
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("message.parts", format!("required: an array of parts; {TAKES_ONE_DATA_PART}")))?;
    for (i, part) in parts.iter().enumerate() {
        let Some(part) = part.as_object() else {
            return Err(invalid(&format!("message.parts[{i}]"), format!("a Part object; {TAKES_ONE_DATA_PART}")));
        };
        let other = match tag {
            Some(tag) => match part.get(tag).and_then(Value::as_str) {
                Some("data") => None,
                Some(kind @ ("text" | "file")) => Some(kind.to_owned()),
                _ => {
                    return Err(invalid(
                        &format!("message.parts[{i}].{tag}"),
                        format!("\"data\"; {TAKES_ONE_DATA_PART}"),
                    ));
                }
            },
            // 1.0's Part is a oneof: a data part carries no other content.
            None => ["text", "raw", "url", "file"].iter().find(|k| part.contains_key(**k)).map(|k| (*k).to_owned()),
        };
        if let Some(kind) = other {
            let why = Why::parameter(
                &format!("message.parts[{i}]"),
                format!("message has a {kind} part; {TAKES_ONE_DATA_PART}"),
            );
            return Err(A2aError::ContentTypeNotSupported.because(why));
        }
    }
    let [part] = parts.as_slice() else {
        return Err(invalid("message.parts", format!("message has {} parts; {TAKES_ONE_DATA_PART}", parts.len())));
    };
    match part.get("data") {
        Some(d @ Value::Object(_)) => Ok(d.clone()),
        _ => Err(invalid("message.parts[0].data", format!("a JSON object; {TAKES_ONE_DATA_PART}"))),
    }
}

fn parse_tasks_send(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object")?;
    let task_id = task_id(params.get("id"), "id")?;
    let metadata = params.get("metadata");
    // A continuation of a task waiting for approval names no skill: its one
    // data part is `{"approval": WORD}` (as `SendMessage` takes it).
    if metadata_str(&[("metadata", metadata)], "skill_id")?.is_none()
        && let Some(message) = params.get("message").and_then(Value::as_object)
        && let Ok(data) = single_data_part(message, Some("type"))
        && let Some(word) = approval_word(&data).map_err(Refusal::beyond_the_seed)?
    {
        return Ok(A2aKind::Answer(AnswerRequest {
            task_id,
            word,
            context_id: None,
            message_id: None,
            history_length: None,
        }));
    }
    if metadata.is_none() {
        return Err(invalid("metadata", SKILL_ID_REQUIRED));
    }
    let (skill_id, transition_fn) = skill_and_pin(&[("metadata", metadata)])?;
    let message = object(params.get("message"), "message", "a Message object")?;
    let arguments = single_data_part(message, Some("type"))?;
    Ok(A2aKind::Send(SendRequest {
        task_id,
        skill_id,
        arguments,
        transition_fn,
        context_id: None,
        message_id: None,
        history_length: None,
        return_immediately: false,
    }))
}

/// A `historyLength`-like member: absent or null is `None`; otherwise a
/// non-negative int32, as a number or (ProtoJSON) a decimal string.
fn non_negative(params: &Map<String, Value>, key: &str, parameter: &str) -> Result<Option<u32>, Bad> {
    let v = match params.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let n = match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.parse::<i64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => Ok(Some(n as u32)),
        Some(n) if n < 0 => Err(invalid(parameter, format!("a non-negative integer, got {n}"))),
        _ => Err(invalid(parameter, "a non-negative integer")),
    }
}

/// An optional string member, bounded.
fn bounded_str(obj: &Map<String, Value>, key: &str, parameter: &str) -> Result<Option<String>, Bad> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MESSAGE_ID_MAX => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(invalid(parameter, format!("at most {MESSAGE_ID_MAX} bytes"))),
        Some(_) => Err(invalid(parameter, "a string")),
    }
}

/// `message/send` (0.3) and `SendMessage` (1.0) share everything but the
/// part discriminator, the role's spelling and the `kind` member.
fn parse_message_send(params: Option<&Value>, flavor: Flavor) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "a SendMessageRequest object")?;
    let message = object(params.get("message"), "message", "a Message object")?;
    if flavor == Flavor::V03 && message.get("kind").is_some_and(|k| k.as_str() != Some("message")) {
        return Err(invalid("message.kind", "\"message\""));
    }
    let message_id = match bounded_str(message, "messageId", "message.messageId")? {
        Some(s) if !s.is_empty() => s,
        _ => return Err(invalid("message.messageId", "required: a non-empty string")),
    };
    let user = match flavor {
        Flavor::V03 => "user",
        _ => "ROLE_USER",
    };
    match message.get("role") {
        Some(Value::String(r)) if r == user => {}
        // ProtoJSON also spells an enum by its number (ROLE_USER = 1).
        Some(Value::Number(n)) if flavor == Flavor::V10 && n.as_u64() == Some(1) => {}
        None | Some(Value::Null) => return Err(invalid("message.role", format!("required: {user}"))),
        Some(_) => return Err(invalid("message.role", format!("{user}: the message an agent is sent is the user's"))),
    }
    // The task id is the idempotency key: taskId when given, else the
    // messageId. Either must fit the task-id grammar; a messageId that does
    // not is refused rather than rewritten (no hash is available here, and a
    // lossy rewrite could merge two tasks).
    let task_id = match message.get("taskId") {
        None | Some(Value::Null) => {
            if !is_task_id(&message_id) {
                return Err(invalid(
                    "message.messageId",
                    format!("with no taskId the messageId is the task id: {TASK_ID_GRAMMAR}"),
                ));
            }
            message_id.clone()
        }
        Some(v) => task_id(Some(v), "message.taskId")?,
    };
    let context_id = bounded_str(message, "contextId", "message.contextId")?;
    let places = [("metadata", params.get("metadata")), ("message.metadata", message.get("metadata"))];
    let answers = metadata_str(&places, "skill_id")?.is_none() && message.get("taskId").is_some_and(|t| !t.is_null());
    let (history_length, return_immediately) = match params.get("configuration") {
        None | Some(Value::Null) => (None, false),
        Some(Value::Object(c)) => {
            if c.get("pushNotificationConfig")
                .or_else(|| c.get("taskPushNotificationConfig"))
                .is_some_and(|v| !v.is_null())
            {
                let why = Why::parameter("configuration.taskPushNotificationConfig", PUSH_DETAIL);
                return Err(A2aError::PushNotificationNotSupported.because(why));
            }
            let return_immediately = match c.get("returnImmediately") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(invalid("configuration.returnImmediately", "a boolean")),
            };
            (non_negative(c, "historyLength", "configuration.historyLength")?, return_immediately)
        }
        Some(_) => return Err(invalid("configuration", "a SendMessageConfiguration object")),
    };
    let tag = match flavor {
        Flavor::V03 => Some("kind"),
        _ => None,
    };
    let arguments = single_data_part(message, tag)?;
    if answers && let Some(word) = approval_word(&arguments)? {
        return Ok(A2aKind::Answer(AnswerRequest {
            task_id,
            word,
            context_id,
            message_id: Some(message_id),
            history_length,
        }));
    }
    let (skill_id, transition_fn) = skill_and_pin(&places)?;
    Ok(A2aKind::Send(SendRequest {
        task_id,
        skill_id,
        arguments,
        transition_fn,
        context_id,
        message_id: Some(message_id),
        history_length,
        return_immediately,
    }))
}

/// The word of an approval answer: a data part `{"approval": WORD}` and
/// nothing else; `None` when the data is something else.
fn approval_word(data: &Value) -> Result<Option<ApprovalWord>, Bad> {
    let Some(obj) = data.as_object().filter(|o| o.len() == 1) else { return Ok(None) };
    let Some(word) = obj.get("approval") else { return Ok(None) };
    let words = || ApprovalWord::ALL.iter().map(|(w, _)| format!("{w:?}")).collect::<Vec<_>>().join(", ");
    match word.as_str().and_then(ApprovalWord::parse) {
        Some(w) => Ok(Some(w)),
        None => Err(invalid("message.parts[0].data.approval", format!("one of {}", words()))),
    }
}

fn parse_get(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object with the task's id")?;
    let task_id = task_id(params.get("id"), "id")?;
    Ok(A2aKind::Get { task_id, history_length: non_negative(params, "historyLength", "historyLength")? })
}

fn parse_cancel(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object with the task's id")?;
    Ok(A2aKind::Cancel { task_id: task_id(params.get("id"), "id")? })
}

fn parse_subscribe(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let params = object(params, "params", "an object with the task's id")?;
    Ok(A2aKind::Subscribe { task_id: task_id(params.get("id"), "id")? })
}

fn state_names() -> String {
    TaskStateName::ALL.iter().map(|s| s.v10()).collect::<Vec<_>>().join(", ")
}

fn parse_list(params: Option<&Value>) -> Result<A2aKind, Bad> {
    let empty = Map::new();
    let params = match params {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(p)) => p,
        Some(_) => return Err(invalid("params", "a ListTasksRequest object")),
    };
    let context_id = match params.get("contextId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid("contextId", "a string")),
    };
    let status = match params.get("status") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "TASK_STATE_UNSPECIFIED" => None,
        Some(Value::String(s)) => match TaskStateName::ALL.iter().find(|t| t.v10() == s) {
            Some(t) => Some(*t),
            None => return Err(invalid("status", format!("one of {}, got {s:?}", state_names()))),
        },
        // ProtoJSON also spells an enum by its number.
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) => None,
            Some(k @ 1..=8) => Some(TaskStateName::ALL[(k - 1) as usize]),
            _ => return Err(invalid("status", format!("one of {}", state_names()))),
        },
        Some(_) => return Err(invalid("status", format!("one of {}", state_names()))),
    };
    let page_size = match non_negative(params, "pageSize", "pageSize") {
        Ok(None) => LIST_PAGE_DEFAULT,
        Ok(Some(n)) if (1..=LIST_PAGE_MAX).contains(&n) => n,
        Ok(Some(n)) => return Err(invalid("pageSize", format!("an integer from 1 to {LIST_PAGE_MAX}, got {n}"))),
        Err(_) => return Err(invalid("pageSize", format!("an integer from 1 to {LIST_PAGE_MAX}"))),
    };
    let status_after = match params.get("statusTimestampAfter") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(parse_iso8601(s).ok_or_else(|| {
            invalid(
                "statusTimestampAfter",
                format!("an ISO 8601 UTC timestamp such as 2025-10-28T10:30:00Z, got {s:?}"),
            )
        })?),
        Some(_) => {
            return Err(invalid("statusTimestampAfter", "an ISO 8601 UTC timestamp such as 2025-10-28T10:30:00Z"));
        }
    };
    let filters = filters_digest(context_id.as_deref(), status, status_after);
    let page_token = match params.get("pageToken") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => match PageToken::decode(s) {
            Some(t) if t.filters == filters => Some(t),
            Some(_) => return Err(invalid("pageToken", "a nextPageToken issued for these same filters")),
            None => return Err(invalid("pageToken", "a nextPageToken from an earlier ListTasks")),
        },
        Some(_) => return Err(invalid("pageToken", "a string")),
    };
    let include_artifacts = match params.get("includeArtifacts") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("includeArtifacts", "a boolean")),
    };
    let history_length = non_negative(params, "historyLength", "historyLength")?;
    Ok(A2aKind::List(ListQuery {
        context_id,
        status,
        status_after,
        page_size,
        page_token,
        history_length,
        include_artifacts,
    }))
}

const PUSH_DETAIL: &str = "push notifications are not offered (the card says capabilities.pushNotifications false): read a task with GetTask (0.3: tasks/get)";

/// The methods served, by name, with the generation that names them.
fn method(name: &str) -> Option<Flavor> {
    Some(match name {
        "tasks/send" => Flavor::Legacy01,
        "message/send"
        | "tasks/get"
        | "tasks/cancel"
        | "agent/getAuthenticatedExtendedCard"
        | "message/stream"
        | "tasks/resubscribe"
        | "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => Flavor::V03,
        "SendMessage"
        | "GetTask"
        | "ListTasks"
        | "CancelTask"
        | "GetExtendedAgentCard"
        | "SendStreamingMessage"
        | "SubscribeToTask"
        | "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Flavor::V10,
        _ => return None,
    })
}

/// Checks the envelope and the params shape.
///
/// Errors: bad JSON, not an object, `jsonrpc` not "2.0" or an id that is not
/// a string, number or null → -32600 `invalid JSON-RPC request`; another
/// method → -32601; a bad shape → -32602 `invalid params` (with `data`
/// naming the parameter, for the 0.3 and 1.0 methods); a part this agent
/// cannot take → -32005 (`invalid params` for `tasks/send`); push
/// notifications → -32003, not being offered. A missing id is answered as
/// `null`.
pub fn parse(body: &[u8]) -> Result<A2aRequest, A2aReply> {
    let invalid_request = |id: &RpcId| A2aError::InvalidRequest.reply(id);
    let obj = rpc::parse_object(body).map_err(|_| invalid_request(&RpcId::Null))?;
    let id = match rpc::id_member(&obj) {
        None => RpcId::Null,
        Some(Some(id)) => id,
        Some(None) => return Err(invalid_request(&RpcId::Null)),
    };
    if !rpc::is_jsonrpc_2(&obj) {
        return Err(invalid_request(&id));
    }
    let Some(name) = rpc::str_member(&obj, "method") else {
        return Err(invalid_request(&id));
    };
    let Some(flavor) = method(&name) else { return Err(A2aError::MethodNotFound.reply(&id)) };
    let params = match rpc::value_member(&obj, "params") {
        None => None,
        Some(Ok(v)) => Some(v),
        // Valid JSON but too deep for a Value: a params problem.
        Some(Err(_)) => return Err(invalid("params", "JSON nested less deeply").reply(&id, flavor)),
    };
    let kind = match name.as_str() {
        "tasks/send" => parse_tasks_send(params.as_ref()),
        "message/send" | "SendMessage" => parse_message_send(params.as_ref(), flavor),
        "tasks/get" | "GetTask" => parse_get(params.as_ref()),
        "tasks/cancel" | "CancelTask" => parse_cancel(params.as_ref()),
        "ListTasks" => parse_list(params.as_ref()),
        "agent/getAuthenticatedExtendedCard" | "GetExtendedAgentCard" => Ok(A2aKind::ExtendedCard),
        "message/stream" | "SendStreamingMessage" => parse_message_send(params.as_ref(), flavor).map(|k| match k {
            A2aKind::Send(send) => A2aKind::StreamSend(send),
            A2aKind::Answer(answer) => A2aKind::StreamAnswer(answer),
            other => other,
        }),
        "tasks/resubscribe" | "SubscribeToTask" => parse_subscribe(params.as_ref()),
        _ => Err(A2aError::PushNotificationNotSupported.because(Why::new(PUSH_DETAIL))),
    }
    .map_err(|e| e.reply(&id, flavor))?;
    Ok(A2aRequest { jsonrpc_id: id, flavor, kind })
}
