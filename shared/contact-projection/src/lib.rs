//! The projection profile `oap.profile.projection.contact.v1`: contact details removed from a
//! memory item's text before it leaves the host for another agent.
//!
//! OAP RFC 0010 (Memory Exchange) §3.5 says a Tool "MUST apply the Projection Profile named in
//! the Grant before returning content", and §3.4/§3.7 name this profile as the grant's
//! `redaction_profile` and the manifest's `supported_redaction_profiles`. The RFC names the
//! profile but does not define it; this crate is its definition, kept pure (no I/O, no clock,
//! no logging) so the same text always projects to the same output on every door.
//!
//! # The profile
//!
//! A *contact detail* is a value that lets the reader reach a person or place directly. Four
//! kinds, each replaced by a fixed marker (the whole detected span becomes the marker; nothing
//! of the value is kept, not even its length):
//!
//! | kind | marker | what counts |
//! |---|---|---|
//! | email | `[contact:email]` | `local@domain.tld` (also `＠`, `mailto:` targets); obfuscated forms with a bracketed at (`[at]`, `(at)`, `{at}`, `<at>`) or a spelled at (`at`, `arroba`, `arobase`, `chiocciola`, `apenstaartje`) followed by a spelled or bracketed dot (`dot`, `punto`, `point`, `punkt`, `punt`) and a known top-level domain |
//! | phone | `[contact:phone]` | a digit run with phone separators (space, no-break space, `.`, `-`, `/`, parentheses) of 7 to 15 digits that is international (`+`, `00`, `tel:`), follows a phone word in one of the supported languages (`call`, `Tel.`, `Handy`, `portable`, `móvil`, `cellulare`, `mobiel`, `denwa`, ...), or has a national shape (trunk `0`, NANP `(415) 555-0132` / `415.555.0143` / `1-800-...`); an extension (`ext. 214`, `x4521`) goes with it |
//! | address | `[contact:address]` | a street line with a house number (number-first: US/UK/FR/JP chome-ban-go; number-after: DE/NL compound streets, ES/IT/PT type-first streets) with what follows it on the line (unit, town with postcode, US state and ZIP); PO boxes (`P.O. Box`, `Postfach`, `Postbus`, `BP`, `Apartado de Correos`, `Casella Postale`); a postcode after a postcode word (`ZIP`, `PLZ`, `code postal`, ...); a UK postcode anywhere |
//! | handle | `[contact:handle]` | `@user` mentions, fediverse `@user@host.tld`, Matrix `@user:host.tld`, profile URLs (LinkedIn `/in/`, X/Twitter, GitHub/GitLab user pages, Instagram, Facebook, TikTok/YouTube `@`, t.me, wa.me, Bluesky, Xing, Reddit `u/`), and the id after a messenger word (`Skype: ...`, `WeChat ID: ...`, `Discord: name#1234`, `my skype is ...`) |
//!
//! Deliberately kept (look-alikes, documented so a peer knows what the profile promises):
//! dates, times, versions, IP and MAC addresses, money, percentages, counts with thousands
//! separators, order/invoice/tracking/ticket/case/account/ISBN/SKU numbers (a number after such a
//! word is never a phone), year ranges, measurements, coordinates, math, hashes and UUIDs;
//! code: decorators and annotations (`@Override`, `@dataclass`, `@app.route(...)`), CSS
//! at-rules, `@` inside inline code spans, npm scopes (`@types/node`), Slack broadcasts
//! (`@here`, `@channel`, `@everyone`), `@ 5pm`; `user@host` without a dotted domain (a shell
//! prompt or ssh target names a login on a machine, not a way to reach a person) and
//! `user@host.tld:path` (an scp/git remote); repository URLs (`github.com/org/repo`); streets
//! named without a house number ("I walked down Main Street"); towns and countries on their
//! own. The profile removes; it never rewrites or normalises the rest of the text.
//!
//! Overlapping detections merge into one span, marked by the kind of the longest one.
//!
//! # Cost
//!
//! [`project`] allocates the output string and one vector of spans; the patterns are compiled
//! once per process. Only ASCII classes are used in the patterns: the workspace builds `regex`
//! without its Unicode tables.
//!
//! ```
//! use contact_projection::{project, Kind};
//!
//! let p = project("Call Ana on +34 612 34 56 78 or mail ana@example.es.");
//! assert_eq!(p.text, "Call Ana on [contact:phone] or mail [contact:email].");
//! assert_eq!(p.removed, 2);
//! assert_eq!(p.kinds.get(Kind::Phone), 1);
//! ```

mod detect;

/// The profile this crate implements, as named in a Memory Grant's `redaction_profile`.
pub const PROFILE_ID: &str = "oap.profile.projection.contact.v1";

/// The kind of a contact detail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Email,
    Phone,
    Address,
    Handle,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Email, Kind::Phone, Kind::Address, Kind::Handle];

    /// The fixed marker that replaces a detail of this kind.
    pub const fn marker(self) -> &'static str {
        match self {
            Kind::Email => "[contact:email]",
            Kind::Phone => "[contact:phone]",
            Kind::Address => "[contact:address]",
            Kind::Handle => "[contact:handle]",
        }
    }

    /// The kind's name as in the marker.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Phone => "phone",
            Kind::Address => "address",
            Kind::Handle => "handle",
        }
    }
}

/// How many details of each kind a projection removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCounts {
    pub email: usize,
    pub phone: usize,
    pub address: usize,
    pub handle: usize,
}

impl KindCounts {
    pub fn get(&self, kind: Kind) -> usize {
        match kind {
            Kind::Email => self.email,
            Kind::Phone => self.phone,
            Kind::Address => self.address,
            Kind::Handle => self.handle,
        }
    }

    fn bump(&mut self, kind: Kind) {
        let slot = match kind {
            Kind::Email => &mut self.email,
            Kind::Phone => &mut self.phone,
            Kind::Address => &mut self.address,
            Kind::Handle => &mut self.handle,
        };
        *slot += 1;
    }
}

/// A projected text: the text with every contact detail replaced by its kind's marker, and
/// counts only (never the removed values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projection {
    pub text: String,
    pub removed: usize,
    pub kinds: KindCounts,
}

/// One detected contact detail: a byte range of the input (on char boundaries) and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detection {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// The contact details of `text`, sorted, non-overlapping.
pub fn detect(text: &str) -> Vec<Detection> {
    detect::spans(text)
}

/// Applies `oap.profile.projection.contact.v1` to `text`.
pub fn project(text: &str) -> Projection {
    let spans = detect::spans(text);
    let mut out = String::with_capacity(text.len());
    let mut kinds = KindCounts::default();
    let mut at = 0;
    for d in &spans {
        out.push_str(text.get(at..d.start).unwrap_or_default());
        out.push_str(d.kind.marker());
        kinds.bump(d.kind);
        at = d.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    Projection {
        text: out,
        removed: spans.len(),
        kinds,
    }
}
