//! What the calls of a shown page did to the worktree and what they ran,
//! from each effect's request and result objects: every `Workspace.Write`
//! effect (`ailang-write`, `ailang-edit`) as a diff, every `Workspace.Exec`
//! effect (`workspace-exec`) as its command line, how it ended and the head of
//! its output. The handlers' payloads are in `crate::runtime::builtin` (what
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

/// The note and the diff of one file effect of the page, given what its path held.
fn change_body(op: &FileOp, ended: &Ended, before: Option<&Known>, lookback_from: u64) -> (String, Markup) {
    match (ended, op) {
        (Ended::Changed, FileOp::Edit { old, new, .. }) => {
            ("replaced its one occurrence of old_text".into(), diff_html(old, new))
        }
        (Ended::Changed, FileOp::Write { content, .. }) => match before {
            Some(Known::Content { text, since, edits }) => {
                let edited = if edits.is_empty() {
                    String::new()
                } else {
                    format!(", with the edits of {} applied", positions(edits))
                };
                (format!("against the write of #{since}{edited}"), diff_html(text, content))
            }
            Some(Known::Lost { at, why }) => {
                (format!("what it replaced is not known ({why}, #{at}): the whole content"), diff_html("", content))
            }
            None => (
                format!("no earlier write of this path in the calls read (from #{lookback_from}): the whole content"),
                diff_html("", content),
            ),
        },
        (Ended::Refused(why) | Ended::NotRun(why) | Ended::Unknown(why), _) => (why.clone(), html! {}),
    }
}

/// `old` to `new` line by line, with a few lines of context around each change.
fn diff_html(old: &str, new: &str) -> Markup {
    if old.len() > DIFF_BYTES_MAX || new.len() > DIFF_BYTES_MAX {
        return html! {
            p.diff-too-large.muted {
                (old.len()) " bytes before, " (new.len()) " after: larger than the " (DIFF_BYTES_MAX)
                " bytes diffed on a page"
            }
        };
    }
    let diff = TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(old, new);
    let groups = diff.grouped_ops(DIFF_CONTEXT);
    if groups.is_empty() {
        return html! { pre.diff { span.same { "no change" } } };
    }
    // A missing last newline is worth saying only where one side has it (an
    // edit's texts are fragments, which seldom end in one).
    let mark_eol = !old.is_empty() && old.ends_with('\n') != new.ends_with('\n');
    let (mut lines, mut shown, mut more) = (vec![], 0, 0);
    for group in &groups {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let range =
            |start: usize, end: usize| format!("{},{}", if end > start { start + 1 } else { start }, end - start);
        let hunk = format!(
            "@@ -{} +{} @@",
            range(first.old_range().start, last.old_range().end),
            range(first.new_range().start, last.new_range().end)
        );
        lines.push(html! { span.hunk { (hunk) } });
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
            lines.push(html! {
                span class=(class) {
                    (sign) (line.strip_suffix('\n').unwrap_or(line))
                    @if eol { span.eol { " (no newline at end)" } }
                }
            });
        }
    }
    html! {
        pre.diff {
            @for l in &lines { (l) }
            @if more > 0 { span.more { "… " (more) " more lines not shown" } }
        }
    }
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

/// `what changed`: every file effect of the page, as a diff or a note.
pub(super) fn what_changed(s: &Snapshot, episode: &str, page: &CallsPage) -> Result<Markup, ReadError> {
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
    let mut out = vec![];
    for c in &page.calls {
        for (i, e) in c.effects.iter().enumerate().filter(|(_, e)| e.effect == WRITE) {
            let o = objects(s, e, e.status == "ok")?;
            let op = o.payload.as_ref().and_then(FileOp::of);
            let end = ended(e, o.result.as_ref());
            let (path, (note, diff)) = match &op {
                Some(op) => (op.path(), change_body(op, &end, files.get(op.path()), lookback_from)),
                None => ("?", ("its request is not readable".into(), html! {})),
            };
            let request = o.request.map_or_else(dash, |r| obj_link_short(&r, "request-link"));
            out.push(html! {
                div.change id={ "change-" (c.position) "-" (i) } {
                    p.change-head {
                        a href={ "#call-" (c.position) } { "#" (c.position) } " "
                        span.tool { (c.transition) } " "
                        code.path { (path) } " "
                        span.change-note { (note) } " "
                        span.muted { "request" } " " (request)
                    }
                    (diff)
                }
            });
            if let Some(op) = &op {
                apply(&mut files, c.position, op, &end);
            }
        }
    }
    Ok(html! {
        h2 #what-changed { "What changed" }
        p.muted {
            "Each write is compared with what World last wrote to the same path (its later edits applied) within the "
            (WRITE_LOOKBACK_CALLS) " calls before this page and the page itself; a command run in between may have \
             changed the file too."
        }
        div #changes {
            @for c in &out { (c) }
            @if out.is_empty() { p #changes-none.muted { "no call shown wrote a file" } }
        }
    })
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
    let Some(p) = payload else { return vec![] };
    let mut asked = vec![p["command"].as_str().unwrap_or("?").to_string()];
    asked.extend(words(&p["args"]).unwrap_or_default());
    asked
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
    let code = r["exit_code"].as_i64();
    let how = html! {
        @if let Some(c) = code { span.exit-code { (c) } } @else { (dash()) }
        @if !notes.is_empty() { " (" (notes.join(", ")) ")" }
    };
    (how, if code == Some(0) { "ok" } else { "failed" })
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

/// `what ran`: every command of the page.
pub(super) fn what_ran(s: &Snapshot, page: &CallsPage) -> Result<Markup, ReadError> {
    let mut rows = vec![];
    for c in &page.calls {
        for (i, e) in c.effects.iter().enumerate().filter(|(_, e)| e.effect == EXEC) {
            let o = objects(s, e, true)?;
            let words = argv(o.payload.as_ref(), o.result.as_ref());
            let (how, class) = exit(e, o.result.as_ref());
            let took = o.result.as_ref().and_then(|r| r["duration_ms"].as_u64());
            rows.push(html! {
                tr.run id={ "run-" (c.position) "-" (i) } {
                    td { a href={ "#call-" (c.position) } { "#" (c.position) } }
                    td.argv {
                        @for (n, w) in words.iter().enumerate() { @if n > 0 { " " } code.arg { (w) } }
                        @if words.is_empty() { (dash()) }
                    }
                    td class={ "exit " (class) } { (how) }
                    td.duration { @if let Some(ms) = took { (ms) " ms" } @else { (dash()) } }
                    td.output { @if let Some(r) = &o.result { (output(r)) } @else { (dash()) } }
                    td.ref { @if let Some(r) = &o.result_ref { (obj_link_short(r, "result-link")) } @else { (dash()) } }
                }
            });
        }
    }
    Ok(html! {
        h2 #what-ran { "What ran" }
        @if rows.is_empty() {
            p #runs-none.muted { "no command ran in the calls shown" }
        } @else {
            table #runs {
                tr { th { "#" } th { "command line" } th { "exit" } th { "took" } th { "output (head)" } th { "result" } }
                @for r in &rows { (r) }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The diff's lines as text, one a line, as a reader sees them.
    fn lines(html: &Markup) -> Vec<String> {
        html.0
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
        let text = &html.0;
        assert_eq!(lines(&html), ["hunk:@@ -0,0 +1,2 @@", "add:+&lt;script&gt;alert(1)&lt;/script&gt;", "add:+x"]);
        assert!(!text.contains("<script") && !text.contains("newline"), "{text}");
        let html = diff_html("x\n", "x");
        assert_eq!(lines(&html), ["hunk:@@ -1,1 +1,1 @@", "del:-x", "add:+x"]);
        assert!(html.0.contains("+x<span class=\"eol\"> (no newline at end)</span>"), "{}", html.0);
        assert_eq!(lines(&diff_html("same\n", "same\n")), ["same:no change"]);
    }

    #[test]
    fn a_long_diff_is_cut_and_says_so() {
        let new: String = (0..DIFF_LINES_MAX + 7).map(|i| format!("{i}\n")).collect();
        let html = diff_html("", &new);
        assert_eq!(html.0.matches("<span class=\"add\">").count(), DIFF_LINES_MAX);
        assert!(html.0.contains("… 7 more lines not shown"), "{}", html.0);
        let big = "x".repeat(DIFF_BYTES_MAX + 1);
        assert!(diff_html("", &big).0.contains("diff-too-large"));
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
        assert_eq!(lines(&diff), ["hunk:@@ -1,2 +1,2 @@", "ctx: x = 2", "del:-print(x)", "add:+print(x * 2)"]);

        // An edit the known text cannot take: the file changed some other way.
        apply(&mut files, 6, &edit("b.py", "absent", "y"), &Ended::Changed);
        let (note, diff) = change_body(&write("b.py", "new\n"), &Ended::Changed, files.get("b.py"), 0);
        assert!(note.starts_with("what it replaced is not known (an edit that does not apply"), "{note}");
        assert_eq!(lines(&diff), ["hunk:@@ -0,0 +1,1 @@", "add:+new"]);

        let (note, _) = change_body(&write("c.py", "c\n"), &Ended::Changed, files.get("c.py"), 40);
        assert_eq!(note, "no earlier write of this path in the calls read (from #40): the whole content");
        let (note, diff) = change_body(&edit("a.py", "print(x)", "print(x)\n"), &Ended::Changed, None, 0);
        assert_eq!(note, "replaced its one occurrence of old_text");
        assert_eq!(lines(&diff), ["hunk:@@ -1,1 +1,1 @@", "del:-print(x)", "add:+print(x)"]);
        let (note, diff) =
            change_body(&rewrite, &Ended::NotRun("denied (denied:budget): nothing written".into()), None, 0);
        assert_eq!((note.as_str(), diff.0.as_str()), ("denied (denied:budget): nothing written", ""));

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
}
