//! Every screen, fed text that a node's or pod's author could have written (escape sequences that
//! clear the screen or recolour it, a bell, a bidirectional override, newlines, 200 KiB of it): the
//! output never carries a control character of theirs, and no cell runs on for kilobytes.

use chrono::{DateTime, Utc};
use serde_json::json;

use k8sm_api::{ExecutorUpgradePolicy, NodePhase};
use k8sm_planner::testing::at;
use k8sm_planner::{Decision, PodClass, Reason};

use crate::render::{NARROW_TEXT, Palette};
use crate::screens::blocked::{BlockedPodRow, BlockedScreen};
use crate::screens::plan::{PlanScreen, PlannedBlocker, PlannedNode, PlannedPod};
use crate::screens::status::StatusScreen;

/// 200 KiB that would clear a terminal, ring its bell, reverse its text and start new lines.
fn hostile(tag: &str) -> String {
    let mut text = format!("{tag}\x1b[2J\x1b[31m\x07\u{202e}\r\n\x1b]0;owned\x07");
    while text.len() < 200 * 1024 {
        text.push_str("\x1b[1;1H\u{9b}x");
    }
    text
}

/// Fails on any control or invisible character in `text` other than line breaks and, with `palette`
/// in colour, the colour codes the plugin writes itself (`ESC [ digits m`).
fn assert_terminal_safe(text: &str, palette: Palette) {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\x1b' && palette == Palette::COLOR {
            let rest = &text[i + 1..];
            let sgr = rest.strip_prefix('[').and_then(|r| {
                let digits = r.find(|d: char| !d.is_ascii_digit())?;
                (r[digits..].starts_with('m')).then_some(digits + 2)
            });
            let Some(len) = sgr else {
                panic!(
                    "a raw escape at byte {i}: {:?}",
                    &text[i..(i + 20).min(text.len())]
                );
            };
            for _ in 0..len {
                chars.next();
            }
            continue;
        }
        assert!(
            c == '\n' || !k8sm_api::text::is_unsafe(c),
            "raw {c:?} at byte {i}: {:?}",
            &text[i.saturating_sub(20)..(i + 20).min(text.len())]
        );
    }
}

/// Lines of a narrow table hold a few cells of at most `NARROW_TEXT` bytes; wide ones at most a few
/// kilobytes.
fn assert_lines_bounded(text: &str, wide: bool) {
    let max = if wide { 8 * 1024 } else { 8 * NARROW_TEXT };
    for line in text.lines() {
        assert!(line.len() <= max, "{} bytes: {line:.200}", line.len());
    }
}

fn check_all(render: impl Fn(bool, Palette) -> String) {
    for wide in [false, true] {
        for palette in [Palette::PLAIN, Palette::COLOR] {
            let text = render(wide, palette);
            assert_terminal_safe(&text, palette);
            assert_lines_bounded(&text, wide);
            assert!(
                text.contains("\\u{1b}"),
                "shown escaped, not dropped:\n{text:.500}"
            );
        }
    }
}

fn now() -> DateTime<Utc> {
    at(60)
}

#[test]
fn status() {
    let policy: ExecutorUpgradePolicy = serde_json::from_value(json!({
        "apiVersion": "k8s.mesosphere.io/v1alpha1",
        "kind": "ExecutorUpgradePolicy",
        "metadata": {"name": "fleet", "generation": 1},
        "spec": {"targetExecutorId": "sha256:new"},
        "status": {
            "observedGeneration": 1,
            "counts": {"total": 3, "draining": 1, "blocked": 1, "incompatible": 1},
            "nodes": [
                {"name": hostile("node"), "phase": "Draining", "podsLeft": 1, "executorId": hostile("id"),
                 "blockers": [hostile("blocker-1"), hostile("blocker-2")], "omittedBlockers": 3},
                {"name": "node-2", "phase": "Blocked", "podsLeft": 1, "blockers": [hostile("stalled")]}
            ],
            "blockedPods": [{"node": "node-2", "namespace": "shop", "name": "web-1", "owner": hostile("owner"),
                             "reason": "WaitingForOwner", "message": hostile("message")}],
            "blockedPodsTotal": 1,
            "conditions": [{"type": "Degraded", "status": "True", "reason": "MalformedAnnotation",
                            "message": hostile("problem"), "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        }
    }))
    .unwrap();
    let view = StatusScreen::from_policy(&policy);
    check_all(|wide, palette| view.render(wide, now(), palette));
    let narrow = view.render(false, now(), Palette::PLAIN);
    assert!(
        narrow.contains("(+4 more)"),
        "2 distinct blockers and 3 the status left out: {narrow}"
    );
    let wide = view.render(true, now(), Palette::PLAIN);
    assert!(
        wide.lines().any(|l| l.trim().starts_with("(+3 more)")),
        "every blocker listed, then those left out: {wide}"
    );
    assert!(wide.contains("(truncated, 204800 bytes)"), "{wide}");
}

#[test]
fn blocked() {
    let row = BlockedPodRow {
        policy: "fleet".into(),
        node: hostile("node"),
        namespace: hostile("ns"),
        name: hostile("pod"),
        uid: hostile("uid"),
        owner: Some(hostile("owner")),
        class: PodClass::Owned,
        reason: Reason::WaitingForOwner,
        needs_operator: false,
        message: hostile("message"),
        since: Some(at(0)),
        until: None,
    };
    let view = BlockedScreen {
        namespace: None,
        pods: vec![row],
    };
    check_all(|wide, palette| view.render(wide, now(), palette));
}

#[test]
fn plan() {
    let pod = |decision| PlannedPod {
        namespace: hostile("ns"),
        name: hostile("pod"),
        uid: "uid".into(),
        owner: Some(hostile("owner")),
        class: PodClass::OtherController,
        decision,
        reason: Some(Reason::WaitingForOwner),
        summary: hostile("summary"),
    };
    let view = PlanScreen {
        policy: "fleet".into(),
        at: now(),
        target_executor_id: Some("sha256:new".into()),
        simulated_target: false,
        paused: false,
        slots: 1,
        slots_in_use: 1,
        nodes: vec![PlannedNode {
            order: Some(1),
            name: hostile("node"),
            phase: NodePhase::Draining,
            pods_left: 2,
            queue_position: None,
            operator_pods: 0,
            next: hostile("next"),
            blockers: vec![PlannedBlocker {
                reason: Reason::MalformedAnnotation,
                message: hostile("blocker"),
            }],
            pods: vec![pod(Decision::Wait), pod(Decision::Ignore)],
        }],
        actions: Vec::new(),
        outside_window: Some(hostile("window")),
        problems: vec![hostile("problem")],
    };
    check_all(|wide, palette| view.render(wide, palette));
}
