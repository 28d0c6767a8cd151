//! What each effect of a shown page's calls did, told in words, from its
//! request and result objects ("wrote app.py, +5 lines", "ran `python3
//! app.py` → exit 1 in 29 ms", "read hello.txt"), with what it showed a click
//! away: every `Workspace.Write` effect (`ailang-write`, `ailang-edit`) as a
//! diff, every `Workspace.Exec` effect (`workspace-exec`) as its command line,
//! how it ended and the head of its output. The handlers' payloads are in `crate::runtime::builtin` (what
//! is asked) and `crate::effects::worktree` (what comes back).

use super::{dash, obj_link_short};
use crate::effects::worktree::{EXEC, WRITE};
use crate::episodes::{self, Call, CallsPage, Effect};
use maud::{Markup, html};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};
use std::collections::HashMap;
use std::time::Duration;
use world_store::{ReadError, Ref, Snapshot};

/// Calls before the shown page read to find what each of its writes replaced.
pub const WRITE_LOOKBACK_CALLS: u64 = 100;
/// Texts larger than this are not diffed on a page; their request holds them.
pub const DIFF_BYTES_MAX: usize = 256 << 10;
/// Lines of one diff shown at most.
pub const DIFF_LINES_MAX: usize = 400;
/// Past this a diff settles for a coarser answer rather than hold the page.
const DIFF_TIMEOUT: Duration = Duration::from_millis(200);
/// Unchanged lines shown around each change.
const DIFF_CONTEXT: usize = 3;
/// Bytes shown of a command's stdout, and of its stderr.
pub const OUTPUT_HEAD_BYTES: usize = 2 << 10;

/// An effect's record and what it names, read back.
struct Objects {
    request: Option<Ref>,
    payload: Option<Value>,
    result_ref: Option<Ref>,
    result: Option<Value>,
}

/// `with_result`: read the result object too (a command's may be 2 MiB).
fn objects(s: &Snapshot, e: &Effect, with_result: bool) -> Result<Objects, ReadError> {
    let named = match e.record.as_deref().and_then(|r| Ref::parse(r).ok()) {
        Some(record) => episodes::effect_objects(s, &record)?,
        None => None,
    };
    // An effect recovery found without an outcome has no record, but its request.
    let told = e.request.as_deref().and_then(|r| Ref::parse(r).ok());
    let (request, result_ref) = named.map_or((told, None), |n| (n.request, n.result));
    let payload = match request {
        Some(r) => episodes::effect_request(s, &r)?.map(|q| q.payload),
        None => None,
    };
    let result = match result_ref.filter(|_| with_result) {
        Some(r) => episodes::effect_result(s, &r)?,
        None => None,
    };
    Ok(Objects { request, payload, result_ref, result })
}

/// A file effect's request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum FileOp {
    Write { path: String, content: String },
    Edit { path: String, old: String, new: String },
}

impl FileOp {
    fn of(payload: &Value) -> Option<FileOp> {
        let text = |k: &str| payload[k].as_str().map(String::from);
        match payload["op"].as_str()? {
            "write" => Some(FileOp::Write { path: text("path")?, content: text("content")? }),
            "edit" => Some(FileOp::Edit { path: text("path")?, old: text("old_text")?, new: text("new_text")? }),
            _ => None,
        }
    }

    fn path(&self) -> &str {
        match self {
            FileOp::Write { path, .. } | FileOp::Edit { path, .. } => path,
        }
    }
}

/// How a file effect ended, as far as its status and result tell.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ended {
    Changed,
    /// The handler ran and refused (`ok:false`): nothing was written.
    Refused(String),
    /// Denied or skipped: the handler never ran.
    NotRun(String),
    /// Failed or interrupted: what it did to the file is not known.
    Unknown(String),
}

fn ended(e: &Effect, result: Option<&Value>) -> Ended {
    match e.status.as_str() {
        "denied" => Ended::NotRun(format!("denied ({}): nothing written", e.denial.as_deref().unwrap_or("?"))),
        "skipped" => Ended::NotRun("skipped after an earlier effect of the call: nothing written".into()),
        "ok" => match result.map(|r| (&r["ok"], &r["refused"])) {
            Some((Value::Bool(true), _)) => Ended::Changed,
            Some((_, refused)) => Ended::Refused(format!("refused: {}", refused.as_str().unwrap_or("?"))),
            None => Ended::Unknown("its result object is not readable".into()),
        },
        status => Ended::Unknown(format!("{status}: what it did to the file is not known")),
    }
}

/// What World last knew a path to hold.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Known {
    /// The content of the write at `since`, with the edits at `edits` applied.
    Content { text: String, since: u64, edits: Vec<u64> },
    /// Not known since the call at `at`.
    Lost { at: u64, why: &'static str },
}

/// The paths' contents after one more file effect (at call `at`).
fn apply(files: &mut HashMap<String, Known>, at: u64, op: &FileOp, ended: &Ended) {
    match (ended, op) {
        (Ended::Changed, FileOp::Write { path, content }) => {
            files.insert(path.clone(), Known::Content { text: content.clone(), since: at, edits: vec![] });
        }
        (Ended::Changed, FileOp::Edit { path, old, new }) => {
            if let Some(Known::Content { text, edits, .. }) = files.get_mut(path) {
                // The handler replaced the one occurrence the file held; if the
                // text World knows does not hold exactly one, the file was
                // changed some other way (a command, say).
                if text.matches(old.as_str()).count() == 1 {
                    *text = text.replacen(old.as_str(), new, 1);
                    edits.push(at);
                } else {
                    let why = "an edit that does not apply to what World last wrote there";
                    files.insert(path.clone(), Known::Lost { at, why });
                }
            }
        }
        (Ended::Unknown(_), op) => {
            if files.contains_key(op.path()) {
                files.insert(op.path().to_string(), Known::Lost { at, why: "a write that ended without a result" });
            }
        }
        (Ended::Refused(_) | Ended::NotRun(_), _) => {}
    }
}

fn positions(at: &[u64]) -> String {
    at.iter().map(|p| format!("#{p}")).collect::<Vec<_>>().join(", ")
}

/// A diff as shown, and the lines it adds and removes (none when it was too
/// large to diff).
struct Diff {
    html: Markup,
    lines: Option<(usize, usize)>,
}

/// The note and the diff of one file effect of the page, given what its path held.
fn change_body(op: &FileOp, ended: &Ended, before: Option<&Known>, lookback_from: u64) -> (String, Option<Diff>) {
    match (ended, op) {
        (Ended::Changed, FileOp::Edit { old, new, .. }) => {
            ("replaced its one occurrence of old_text".into(), Some(diff_html(old, new)))
        }
        (Ended::Changed, FileOp::Write { content, .. }) => match before {
            Some(Known::Content { text, since, edits }) => {
                let edited = if edits.is_empty() {
                    String::new()
                } else {
                    format!(", with the edits of {} applied", positions(edits))
                };
                (format!("against the write of #{since}{edited}"), Some(diff_html(text, content)))
            }
            Some(Known::Lost { at, why }) => (
                format!("what it replaced is not known ({why}, #{at}): the whole content"),
                Some(diff_html("", content)),
            ),
            None => (
                format!("no earlier write of this path in the calls read (from #{lookback_from}): the whole content"),
                Some(diff_html("", content)),
            ),
        },
        (Ended::Refused(why) | Ended::NotRun(why) | Ended::Unknown(why), _) => (why.clone(), None),
    }
}

/// `old` to `new` line by line, with a few lines of context around each change.
fn diff_html(old: &str, new: &str) -> Diff {
    if old.len() > DIFF_BYTES_MAX || new.len() > DIFF_BYTES_MAX {
        let html = html! {
            p.diff-too-large.muted {
                (old.len()) " bytes before, " (new.len()) " after: larger than the " (DIFF_BYTES_MAX)
                " bytes diffed on a page"
            }
        };
        return Diff { html, lines: None };
    }
    let diff = TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(old, new);
    let counted = |tag| diff.iter_all_changes().filter(|c| c.tag() == tag).count();
    let lines = Some((counted(ChangeTag::Insert), counted(ChangeTag::Delete)));
    let groups = diff.grouped_ops(DIFF_CONTEXT);
    if groups.is_empty() {
        return Diff { html: html! { pre.diff { span.same { "no change" } } }, lines };
    }
    // A missing last newline is worth saying only where one side has it (an
    // edit's texts are fragments, which seldom end in one).
    let mark_eol = !old.is_empty() && old.ends_with('\n') != new.ends_with('\n');
    let (mut shown_lines, mut shown, mut more) = (vec![], 0, 0);
    for group in &groups {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let range =
            |start: usize, end: usize| format!("{},{}", if end > start { start + 1 } else { start }, end - start);
        let hunk = format!(
            "@@ -{} +{} @@",
            range(first.old_range().start, last.old_range().end),
            range(first.new_range().start, last.new_range().end)
        );
        shown_lines.push(html! { span.hunk { (hunk) } });
        for change in group.iter().flat_map(|op| diff.iter_changes(op)) {
            if shown == DIFF_LINES_MAX {
                more += 1;
                continue;
            }
            shown += 1;
            let (class, sign) = match change.tag() {
                ChangeTag::Delete => ("del", '-'),
                ChangeTag::Insert => ("add", '+'),
                ChangeTag::Equal => ("ctx", ' '),
            };
            let line = change.value();
            let eol = mark_eol && change.missing_newline();
            shown_lines.push(html! {
                span class=(class) {
                    (sign) (line.strip_suffix('\n').unwrap_or(line))
                    @if eol { span.eol { " (no newline at end)" } }
                }
            });
        }
    }
    let html = html! {
        pre.diff {
            @for l in &shown_lines { (l) }
            @if more > 0 { span.more { "… " (more) " more lines not shown" } }
        }
    };
    Diff { html, lines }
}

/// The calls just before `page` (for what its writes replaced).
fn lookback(s: &Snapshot, episode: &str, page: &CallsPage) -> Result<(u64, Vec<Call>), ReadError> {
    let from = page.from.saturating_sub(WRITE_LOOKBACK_CALLS).min(page.from);
    if from == page.from {
        return Ok((from, vec![]));
    }
    let limit = (page.from - from) as usize;
    Ok((from, episodes::calls(s, episode, from, limit)?.map(|p| p.calls).unwrap_or_default()))
}

/// What one effect of a shown call did, in words, and what it showed, a click away.
pub(super) struct Told {
    pub said: Markup,
    /// What the `<details>` under the words is called, and what it holds.
    pub more: Option<(&'static str, Markup)>,
}

/// Where a told effect is: its call's position and its place in the call.
pub(super) type At = (u64, usize);

/// Every effect of the page's calls, told.
pub(super) fn told(s: &Snapshot, episode: &str, page: &CallsPage) -> Result<HashMap<At, Told>, ReadError> {
    let (lookback_from, earlier) = lookback(s, episode, page)?;
    let mut files = HashMap::new();
    for c in &earlier {
        for e in c.effects.iter().filter(|e| e.effect == WRITE && !matches!(e.status.as_str(), "denied" | "skipped")) {
            let o = objects(s, e, e.status == "ok")?;
            if let Some(op) = o.payload.as_ref().and_then(FileOp::of) {
                apply(&mut files, c.position, &op, &ended(e, o.result.as_ref()));
            }
        }
    }
    let mut out = HashMap::new();
    // In call order, so each write is compared with the one before it.
    for c in &page.calls {
        for (i, e) in c.effects.iter().enumerate() {
            let told = match e.effect.as_str() {
                WRITE => write_told(s, c, i, e, &mut files, lookback_from)?,
                EXEC => exec_told(s, c, i, e)?,
                _ => other_told(s, c, e)?,
            };
            out.insert((c.position, i), told);
        }
    }
    Ok(out)
}

/// `denied: budget` for the label `denied:budget`.
fn denial_words(e: &Effect) -> String {
    let label = e.denial.as_deref().unwrap_or("?");
    format!("denied: {}", label.strip_prefix("denied:").unwrap_or(label))
}

/// `+5 −1 lines`, or what stands for it.
fn line_counts(lines: Option<(usize, usize)>) -> String {
    match lines {
        None => "too large to diff here".into(),
        Some((0, 0)) => "no change".into(),
        Some((added, 0)) => format!("+{added} {}", if added == 1 { "line" } else { "lines" }),
        Some((added, removed)) => format!("+{added} −{removed} lines"),
    }
}

fn write_told(
    s: &Snapshot,
    c: &Call,
    i: usize,
    e: &Effect,
    files: &mut HashMap<String, Known>,
    lookback_from: u64,
) -> Result<Told, ReadError> {
    let o = objects(s, e, e.status == "ok")?;
    let op = o.payload.as_ref().and_then(FileOp::of);
    let end = ended(e, o.result.as_ref());
    let (path, (note, diff)) = match &op {
        Some(op) => (op.path(), change_body(op, &end, files.get(op.path()), lookback_from)),
        None => ("?", ("its request is not readable".into(), None)),
    };
    let said = write_said(e, op.as_ref(), path, &end, diff.as_ref(), &note);
    let request = o.request.map_or_else(dash, |r| obj_link_short(&r, "request-link"));
    let shown = html! {
        div.change id={ "change-" (c.position) "-" (i) } {
            p.change-head {
                span.tool { (c.transition) } " " code.path { (path) } " "
                span.change-note { (note) } " " span.muted { "request" } " " (request)
            }
            @if let Some(d) = &diff { (d.html) }
        }
    };
    if let Some(op) = &op {
        apply(files, c.position, op, &end);
    }
    // A write that changed nothing has no diff to open; its words say why.
    Ok(Told { said, more: diff.is_some().then_some(("diff", shown)) })
}

/// A file effect in words: what it wrote and how many lines changed, or why it did not.
fn write_said(e: &Effect, op: Option<&FileOp>, path: &str, end: &Ended, diff: Option<&Diff>, note: &str) -> Markup {
    let (verb, done) = if matches!(op, Some(FileOp::Edit { .. })) { ("edit", "edited") } else { ("write", "wrote") };
    match (end, diff) {
        (Ended::Changed, Some(d)) => {
            html! { (done) " " code.path { (path) } ", " span.lines { (line_counts(d.lines)) } }
        }
        _ if e.status == "denied" => html! { "tried to " (verb) " " code.path { (path) } " — " (denial_words(e)) },
        _ => html! { "tried to " (verb) " " code.path { (path) } ": " (note) },
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The words of the command line: what ran (the result's `argv`), else what was asked.
fn argv(payload: Option<&Value>, result: Option<&Value>) -> Vec<String> {
    let words = |v: &Value| v.as_array().map(|a| a.iter().map(|w| w.as_str().unwrap_or("?").to_string()).collect());
    if let Some(ran) = result.and_then(|r| words(&r["argv"])) {
        return ran;
    }
    asked(payload)
}

/// The command line as the agent asked for it (its command's name, not the path it ran as).
fn asked(payload: Option<&Value>) -> Vec<String> {
    let Some(p) = payload else { return vec![] };
    let words = |v: &Value| -> Option<Vec<String>> {
        v.as_array().map(|a| a.iter().map(|w| w.as_str().unwrap_or("?").to_string()).collect())
    };
    let mut asked = vec![p["command"].as_str().unwrap_or("?").to_string()];
    asked.extend(words(&p["args"]).unwrap_or_default());
    asked
}

/// A duration as a person reads it: milliseconds under a second, else seconds.
fn duration(ms: u64) -> String {
    if ms < 1000 { format!("{ms} ms") } else { format!("{:.1} s", ms as f64 / 1000.0) }
}

/// How a command ended, and the class its cell takes.
fn exit(e: &Effect, result: Option<&Value>) -> (Markup, &'static str) {
    let Some(r) = result else {
        return match e.status.as_str() {
            "denied" => (html! { "denied (" (e.denial.as_deref().unwrap_or("?")) ")" }, "denied"),
            status => (html! { (status) ": no result" }, "failed"),
        };
    };
    if let Some(why) = r["refused"].as_str() {
        return (html! { "refused: " (why) }, "failed");
    }
    let notes = exit_notes(r);
    let code = r["exit_code"].as_i64();
    let how = html! {
        @if let Some(c) = code { span.exit-code { (c) } } @else { (dash()) }
        @if !notes.is_empty() { " (" (notes.join(", ")) ")" }
    };
    (how, if code == Some(0) { "ok" } else { "failed" })
}

/// Why a command stopped, when it did not end by itself.
fn exit_notes(r: &Value) -> Vec<String> {
    let mut notes = vec![];
    for (flag, said) in
        [("timed_out", "timed out"), ("memory_exceeded", "over memory"), ("quota_exceeded", "over quota")]
    {
        if r[flag] == Value::Bool(true) {
            notes.push(said.to_string());
        }
    }
    if let Some(sig) = r["signal"].as_i64() {
        notes.push(format!("signal {sig}"));
    }
    notes
}

fn output(r: &Value) -> Markup {
    let mut streams = vec![];
    for stream in ["stdout", "stderr"] {
        let text = r[stream].as_str().unwrap_or_default();
        let total = r[format!("{stream}_bytes")].as_u64().unwrap_or(text.len() as u64);
        if total == 0 {
            continue;
        }
        let shown = head(text, OUTPUT_HEAD_BYTES);
        streams.push(html! {
            div.stream {
                span.muted {
                    (stream) ", " (total) " bytes"
                    @if (shown.len() as u64) < total { ", the first " (shown.len()) " shown" }
                }
                pre class=(stream) { (shown) }
            }
        });
    }
    html! {
        @for s in &streams { (s) }
        @if streams.is_empty() { span.muted { "no output" } }
    }
}

fn exec_told(s: &Snapshot, c: &Call, i: usize, e: &Effect) -> Result<Told, ReadError> {
    let o = objects(s, e, true)?;
    let (result, payload) = (o.result.as_ref(), o.payload.as_ref());
    let line = asked(payload);
    let line = if line.is_empty() { argv(payload, result) } else { line };
    let said = exec_said(e, &line, result);
    let took = result.and_then(|r| r["duration_ms"].as_u64());
    let words = argv(payload, result);
    let (how, class) = exit(e, result);
    let shown = html! {
        div.run-detail id={ "run-" (c.position) "-" (i) } {
            p {
                span.argv {
                    @for (n, w) in words.iter().enumerate() { @if n > 0 { " " } code.arg { (w) } }
                    @if words.is_empty() { (dash()) }
                }
                " · exit " span class={ "exit " (class) } { (how) }
                " · " span.duration { @if let Some(ms) = took { (ms) " ms" } @else { (dash()) } }
                " · " span.muted { "result" } " "
                @if let Some(r) = &o.result_ref { (obj_link_short(r, "result-link")) } @else { (dash()) }
            }
            div.output { @if let Some(r) = result { (output(r)) } @else { (dash()) } }
        }
    };
    Ok(Told { said, more: Some(("output", shown)) })
}

/// A command in words: the line the agent asked for, how it ended, how long it took.
fn exec_said(e: &Effect, line: &[String], result: Option<&Value>) -> Markup {
    let line = html! { code.cmdline { @if line.is_empty() { "?" } @else { (line.join(" ")) } } };
    match result {
        _ if e.status == "denied" => html! { "tried to run " (line) " — " (denial_words(e)) },
        None => html! { "ran " (line) ": " (e.status) ", no result" },
        Some(r) if r["refused"].is_string() => {
            html! { "tried to run " (line) ": refused: " (r["refused"].as_str().unwrap_or_default()) }
        }
        Some(r) => {
            let notes = exit_notes(r);
            html! {
                "ran " (line) " → "
                @match r["exit_code"].as_i64() {
                    Some(0) => { span.ok { "exit 0" } }
                    Some(code) => { span.failed { "exit " (code) } }
                    None => { span.failed { "stopped" } }
                }
                @if !notes.is_empty() { " (" (notes.join(", ")) ")" }
                @if let Some(ms) = r["duration_ms"].as_u64() { " in " (duration(ms)) }
            }
        }
    }
}

/// Reads, lists, searches, and any other effect: what it named.
fn other_told(s: &Snapshot, c: &Call, e: &Effect) -> Result<Told, ReadError> {
    let o = objects(s, e, false)?;
    Ok(Told { said: other_said(c, e, &o.payload.unwrap_or(Value::Null)), more: None })
}

/// An effect that is not a write or a command, in words, from its request's payload.
fn other_said(c: &Call, e: &Effect, p: &Value) -> Markup {
    let path = p["path"].as_str().unwrap_or(".");
    let (verb, done, what) = match p["op"].as_str() {
        Some("read") => ("read", "read", html! { code.path { (path) } }),
        Some("list") => ("list", "listed", html! { code.path { (path) } }),
        Some("search") => (
            "search",
            "searched",
            html! { code.path { (path) } " for " q { (p["query"].as_str().unwrap_or_default()) } },
        ),
        _ => {
            let tool = if c.transition.is_empty() { "a tool" } else { c.transition.as_str() };
            return html! {
                @if e.status == "denied" { "tried " }
                (tool) ": " (e.effect) " on " (e.scope)
                @if e.status == "denied" { " — " (denial_words(e)) }
            };
        }
    };
    match e.status.as_str() {
        "denied" => html! { "tried to " (verb) " " (what) " — " (denial_words(e)) },
        "ok" => html! { (done) " " (what) },
        status => html! { (done) " " (what) ": " (status) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The diff's lines as text, one a line, as a reader sees them.
    fn lines(diff: &Diff) -> Vec<String> {
        diff.html
            .0
            .split("<span class=\"")
            .skip(1)
            .filter(|l| !l.starts_with("eol"))
            .map(|l| {
                let (class, rest) = l.split_once("\">").unwrap();
                let text = rest.split("</span>").next().unwrap();
                format!("{class}:{text}")
            })
            .collect()
    }

    #[test]
    fn a_rewrite_shows_the_lines_it_changed_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\ni\n";
        assert_eq!(
            lines(&diff_html(old, new)),
            [
                "hunk:@@ -2,7 +2,8 @@",
                "ctx: b",
                "ctx: c",
                "ctx: d",
                "del:-e",
                "add:+E",
                "ctx: f",
                "ctx: g",
                "ctx: h",
                "add:+i"
            ]
        );
    }

    #[test]
    fn new_content_is_all_added_and_hostile_text_is_escaped() {
        let html = diff_html("", "<script>alert(1)</script>\nx");
        let text = &html.html.0;
        assert_eq!(lines(&html), ["hunk:@@ -0,0 +1,2 @@", "add:+&lt;script&gt;alert(1)&lt;/script&gt;", "add:+x"]);
        assert!(!text.contains("<script") && !text.contains("newline"), "{text}");
        let html = diff_html("x\n", "x");
        assert_eq!(lines(&html), ["hunk:@@ -1,1 +1,1 @@", "del:-x", "add:+x"]);
        assert!(html.html.0.contains("+x<span class=\"eol\"> (no newline at end)</span>"), "{}", html.html.0);
        assert_eq!(html.lines, Some((1, 1)), "one line replaced");
        assert_eq!(lines(&diff_html("same\n", "same\n")), ["same:no change"]);
    }

    #[test]
    fn a_long_diff_is_cut_and_says_so() {
        let new: String = (0..DIFF_LINES_MAX + 7).map(|i| format!("{i}\n")).collect();
        let html = diff_html("", &new);
        assert_eq!(html.html.0.matches("<span class=\"add\">").count(), DIFF_LINES_MAX);
        assert_eq!(html.lines, Some((DIFF_LINES_MAX + 7, 0)), "every line counted, shown or not");
        assert!(html.html.0.contains("… 7 more lines not shown"), "{}", html.html.0);
        let big = "x".repeat(DIFF_BYTES_MAX + 1);
        assert!(diff_html("", &big).html.0.contains("diff-too-large"));
        assert_eq!(diff_html("", &big).lines, None);
    }

    fn effect(status: &'static str, denial: Option<&str>) -> Effect {
        Effect {
            id: "e1".into(),
            effect: WRITE.into(),
            scope: "worktree".into(),
            status: status.into(),
            denial: denial.map(String::from),
            cost: 1,
            debited: 1,
            budget_before: 5,
            budget_after: 4,
            record: None,
            request: None,
        }
    }

    fn write(path: &str, content: &str) -> FileOp {
        FileOp::of(&json!({"op": "write", "path": path, "content": content})).unwrap()
    }

    fn edit(path: &str, old: &str, new: &str) -> FileOp {
        FileOp::of(&json!({"op": "edit", "path": path, "old_text": old, "new_text": new})).unwrap()
    }

    #[test]
    fn the_end_of_a_file_effect_comes_from_its_status_and_result() {
        let ok = effect("ok", None);
        assert_eq!(ended(&ok, Some(&json!({"ok": true, "bytes": 3}))), Ended::Changed);
        assert_eq!(
            ended(&ok, Some(&json!({"ok": false, "refused": "old_text not found"}))),
            Ended::Refused("refused: old_text not found".into())
        );
        assert!(matches!(ended(&ok, None), Ended::Unknown(_)));
        assert_eq!(
            ended(&effect("denied", Some("denied:budget")), None),
            Ended::NotRun("denied (denied:budget): nothing written".into())
        );
        assert!(matches!(ended(&effect("indeterminate", None), None), Ended::Unknown(_)));
        assert_eq!(FileOp::of(&json!({"op": "read", "path": "a"})), None);
        assert_eq!(FileOp::of(&json!({"op": "write", "path": "a"})), None);
    }

    #[test]
    fn a_write_is_compared_with_the_last_write_and_the_edits_since() {
        let mut files = HashMap::new();
        apply(&mut files, 1, &write("a.py", "x = 1\nprint(x)\n"), &Ended::Changed);
        apply(&mut files, 2, &write("b.py", "other\n"), &Ended::Changed);
        apply(&mut files, 3, &edit("a.py", "x = 1", "x = 2"), &Ended::Changed);
        apply(&mut files, 4, &edit("a.py", "print", "never"), &Ended::Refused("refused".into()));
        apply(&mut files, 5, &write("a.py", "gone\n"), &Ended::NotRun("denied".into()));
        let rewrite = write("a.py", "x = 2\nprint(x * 2)\n");
        let (note, diff) = change_body(&rewrite, &Ended::Changed, files.get("a.py"), 0);
        assert_eq!(note, "against the write of #1, with the edits of #3 applied");
        assert_eq!(
            lines(diff.as_ref().unwrap()),
            ["hunk:@@ -1,2 +1,2 @@", "ctx: x = 2", "del:-print(x)", "add:+print(x * 2)"]
        );

        // An edit the known text cannot take: the file changed some other way.
        apply(&mut files, 6, &edit("b.py", "absent", "y"), &Ended::Changed);
        let (note, diff) = change_body(&write("b.py", "new\n"), &Ended::Changed, files.get("b.py"), 0);
        assert!(note.starts_with("what it replaced is not known (an edit that does not apply"), "{note}");
        assert_eq!(lines(diff.as_ref().unwrap()), ["hunk:@@ -0,0 +1,1 @@", "add:+new"]);

        let (note, _) = change_body(&write("c.py", "c\n"), &Ended::Changed, files.get("c.py"), 40);
        assert_eq!(note, "no earlier write of this path in the calls read (from #40): the whole content");
        let (note, diff) = change_body(&edit("a.py", "print(x)", "print(x)\n"), &Ended::Changed, None, 0);
        assert_eq!(note, "replaced its one occurrence of old_text");
        assert_eq!(lines(diff.as_ref().unwrap()), ["hunk:@@ -1,1 +1,1 @@", "del:-print(x)", "add:+print(x)"]);
        let (note, diff) =
            change_body(&rewrite, &Ended::NotRun("denied (denied:budget): nothing written".into()), None, 0);
        assert_eq!((note.as_str(), diff.is_none()), ("denied (denied:budget): nothing written", true));

        apply(&mut files, 7, &write("a.py", "?"), &Ended::Unknown("failed".into()));
        assert!(matches!(files.get("a.py"), Some(Known::Lost { at: 7, .. })));
    }

    #[test]
    fn a_command_shows_what_ran_and_how_it_ended() {
        let result = json!({"argv": ["/usr/bin/python3", "-c", "<x>"], "exit_code": 3, "ok": false,
            "timed_out": false, "memory_exceeded": false, "quota_exceeded": false, "duration_ms": 29,
            "stdout": "boom\n", "stdout_bytes": 5, "stderr": "", "stderr_bytes": 0});
        let asked = json!({"op": "exec", "command": "python3", "args": ["-c", "<x>"]});
        assert_eq!(argv(Some(&asked), Some(&result)), ["/usr/bin/python3", "-c", "<x>"]);
        assert_eq!(argv(Some(&asked), None), ["python3", "-c", "<x>"]);
        let ran = effect("ok", None);
        let said = |(how, class): (Markup, &str)| (how.into_string(), class.to_string());
        assert_eq!(said(exit(&ran, Some(&result))), ("<span class=\"exit-code\">3</span>".into(), "failed".into()));
        let killed = json!({"exit_code": null, "signal": 9, "timed_out": true});
        assert_eq!(said(exit(&ran, Some(&killed))).0, format!("{} (timed out, signal 9)", dash().into_string()));
        assert_eq!(said(exit(&ran, Some(&json!({"ok": false, "refused": "not allowed"})))).0, "refused: not allowed");
        assert_eq!(
            said(exit(&effect("denied", Some("denied:budget")), None)),
            ("denied (denied:budget)".into(), "denied".into())
        );
        let out = output(&result).into_string();
        assert!(
            out.contains("stdout, 5 bytes</span><pre class=\"stdout\">boom\n</pre>") && !out.contains("stderr"),
            "{out}"
        );
        let long = json!({"stdout": "é".repeat(OUTPUT_HEAD_BYTES), "stdout_bytes": 2 * OUTPUT_HEAD_BYTES});
        assert!(output(&long).0.contains(&format!("the first {OUTPUT_HEAD_BYTES} shown")));
        assert_eq!(head("aé", 2), "a");
    }

    const EVIL: &str = "<script>alert('x')</script>\"&";
    const EVIL_ESCAPED: &str = "&lt;script&gt;alert('x')&lt;/script&gt;&quot;&amp;";

    #[test]
    fn each_effect_is_told_in_words_and_a_hostile_path_or_argument_is_text() {
        let said = |m: Markup| m.into_string();
        // A write, an edit, a denied write, a refused edit; the path a hostile name.
        let w = write(EVIL, "a\nb\n");
        let d = diff_html("", "a\nb\n");
        assert_eq!(
            said(write_said(&effect("ok", None), Some(&w), EVIL, &Ended::Changed, Some(&d), "")),
            format!("wrote <code class=\"path\">{EVIL_ESCAPED}</code>, <span class=\"lines\">+2 lines</span>")
        );
        let ed = edit("a.py", "x", "y");
        let d = diff_html("x", "y");
        assert!(
            said(write_said(&effect("ok", None), Some(&ed), "a.py", &Ended::Changed, Some(&d), ""))
                .starts_with("edited <code class=\"path\">a.py</code>, <span class=\"lines\">+1 −1 lines")
        );
        let denied = effect("denied", Some("denied:budget"));
        let end = Ended::NotRun("denied".into());
        assert_eq!(
            said(write_said(&denied, Some(&w), "a.py", &end, None, "")),
            "tried to write <code class=\"path\">a.py</code> — denied: budget"
        );
        let end = Ended::Refused("refused: old_text not found".into());
        assert_eq!(
            said(write_said(&effect("ok", None), Some(&ed), "a.py", &end, None, "refused: old_text not found")),
            "tried to edit <code class=\"path\">a.py</code>: refused: old_text not found"
        );

        // A command: the line asked for, its exit and its time; a hostile argument is text.
        let line = vec!["python3".to_string(), EVIL.to_string()];
        let ran = json!({"exit_code": 1, "duration_ms": 412});
        assert_eq!(
            said(exec_said(&effect("ok", None), &line, Some(&ran))),
            format!(
                "ran <code class=\"cmdline\">python3 {EVIL_ESCAPED}</code> → <span class=\"failed\">exit 1</span> in 412 ms"
            )
        );
        let killed = json!({"exit_code": null, "signal": 9, "timed_out": true, "duration_ms": 9000});
        assert!(
            said(exec_said(&effect("ok", None), &line, Some(&killed)))
                .ends_with("→ <span class=\"failed\">stopped</span> (timed out, signal 9) in 9.0 s")
        );
        assert!(said(exec_said(&denied, &line, None)).ends_with("</code> — denied: budget"));

        // Reads, lists, searches, and what has no words of its own.
        let c = |transition: &str| {
            let mut c = Call {
                position: 0,
                task_id: "t".into(),
                invocation_id: "a2a:ep:t".into(),
                surface: "a2a".into(),
                transition: transition.into(),
                started_at: 0,
                ended_at: Some(1),
                state: "committed".into(),
                entry_index: Some(1),
                output: None,
                effects: vec![],
                run: None,
            };
            c.effects.push(effect("ok", None));
            c
        };
        let read = c("ailang-read");
        assert_eq!(
            said(other_said(&read, &effect("ok", None), &json!({"op": "read", "path": EVIL}))),
            format!("read <code class=\"path\">{EVIL_ESCAPED}</code>")
        );
        assert_eq!(
            said(other_said(&read, &effect("ok", None), &json!({"op": "search", "path": ".", "query": EVIL}))),
            format!("searched <code class=\"path\">.</code> for <q>{EVIL_ESCAPED}</q>")
        );
        let scope = Some("denied:scope");
        assert_eq!(
            said(other_said(&read, &effect("denied", scope), &json!({"op": "list", "path": "src"}))),
            "tried to list <code class=\"path\">src</code> — denied: scope"
        );
        assert_eq!(
            said(other_said(&c(EVIL), &effect("ok", None), &Value::Null)),
            format!("{EVIL_ESCAPED}: Workspace.Write on worktree")
        );
        assert_eq!((duration(999), duration(1250)), ("999 ms".to_string(), "1.2 s".to_string()));
    }
}
