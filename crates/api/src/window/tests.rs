use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;

use super::*;

fn window(days: &[Weekday], start: &str, end: &str, zone: &str) -> MaintenanceWindow {
    MaintenanceWindow {
        days: days.to_vec(),
        start: start.into(),
        end: end.into(),
        time_zone: zone.into(),
        in_flight: InFlight::default(),
    }
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("an RFC 3339 time")
        .with_timezone(&Utc)
}

fn open_until(text: &str) -> WindowState {
    WindowState::Open { closes: utc(text) }
}

fn closed_until(text: &str) -> WindowState {
    WindowState::Closed { opens: utc(text) }
}

// 2026-11-30 is a Monday.

#[test]
fn a_window_across_midnight_belongs_to_the_day_it_opens_on() {
    let w = window(&[Weekday::Monday], "22:00", "04:00", "UTC");
    let at = |t: &str| w.state(utc(t)).unwrap();
    assert_eq!(
        at("2026-11-30T21:59:00Z"),
        closed_until("2026-11-30T22:00:00Z")
    );
    assert_eq!(
        at("2026-11-30T22:00:00Z"),
        open_until("2026-12-01T04:00:00Z")
    );
    // Tuesday is not listed, but Monday's opening runs into it.
    assert_eq!(
        at("2026-12-01T03:59:59Z"),
        open_until("2026-12-01T04:00:00Z")
    );
    // Closed at its end, until Monday next week.
    assert_eq!(
        at("2026-12-01T04:00:00Z"),
        closed_until("2026-12-07T22:00:00Z")
    );
}

#[test]
fn a_window_opening_on_sunday_runs_into_the_next_week() {
    let w = window(&[Weekday::Sunday], "23:00", "01:00", "UTC");
    let at = |t: &str| w.state(utc(t)).unwrap();
    // Saturday 2026-12-05.
    assert_eq!(
        at("2026-12-05T12:00:00Z"),
        closed_until("2026-12-06T23:00:00Z")
    );
    assert_eq!(
        at("2026-12-06T23:30:00Z"),
        open_until("2026-12-07T01:00:00Z")
    );
    assert_eq!(
        at("2026-12-07T00:30:00Z"),
        open_until("2026-12-07T01:00:00Z")
    );
}

#[test]
fn openings_without_a_gap_are_one() {
    // 24 hours from Saturday 00:00 and from Sunday 00:00: open from Saturday to Monday.
    let w = window(
        &[Weekday::Sunday, Weekday::Saturday],
        "00:00",
        "00:00",
        "UTC",
    );
    assert_eq!(
        w.state(utc("2026-12-05T12:00:00Z")).unwrap(),
        open_until("2026-12-07T00:00:00Z")
    );
}

#[test]
fn local_hours_hold_across_daylight_saving_time() {
    let w = window(
        &[Weekday::Monday, Weekday::Tuesday],
        "22:00",
        "23:00",
        "Europe/Berlin",
    );
    // Winter (CET, UTC+1) and summer (CEST, UTC+2).
    assert_eq!(
        w.state(utc("2026-11-30T12:00:00Z")).unwrap(),
        closed_until("2026-11-30T21:00:00Z")
    );
    assert_eq!(
        w.state(utc("2026-06-01T12:00:00Z")).unwrap(),
        closed_until("2026-06-01T20:00:00Z")
    );
}

#[test]
fn a_start_skipped_by_the_clocks_going_forward_opens_at_the_first_minute_after() {
    // Europe/Berlin, Sunday 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
    let w = window(&[Weekday::Sunday], "02:30", "05:00", "Europe/Berlin");
    assert_eq!(
        w.state(utc("2026-03-28T12:00:00Z")).unwrap(),
        closed_until("2026-03-29T01:00:00Z") // 03:00 CEST
    );
    assert_eq!(
        w.state(utc("2026-03-29T01:00:00Z")).unwrap(),
        open_until("2026-03-29T03:00:00Z") // 05:00 CEST
    );
}

#[test]
fn a_time_that_happens_twice_counts_at_its_first_occurrence() {
    // Europe/Berlin, Sunday 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    let w = window(&[Weekday::Sunday], "02:30", "03:30", "Europe/Berlin");
    assert_eq!(
        w.state(utc("2026-10-24T12:00:00Z")).unwrap(),
        closed_until("2026-10-25T00:30:00Z") // the first 02:30, CEST
    );
    // Two hours of real time: from 02:30 CEST to 03:30 CET.
    assert_eq!(
        w.state(utc("2026-10-25T00:30:00Z")).unwrap(),
        open_until("2026-10-25T02:30:00Z")
    );
}

#[test]
fn what_cannot_be_evaluated_names_the_field_to_fix() {
    let now = utc("2026-11-30T12:00:00Z");
    let zone = window(&[Weekday::Monday], "22:00", "04:00", "Europe/Berln");
    assert_eq!(
        zone.state(now).unwrap_err().to_string(),
        "spec.window.timeZone: \"Europe/Berln\" is not an IANA time zone; use a name such as \"Europe/Berlin\" or \
         \"UTC\""
    );
    for (start, end, field) in [("24:00", "04:00", "start"), ("22:00", "4:00", "end")] {
        let clock = window(&[Weekday::Monday], start, end, "UTC");
        let message = clock.state(now).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("spec.window.{field}: ")),
            "{message}"
        );
    }
    assert_eq!(
        window(&[], "22:00", "04:00", "UTC").state(now).unwrap_err(),
        InvalidWindow::NoDays
    );
}

#[test]
fn it_reads_as_an_operator_writes_it() {
    let w = window(
        &[Weekday::Tuesday, Weekday::Monday, Weekday::Monday],
        "22:00",
        "04:00",
        "Europe/Berlin",
    );
    assert_eq!(w.to_string(), "Mon,Tue 22:00-04:00 Europe/Berlin");
}

const DAYS: [Weekday; 7] = [
    Weekday::Monday,
    Weekday::Tuesday,
    Weekday::Wednesday,
    Weekday::Thursday,
    Weekday::Friday,
    Weekday::Saturday,
    Weekday::Sunday,
];

/// The oracle, in UTC (no daylight-saving time), minute by minute: open when some listed day's opening covers the
/// minute, counted from that day's start; an opening lasts from start to end, 24 hours when they are equal.
fn open_at(days: &[Weekday], start: u32, end: u32, minute_of_week: i64) -> bool {
    let length = match (end + 1440 - start) % 1440 {
        0 => 1440,
        n => n,
    };
    days.iter().any(|day| {
        let index = DAYS.iter().position(|d| d == day).expect("a day") as i64;
        let opens = index * 1440 + i64::from(start);
        // This week's opening, or last week's running into this one.
        [opens, opens - 7 * 1440]
            .iter()
            .any(|&o| (o..o + i64::from(length)).contains(&minute_of_week))
    })
}

proptest! {
    /// Against the minute-by-minute oracle: an open window is open from now until it closes and closed then; a
    /// closed one is closed from now until it opens and open then.
    #[test]
    fn the_state_agrees_with_the_minute_by_minute_oracle(
        day_mask in 1u8..128,
        start in 0u32..1440,
        end in 0u32..1440,
        anywhere in 0i64..(14 * 1440),
        near in 0u8..3,
        day in 0i64..13,
        delta in -1i64..=1,
    ) {
        // A third of the cases at any minute; the others within a minute of some day's start or end, where the
        // state changes.
        let now = match near {
            0 => anywhere,
            1 => day * 1440 + i64::from(start) + delta,
            _ => day * 1440 + i64::from(end) + delta,
        }
        .max(0);
        let days: Vec<Weekday> = DAYS
            .iter()
            .enumerate()
            .filter(|(i, _)| day_mask & (1 << i) != 0)
            .map(|(_, d)| *d)
            .collect();
        let hhmm = |m: u32| format!("{:02}:{:02}", m / 60, m % 60);
        let w = window(&days, &hhmm(start), &hhmm(end), "UTC");
        let monday = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).single().expect("a date");
        let minute = |m: i64| monday + Duration::minutes(m);
        let oracle = |m: i64| open_at(&days, start, end, m.rem_euclid(7 * 1440));
        let (expected_now, until) = match w.state(minute(now)).expect("valid") {
            WindowState::Open { closes } => (true, closes),
            WindowState::Closed { opens } => (false, opens),
        };
        let until = (until - monday).num_minutes();
        prop_assert!(until > now);
        prop_assert!(until - now <= 8 * 1440 || expected_now, "opens within a week");
        // Every day listed: a window is never open for good.
        for m in now..until.min(now + 8 * 1440) {
            prop_assert_eq!(oracle(m), expected_now, "minute {}", m);
        }
        if until - now <= 8 * 1440 {
            prop_assert_eq!(oracle(until), !expected_now, "changes at minute {}", until);
        }
    }
}
