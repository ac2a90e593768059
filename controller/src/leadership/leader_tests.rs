//! The election's pure logic: claims judged by observation time, whatever the holder's clock says; leadership as a
//! deadline on clocks that count through suspend; the write timeout's arithmetic; the settings' validation.

use super::*;

const ME: &str = "me";

fn in_millis(lease_ms: u64, renew_ms: Option<u64>) -> Result<LeaseConfig, String> {
    LeaseConfig::new(
        "ns".into(),
        "lease".into(),
        ME.into(),
        Duration::from_millis(lease_ms),
        renew_ms.map(Duration::from_millis),
    )
}

const MS: Duration = Duration::from_millis(1);

fn in_secs(lease: u64, renew: Option<u64>) -> Result<LeaseConfig, String> {
    in_millis(lease * 1000, renew.map(|r| r * 1000))
}

fn record(holder: &str, renew_time: &str, version: &str) -> Record {
    Record {
        holder: holder.into(),
        renew_time: Some(renew_time.into()),
        resource_version: Some(version.into()),
        lease_duration: Duration::from_secs(15),
    }
}

const S: Duration = Duration::from_secs(1);

#[test]
fn a_claim_expires_by_the_observers_clock_whatever_the_holders_renew_time_says() {
    // The holder's clock runs years behind ours (by its renewTime the claim looks long expired), or decades ahead (it
    // would stand for decades), or agrees: the claim stands for its lease duration from when this replica saw it.
    for renew_time in ["2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "now"] {
        let t0 = Instant::now();
        let mut observed = Observation::default();
        observed.see(record("other", renew_time, "7"), t0);
        assert_eq!(
            observed.claim_of_other(ME, t0),
            Some(15 * S),
            "{renew_time}"
        );
        // The same record read again later does not restart its age.
        observed.see(record("other", renew_time, "7"), t0 + 10 * S);
        assert_eq!(
            observed.claim_of_other(ME, t0 + 14 * S),
            Some(S),
            "{renew_time}"
        );
        assert_eq!(
            observed.claim_of_other(ME, t0 + 15 * S),
            None,
            "{renew_time}"
        );
    }
}

#[test]
fn a_renewal_restarts_the_claim_from_when_it_is_seen() {
    let t0 = Instant::now();
    let mut observed = Observation::default();
    observed.see(record("other", "10:00:00", "7"), t0);
    // A new renewTime or a new resourceVersion is a new record, seen at t0 + 12 s.
    observed.see(record("other", "10:00:05", "8"), t0 + 12 * S);
    assert_eq!(observed.claim_of_other(ME, t0 + 20 * S), Some(7 * S));
    observed.see(record("other", "10:00:05", "9"), t0 + 20 * S);
    assert_eq!(observed.claim_of_other(ME, t0 + 30 * S), Some(5 * S));
}

#[test]
fn no_standing_claim_when_nobody_or_this_replica_holds_it() {
    let t0 = Instant::now();
    let mut observed = Observation::default();
    assert_eq!(observed.claim_of_other(ME, t0), None);
    // Released: no holder, 1 s. A candidate acquires at once, without waiting that second.
    observed.see(
        Record {
            lease_duration: S,
            ..record("", "10:00:00", "9")
        },
        t0,
    );
    assert_eq!(observed.claim_of_other(ME, t0), None);
    observed.see(record(ME, "10:00:01", "10"), t0);
    assert_eq!(observed.claim_of_other(ME, t0), None);
}

#[test]
fn the_holders_promised_duration_counts_not_ours() {
    let t0 = Instant::now();
    let mut observed = Observation::default();
    let long = Record {
        lease_duration: 60 * S,
        ..record("other", "10:00:00", "7")
    };
    observed.see(long, t0);
    assert!(observed.claim_of_other(ME, t0 + 59 * S).is_some());
    assert_eq!(observed.claim_of_other(ME, t0 + 60 * S), None);
}

/// A reading `secs` after an origin, on both clocks.
fn at(secs: Duration) -> Reading {
    Reading::at(secs + 1000 * S, secs + 1_000_000 * S)
}

#[test]
fn leadership_is_a_deadline_from_the_start_of_the_last_successful_round() {
    let zero = Duration::ZERO;
    let mut term = Term::default();
    assert_eq!(term.check(at(zero), zero), Err(NotLeader::NotAcquired));
    term.renewed(at(zero), 10 * S);
    assert_eq!(term.check(at(9 * S), zero), Ok(()));
    // A process frozen past its deadline learns it at the first check after it wakes, with no round in between.
    assert_eq!(
        term.check(at(12 * S), zero),
        Err(NotLeader::DeadlinePassed(2 * S))
    );
    term.renewed(at(11 * S), 10 * S);
    assert_eq!(term.check(at(20 * S), zero), Ok(()));
    assert_eq!(
        term.check(at(21 * S), zero),
        Err(NotLeader::DeadlinePassed(Duration::ZERO))
    );
    term.lost();
    assert_eq!(term.check(at(12 * S), zero), Err(NotLeader::Superseded));
}

#[test]
fn a_write_starts_only_while_the_term_has_its_timeout_left() {
    let mut term = Term::default();
    term.renewed(at(Duration::ZERO), 10 * S);
    assert_eq!(term.check(at(6 * S), 4 * S), Ok(()));
    assert_eq!(
        term.check(at(7 * S), 4 * S),
        Err(NotLeader::TooLittleLeft {
            left: 3 * S,
            needed: 4 * S
        })
    );
    assert_eq!(
        NotLeader::TooLittleLeft {
            left: 3 * S,
            needed: 4 * S
        }
        .to_string(),
        "not the leader for long enough (the term ends in 3.0s, a write may take 4.0s)"
    );
}

#[test]
fn a_pause_of_the_monotonic_clock_does_not_extend_the_term() {
    let mut term = Term::default();
    term.renewed(Reading::at(100 * S, 1000 * S), 10 * S);
    // Paused for a minute one second after renewing: the monotonic clock would read 101 s, boot time and the wall
    // clock read 161 s and 1061 s.
    assert_eq!(
        term.check(Reading::at(161 * S, 1061 * S), Duration::ZERO),
        Err(NotLeader::DeadlinePassed(51 * S))
    );
}

#[test]
fn a_released_term_never_comes_back() {
    let mut term = Term::default();
    term.renewed(at(Duration::ZERO), 10 * S);
    term.release();
    assert_eq!(
        term.check(at(Duration::ZERO), Duration::ZERO),
        Err(NotLeader::Released)
    );
    // A renewal round that was under way when the release began does not revive it.
    term.renewed(at(S), 10 * S);
    assert_eq!(term.check(at(S), Duration::ZERO), Err(NotLeader::Released));
}

#[test]
fn every_write_ends_before_a_standby_may_take_over_and_fits_a_term_renewed_on_time() {
    assert_eq!(in_secs(15, None).unwrap().write_timeout(), 4 * S);
    assert_eq!(in_secs(6, None).unwrap().write_timeout(), 1600 * MS);
    assert_eq!(
        in_secs(60, Some(40)).unwrap().write_timeout(),
        MAX_WRITE_TIMEOUT
    );
    let mut checked = 0;
    for lease_ms in (1_000..=120_000).step_by(1_000) {
        for renew_ms in (100..lease_ms).step_by(250) {
            let Ok(config) = in_millis(lease_ms, Some(renew_ms)) else {
                continue;
            };
            checked += 1;
            let (lease, renew, write) = (
                config.lease_duration,
                config.renew_deadline,
                config.write_timeout(),
            );
            assert!(
                write >= MIN_WRITE_TIMEOUT && write <= MAX_WRITE_TIMEOUT,
                "{config:?}"
            );
            // Checked only by `ensure` at the deadline's last instant, a write still ends before a standby's turn.
            assert!(write < lease - renew, "{config:?}");
            // A term renewed on time (every retry period, a round taking up to another) leaves room for a write.
            assert!(write <= renew - 2 * config.retry_period(), "{config:?}");
            // A write allowed by `ensure_for` at any moment of the term ends within it.
            let mut term = Term::default();
            term.renewed(at(Duration::ZERO), renew);
            for started_ms in (0..renew_ms).step_by(100) {
                let started = Duration::from_millis(started_ms);
                if term.check(at(started), write).is_ok() {
                    assert!(started + write <= renew, "{config:?} at {started:?}");
                }
            }
        }
    }
    assert!(checked > 5_000, "{checked} configurations");
    assert!(
        in_millis(15_000, Some(14_500))
            .unwrap_err()
            .contains("leave writes")
    );
}

#[test]
fn the_error_says_how_long_ago_the_deadline_passed() {
    let error = NotLeader::DeadlinePassed(Duration::from_millis(8_250));
    assert_eq!(
        error.to_string(),
        "not the leader (deadline passed 8.2s ago)"
    );
}

#[test]
fn the_renew_deadline_defaults_below_the_lease_duration_and_must_stay_below() {
    let config = in_secs(15, None).unwrap();
    assert_eq!(config.renew_deadline, 10 * S);
    assert_eq!(config.retry_period(), S);
    assert!(config.round_timeout() < config.renew_deadline);
    let short = in_millis(6_000, None).unwrap();
    assert_eq!(short.renew_deadline, 4 * S);
    assert_eq!(short.retry_period(), S);
    assert!(
        in_secs(15, Some(15))
            .unwrap_err()
            .contains("must be shorter")
    );
    assert!(in_secs(15, Some(20)).is_err());
    assert!(in_millis(500, None).unwrap_err().contains("at least 1s"));
    assert!(
        in_secs(15, Some(1))
            .unwrap_err()
            .contains("twice the retry period")
    );
    assert_eq!(in_secs(2, None).unwrap().retry_period(), 2 * S / 6);
}

#[test]
fn the_written_lease_duration_rounds_up() {
    assert_eq!(in_secs(15, None).unwrap().lease_seconds(), 15);
    assert_eq!(in_millis(6_500, None).unwrap().lease_seconds(), 7);
}

#[test]
fn a_records_duration_is_the_holders_or_ours_when_it_has_none() {
    let config = in_secs(6, None).unwrap();
    let mut lease = Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some("other".into()),
            lease_duration_seconds: Some(30),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    };
    assert_eq!(Record::of(&lease, &config).lease_duration, 30 * S);
    lease.spec.as_mut().unwrap().lease_duration_seconds = None;
    assert_eq!(Record::of(&lease, &config).lease_duration, 6 * S);
    assert_eq!(Record::of(&Lease::default(), &config).holder, "");
}

#[test]
fn a_term_won_again_is_a_new_term_and_a_renewal_is_not() {
    let renew = 10 * S;
    let mut tenure = Tenure::default();
    assert_eq!(tenure.current(at(Duration::ZERO)), None);
    tenure.renewed(at(Duration::ZERO), renew);
    assert_eq!(tenure.current(at(1 * S)), Some(1));
    tenure.renewed(at(5 * S), renew);
    assert_eq!(
        tenure.current(at(12 * S)),
        Some(1),
        "renewed within the term"
    );
    tenure.term.lost();
    assert_eq!(tenure.current(at(13 * S)), None);
    tenure.renewed(at(40 * S), renew);
    assert_eq!(
        tenure.current(at(41 * S)),
        Some(2),
        "won again after another holder"
    );
    // The deadline (50 s) passed before the next round: another replica may have led in between.
    tenure.renewed(at(70 * S), renew);
    assert_eq!(tenure.current(at(71 * S)), Some(3));
    tenure.term.release();
    tenure.renewed(at(72 * S), renew);
    assert_eq!(tenure.current(at(73 * S)), None, "released for good");
}
