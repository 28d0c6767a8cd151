//! One record of the export stream: a row of the store as plain data. Both
//! engines stream their rows as these (`export`), and `apply::import` writes
//! them back.

use crate::model::*;
use crate::refs::Ref;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Record {
    Header {
        format: u64,
        created_at: u64,
        with_sessions: bool,
    },
    Object {
        hash: Ref,
        meta: ObjectMeta,
        #[serde(with = "crate::model::serde_bytes_vec")]
        payload: Vec<u8>,
    },
    Entry(LogEntry),
    World(World),
    Head {
        name: String,
        head: Ref,
    },
    RegistryEntry {
        registry: String,
        id: String,
        transition_fn: Ref,
    },
    Intent {
        invocation_id: String,
        ordinal: u32,
        intent: EffectIntent,
    },
    Outcome {
        invocation_id: String,
        ordinal: u32,
        outcome: EffectOutcome,
    },
    Spend {
        episode: String,
        effect: String,
        scope: String,
        units: u64,
    },
    Task {
        key: TaskKey,
        task: Task,
    },
    Receipt {
        id: String,
        receipt: Receipt,
    },
    Session {
        credential_id: Ref,
        session: Session,
    },
    Approval {
        id: String,
        approval: ApprovalRow,
    },
    /// The approval session `credential_id`'s A2A task `task_id` last waited on.
    ApprovalWait {
        credential_id: Ref,
        task_id: String,
        approval: String,
    },
    End {
        records: u64,
    },
}
