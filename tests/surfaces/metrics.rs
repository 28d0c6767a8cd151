//! `GET /metrics`: a known mix of calls on both surfaces moves each counter
//! by exactly what happened, with bounded labels only; the store writer's
//! histograms agree with its counters; `--no-metrics` serves none.

use crate::harness::*;
use serde_json::json;

/// The sample of `series` (name and labels as the text spells them), or 0.
fn sample(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
}

/// A histogram's buckets as the text spells them: `(le, cumulative count)`, in order.
fn buckets(text: &str, histogram: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{histogram}_bucket{{le=\"");
    let bucket = |l: &str| {
        let (le, count) = l.strip_prefix(&prefix)?.split_once("\"} ")?;
        let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
        Some((le, count.parse().ok()?))
    };
    text.lines().filter_map(bucket).collect()
}

/// The OpenMetrics text of `GET /metrics`.
fn scrape(lab: &Lab) -> String {
    let reply = http(lab.addr(), "GET", "/metrics", &[("Accept", "application/openmetrics-text; version=1.0.0")], b"");
    assert_eq!(reply.status, 200);
    reply.text()
}

#[test]
fn a_known_mix_of_calls_moves_each_counter_by_exactly_what_happened() {
    let lab =
        Lab::new(LabOptions { episodes: &["ep"], exec: &[("greet", "#!/bin/sh\necho hi\n")], ..Default::default() });
    std::fs::write(lab.worktree("ep").join("hello.txt"), "hello\n").unwrap();
    let token = lab.mint("ep", &["world.apply=world:10", "Workspace.Read=worktree:2", "Workspace.Exec=worktree:1"]);
    let before = scrape(&lab);
    let ran = lab.send(&token, "x1", "workspace-exec", &json!({"command": "greet"}));
    assert_eq!(ran["result"]["artifacts"][0]["parts"][0]["data"]["stdout"], "hi\n", "{ran}");
    lab.mcp_call_ok(&token, "tools_decho", &json!({"message": "hi"}));
    let read = json!({"path": "hello.txt"});
    for task in ["r1", "r2", "r3"] {
        // Two reads are paid for; the third is denied over budget, and still commits.
        lab.send(&token, task, "ailang-read", &read);
    }
    let refused = lab.send(&token, "r4", "ailang-read", &json!({"path": "../outside"}));
    assert!(refused.get("result").is_some(), "a path the plan refuses commits without an effect: {refused}");
    lab.send(&token, "r1", "ailang-read", &read);
    let reused = lab.send(&token, "r1", "ailang-read", &json!({"path": "other.txt"}));
    assert_eq!(reused["error"]["message"], "task id already used in this session", "{reused}");

    // The writes wait in the log until a checkpoint is due: let one run.
    std::thread::sleep(world_store::CHECKPOINT_INTERVAL + std::time::Duration::from_millis(500));
    let reply = http(lab.addr(), "GET", "/metrics", &[("Accept", "application/openmetrics-text; version=1.0.0")], b"");
    assert_eq!(reply.status, 200);
    assert!(reply.header("Content-Type").unwrap_or_default().starts_with("application/openmetrics-text"));
    let text = reply.text();
    let expect = [
        ("worldd_calls_total{surface=\"mcp\",tool=\"tools.echo\",outcome=\"committed\"}", 1.0),
        // r1, r2, r3, r4 and r1 resent with its own request (its committed result, nothing run).
        ("worldd_calls_total{surface=\"a2a\",tool=\"ailang-read\",outcome=\"committed\"}", 5.0),
        ("worldd_calls_total{surface=\"a2a\",tool=\"workspace-exec\",outcome=\"committed\"}", 1.0),
        ("worldd_effects_total{effect=\"Workspace.Exec\",status=\"ok\"}", 1.0),
        ("worldd_confined_runs_total{kind=\"exec\",outcome=\"exited_zero\"}", 1.0),
        // The start-up self-check confines one shell.
        ("worldd_confined_runs_total{kind=\"pure\",outcome=\"exited_zero\"}", 1.0),
        ("worldd_calls_total{surface=\"a2a\",tool=\"ailang-read\",outcome=\"task_id_in_use\"}", 1.0),
        ("worldd_effects_total{effect=\"Workspace.Read\",status=\"ok\"}", 2.0),
        ("worldd_effects_total{effect=\"Workspace.Read\",status=\"denied\"}", 1.0),
        ("worldd_effect_denials_total{effect=\"Workspace.Read\",label=\"denied:budget\"}", 1.0),
        ("worldd_effect_cost_total{effect=\"Workspace.Read\",scope=\"worktree\"}", 2.0),
        ("worldd_call_duration_seconds_count{surface=\"a2a\",outcome=\"committed\"}", 6.0),
        ("worldd_calls_in_flight", 0.0),
        ("worldd_store_degraded", 0.0),
    ];
    for (series, value) in expect {
        assert_eq!(sample(&text, series), value, "{series}\n{text}");
    }
    assert!(text.contains("worldd_build_info{version=\"") && text.contains("engine=\"embedded\"} 1"), "{text}");
    for private in ["ep", "r1", &token] {
        assert!(!text.contains(&format!("\"{private}\"")), "a label names {private}: {text}");
    }
    assert!(text.ends_with("# EOF\n"));
    assert!(sample(&text, "worldd_store_batches_total") >= 7.0, "the calls' group commits: {text}");
    assert!(sample(&text, "worldd_store_bytes{kind=\"file\"}") > 0.0, "{text}");
    assert_eq!(sample(&text, "worldd_callback_slots_in_use"), 0.0, "{text}");
    // The calls' objects entered the young tables of the tiered indexes.
    for index in ["places", "semantic"] {
        let young = format!("worldd_store_index_rows{{index=\"{index}\",part=\"young\"}}");
        assert!(sample(&text, &young) > sample(&before, &young), "{young}\n{text}");
        assert_eq!(sample(&text, &format!("worldd_store_index_runs{{index=\"{index}\"}}")), 0.0, "{text}");
    }

    // The store writer's histograms: one observation per batch made durable
    // (every batch here), the requests they carried, buckets that add up.
    let moved = |series: &str| sample(&text, series) - sample(&before, series);
    let batches = moved("worldd_store_batches_total");
    assert!(batches >= 1.0, "{text}");
    for histogram in [
        "worldd_store_commit_duration_seconds",
        "worldd_store_log_sync_duration_seconds",
        "worldd_store_batch_requests",
    ] {
        assert_eq!(moved(&format!("{histogram}_count")), batches, "{histogram}\n{text}");
        assert!(moved(&format!("{histogram}_sum")) > 0.0, "{histogram}\n{text}");
        let b = buckets(&text, histogram);
        assert!(b.len() > 1 && b.last().unwrap().0 == f64::INFINITY, "{histogram}: {b:?}");
        assert!(b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{histogram}: cumulative, in order: {b:?}");
        assert_eq!(b.last().unwrap().1, sample(&text, &format!("{histogram}_count")), "{histogram}: +Inf is the count");
    }
    assert_eq!(moved("worldd_store_batch_requests_sum"), moved("worldd_store_requests_total"), "{text}");
    // A batch's sync is part of its commit.
    let sync = moved("worldd_store_log_sync_duration_seconds_sum");
    assert!(sync <= moved("worldd_store_commit_duration_seconds_sum"), "{text}");
    // One observation per checkpoint (one may fall between the scrape's two readings).
    let checkpoints = sample(&text, "worldd_store_checkpoints_total");
    let timed = sample(&text, "worldd_store_checkpoint_duration_seconds_count");
    assert!(checkpoints >= 1.0 && (timed - checkpoints).abs() <= 1.0, "{checkpoints} {timed}\n{text}");
    let b = buckets(&text, "worldd_store_checkpoint_duration_seconds");
    assert_eq!(b.last().unwrap().1, timed, "{b:?}");
    // The writer worked on those batches and waited for their syncs.
    for state in ["working", "waiting_for_sync"] {
        let series = format!("worldd_store_writer_seconds_total{{state=\"{state}\"}}");
        assert!(moved(&series) > 0.0, "{series}\n{text}");
    }

    // A scraper that does not ask for OpenMetrics gets the classic text format.
    let classic = lab.get("/metrics");
    assert_eq!(classic.header("Content-Type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    let classic = classic.text();
    assert!(classic.contains("# TYPE worldd_calls_total counter"), "{classic}");
    assert!(!classic.contains("# EOF"), "{classic}");
    let series = "worldd_calls_total{surface=\"mcp\",tool=\"tools.echo\",outcome=\"committed\"}";
    assert_eq!(sample(&classic, series), 1.0, "{classic}");
}

#[test]
fn with_no_metrics_calls_are_served_and_metrics_are_not() {
    let lab = Lab::new(LabOptions { episodes: &["ep"], serve_args: &["--no-metrics"], ..Default::default() });
    let token = lab.mint("ep", &["world.apply=world:10"]);
    lab.mcp_call_ok(&token, "tools_decho", &json!({"message": "hi"}));
    assert_eq!(lab.get("/metrics").status, 404);
    assert_eq!(lab.get_json("/v1/store")["batches"].as_u64().map(|b| b >= 1), Some(true), "the store still counts");
}

#[test]
fn only_registered_tools_become_labels_and_unknown_ones_count_under_one() {
    let lab = Lab::new(LabOptions { episodes: &["ep"], ..Default::default() });
    let token = lab.mint("ep", &["world.apply=world:10"]);
    // More made-up skill ids than the label set holds, some long, some with control characters.
    for i in 0..70 {
        let skill = format!("made-up-{i}-\u{1}\n{}", "x".repeat(200));
        let refused = lab.send(&token, &format!("u{i}"), &skill, &json!({}));
        assert!(refused.get("error").is_some() || refused["result"]["status"]["state"] != "completed", "{refused}");
    }
    // A registered tool called afterwards is still counted under its own name.
    lab.send(&token, "e1", "tools.echo", &json!({"message": "hi"}));
    let text = scrape(&lab);
    let labelled: Vec<&str> = text.lines().filter(|l| l.starts_with("worldd_calls_total{")).collect();
    let unknown = labelled.iter().filter(|l| l.contains("tool=\"unknown\"")).map(|l| l.rsplit(' ').next().unwrap());
    assert_eq!(unknown.map(|n| n.parse::<f64>().unwrap()).sum::<f64>(), 70.0, "{labelled:#?}");
    assert!(labelled.iter().all(|l| !l.contains("made-up")), "{labelled:#?}");
    let echo = "worldd_calls_total{surface=\"a2a\",tool=\"tools.echo\",outcome=\"committed\"}";
    assert_eq!(sample(&text, echo), 1.0, "{labelled:#?}");
}
