//! What `ListTasks` filters and pages by: task state names, timestamps,
//! page tokens.

use super::*;

/// A2A's task states, as the filter of `ListTasks` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStateName {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
    Rejected,
    AuthRequired,
}

impl TaskStateName {
    /// Every state, in the proto's numbering (1–8).
    pub const ALL: [TaskStateName; 8] = [
        TaskStateName::Submitted,
        TaskStateName::Working,
        TaskStateName::Completed,
        TaskStateName::Failed,
        TaskStateName::Canceled,
        TaskStateName::InputRequired,
        TaskStateName::Rejected,
        TaskStateName::AuthRequired,
    ];

    /// The 1.0 (ProtoJSON) name.
    pub fn v10(self) -> &'static str {
        match self {
            TaskStateName::Submitted => "TASK_STATE_SUBMITTED",
            TaskStateName::Working => "TASK_STATE_WORKING",
            TaskStateName::Completed => "TASK_STATE_COMPLETED",
            TaskStateName::Failed => "TASK_STATE_FAILED",
            TaskStateName::Canceled => "TASK_STATE_CANCELED",
            TaskStateName::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskStateName::Rejected => "TASK_STATE_REJECTED",
            TaskStateName::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// The 0.3 name.
    pub fn v03(self) -> &'static str {
        match self {
            TaskStateName::Submitted => "submitted",
            TaskStateName::Working => "working",
            TaskStateName::Completed => "completed",
            TaskStateName::Failed => "failed",
            TaskStateName::Canceled => "canceled",
            TaskStateName::InputRequired => "input-required",
            TaskStateName::Rejected => "rejected",
            TaskStateName::AuthRequired => "auth-required",
        }
    }

    /// The name `flavor` uses.
    pub fn name(self, flavor: Flavor) -> &'static str {
        match flavor {
            Flavor::V10 => self.v10(),
            _ => self.v03(),
        }
    }

    /// Completed, failed, canceled and rejected tasks take no more messages.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStateName::Completed | TaskStateName::Failed | TaskStateName::Canceled | TaskStateName::Rejected
        )
    }
}

// ---- timestamps ----
//
// The calendar is jiff's (a maintained, well-tested date-time crate) rather
// than arithmetic of our own: every written time goes through these, RFC 3339
// on the wire and UTC for people (`server/src/clock.rs`).

/// 1970-01-01T00:00:00 UTC, where Unix seconds count from.
const UNIX_EPOCH: jiff::civil::DateTime = jiff::civil::DateTime::constant(1970, 1, 1, 0, 0, 0, 0);

/// The UTC date and time `secs` Unix seconds name; past the last one with a
/// four-digit year (9999-12-31T23:59:59), that last one.
pub fn utc_datetime(secs: u64) -> jiff::civil::DateTime {
    i64::try_from(secs)
        .ok()
        .and_then(|s| UNIX_EPOCH.checked_add(jiff::SignedDuration::from_secs(s)).ok())
        .unwrap_or(jiff::civil::DateTime::MAX)
}

/// Unix seconds as ISO 8601 / RFC 3339 in UTC (`2025-10-28T10:30:00Z`), as
/// A2A 1.0 §5.6.1 writes timestamps (the store keeps whole seconds, so no fraction).
pub fn iso8601(secs: u64) -> String {
    utc_datetime(secs).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Unix seconds as `[year, month, day, hour, minute, second]` in UTC, the
/// proleptic Gregorian calendar: the one calendar every written time uses.
pub fn civil(secs: u64) -> [i64; 6] {
    let t = utc_datetime(secs);
    [i64::from(t.year()), t.month().into(), t.day().into(), t.hour().into(), t.minute().into(), t.second().into()]
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` to Unix seconds (the fraction is
/// dropped; a time before 1970 is 0; a leap second is the second before it).
/// Only UTC: A2A 1.0 §5.6.1 allows no offset, so the shape is checked here
/// and the calendar (which days exist) by jiff.
pub fn parse_iso8601(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = &b[19..];
    let rest = match rest.strip_prefix(b".") {
        Some(f) => {
            let digits = f.iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 || digits > 9 {
                return None;
            }
            &f[digits..]
        }
        None => rest,
    };
    if rest != b"Z" || sec > 60 {
        return None;
    }
    // Each part has at most four digits, so every conversion below holds.
    let part = |n: i64| i8::try_from(n).ok();
    let at = jiff::civil::DateTime::new(
        i16::try_from(y).ok()?,
        part(mo)?,
        part(d)?,
        part(h)?,
        part(mi)?,
        part(sec.min(59))?,
        0,
    )
    .ok()?;
    Some(UNIX_EPOCH.duration_until(at).as_secs().max(0) as u64)
}

// ---- page tokens ----

/// Where a `ListTasks` page ends: the next page starts below episode
/// position `before`, `seen` tasks having been listed on earlier pages, for
/// the filters whose digest is `filters`. Opaque to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageToken {
    pub before: u64,
    pub seen: u64,
    pub filters: u64,
}

impl PageToken {
    pub fn encode(&self) -> String {
        let text = format!("{}.{}.{:016x}", self.before, self.seen, self.filters);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
    }

    pub fn decode(token: &str) -> Option<PageToken> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let mut it = text.split('.');
        let before = it.next()?.parse().ok()?;
        let seen = it.next()?.parse().ok()?;
        let filters = it.next().filter(|f| f.len() == 16)?;
        let filters = u64::from_str_radix(filters, 16).ok()?;
        it.next().is_none().then_some(PageToken { before, seen, filters })
    }
}

/// A digest of a listing's filters (FNV-1a), so a token is not taken with
/// other filters than the ones it paged (its counts would be wrong).
pub fn filters_digest(context_id: Option<&str>, status: Option<TaskStateName>, after: Option<u64>) -> u64 {
    let text = format!("{context_id:?}|{:?}|{after:?}", status.map(TaskStateName::v10));
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
