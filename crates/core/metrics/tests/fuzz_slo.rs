//! Fuzzing SLO expressions on stable (proptest; `scripts/fuzz.sh` runs it with a large case
//! count): arbitrary strings and mutated real expressions (`fuzz/corpus/slo/`) parse or fail with
//! a typed error, never a panic, and whatever parses round-trips through its display form.

use goodput_metrics::Slo;
use proptest::prelude::*;

include!("../../../../fuzz/mutate.rs");

fn check(s: &str) -> Result<(), TestCaseError> {
    match Slo::parse(s) {
        Ok(slo) => {
            let shown = slo.describe();
            let again = Slo::parse(&shown).map_err(|e| TestCaseError::fail(format!("{s:?} → {shown:?}: {e}")))?;
            prop_assert_eq!(again, slo, "{:?} → {:?}", s, shown);
        }
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    Ok(())
}

#[test]
fn corpus_replays() {
    for (name, bytes) in corpus("slo") {
        let s = String::from_utf8(bytes).unwrap();
        assert!(Slo::parse(&s).is_ok(), "slo/{name}: {s}");
        check(&s).unwrap();
    }
}

/// A bare number of milliseconds went through seconds and came back one ulp off, so the SLO
/// did not round-trip through its display form (found by `expression_shaped`).
#[test]
fn regression_milliseconds_round_trip_exactly() {
    let slo = Slo::parse("ttft<=5545282.239777439").unwrap();
    assert_eq!(slo.describe(), "ttft<=5545282.239777439ms");
    assert_eq!(Slo::parse(&slo.describe()).unwrap(), slo);
    check("p99(tpot)<=0.1ms").unwrap();
}

/// Other edge cases of the grammar, kept as regressions.
#[test]
fn regressions() {
    for s in ["p29(ttft)<=1s", "p99.99(e2e)<=0.1ms", "ttft<=1e-9s", "ttft<1e308s", "p(ttft)<=1s", "ttft<=", ","] {
        check(s).unwrap();
    }
}

proptest! {
    #[test]
    fn arbitrary_strings(s in "[ -~]{0,40}") {
        check(&s)?;
    }

    #[test]
    fn expression_shaped(p in proptest::option::of(0.0f64..100.0),
                         metric in "ttft|ttft_sched|tpot|itl_max|e2e|e2e_sched|x",
                         op in "<=|<|=",
                         limit in 0.0f64..1e7,
                         unit in "ms|s||us|m") {
        let lhs = match p { Some(p) => format!("p{p}({metric})"), None => metric };
        check(&format!("{lhs}{op}{limit}{unit}"))?;
    }

    #[test]
    fn mutated_expressions(bytes in mutated("slo", 6)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }
}
