//! Committed-prefix checker: Bayou's committed order is final (Terry et al., SOSP 1995
//! §4.3). Conflicting positions and duplicates next to lagging-but-consistent replicas.

use crate::eventual_support;

use eventual_support::{evidence_indices, expect, mentions, H};
use serde_json::json;
use splitbrain_checkers::eventual::CommittedPrefixChecker;
use splitbrain_checkers::Validity;

fn base() -> H {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add(1, "k", 2, "n2");
    h.add(2, "k", 3, "n3");
    h.read_ct(3, "k", &[1, 2], &[3], "n1");
    h
}

#[test]
fn lagging_replicas_with_shorter_prefixes_are_valid() {
    let mut h = base();
    h.read_ct(4, "k", &[1], &[3, 2], "n2");
    h.read_ct(4, "k", &[], &[2, 1, 3], "n3");
    h.read_ct(4, "k", &[1, 2, 3], &[], "n3");
    let r = h.check(&CommittedPrefixChecker);
    expect(&r, Validity::Valid);
    assert_eq!(r.details["reads_with_committed"], 4);
}

#[test]
fn a_different_element_at_a_committed_position_is_caught() {
    let mut h = base();
    h.read_ct(4, "k", &[2, 1], &[3], "n2");
    let r = h.check(&CommittedPrefixChecker);
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["committed-prefix-changed"]);
    mentions(
        &r,
        &["committed position 0 held 1 in read op 7 (n1) but 2 in read op 9 (n2)"],
    );
    assert_eq!(evidence_indices(&r), [7, 9]);
    assert_eq!(r.details["cases"][0]["position"], 0);
}

#[test]
fn an_element_twice_in_one_committed_list_is_caught() {
    let mut h = base();
    h.read_ct(4, "k", &[1, 2, 1], &[], "n2");
    let r = h.check(&CommittedPrefixChecker);
    expect(&r, Validity::Invalid);
    assert!(r.anomaly_types.contains(&"committed-duplicate".to_string()));
    mentions(
        &r,
        &["read op 9 (n2) holds 1 twice in its committed list, at positions 0 and 2"],
    );
}

#[test]
fn booking_reads_are_judged_by_their_committed_ids() {
    let mut h = H::new();
    h.book(0, "s", 7, json!([[1, 1]]), "n1");
    h.book(1, "s", 8, json!([[1, 1]]), "n2");
    h.read(
        2,
        "s",
        json!({"committed": [7, 8], "tentative": [], "schedule": [[7, 1, 1], [8, null, null]]}),
        "n1",
    );
    h.read(
        2,
        "s",
        json!({"committed": [7], "tentative": [8], "schedule": [[7, 1, 1], [8, null, null]]}),
        "n2",
    );
    expect(&h.check(&CommittedPrefixChecker), Validity::Valid);
    h.read(
        2,
        "s",
        json!({"committed": [8, 7], "tentative": [], "schedule": [[8, 1, 1], [7, null, null]]}),
        "n3",
    );
    expect(&h.check(&CommittedPrefixChecker), Validity::Invalid);
}

#[test]
fn plain_lists_carry_no_commit_order_so_nothing_is_judged() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.read(1, "k", json!([1]), "n1");
    let r = h.check(&CommittedPrefixChecker);
    expect(&r, Validity::Unknown);
    mentions(&r, &["no ok read carries a committed list"]);
}
