//! `worldd why REF`: the provenance walk. From an effect record, request or
//! result, a plan, an invocation input, output or record, an entry hash, a world
//! ref, an entry index or `head`, climb to the log entry and world that carry
//! it, recomputing every hash on the way. Exit 0 verified, 1 a link failed,
//! 2 not found.

use super::client::Client;
use base64::Engine;
use serde_json::{Value, json};
use std::process::ExitCode;
use world_store::{EntryHeader, Ref, canonical};

const RECORD_V1: &str = "world/invocation-record/v1";
const RECORD_V2: &str = "world/invocation-record/v2";
use crate::effects::{EFFECT_RECORD as EFFECT_RECORD_V2, EFFECT_RECORD_V1, EFFECT_RECORD_V3};
const EFFECT_RECORDS: [&str; 3] = [EFFECT_RECORD_V1, EFFECT_RECORD_V2, EFFECT_RECORD_V3];
use crate::effects::commit::COMMIT_RECORD;

struct Walk<'c> {
    client: &'c Client,
    links: Vec<(bool, String)>,
    notes: Vec<String>,
    chain: serde_json::Map<String, Value>,
}

enum Found {
    Yes,
    NotFound(String),
}

struct Object {
    semantic_id: String,
    payload: Vec<u8>,
}

impl Walk<'_> {
    fn link(&mut self, ok: bool, text: impl Into<String>) -> bool {
        self.links.push((ok, text.into()));
        ok
    }

    fn get(&self, path: &str) -> Result<Option<Value>, String> {
        let (status, body) = self.client.get(path).map_err(|e| e.to_string())?;
        match status {
            200 => serde_json::from_slice(&body).map(Some).map_err(|e| format!("{path}: {e}")),
            404 => Ok(None),
            s => Err(self.client.describe(path, s, &body)),
        }
    }

    /// Fetches an object and checks that its payload rehashes to its ref.
    fn object(&mut self, r: &Ref, what: &str) -> Result<Option<Object>, String> {
        let Some(v) = self.get(&format!("/v1/objects/{r}?payload=true"))? else { return Ok(None) };
        let payload = base64::engine::general_purpose::STANDARD
            .decode(v["payload"].as_str().unwrap_or_default())
            .map_err(|e| format!("object {r}: payload is not base64: {e}"))?;
        let semantic_id = v["semanticId"].as_str().unwrap_or_default().to_string();
        let actual = Ref::of(&payload);
        self.link(actual == *r, format!("{what} {r} rehashes ({semantic_id})"));
        Ok(Some(Object { semantic_id, payload }))
    }

    fn referrers(&self, r: &Ref) -> Result<Vec<Value>, String> {
        Ok(self
            .get(&format!("/v1/objects/{r}/referrers?limit=500"))?
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default())
    }

    /// The objects naming `r` whose semantic id is one of `ids`.
    fn naming_objects(&mut self, r: &Ref, ids: &[&str]) -> Result<Vec<(Ref, Object)>, String> {
        let mut out = vec![];
        for item in self.referrers(r)? {
            if item["kind"] != "object" {
                continue;
            }
            let Some(rr) = item["ref"].as_str().and_then(|s| Ref::parse(s).ok()) else { continue };
            let Some(v) = self.get(&format!("/v1/objects/{rr}"))? else { continue };
            if ids.contains(&v["semanticId"].as_str().unwrap_or_default()) {
                let obj = self.object(&rr, "referrer")?;
                if let Some(o) = obj {
                    out.push((rr, o));
                }
            }
        }
        Ok(out)
    }

    fn start(&mut self, target: &str) -> Result<Found, String> {
        if target == "head" {
            let (status, body) = self.client.get("/v1/head").map_err(|e| e.to_string())?;
            match status {
                200 => {}
                404 => return Ok(Found::NotFound("no world head has been selected yet".into())),
                s => return Err(self.client.describe("/v1/head", s, &body)),
            }
            let text = String::from_utf8_lossy(&body);
            let r = Ref::parse(text.trim()).map_err(|e| format!("head: {e}"))?;
            return self.walk_world(&r);
        }
        if let Ok(index) = target.parse::<u64>() {
            return self.walk_entry(index);
        }
        let r = Ref::parse(target).map_err(|e| format!("{target:?}: {e} (or an entry index, or head)"))?;
        let Some(obj) = self.object(&r, "object")? else {
            if self.get(&format!("/v1/worlds/{r}"))?.is_some() {
                return self.walk_world(&r);
            }
            for item in self.referrers(&r).unwrap_or_default() {
                if item["kind"] == "world"
                    && let Some(w) = item["ref"].as_str().and_then(|s| Ref::parse(s).ok())
                {
                    self.notes.push(format!("{r} is the entry hash the world {w} names as its logHead"));
                    return self.walk_world(&w);
                }
            }
            return Ok(Found::NotFound(format!("{r} is not an object, entry hash or world in this store")));
        };
        match obj.semantic_id.as_str() {
            RECORD_V1 | RECORD_V2 => self.walk_record(&r, &obj),
            COMMIT_RECORD => {
                let named: Value =
                    serde_json::from_slice(&obj.payload).map_err(|e| format!("commit record {r}: {e}"))?;
                match named["entryIndex"].as_u64() {
                    Some(index) => self.walk_entry(index),
                    None => Ok(Found::NotFound(format!("commit record {r} names no entry index"))),
                }
            }
            EFFECT_RECORD_V1 | EFFECT_RECORD_V2 | EFFECT_RECORD_V3 => self.walk_effect_record(&r, &obj),
            "world/effect-request/v1" | "world/effect-result/v1" => {
                let records = self.naming_objects(&r, &EFFECT_RECORDS)?;
                let Some((rec, obj)) = records.into_iter().next() else {
                    return Ok(Found::NotFound(format!("no effect record names {r}")));
                };
                self.link(true, format!("effect record {rec} names it"));
                self.walk_effect_record(&rec, &obj)
            }
            _ => {
                let records = self.naming_objects(&r, &[RECORD_V1, RECORD_V2])?;
                if let Some((rec, o)) = records.into_iter().next() {
                    self.link(true, format!("invocation record {rec} names it"));
                    return self.walk_record(&rec, &o);
                }
                for item in self.referrers(&r)? {
                    if item["kind"] == "entry"
                        && let Some(i) = item["entryIndex"].as_u64()
                    {
                        return self.walk_entry(i);
                    }
                }
                Ok(Found::NotFound(format!("no invocation record or log entry names {r} ({})", obj.semantic_id)))
            }
        }
    }

    fn walk_world(&mut self, w: &Ref) -> Result<Found, String> {
        let Some(world) = self.get(&format!("/v1/worlds/{w}"))? else {
            return Ok(Found::NotFound(format!("world {w} not found")));
        };
        let index = world["revision"].as_u64().ok_or("world without a revision")?;
        self.walk_entry(index)
    }

    /// From an effect record to the one invocation that decided it. A v2
    /// record names its invocation, and exactly that invocation's record must
    /// list it; a v1 record names none, and two decisions alike to the second
    /// may share it: then every invocation listing it is named.
    fn walk_effect_record(&mut self, rec: &Ref, obj: &Object) -> Result<Found, String> {
        let named: Value = serde_json::from_slice(&obj.payload).map_err(|e| format!("effect record {rec}: {e}"))?;
        let mut records = self.naming_objects(rec, &[RECORD_V1, RECORD_V2])?;
        if obj.semantic_id != EFFECT_RECORD_V1 {
            let invocation = named["invocationId"].as_str().unwrap_or_default().to_string();
            let listing: Vec<Ref> = records.iter().map(|(r, _)| *r).collect();
            records.retain(|(_, o)| {
                serde_json::from_slice::<Value>(&o.payload).is_ok_and(|v| v["invocationId"] == json!(invocation))
            });
            self.link(
                listing.len() <= 1 && records.len() == listing.len(),
                format!("effect record {rec} is listed by the invocation it names only ({} listing)", listing.len()),
            );
            match self.get(&format!("/v1/objects/{rec}/journal"))? {
                Some(j) => {
                    let same = j["invocationId"] == json!(invocation) && j["ordinal"] == named["ordinal"];
                    self.link(
                        same,
                        format!("the journal item of {rec} is the effect it names ({invocation}#{})", named["ordinal"]),
                    );
                }
                // The broker journals every effect it lets run; a denial has no intent.
                None if named["allowed"] == json!(true) => {
                    self.link(false, format!("a journal item carries effect record {rec}, which says the effect ran: none does, so the broker did not write it"));
                }
                None => {}
            }
            self.notes.push(format!(
                "effect record {rec} decides effect {} of invocation {invocation}#{}",
                named["effectId"].as_str().unwrap_or(""),
                named["ordinal"]
            ));
        } else if records.len() > 1 {
            let ids: Vec<String> = records
                .iter()
                .filter_map(|(_, o)| serde_json::from_slice::<Value>(&o.payload).ok())
                .map(|v| v["invocationId"].as_str().unwrap_or("").to_string())
                .collect();
            self.notes.push(format!(
                "{rec} is a v1 effect record (it names no invocation) shared by {} alike decisions: {}; the first is walked",
                ids.len(),
                ids.join(", ")
            ));
        }
        if let Some((r, o)) = records.into_iter().next() {
            self.link(true, format!("invocation record {r} lists effect record {rec}"));
            return self.walk_record(&r, &o);
        }
        // Recorded, but no invocation record lists it: EffectsUnrecorded.
        self.effect(rec, None)?;
        match self.get(&format!("/v1/objects/{rec}/journal"))? {
            Some(j) => {
                self.notes.push(format!(
                    "journal {}#{}: intent {} {}/{} cost {} budget {} -> {}; outcome {}; task {}",
                    j["invocationId"].as_str().unwrap_or(""),
                    j["ordinal"],
                    j["intent"]["effectId"].as_str().unwrap_or(""),
                    j["intent"]["effect"].as_str().unwrap_or(""),
                    j["intent"]["scope"].as_str().unwrap_or(""),
                    j["intent"]["cost"],
                    j["intent"]["budgetBefore"],
                    j["intent"]["budgetAfter"],
                    j["outcome"]["status"].as_str().unwrap_or("none"),
                    j["taskState"].as_str().unwrap_or("unknown"),
                ));
                self.chain.insert("journal".into(), j);
            }
            None => self.notes.push("no journal item carries this record".into()),
        }
        self.notes.push(
            "no log entry carries this effect: the invocation was not committed (EffectsUnrecorded); the effect ran and its debit stands"
                .into(),
        );
        self.chain.insert("committed".into(), json!(false));
        Ok(Found::Yes)
    }

    fn entry_at(&mut self, index: u64) -> Result<Option<Value>, String> {
        let Some(e) = self.get(&format!("/v1/log/{index}"))? else { return Ok(None) };
        let header: EntryHeader =
            serde_json::from_value(e["header"].clone()).map_err(|x| format!("entry {index}: {x}"))?;
        let tref = e["transitionRef"].as_str().and_then(|s| Ref::parse(s).ok()).ok_or("entry without transitionRef")?;
        let claimed = e["entryHash"].as_str().and_then(|s| Ref::parse(s).ok()).ok_or("entry without entryHash")?;
        let recomputed = canonical::entry_hash(&header, &tref);
        self.link(recomputed == claimed, format!("entry {index} hash recomputes to {recomputed}"));
        if index > 0
            && let Some(prev) = self.get(&format!("/v1/log/{}", index - 1))?
        {
            let ok = prev["entryHash"].as_str() == Some(&header.prev_entry_hash.to_string());
            self.link(ok, format!("entry {index} chains to entry {} (prevEntryHash)", index - 1));
        }
        Ok(Some(e))
    }

    fn walk_entry(&mut self, index: u64) -> Result<Found, String> {
        let Some(e) = self.entry_at(index)? else { return Ok(Found::NotFound(format!("log entry {index} not found"))) };
        let tref = e["transitionRef"].as_str().and_then(|s| Ref::parse(s).ok()).ok_or("entry without transitionRef")?;
        let Some(obj) = self.object(&tref, "transitionRef")? else {
            self.link(false, format!("entry {index} transitionRef {tref} resolves"));
            return Ok(Found::Yes);
        };
        if matches!(obj.semantic_id.as_str(), RECORD_V1 | RECORD_V2) {
            return self.walk_record(&tref, &obj);
        }
        let written_by = e["header"]["writtenBy"].as_str().unwrap_or("");
        let header: Option<EntryHeader> = serde_json::from_value(e["header"].clone()).ok();
        if header.is_some_and(|h| world_store::entry_claims_daemon(index, &h, &tref)) {
            self.link(
                false,
                format!("entry {index} claims the daemon ({written_by}) as its author but carries no invocation record: not the daemon's"),
            );
        }
        self.notes.push(format!(
            "entry {index} was written by {} (not the coordinator): shown with its object only",
            e["header"]["writtenBy"].as_str().unwrap_or("")
        ));
        self.committed_by(index, &e)?;
        self.world_of(index, &e, None)?;
        self.chain.insert("entry".into(), e);
        Ok(Found::Yes)
    }

    /// Who committed a REST entry: the commit record naming it, and the
    /// journal item (keyed by the entry) whose intent names the session.
    fn committed_by(&mut self, index: u64, entry: &Value) -> Result<(), String> {
        let entry_hash =
            entry["entryHash"].as_str().and_then(|s| Ref::parse(s).ok()).ok_or("entry without entryHash")?;
        let Some((rec, obj)) = self.naming_objects(&entry_hash, &[COMMIT_RECORD])?.into_iter().next() else {
            self.notes.push(format!(
                "no commit record names entry {index}: nothing tells who committed it (a store written before \
                 REST commits were accountable keeps none)"
            ));
            return Ok(());
        };
        let named: Value = serde_json::from_slice(&obj.payload).map_err(|e| format!("commit record {rec}: {e}"))?;
        let names_it = named["entryIndex"] == json!(index) && named["entryHash"] == json!(entry_hash.to_string());
        self.link(names_it, format!("commit record {rec} names entry {index}"));
        let key = world_store::commit_journal_id(index);
        match self.get(&format!("/v1/objects/{rec}/journal"))? {
            Some(j) => {
                let same = j["invocationId"] == json!(key) && j["intent"]["credential"] == named["credentialId"];
                self.link(same, format!("the journal item {key} carries the record and names its session"));
                self.notes.push(format!(
                    "committed over REST by session {} of episode {}: {} {}/{} unit(s), budget {} -> {}",
                    named["credentialId"].as_str().unwrap_or(""),
                    named["episode"].as_str().unwrap_or(""),
                    j["intent"]["cost"],
                    j["intent"]["effect"].as_str().unwrap_or(""),
                    j["intent"]["scope"].as_str().unwrap_or(""),
                    j["intent"]["budgetBefore"],
                    j["intent"]["budgetAfter"],
                ));
                self.chain.insert("journal".into(), j);
            }
            None => {
                self.link(false, format!("a journal item carries commit record {rec}"));
            }
        }
        self.chain.insert("commitRecord".into(), named);
        Ok(())
    }

    /// Recomputes the world the entry produced and confirms it.
    fn world_of(&mut self, index: u64, entry: &Value, state_root: Option<Ref>) -> Result<(), String> {
        let entry_hash =
            entry["entryHash"].as_str().and_then(|s| Ref::parse(s).ok()).ok_or("entry without entryHash")?;
        let world = self.referrers(&entry_hash)?.into_iter().find(|i| i["kind"] == "world");
        let Some(w) = world.and_then(|i| i["ref"].as_str().and_then(|s| Ref::parse(s).ok())) else {
            self.link(false, format!("a world names entry {index} as its logHead"));
            return Ok(());
        };
        let Some(row) = self.get(&format!("/v1/worlds/{w}"))? else {
            self.link(false, format!("world {w} exists"));
            return Ok(());
        };
        let root = row["stateRoot"].as_str().and_then(|s| Ref::parse(s).ok()).ok_or("world without stateRoot")?;
        let recomputed = canonical::world_ref(index, &root, &entry_hash);
        self.link(
            recomputed == w && row["revision"].as_u64() == Some(index),
            format!("world {w} recomputes (revision {index})"),
        );
        if let Some(expected) = state_root {
            self.link(root == expected, format!("world stateRoot is the invocation output {expected}"));
        }
        self.chain.insert("world".into(), row);
        Ok(())
    }

    fn walk_record(&mut self, rec_ref: &Ref, rec: &Object) -> Result<Found, String> {
        let record: Value =
            serde_json::from_slice(&rec.payload).map_err(|e| format!("invocation record {rec_ref}: {e}"))?;
        let entry = self.referrers(rec_ref)?.into_iter().find(|i| i["kind"] == "entry");
        let Some(index) = entry.and_then(|i| i["entryIndex"].as_u64()) else {
            self.link(false, format!("a log entry carries invocation record {rec_ref}"));
            return Ok(Found::Yes);
        };
        let Some(e) = self.entry_at(index)? else { return Ok(Found::NotFound(format!("log entry {index} not found"))) };
        self.link(
            e["transitionRef"].as_str() == Some(&rec_ref.to_string()),
            format!("entry {index} carries the record (transitionRef)"),
        );
        self.committed_by_task(index, record["invocationId"].as_str().unwrap_or(""))?;
        for (field, header_field) in
            [("transitionFn", "transitionFn"), ("interpreter", "interpreter"), ("semanticsEpoch", "semanticsEpoch")]
        {
            let ok = record[field] == e["header"][header_field];
            self.link(ok, format!("entry {index} {header_field} matches the record"));
        }
        let output = record["output"].as_str().and_then(|s| Ref::parse(s).ok());
        for field in ["input", "output", "plan"] {
            if let Some(r) = record[field].as_str().and_then(|s| Ref::parse(s).ok())
                && self.object(&r, field)?.is_none()
            {
                self.link(false, format!("{field} {r} resolves"));
            }
        }
        let out_obj = match output {
            Some(o) => self.get(&format!("/v1/objects/{o}?payload=true"))?,
            None => None,
        };
        let out_value: Option<Value> = out_obj
            .and_then(|v| {
                base64::engine::general_purpose::STANDARD.decode(v["payload"].as_str().unwrap_or_default()).ok()
            })
            .and_then(|b| serde_json::from_slice(&b).ok());
        let world_block = out_value.as_ref().map(|v| v["world"].clone()).unwrap_or(Value::Null);
        if record.get("plan").is_some() {
            self.link(world_block["plan"] == record["plan"], "the output's world block names the record's plan");
        }
        let effects: Vec<Ref> = record["effects"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().and_then(|s| Ref::parse(s).ok())).collect())
            .unwrap_or_default();
        let named: Vec<Value> = world_block["effects"].as_array().cloned().unwrap_or_default();
        for (i, r) in effects.iter().enumerate() {
            let status = named.get(i).and_then(|n| (n["record"] == json!(r.to_string())).then(|| n["status"].clone()));
            self.link(status.is_some(), format!("the output's world block names effect record {r}"));
            self.effect(r, status.and_then(|s| s.as_str().map(String::from)))?;
        }
        self.world_of(index, &e, output)?;
        self.chain.insert(
            "invocation".into(),
            json!({"record": rec_ref.to_string(), "invocationId": record["invocationId"], "episode": record["episodeId"],
                   "transition": record["skillId"], "transitionFn": record["transitionFn"], "entryIndex": index}),
        );
        self.notes.insert(
            0,
            format!(
                "entry {index}: transition {} (transitionFn {}), episode {}, invocation {}",
                record["skillId"].as_str().unwrap_or(""),
                record["transitionFn"].as_str().unwrap_or(""),
                record["episodeId"].as_str().unwrap_or(""),
                record["invocationId"].as_str().unwrap_or("")
            ),
        );
        self.chain.insert("committed".into(), json!(true));
        Ok(Found::Yes)
    }

    /// The task the invocation record names committed this very entry: a
    /// task names only the daemon's own commits (`verify` reports an entry
    /// claiming the daemon that none names as `forged`). Found among its
    /// episode's calls, a page at a time.
    fn committed_by_task(&mut self, index: u64, invocation_id: &str) -> Result<(), String> {
        let Some(key) = world_store::TaskKey::from_invocation_id(invocation_id) else {
            self.link(false, format!("the record names a task ({invocation_id:?})"));
            return Ok(());
        };
        let episode = super::episodes::encode_segment(&key.episode);
        let (mut from, mut entry) = (Some(0), None);
        while let Some(at) = from {
            let path = format!("/v1/episodes/{episode}/calls?from={at}&limit={}", crate::episodes::CALLS_PAGE_MAX);
            let page = match self.get(&path) {
                Ok(Some(page)) => page,
                Ok(None) => break,
                Err(e) => {
                    self.notes.push(format!("the task of entry {index} is not checked: {e}"));
                    return Ok(());
                }
            };
            let calls = page["calls"].as_array().map(Vec::as_slice).unwrap_or_default();
            if let Some(call) = calls.iter().find(|c| c["invocationId"] == json!(invocation_id)) {
                entry = Some(call["entryIndex"].as_u64());
                break;
            }
            from = page["next"].as_u64();
        }
        let told = match entry {
            None => "no such task".to_string(),
            Some(None) => "it committed none".to_string(),
            Some(Some(i)) => format!("it committed entry {i}"),
        };
        self.link(entry == Some(Some(index)), format!("task {invocation_id} committed entry {index} ({told})"));
        Ok(())
    }

    /// Checks one effect record with its request and result.
    /// The decision an effect record names: who approved (or denied) it, when.
    fn approval(&mut self, r: &Ref, rec: &Value) -> Result<(), String> {
        let Some(obj) = self.object(r, "approval")? else {
            self.link(false, format!("approval {r} resolves"));
            return Ok(());
        };
        let Some(a) = crate::approvals::ApprovalObject::parse(&obj.payload) else {
            self.link(false, format!("approval {r} is a {} object", crate::approvals::APPROVAL));
            return Ok(());
        };
        let same = rec["effect"] == json!(a.effect) && rec["scope"] == json!(a.scope) && rec["cost"] == json!(a.cost);
        self.link(same, format!("approval {} is for this effect, scope and cost", a.approval_id));
        let verb = match a.decision.as_str() {
            "approved" => "approved",
            "approved-for-session" => "approved for the session",
            "denied" => "denied",
            _ => "not decided",
        };
        let note = if a.note.is_empty() { String::new() } else { format!(" ({})", a.note) };
        self.notes.push(format!(
            "    {verb} by {} at {} UTC{note}: approval {}, asked at {} UTC, object {r}",
            a.decided_by_text,
            crate::clock::utc(a.decided_at),
            a.approval_id,
            crate::clock::utc(a.requested_at),
        ));
        self.chain.insert("approval".into(), json!({"ref": r.to_string(), "decision": a.decision, "by": a.decided_by_text, "decidedAt": a.decided_at, "id": a.approval_id}));
        Ok(())
    }

    fn effect(&mut self, r: &Ref, status: Option<String>) -> Result<(), String> {
        let Some(obj) = self.object(r, "effect record")? else {
            self.link(false, format!("effect record {r} resolves"));
            return Ok(());
        };
        let rec: Value = serde_json::from_slice(&obj.payload).map_err(|e| format!("effect record {r}: {e}"))?;
        for field in ["requestRef", "resultRef"] {
            if let Some(x) = rec[field].as_str().filter(|s| !s.is_empty()).and_then(|s| Ref::parse(s).ok())
                && self.object(&x, field)?.is_none()
            {
                self.link(false, format!("{field} {x} resolves"));
            }
        }
        let status = status.unwrap_or_else(|| {
            if rec["allowed"] == json!(false) {
                "denied".into()
            } else if rec["failed"] == json!(true) {
                "failed".into()
            } else {
                "ok".into()
            }
        });
        self.notes.push(format!(
            "  effect {}/{} {status}: cost {}, budget {} -> {}{}, record {r}",
            rec["effect"].as_str().unwrap_or(""),
            rec["scope"].as_str().unwrap_or(""),
            rec["cost"],
            rec["budgetBefore"],
            rec["budgetAfter"],
            match rec["denial"].as_str() {
                Some(d) if !d.is_empty() => format!(", {d}"),
                _ => String::new(),
            },
        ));
        if let Some(a) = rec["approvalRef"].as_str().and_then(|s| Ref::parse(s).ok()) {
            self.approval(&a, &rec)?;
        }
        let effects = self.chain.entry("effects").or_insert_with(|| json!([]));
        if let Some(a) = effects.as_array_mut() {
            a.push(json!({"record": r.to_string(), "status": status, "detail": rec}));
        }
        Ok(())
    }
}

/// `worldd why`'s exit code when no daemon answered: nothing was checked, so
/// neither verified (0), failed (1) nor not found (2).
pub const EXIT_UNREACHABLE: u8 = 3;

pub fn run(client: &Client, target: &str, as_json: bool) -> ExitCode {
    let mut walk = Walk { client, links: vec![], notes: vec![], chain: Default::default() };
    let found = match walk.start(target) {
        Ok(f) => f,
        // A link that cannot even be read (an object that no longer parses)
        // is a failed link: show how far the walk got.
        Err(e) => {
            walk.link(false, e);
            Found::Yes
        }
    };
    // No daemon answered (at the start, or as it went): that is not a link of the chain failing.
    if let Some(why) = client.unreached() {
        if as_json {
            say!("{}", json!({"target": target, "reachable": false, "verified": false, "reason": why}));
        } else {
            note!("worldd: why: {why}");
        }
        return ExitCode::from(EXIT_UNREACHABLE);
    }
    if let Found::NotFound(why) = found {
        if as_json {
            say!("{}", json!({"target": target, "found": false, "reason": why}));
        } else {
            note!("worldd: why: {why}");
        }
        return ExitCode::from(2);
    }
    let failed = walk.links.iter().filter(|(ok, _)| !ok).count();
    if as_json {
        let links: Vec<Value> = walk.links.iter().map(|(ok, t)| json!({"ok": ok, "check": t})).collect();
        walk.chain.insert("target".into(), json!(target));
        walk.chain.insert("links".into(), Value::Array(links));
        walk.chain.insert("notes".into(), json!(walk.notes));
        walk.chain.insert("verified".into(), json!(failed == 0));
        say!("{}", Value::Object(walk.chain));
    } else {
        for (ok, text) in &walk.links {
            say!("{} {text}", if *ok { "✓" } else { "✗" });
        }
        for note in &walk.notes {
            say!("{note}");
        }
        if failed == 0 {
            say!("all {} link(s) verified", walk.links.len());
        } else {
            say!("{failed} of {} link(s) FAILED", walk.links.len());
        }
    }
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
