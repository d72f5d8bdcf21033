//! The profile's definition, example by example (docs/projection.md).

use contact_projection::{project, Kind, PROFILE_ID};

fn p(text: &str) -> String {
    project(text).text
}

#[test]
fn profile_id_and_markers_are_fixed() {
    assert_eq!(PROFILE_ID, "oap.profile.projection.contact.v1");
    let markers: Vec<&str> = Kind::ALL.iter().map(|k| k.marker()).collect();
    assert_eq!(
        markers,
        [
            "[contact:email]",
            "[contact:phone]",
            "[contact:address]",
            "[contact:handle]"
        ]
    );
}

#[test]
fn each_kind_is_replaced_by_its_marker() {
    assert_eq!(
        p("mail jane.doe@example.com now"),
        "mail [contact:email] now"
    );
    assert_eq!(p("jane dot doe at example dot com"), "[contact:email]");
    assert_eq!(p("call +1 (650) 555-0110 ext 23."), "call [contact:phone].");
    assert_eq!(
        p("at 12 rue de la Paix, 75002 Paris."),
        "at [contact:address]."
    );
    assert_eq!(p("ping @maya_codes."), "ping [contact:handle].");
    assert_eq!(p("see github.com/octocat"), "see [contact:handle]");
}

#[test]
fn look_alikes_stay() {
    for text in [
        "Released 2.14.3 on 2024-03-18 at 10:30, 8.25% up, $12,450.00.",
        "Host 192.168.1.100, ISBN 978-0-262-03384-8, years 2019-2023.",
        "@Override and @dataclass(frozen=True), @media print, @types/node, @here.",
        "meet @ 5pm; root@bastion:~$ ls; git@github.com:acme/widgets.git",
        "I walked down Main Street; github.com/rust-lang/regex is a repository.",
        "Order #112-4839201-5567213 and ticket 4155550123.",
    ] {
        assert_eq!(p(text), text);
    }
}

#[test]
fn counts_only_never_values() {
    let out = project("a@b.io, c@d.io and +44 20 7946 0958");
    assert_eq!(out.removed, 3);
    assert_eq!((out.kinds.email, out.kinds.phone), (2, 1));
    assert!(!format!("{out:?}").contains("b.io"));
}
