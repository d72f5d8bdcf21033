//! Projection profiles (OAP RFC 0010 §3.5, RFC 0007): what is taken out of an item's content
//! before it leaves for a grantee. The profile itself is defined in docs/projection.md.

/// Contact details (emails, phone numbers, postal addresses, handles) removed.
pub const CONTACT_V1: &str = "oap.profile.projection.contact.v1";

/// Content after a profile: the text and how many details were taken out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projected {
    pub text: String,
    pub removed: usize,
}

/// Applies `profile` (one of [`crate::grant::SUPPORTED_PROFILES`]) to `text`.
pub fn apply(profile: &str, text: &str) -> Projected {
    debug_assert_eq!(profile, CONTACT_V1);
    // Interim: e-mail addresses only, until the contact-projection crate lands.
    let mut removed = 0;
    let words: Vec<String> = text
        .split(' ')
        .map(|w| {
            if w.contains('@') && w.contains('.') {
                removed += 1;
                "[contact:email]".to_owned()
            } else {
                w.to_owned()
            }
        })
        .collect();
    Projected {
        text: words.join(" "),
        removed,
    }
}
