//! Projection profiles (OAP RFC 0010 §3.5, RFC 0007): what is taken out of an item's content
//! before it leaves for a grantee. The one profile, `oap.profile.projection.contact.v1`, is the
//! contact-projection crate's (docs/projection.md).

pub use contact_projection::PROFILE_ID as CONTACT_V1;

/// Content after a profile: the text and how many details were taken out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projected {
    pub text: String,
    pub removed: usize,
}

/// Applies `profile` (one of [`crate::grant::SUPPORTED_PROFILES`], checked when the grant was
/// issued) to `text`.
pub fn apply(profile: &str, text: &str) -> Projected {
    debug_assert_eq!(profile, CONTACT_V1);
    let p = contact_projection::project(text);
    Projected {
        text: p.text,
        removed: p.removed,
    }
}
