//! `worldd episodes` and `worldd episode EP`: what each episode did and paid,
//! read from a running daemon's `/v1/episodes` routes and drawn as tables
//! that fit `WIDTH` columns (a cell that does not fit ends with `…`), or, with
//! `--json`, the REST bodies as they came.

use super::client::Client;
use crate::clock::utc;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

/// The widest line the tables draw.
pub const WIDTH: usize = 100;
/// What `--limit` may ask of one page of `/v1/episodes`.
pub const EPISODES_LIMIT_MAX: u64 = crate::episodes::EPISODES_PAGE_MAX as u64;
/// What `--calls` may ask of one page of `/v1/episodes/{episode}/calls`.
pub const CALLS_MAX: u64 = crate::episodes::CALLS_PAGE_MAX as u64;

// The REST bodies are `crate::episodes`'s, read back.
use crate::episodes::{Call, CallsPage, EpisodesPage, Spend, Summary};

// ---- the verbs ----

/// `worldd episodes`: one row per episode, most recently active first.
pub fn list(client: &Client, json: bool, limit: u64) -> ExitCode {
    let body = match fetch(client, &format!("/v1/episodes?limit={limit}"), None) {
        Ok(b) => b,
        Err(code) => return code,
    };
    if json {
        return print_raw(&[body]);
    }
    match serde_json::from_slice::<EpisodesPage>(&body) {
        Ok(page) => print_text(&episodes_table(&page)),
        Err(e) => super::fail(1, format!("/v1/episodes: unexpected body: {e}")),
    }
}

/// `worldd episode EP`: its summary, then its last `calls` calls.
pub fn one(client: &Client, episode: &str, json: bool, calls: u64) -> ExitCode {
    let path = format!("/v1/episodes/{}", encode_segment(episode));
    let summary_body = match fetch(client, &path, Some(episode)) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let summary: Summary = match serde_json::from_slice(&summary_body) {
        Ok(s) => s,
        Err(e) => return super::fail(1, format!("{path}: unexpected body: {e}")),
    };
    // The summary's count places the last page; calls that start meanwhile
    // only make the page end before the newest.
    let page_body = if calls == 0 {
        None
    } else {
        let from = summary.calls.saturating_sub(calls);
        match fetch(client, &format!("{path}/calls?from={from}&limit={calls}"), Some(episode)) {
            Ok(b) => Some(b),
            Err(code) => return code,
        }
    };
    if json {
        let bodies: Vec<Vec<u8>> = std::iter::once(summary_body).chain(page_body).collect();
        return print_raw(&bodies);
    }
    let page = match page_body.map(|b| serde_json::from_slice::<CallsPage>(&b)).transpose() {
        Ok(p) => p,
        Err(e) => return super::fail(1, format!("{path}/calls: unexpected body: {e}")),
    };
    print_text(&episode_text(&summary, page.as_ref()))
}

/// GETs `path`: the body of a 2xx, else the failure said on stderr. A 404
/// while asking about `episode` means the store has no call of it.
fn fetch(client: &Client, path: &str, episode: Option<&str>) -> Result<Vec<u8>, ExitCode> {
    let (status, body) = client.get(path).map_err(|e| super::fail(1, e))?;
    match (status, episode) {
        (200..=299, _) => Ok(body),
        (404, Some(ep)) => Err(super::fail(1, format!("no call of episode {} has reached this store", clean(ep)))),
        _ => Err(super::fail(1, client.describe(path, status, &body))),
    }
}

fn print_raw(bodies: &[Vec<u8>]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    for body in bodies {
        let _ = out.write_all(body);
        if !body.ends_with(b"\n") {
            let _ = out.write_all(b"\n");
        }
    }
    ExitCode::SUCCESS
}

fn print_text(lines: &[String]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    ExitCode::SUCCESS
}

/// An episode as one path segment: every byte but the unreserved ones escaped.
pub(super) fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---- what is drawn ----

/// Calls by state, in the order a call goes through them (unknown keys after).
const STATES: [&str; 4] = ["started", "committed", "not-committed", "uncertain"];
/// Effects by status, likewise.
const STATUSES: [&str; 5] = ["ok", "failed", "denied", "skipped", "indeterminate"];

/// The `episodes` table, and a line saying what its columns count.
pub fn episodes_table(page: &EpisodesPage) -> Vec<String> {
    if page.episodes.is_empty() {
        return vec!["no episode has reached this store".into()];
    }
    let columns = [
        Column::text("EPISODE"),
        Column::number("CALLS"),
        Column::text("C/R/U"),
        Column::text("OK/F/D"),
        Column::text("LAST ACTIVITY (UTC)"),
        Column::text("SPEND USED/BUDGET"),
    ];
    let count = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let rows = page
        .episodes
        .iter()
        .map(|s| {
            vec![
                s.episode.clone(),
                s.calls.to_string(),
                format!(
                    "{}/{}/{}",
                    count(&s.states, "committed"),
                    count(&s.states, "not-committed"),
                    count(&s.states, "uncertain")
                ),
                format!("{}/{}/{}", count(&s.effects, "ok"), count(&s.effects, "failed"), count(&s.effects, "denied")),
                utc(s.last_at),
                compact_spend(&s.spend),
            ]
        })
        .collect();
    // The episode keeps 24 characters before the spend gives up any.
    let mut lines = table(&columns, rows, 0, &[(0, 24), (5, 0), (0, 0)]);
    lines
        .push(fit("C/R/U: calls committed/refused (not committed)/uncertain; OK/F/D: effects ok/failed/denied", WIDTH));
    if let Some(next) = &page.next {
        lines.push(fit(&format!("more episodes: GET /v1/episodes?after={next}"), WIDTH));
    }
    lines
}

/// Each (effect, scope) as `effect used/budget`, the scope named only where
/// one effect is spent under several; the pairs spent on first, since the
/// cell is cut when the row is too wide.
fn compact_spend(spend: &[Spend]) -> String {
    let (spent, unspent): (Vec<&Spend>, Vec<&Spend>) = spend.iter().partition(|s| s.spent > 0);
    let parts: Vec<String> = spent
        .into_iter()
        .chain(unspent)
        .map(|s| {
            let shared = spend.iter().filter(|o| o.effect == s.effect).count() > 1;
            let name = if shared { format!("{}@{}", s.effect, s.scope) } else { s.effect.clone() };
            format!("{name} {}/{}", s.spent, or_dash(s.budget))
        })
        .collect();
    if parts.is_empty() { "-".into() } else { parts.join(", ") }
}

/// The `episode` view: the summary, then the page of calls.
pub fn episode_text(s: &Summary, page: Option<&CallsPage>) -> Vec<String> {
    let mut lines = vec![
        format!("episode   {}", s.episode),
        format!("calls     {}: {}", s.calls, counts(&s.states, &STATES)),
        format!("effects   {}", counts(&s.effects, &STATUSES)),
        format!("denials   {}", counts(&s.denials, &[])),
        format!("sessions  {} live of {}", s.sessions.live, s.sessions.total),
        format!("activity  first {} UTC, last {} UTC", utc(s.first_at), utc(s.last_at)),
    ];
    lines = lines.iter().map(|l| fit(l, WIDTH)).collect();
    if s.spend.is_empty() {
        lines.push("spend     none".into());
    } else {
        lines.push("spend".into());
        let columns = [Column::text("EFFECT"), Column::text("SCOPE"), Column::text("USED/BUDGET (REMAINING)")];
        let rows = s
            .spend
            .iter()
            .map(|p| {
                vec![
                    p.effect.clone(),
                    p.scope.clone(),
                    format!("{}/{} ({})", p.spent, or_dash(p.budget), or_dash(p.remaining)),
                ]
            })
            .collect();
        lines.extend(table(&columns, rows, 2, &[(0, 24), (1, 12), (0, 0), (1, 0)]));
    }
    let Some(page) = page else { return lines };
    lines.push(String::new());
    if page.calls.is_empty() {
        lines.push(format!("no calls to show (of {})", page.total));
        return lines;
    }
    lines.push(format!("the last {} of {} call(s):", page.calls.len(), page.total));
    let columns = [
        Column::number("#"),
        Column::text("TIME (UTC)"),
        Column::text("VIA"),
        Column::text("TRANSITION"),
        Column::text("STATE"),
        Column::text("EFFECTS"),
        Column::number("ENTRY"),
    ];
    let rows = page
        .calls
        .iter()
        .map(|c| {
            let effects: Vec<String> = c
                .effects
                .iter()
                .map(|e| {
                    // A skipped effect never met the broker: it has no budget to tell.
                    match (&e.denial, e.status.as_str()) {
                        (Some(label), _) => format!("{label} cost {}, {} left", e.cost, e.budget_after),
                        (None, "skipped") => "skipped".to_string(),
                        (None, status) => format!("{status} cost {}, {} left", e.cost, e.budget_after),
                    }
                })
                .collect();
            vec![
                c.position.to_string(),
                utc(c.started_at),
                c.surface.clone(),
                c.transition.clone(),
                c.state.clone(),
                if effects.is_empty() { "-".into() } else { effects.join("; ") },
                c.entry_index.map_or("-".into(), |i| i.to_string()),
            ]
        })
        .collect();
    // The transition gives up width first: the effects are what the page is for.
    lines.extend(table(&columns, rows, 0, &[(3, 16), (5, 24), (3, 0), (5, 0)]));
    lines.extend(running_lines(&page.calls));
    lines
}

/// Each running task of the page: when it stops, its last output, how to stop it.
fn running_lines(calls: &[Call]) -> Vec<String> {
    let running = calls.iter().filter_map(|c| Some((c, c.run.as_ref()?, c.run.as_ref()?.cancel.as_ref()?)));
    running
        .flat_map(|(c, run, cancel)| {
            let mut lines =
                vec![format!("running #{} {}: stops at {} UTC", c.position, c.invocation_id, utc(run.deadline_at))];
            if let Some(line) = &run.last_output {
                lines.push(format!("  last output: {line}"));
            }
            lines.push(format!("  stop it: {cancel}"));
            lines
        })
        .collect()
}

/// `key n, key n, …`: the keys of `order` first, in that order, then the rest.
fn counts(map: &BTreeMap<String, u64>, order: &[&str]) -> String {
    let known = order.iter().filter_map(|k| map.get(*k).map(|n| format!("{k} {n}")));
    let rest = map.iter().filter(|(k, _)| !order.contains(&k.as_str())).map(|(k, n)| format!("{k} {n}"));
    let parts: Vec<String> = known.chain(rest).collect();
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

fn or_dash(n: Option<u64>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}

// ---- tables ----

/// One column; numbers align right.
#[derive(Clone, Copy)]
struct Column {
    header: &'static str,
    right: bool,
}

impl Column {
    fn text(header: &'static str) -> Column {
        Column { header, right: false }
    }
    fn number(header: &'static str) -> Column {
        Column { header, right: true }
    }
}

const GAP: usize = 2;

/// The header and one line per row, indented by `indent`. While a line would
/// be wider than `WIDTH`, the columns `shrink` names give up width in its
/// order, each down to its floor (never below its header): what matters most
/// keeps its width longest, and a cut cell ends with `…`.
fn table(columns: &[Column], rows: Vec<Vec<String>>, indent: usize, shrink: &[(usize, usize)]) -> Vec<String> {
    let rows: Vec<Vec<String>> = rows.into_iter().map(|r| r.iter().map(|c| clean(c)).collect()).collect();
    let mut widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| rows.iter().map(|r| chars(&r[i])).chain([chars(c.header)]).max().unwrap_or(0))
        .collect();
    let total = indent + widths.iter().sum::<usize>() + GAP * widths.len().saturating_sub(1);
    let mut over = total.saturating_sub(WIDTH);
    for &(i, floor) in shrink {
        let floor = floor.max(chars(columns[i].header));
        let give = over.min(widths[i].saturating_sub(floor));
        widths[i] -= give;
        over -= give;
    }
    let line = |cells: Vec<String>| {
        let mut out = " ".repeat(indent);
        for (i, (cell, c)) in cells.iter().zip(columns).enumerate() {
            if i > 0 {
                out.push_str(&" ".repeat(GAP));
            }
            let cell = cut(cell, widths[i]);
            let pad = " ".repeat(widths[i] - chars(&cell));
            if c.right {
                out.push_str(&pad);
                out.push_str(&cell);
            } else {
                out.push_str(&cell);
                out.push_str(&pad);
            }
        }
        out.trim_end().to_string()
    };
    let mut lines = vec![line(columns.iter().map(|c| c.header.to_string()).collect())];
    lines.extend(rows.into_iter().map(line));
    lines
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `s` in at most `width` characters; a cut one ends with `…`.
fn cut(s: &str, width: usize) -> String {
    if chars(s) <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A line of free text, made safe and cut to `width`.
fn fit(s: &str, width: usize) -> String {
    cut(&clean(s), width)
}

/// Control characters (a name may hold any) drawn as `?`, so that no name
/// moves the cursor or breaks a row.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(episode: &str, spend: serde_json::Value) -> serde_json::Value {
        json!({"episode": episode, "calls": 12,
            "states": {"committed": 9, "not-committed": 2, "uncertain": 1},
            "effects": {"ok": 7, "failed": 1, "denied": 3, "skipped": 1},
            "denials": {"denied:budget": 2, "denied:scope": 1},
            "spend": spend, "sessions": {"live": 2, "total": 3},
            "firstAt": 1_796_418_000u64, "lastAt": 1_796_418_462u64,
            "activity": {"origin": 0, "width": 60, "counts": []}})
    }

    fn spend_pair(effect: &str, scope: &str, spent: u64, budget: Option<u64>) -> serde_json::Value {
        json!({"effect": effect, "scope": scope, "spent": spent, "budget": budget,
            "remaining": budget.map(|b| b.saturating_sub(spent))})
    }

    fn call(position: u64, transition: &str, effects: serde_json::Value) -> serde_json::Value {
        json!({"position": position, "taskId": "t", "invocationId": "a2a:e:t", "surface": "a2a",
            "transition": transition, "startedAt": 1_796_418_462u64, "endedAt": 1_796_418_462u64,
            "state": "not-committed", "entryIndex": null, "output": null, "effects": effects})
    }

    fn assert_fits(lines: &[String]) {
        for l in lines {
            assert!(chars(l) <= WIDTH, "{} columns: {l:?}", chars(l));
        }
    }

    #[test]
    fn a_short_episodes_table_is_drawn_whole_with_every_count() {
        let page: EpisodesPage = serde_json::from_value(json!({"episodes": [summary("demo", json!([
            spend_pair("Workspace.Read", "worktree", 3, Some(5)),
            spend_pair("world.apply", "world", 0, None)]))], "next": null}))
        .unwrap();
        let lines = episodes_table(&page);
        assert_fits(&lines);
        assert_eq!(lines[0], "EPISODE  CALLS  C/R/U  OK/F/D  LAST ACTIVITY (UTC)  SPEND USED/BUDGET");
        assert_eq!(lines[1], "demo        12  9/2/1  7/1/3   2026-12-04 21:07:42  Workspace.Read 3/5, world.apply 0/-");
        assert!(!lines.iter().any(|l| l.contains('…')), "{lines:#?}");
        assert_eq!(lines.len(), 3, "header, row, legend: {lines:#?}");
    }

    #[test]
    fn long_names_are_cut_with_an_ellipsis_and_every_line_fits() {
        let long = "an-episode-whose-name-goes-on-and-on-well-past-any-sensible-column-width-x".repeat(2);
        let many: Vec<serde_json::Value> = (0..8)
            .map(|i| spend_pair(&format!("Some.Very.Long.Effect.Name{i}"), "a-scope-too", i, Some(1_000_000)))
            .collect();
        let page: EpisodesPage = serde_json::from_value(json!({
            "episodes": [summary(&long, json!(many)), summary("short", json!([]))],
            "next": format!("1796418462.{long}")}))
        .unwrap();
        let lines = episodes_table(&page);
        assert_fits(&lines);
        let row = &lines[1];
        assert!(row.starts_with("an-episode-whose"), "{row}");
        assert!(row.contains("… ") && row.ends_with('…'), "the episode and the spend are cut: {row}");
        // The counts and the time keep every digit.
        assert!(row.contains("9/2/1") && row.contains("7/1/3") && row.contains("2026-12-04 21:07:42"), "{row}");
        assert!(lines[2].starts_with("short ") && lines[2].ends_with(" -"), "{}", lines[2]);
        assert!(lines.last().unwrap().starts_with("more episodes: GET /v1/episodes?after=1796418462.an-episode"));
    }

    #[test]
    fn an_effect_spent_under_two_scopes_names_each_scope_and_spent_pairs_come_first() {
        let spend: Vec<Spend> = serde_json::from_value(json!([
            spend_pair("Workspace.Read", "worktree", 1, Some(2)),
            spend_pair("Workspace.Read", "other", 0, Some(4)),
            spend_pair("world.apply", "world", 5, Some(5))
        ]))
        .unwrap();
        assert_eq!(compact_spend(&spend), "Workspace.Read@worktree 1/2, world.apply 5/5, Workspace.Read@other 0/4");
        assert_eq!(compact_spend(&[]), "-");
    }

    #[test]
    fn the_episode_view_gives_the_summary_then_the_calls_and_fits() {
        let s: Summary = serde_json::from_value(summary(
            "demo",
            json!([spend_pair("Workspace.Read", "worktree", 3, Some(5)), spend_pair("world.apply", "world", 0, None)]),
        ))
        .unwrap();
        let long_transition = "a.transition.published.with.a.name.long.enough.to.push.the.effects.off.the.edge";
        let page: CallsPage = serde_json::from_value(json!({"episode": "demo", "from": 10, "next": null, "total": 12,
        "calls": [
            call(10, "ailang-read", json!([{"id": "e1", "effect": "Workspace.Read", "scope": "worktree",
                "status": "denied", "denial": "denied:budget", "cost": 1, "debited": 0,
                "budgetBefore": 0, "budgetAfter": 0, "record": null}])),
            call(11, long_transition, json!([
                {"id": "e1", "effect": "Workspace.Read", "scope": "worktree", "status": "ok", "denial": null,
                 "cost": 1, "debited": 1, "budgetBefore": 5, "budgetAfter": 4, "record": null},
                {"id": "e2", "effect": "Workspace.Write", "scope": "worktree", "status": "skipped",
                 "denial": null, "cost": 2, "debited": 0, "budgetBefore": 0, "budgetAfter": 0, "record": null}])),
        ]}))
        .unwrap();
        let lines = episode_text(&s, Some(&page));
        assert_fits(&lines);
        let text = lines.join("\n");
        for expected in [
            "calls     12: committed 9, not-committed 2, uncertain 1",
            "effects   ok 7, failed 1, denied 3, skipped 1",
            "denials   denied:budget 2, denied:scope 1",
            "sessions  2 live of 3",
            "activity  first 2026-12-04 21:00:00 UTC, last 2026-12-04 21:07:42 UTC",
            "  Workspace.Read  worktree  3/5 (2)",
            "  world.apply     world     0/- (-)",
            "the last 2 of 12 call(s):",
        ] {
            assert!(text.contains(expected), "{expected:?} in\n{text}");
        }
        let denied = lines.iter().find(|l| l.trim_start().starts_with("10 ")).unwrap();
        assert!(denied.contains("ailang-read") && denied.contains("denied:budget cost 1, 0 left"), "{denied}");
        assert!(denied.ends_with(" -"), "no entry: {denied}");
        let long = lines.iter().find(|l| l.trim_start().starts_with("11 ")).unwrap();
        assert!(long.contains('…'), "{long}");
        assert!(long.contains("ok cost 1, 4 left"), "the effects keep room beside a long transition: {long}");
    }

    #[test]
    fn control_characters_in_a_name_never_reach_the_terminal() {
        let s: Summary = serde_json::from_value(summary("ep\u{1b}[2J\nx", json!([]))).unwrap();
        let lines = episode_text(&s, None);
        assert_eq!(lines[0], "episode   ep?[2J?x");
        assert!(lines.iter().any(|l| l == "spend     none"));
        let page = EpisodesPage { episodes: vec![s], next: None };
        assert!(episodes_table(&page)[1].starts_with("ep?[2J?x "));
    }

    #[test]
    fn an_episode_is_one_path_segment() {
        assert_eq!(encode_segment("demo-1.a_b~"), "demo-1.a_b~");
        assert_eq!(encode_segment("a/b c?é"), "a%2Fb%20c%3F%C3%A9");
    }
}
