//! The detectors of the profile (see the crate doc for what each kind covers and keeps).
//!
//! Each detector proposes candidate spans from a pattern, then checks the surroundings the
//! pattern cannot express (the character before and after, a keyword window before). Patterns
//! use ASCII classes only and `(?i-u:...)` for case-insensitive words: `regex` is built without
//! its Unicode tables in this workspace.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;

use crate::{Detection, Kind};

struct Rules {
    email: Regex,
    obfuscated_email: Regex,
    fediverse: Regex,
    profile_url: Regex,
    reddit: Regex,
    mention: Regex,
    messenger: Regex,
    phone: Regex,
    extension: Regex,
    street_number_first_en: Regex,
    street_number_first_fr: Regex,
    street_type_first: Regex,
    street_compound: Regex,
    street_de_two_words: Regex,
    street_jp: Regex,
    po_box: Regex,
    postcode_in_context: Regex,
    uk_postcode: Regex,
    address_tail: Regex,
    phone_words: AhoCorasick,
    /// Per pattern of `phone_words`: `true` for a phone word, `false` for an id word.
    phone_word_positive: Vec<bool>,
    address_veto: AhoCorasick,
}

/// Words before a digit run that make it a phone number.
const PHONE_WORDS: &[&str] = &[
    "tel",
    "tél",
    "phone",
    "call",
    "ring",
    "dial",
    "mobile",
    "mobil",
    "cell",
    "fax",
    "text me",
    "sms",
    "whatsapp",
    "signal",
    "hotline",
    "number",
    "nummer",
    "numero",
    "número",
    "no.",
    "telefon",
    "téléphone",
    "telefono",
    "teléfono",
    "portable",
    "móvil",
    "movil",
    "llamar",
    "llama",
    "llámame",
    "cellulare",
    "chiamare",
    "chiama",
    "bel ",
    "bellen",
    "mobiel",
    "denwa",
    "keitai",
    "celular",
    "ligar",
    "handy",
    "fixe",
    "standard",
    "landline",
    "reception",
    "office line",
    "toll free",
    "toll-free",
    "helpline",
    "contact",
    "reach",
    "durchwahl",
    "zentrale",
    "appelle",
    "appeler",
    "composer",
    "le numéro",
    "ruf",
    "erreichbar",
    "unter",
    "op ",
    "au ",
    "al ",
    "on ",
];

/// Words before a digit run that make it an identifier, never a phone number.
const ID_WORDS: &[&str] = &[
    "order",
    "invoice",
    "ticket",
    "case",
    "tracking",
    "isbn",
    "account",
    "acct",
    "ref",
    "reference",
    "serial",
    "sku",
    "part",
    "po ",
    "flight",
    "booking",
    "confirmation",
    "iban",
    "id ",
    "pin",
    "code",
    "build",
    "version",
    "room",
    "page",
    "error",
    "bestellung",
    "rechnung",
    "commande",
    "facture",
    "pedido",
    "factura",
    "ordine",
    "fattura",
    "bestelling",
    "factuur",
    "tracking number",
    "order number",
    "serial number",
    "account number",
    "case number",
    "invoice number",
    "reference number",
    "ticket number",
    "customer number",
    "kundennummer",
    "population",
    "epoch",
    "timestamp",
    "item",
    "step",
    "chapter",
    "section",
    "issue",
    "pr ",
    "commit",
    "port",
    "pid",
    "uid",
    "gid",
    "bus",
    "route",
    "isbn-10",
    "isbn-13",
];

/// Words right before a number-first street that make it something else.
const ADDRESS_VETO: &[&str] = &[
    "chapter",
    "page",
    "pages",
    "section",
    "step",
    "steps",
    "no.",
    "vol.",
    "volume",
    "part",
    "episode",
    "season",
    "kapitel",
    "seite",
    "chapitre",
    "capítulo",
    "capitolo",
    "hoofdstuk",
];

/// `@word`s that are code or broadcast mentions, not handles (compared ASCII-case-insensitively).
const AT_KEEP: &[&str] = &[
    "override",
    "deprecated",
    "suppresswarnings",
    "functionalinterface",
    "safevarargs",
    "test",
    "before",
    "after",
    "beforeeach",
    "aftereach",
    "beforeall",
    "afterall",
    "beforeclass",
    "afterclass",
    "autowired",
    "component",
    "service",
    "repository",
    "controller",
    "restcontroller",
    "entity",
    "table",
    "column",
    "id",
    "inject",
    "nullable",
    "nonnull",
    "transactional",
    "bean",
    "configuration",
    "value",
    "data",
    "getter",
    "setter",
    "builder",
    "slf4j",
    "getmapping",
    "postmapping",
    "putmapping",
    "deletemapping",
    "requestmapping",
    "pathvariable",
    "requestbody",
    "requestparam",
    "jsonproperty",
    "valid",
    "notnull",
    "mock",
    "injectmocks",
    "spy",
    "parameterizedtest",
    "input",
    "output",
    "injectable",
    "ngmodule",
    "hostlistener",
    "viewchild",
    "published",
    "state",
    "binding",
    "observedobject",
    "environmentobject",
    "mainactor",
    "objc",
    "available",
    "escaping",
    "discardableresult",
    "dataclass",
    "property",
    "staticmethod",
    "classmethod",
    "abstractmethod",
    "cached_property",
    "lru_cache",
    "cache",
    "wraps",
    "contextmanager",
    "override",
    "overload",
    "final",
    "total_ordering",
    "singledispatch",
    "pytest",
    "app",
    "router",
    "api",
    "bp",
    "blueprint",
    "celery",
    "task",
    "shared_task",
    "login_required",
    "csrf_exempt",
    "receiver",
    "admin",
    "patch",
    "fixture",
    "media",
    "import",
    "keyframes",
    "font-face",
    "supports",
    "charset",
    "page",
    "layer",
    "container",
    "namespace",
    "tailwind",
    "apply",
    "screen",
    "mixin",
    "include",
    "extend",
    "use",
    "forward",
    "function",
    "return",
    "if",
    "else",
    "each",
    "for",
    "while",
    "debug",
    "warn",
    "error",
    "content",
    "param",
    "returns",
    "throws",
    "throw",
    "see",
    "since",
    "author",
    "version",
    "todo",
    "link",
    "inheritdoc",
    "code",
    "type",
    "typedef",
    "example",
    "ts-ignore",
    "ts-expect-error",
    "here",
    "channel",
    "everyone",
    "all",
    "model",
    "html",
    "url",
    "viewbag",
    "argv",
    "array",
    "inc",
    "isa",
    "export",
    "section",
    "yield",
    "foreach",
    "csrf",
    "method",
    "vite",
    "livewire",
    "props",
    "click",
    "submit",
    "change",
    "jvmstatic",
    "composable",
    "preview",
    "inline",
    "noinline",
    "suppress",
    "jvmfield",
    "serializable",
    "serialname",
    "deprecatedsince",
    "experimental",
    "optin",
    "main",
    "command",
    "option",
    "click",
    "slot",
    "emit",
    "on",
    "bind",
    "ref",
];

/// Messenger ids that are ordinary words after all ("Discord: is down").
const ID_STOPWORDS: &[&str] = &[
    "is", "the", "a", "an", "down", "me", "us", "group", "chat", "call", "not", "no", "yes", "ok",
    "and", "or", "for", "link", "app", "account", "same", "none", "n/a", "na", "tbd", "only",
    "off", "on",
];

const TLDS: &str = "com|org|net|edu|gov|mil|int|io|co|uk|de|fr|es|it|nl|be|ch|at|se|no|dk|fi|pt|pl|cz|ie|eu|us|ca|au|nz|jp|cn|kr|in|br|mx|ar|ru|ua|tr|gr|hu|ro|za|ng|ke|il|ae|sg|hk|tw|ai|app|dev|me|info|biz|xyz|tv|fm|ly|so|sh|ac|cat|gal|ovh|online|site|tech|cloud|email|mail";

/// File extensions that look like a top-level domain after `name@`: `report@v2.pdf`.
const FILE_EXTENSIONS: &[&str] = &[
    "pdf", "png", "jpg", "jpeg", "gif", "txt", "json", "yaml", "yml", "toml", "lock", "csv",
    "html", "htm", "zip", "gz", "tgz", "exe", "docx", "xlsx", "pptx", "svg", "webp", "mp3", "mp4",
    "log", "js", "ts", "tsx", "jsx", "css", "scss", "wasm", "bin", "iso", "dmg",
];

/// Path segments of profile hosts that are not a user: `github.com/features`, `t.me/joinchat`.
const RESERVED_PATHS: &[&str] = &[
    "features",
    "pricing",
    "about",
    "login",
    "logout",
    "signup",
    "join",
    "settings",
    "orgs",
    "topics",
    "marketplace",
    "sponsors",
    "explore",
    "enterprise",
    "security",
    "collections",
    "trending",
    "notifications",
    "issues",
    "pulls",
    "search",
    "site",
    "contact",
    "home",
    "i",
    "intent",
    "share",
    "hashtag",
    "p",
    "reel",
    "reels",
    "stories",
    "watch",
    "channel",
    "c",
    "joinchat",
    "help",
    "legal",
    "privacy",
    "terms",
    "jobs",
    "careers",
    "blog",
    "docs",
    "events",
    "groups",
    "pages",
    "company",
    "school",
    "feed",
    "messaging",
    "tos",
    "policies",
    "apps",
    "readme",
    "new",
    "codespaces",
    "copilot",
    "solutions",
    "resources",
    "customer-stories",
];

const EN_STREET_TYPES: &str = "Street|St|Avenue|Ave|Av|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|Ter|Parkway|Pkwy|Highway|Hwy|Circle|Cir|Loop|Square|Sq|Close|Crescent|Cres|Row|Mews|Gardens|Grove|Walk|Hill|Trail|Trl|Alley|Plaza|Broadway";

fn rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(Rules::new)
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this crate; `tests` compile every one of them.
    Regex::new(pattern).expect("contact-projection pattern compiles")
}

fn words(list: &[&str]) -> AhoCorasick {
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::LeftmostLongest)
        .build(list)
        .expect("contact-projection word list builds")
}

impl Rules {
    fn new() -> Rules {
        let at_words = "at|arroba|arobase|chiocciola|apenstaartje";
        let dot_words = "dot|punto|point|punkt|punt";
        let open = r"[\[\(\{<]";
        let close = r"[\]\)\}>]";
        let spelled_at =
            format!(r"(?:[ ]*{open}[ ]*(?i-u:at|@)[ ]*{close}[ ]*|[ ]+(?i-u:{at_words})[ ]+)");
        let spelled_dot = format!(
            r"(?:[ ]*{open}[ ]*(?i-u:dot|\.)[ ]*{close}[ ]*|[ ]+(?i-u:{dot_words})[ ]+|\.)"
        );
        let local_dot = format!(r"(?:[ ]+(?i-u:{dot_words})[ ]+|\.)");
        let obfuscated_email = format!(
            r"([A-Za-z0-9_%+\-]+(?:{local_dot}[A-Za-z0-9_%+\-]+)*{spelled_at}[A-Za-z0-9\-]+(?:{spelled_dot}[A-Za-z0-9\-]+)*{spelled_dot}(?i-u:{TLDS}))(?:[^A-Za-z0-9\-]|$)"
        );

        let mut phone_list: Vec<&str> = PHONE_WORDS.to_vec();
        let mut positive = vec![true; PHONE_WORDS.len()];
        phone_list.extend_from_slice(ID_WORDS);
        positive.extend(std::iter::repeat_n(false, ID_WORDS.len()));

        let name_word = r"(?:[A-Z][A-Za-z'\-]*\.?|[0-9]{1,3}(?:st|nd|rd|th)|[A-Z])";
        let fr_types = "rue|avenue|av\\.|bd|boulevard|place|allée|allee|chemin|impasse|quai|cours|route|square|passage|rond-point|faubourg|voie|sentier";
        let fr_name = r"(?:(?:des|du|de|la|le|les|et|sur|en|aux) |d'|l'|[A-ZÀ-Ý][A-Za-zÀ-ÿ'\-]* ?)";
        let type_first = "Calle|C/|Avda\\.?|Avenida|Av\\.|Plaza|Pza\\.?|Paseo|Camino|Carrera|Ronda|Travesía|Rua|Via|Viale|Piazza|Piazzale|Corso|Largo|Vicolo|Strada|Rambla";
        let type_first_name = r"(?:[A-ZÀ-Ý][A-Za-zÀ-ÿ'\-]*|de|del|de la|de los|de las|della|dei|degli|delle|di|da|do|dos|das|el|la|los|las)";
        let compound = "straße|strasse|str\\.|weg|allee|platz|gasse|damm|ufer|chaussee|steig|pfad|straat|laan|plein|gracht|kade|singel|dijk|steeg|markt";
        let uk = r"[A-Z]{1,2}[0-9][A-Z0-9]? [0-9][ABD-HJLNP-UW-Z]{2}";
        let house = r"[0-9]{1,4}(?: ?[A-Za-z](?:[^A-Za-z0-9]|$))?";

        Rules {
            email: re(
                r"[A-Za-z0-9._%+'\-]+[@＠][A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}",
            ),
            obfuscated_email: re(&obfuscated_email),
            fediverse: re(
                r"@[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?(?:@|:)[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}",
            ),
            profile_url: re(
                r"(?i-u:(?:https?://)?(?:(?:www|m|mobile|de|fr|es|it|nl|uk)\.)?(?:(?:linkedin\.com/(?:in|pub)|xing\.com/profile|bsky\.app/profile|reddit\.com/u(?:ser)?|snapchat\.com/add|keybase\.io|twitter\.com|x\.com|github\.com|gitlab\.com|instagram\.com|facebook\.com|fb\.com|t\.me|telegram\.me|wa\.me|m\.me|vk\.com|threads\.net|medium\.com|tiktok\.com|youtube\.com|mastodon\.social|behance\.net|dribbble\.com)/@?[a-z0-9_](?:[a-z0-9_.\-]*[a-z0-9_])?)/?)",
            ),
            reddit: re(r"(?i-u:u)/[A-Za-z0-9_\-]{3,20}"),
            mention: re(r"[@＠][A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?"),
            messenger: re(
                r"(?i-u:(?:skype|telegram|tg|whatsapp|signal|wechat|weixin|line|discord|icq|kik|threema|viber|snapchat|keybase|session|wire|element|qq)(?:[ ]+(?:id|name|username|user name|handle))?(?:[ ]+(?:is|ist|es|est|è)[ ]+|[ ]*[:=][ ]*))(@?[A-Za-z0-9_](?:[A-Za-z0-9_.:\-]*[A-Za-z0-9_])?(?:#[0-9]{4})?)",
            ),
            phone: re(r"(?:(?i-u:tel):)?(?:\+[ ]?)?\(?[0-9](?:[0-9]|[ .\-/()\x{A0}]{1,3}[0-9])*"),
            extension: re(r"^(?:[ ,]*(?i-u:ext\.?|extension|x|poste|#|apt\.)[ ]?[0-9]{1,6})"),
            street_number_first_en: re(&format!(
                r"[0-9]{{1,5}}[A-Za-z]?,? (?:{name_word} ){{1,4}}(?:{EN_STREET_TYPES})\.?(?:[^A-Za-z0-9]|$)"
            )),
            street_number_first_fr: re(&format!(
                r"[0-9]{{1,4}}(?: ?(?i-u:bis|ter|[a-c]))?,? (?i-u:{fr_types}) {fr_name}{{1,6}}"
            )),
            street_type_first: re(&format!(
                r"(?:{type_first}) (?:{type_first_name} ){{0,4}}{type_first_name},? (?:n[º°o]\.? ?)?{house}"
            )),
            street_compound: re(&format!(r"[A-ZÄÖÜ][A-Za-zÀ-ÿ\-]*(?:{compound}) {house}")),
            street_de_two_words: re(&format!(
                r"[A-ZÄÖÜ][A-Za-zÀ-ÿ]+(?:er)? (?:Straße|Strasse|Str\.|Weg|Allee|Platz|Ring|Damm|Ufer|Chaussee|Laan|Weg|Plein) {house}"
            )),
            street_jp: re(
                r"[0-9]{1,2}-[0-9]{1,2}(?:-[0-9]{1,3})? [A-Z][a-z]+(?:, [A-Z][a-z]+-(?:ku|shi|cho|machi|gun))?, [A-Z][a-z]+(?: [0-9]{3}-[0-9]{4})?",
            ),
            po_box: re(
                r"(?:(?i-u:p\.? ?o\.? box|post office box|postfach|postbus|apartado de correos|apartado|casella postale|boîte postale|boite postale)|BP) [0-9]{1,6}(?: [0-9]{2,4}){0,2}",
            ),
            postcode_in_context: re(&format!(
                r"(?i-u:zip code|zip|postcode|post code|postal code|plz|code postal|cp|cap|postleitzahl|código postal|codigo postal)(?:[ ]*(?:is|ist|est|es|è|was|=|:)?[ ]*)({uk}|[0-9]{{4}} ?[A-Z]{{2}}|[0-9]{{3}}-[0-9]{{4}}|[0-9]{{5}}(?:-[0-9]{{4}})?|[0-9]{{4}})"
            )),
            uk_postcode: re(uk),
            address_tail: re(&format!(
                r"^(?:,? (?i-u:apt|apartment|suite|ste|unit|flat|floor|fl|room)\.? ?[0-9A-Za-z\-]{{1,6}}|, [0-9]{{1,2}}[º°] ?[A-Za-z]{{1,4}}|,? (?:[A-Z][A-Za-z\-]+ ){{0,2}}[A-Z][A-Za-z\-]+,? [A-Z]{{2}} [0-9]{{5}}(?:-[0-9]{{4}})?|,? [0-9]{{4}} [A-Z]{{2}} [A-Z][A-Za-z\-]+|,? [0-9]{{4,5}} [A-ZÀ-Ý][A-Za-zÀ-ÿ\-]+|,? (?:[A-Z][A-Za-z\-]+ )?{uk}|,? [A-Z][a-z]+-(?:ku|shi), [A-Z][a-z]+(?: [0-9]{{3}}-[0-9]{{4}})?)"
            )),
            phone_words: AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::LeftmostLongest)
                .build(&phone_list)
                .expect("contact-projection word list builds"),
            phone_word_positive: positive,
            address_veto: words(ADDRESS_VETO),
        }
    }
}

fn prev_char(text: &str, at: usize) -> Option<char> {
    text.get(..at).and_then(|s| s.chars().next_back())
}

fn next_char(text: &str, at: usize) -> Option<char> {
    text.get(at..).and_then(|s| s.chars().next())
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

fn eq_any(word: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
}

/// The start of a window of about `len` bytes before `at`, on a char boundary, not before the
/// line start.
fn window_start(text: &str, at: usize, len: usize) -> usize {
    let mut start = at.saturating_sub(len);
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    match text.get(start..at).and_then(|w| w.rfind('\n')) {
        Some(nl) => start + nl + 1,
        None => start,
    }
}

/// Whether `at` is inside an inline code span (an odd number of backticks before it on its line).
fn in_code_span(text: &str, at: usize) -> bool {
    let line_start = text
        .get(..at)
        .and_then(|s| s.rfind('\n'))
        .map_or(0, |i| i + 1);
    text.get(line_start..at)
        .is_some_and(|s| s.bytes().filter(|&b| b == b'`').count() % 2 == 1)
}

struct Found(Vec<Detection>);

impl Found {
    fn push(&mut self, start: usize, end: usize, kind: Kind) {
        if start < end {
            self.0.push(Detection { start, end, kind });
        }
    }
}

pub(crate) fn spans(text: &str) -> Vec<Detection> {
    let r = rules();
    let mut found = Found(Vec::new());
    handles(r, text, &mut found);
    emails(r, text, &mut found);
    phones(r, text, &mut found);
    addresses(r, text, &mut found);
    merge(found.0)
}

/// Overlapping or touching-inside spans become one, of the kind of the longest.
fn merge(mut all: Vec<Detection>) -> Vec<Detection> {
    all.sort_by_key(|d| (d.start, std::cmp::Reverse(d.end)));
    let mut out: Vec<(Detection, usize)> = Vec::with_capacity(all.len());
    for d in all {
        if let Some((last, longest)) = out.last_mut() {
            if d.start < last.end {
                if d.end - d.start > *longest {
                    *longest = d.end - d.start;
                    last.kind = d.kind;
                }
                last.end = last.end.max(d.end);
                continue;
            }
        }
        out.push((d, d.end - d.start));
    }
    out.into_iter().map(|(d, _)| d).collect()
}

fn emails(r: &Rules, text: &str, found: &mut Found) {
    for m in r.email.find_iter(text) {
        let (mut start, end) = (m.start(), m.end());
        // A local part does not start with a dot or an apostrophe ("'a@b.io'").
        while let Some(c @ ('.' | '\'')) = next_char(text, start) {
            start += c.len_utf8();
        }
        if matches!(prev_char(text, start), Some('@' | '/')) || is_word(next_char(text, end)) {
            continue;
        }
        // scp/git remotes `git@host.tld:org/repo`.
        if next_char(text, end) == Some(':')
            && next_char(text, end + 1).is_some_and(|c| !c.is_whitespace())
        {
            continue;
        }
        let domain = m.as_str();
        let tld = domain.rsplit('.').next().unwrap_or_default();
        let dots = domain
            .rsplit(['@', '＠'])
            .next()
            .map_or(0, |d| d.matches('.').count());
        if dots == 1 && eq_any(tld, FILE_EXTENSIONS) {
            continue;
        }
        found.push(start, end, Kind::Email);
    }
    for c in r.obfuscated_email.captures_iter(text) {
        let Some(m) = c.get(1) else { continue };
        let s = m.as_str();
        if is_word(prev_char(text, m.start())) || is_word(next_char(text, m.end())) {
            continue;
        }
        // A plain " at " needs a spelled or bracketed dot after it: "met at google.com" is prose.
        let bracketed = s.contains(['[', '(', '{', '<']);
        if !bracketed {
            let lower = s.to_ascii_lowercase();
            let spelled_dot = ["dot", "punto", "point", "punkt", "punt"]
                .iter()
                .any(|w| lower.split(' ').any(|t| t == *w));
            if !spelled_dot {
                continue;
            }
        }
        found.push(m.start(), m.end(), Kind::Email);
    }
}

fn handles(r: &Rules, text: &str, found: &mut Found) {
    for m in r.fediverse.find_iter(text) {
        let before = prev_char(text, m.start());
        if is_word(before) || matches!(before, Some('.' | '/' | '@' | '\\')) {
            continue;
        }
        if is_word(next_char(text, m.end())) || in_code_span(text, m.start()) {
            continue;
        }
        found.push(m.start(), m.end(), Kind::Handle);
    }
    for m in r.profile_url.find_iter(text) {
        let before = prev_char(text, m.start());
        if is_word(before) || matches!(before, Some('.' | '-' | '@' | '/')) {
            continue;
        }
        let s = m.as_str();
        let lower = s.to_ascii_lowercase();
        let path = lower.split(".com/").nth(1).or_else(|| {
            lower
                .split('/')
                .nth_back(if lower.ends_with('/') { 1 } else { 0 })
        });
        let user = path
            .unwrap_or_default()
            .trim_start_matches(['@', '/'])
            .trim_end_matches('/');
        let first = user.split('/').next().unwrap_or_default();
        let site_paths = [
            "github.com/",
            "gitlab.com/",
            "x.com/",
            "twitter.com/",
            "facebook.com/",
            "instagram.com/",
        ];
        if site_paths.iter().any(|h| lower.contains(h)) && eq_any(first, RESERVED_PATHS) {
            continue;
        }
        // A repository (`github.com/org/repo`) is a reference to code, not to a person.
        let code_host = lower.contains("github.com/") || lower.contains("gitlab.com/");
        if code_host
            && !s.ends_with('/')
            && next_char(text, m.end()) == Some('/')
            && next_char(text, m.end() + 1).is_some_and(|c| c.is_ascii_alphanumeric())
        {
            continue;
        }
        if code_host
            && s.ends_with('/')
            && next_char(text, m.end()).is_some_and(|c| c.is_ascii_alphanumeric())
        {
            continue;
        }
        found.push(m.start(), m.end(), Kind::Handle);
    }
    for m in r.reddit.find_iter(text) {
        let before = prev_char(text, m.start());
        if before.is_some_and(|c| !(c.is_whitespace() || c == '(' || c == '"')) {
            continue;
        }
        if is_word(next_char(text, m.end())) || next_char(text, m.end()) == Some('/') {
            continue;
        }
        found.push(m.start(), m.end(), Kind::Handle);
    }
    for m in r.mention.find_iter(text) {
        let before = prev_char(text, m.start());
        if is_word(before)
            || matches!(
                before,
                Some('.' | '/' | '\\' | ':' | '+' | '-' | '@' | '"' | '\'')
            )
        {
            continue;
        }
        let mut end = m.end();
        let name = &text[m.start() + next_char(text, m.start()).map_or(1, char::len_utf8)..end];
        let after = next_char(text, end);
        // `@app.route(...)`, `@lru_cache(...)`: a decorator call; `@types/node`: an npm scope.
        if matches!(after, Some('(' | '/' | '"' | '=')) || in_code_span(text, m.start()) {
            continue;
        }
        let first = name.split(['.', '-']).next().unwrap_or_default();
        if eq_any(name, AT_KEEP) || eq_any(first, AT_KEEP) {
            continue;
        }
        if !name.bytes().any(|b| b.is_ascii_alphabetic()) || is_time(name) {
            continue;
        }
        // A sentence's full stop is not part of the handle.
        while text[..end].ends_with('.') {
            end -= 1;
        }
        found.push(m.start(), end, Kind::Handle);
    }
    for c in r.messenger.captures_iter(text) {
        let (Some(whole), Some(id)) = (c.get(0), c.get(1)) else {
            continue;
        };
        if is_word(prev_char(text, whole.start())) || is_word(next_char(text, id.end())) {
            continue;
        }
        let value = id.as_str();
        let keyword = whole.as_str().to_ascii_lowercase();
        if keyword.starts_with("line") && !keyword.contains("id") {
            continue;
        }
        if !value.bytes().any(|b| b.is_ascii_alphabetic()) || eq_any(value, ID_STOPWORDS) {
            continue;
        }
        // A profile URL after the messenger word is the URL detector's.
        if next_char(text, id.end()) == Some('/') {
            continue;
        }
        found.push(id.start(), id.end(), Kind::Handle);
    }
}

fn is_time(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let core = lower
        .strip_suffix("am")
        .or_else(|| lower.strip_suffix("pm"))
        .or_else(|| lower.strip_suffix('h'))
        .unwrap_or(&lower);
    !core.is_empty() && core.bytes().all(|b| b.is_ascii_digit() || b == b':')
}

fn phones(r: &Rules, text: &str, found: &mut Found) {
    for m in r.phone.find_iter(text) {
        let (mut start, mut end) = (m.start(), m.end());
        let mut s = m.as_str();
        // The run's trailing separators are not part of it (the pattern ends on a digit), but an
        // opening parenthesis without its close is.
        let tel = s.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("tel:"));
        if s.starts_with('(') && !s.contains(')') {
            start += 1;
            s = &s[1..];
        }
        let before = prev_char(text, start);
        if is_word(before)
            || matches!(
                before,
                Some(
                    '.' | '-'
                        | '/'
                        | ':'
                        | '#'
                        | '$'
                        | '€'
                        | '£'
                        | '¥'
                        | '+'
                        | ','
                        | '@'
                        | '_'
                        | '='
                        | '^'
                        | '~'
                )
            )
        {
            continue;
        }
        let after = next_char(text, end);
        if is_word(after)
            || matches!(
                after,
                Some('%' | '°' | '€' | '$' | '£' | ':' | '/' | '\'' | '′' | '″')
            )
        {
            continue;
        }
        if after == Some('.') && next_char(text, end + 1).is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let body = if tel {
            s.get(4..).unwrap_or_default()
        } else {
            s
        };
        let international = body.starts_with('+') || body.starts_with("00");
        let digits = body.bytes().filter(u8::is_ascii_digit).count();
        if !(7..=15).contains(&digits) {
            continue;
        }
        let groups: Vec<&str> = body
            .split(|c: char| !c.is_ascii_digit())
            .filter(|g| !g.is_empty())
            .collect();
        let seps: Vec<char> = body
            .trim_start_matches('+')
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect();
        if looks_like_non_phone(&groups, &seps) {
            continue;
        }
        if followed_by_currency(text, end) {
            continue;
        }
        let context = phone_context(r, text, start);
        if context == Some(false) {
            continue;
        }
        let accepted = (international || tel) && digits >= 8
            || context == Some(true)
            || national_shape(body, &groups, &seps, digits);
        if !accepted {
            continue;
        }
        if let Some(ext) = text.get(end..).and_then(|rest| r.extension.find(rest)) {
            if !is_word(next_char(text, end + ext.end())) {
                end += ext.end();
            }
        }
        found.push(start, end, Kind::Phone);
    }
}

/// Dates, IPs, versions, ISBNs, thousands and year ranges.
fn looks_like_non_phone(groups: &[&str], seps: &[char]) -> bool {
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    let uniform = seps.windows(2).all(|w| w[0] == w[1]);
    let sep = seps.first().copied();
    // Dates: 2024-03-18, 14.05.2024, 03/07/2023, 2024/09/13.
    if lens.len() == 3
        && uniform
        && matches!(sep, Some('.' | '/' | '-'))
        && (matches!(lens[..], [1 | 2, 1 | 2, 2 | 4]) || matches!(lens[..], [4, 1 | 2, 1 | 2]))
    {
        return true;
    }
    // IPv4.
    if lens.len() == 4 && uniform && sep == Some('.') && lens.iter().all(|&l| l <= 3) {
        return true;
    }
    // Year ranges 2019-2023.
    if lens.len() == 2
        && lens == [4, 4]
        && groups
            .iter()
            .all(|g| g.starts_with("19") || g.starts_with("20"))
    {
        return true;
    }
    // ISBN-13.
    if groups.len() >= 4 && (groups[0] == "978" || groups[0] == "979") {
        return true;
    }
    // Dotted numbers that are not the French or NANP dotted shapes: versions, builds.
    if sep == Some('.') && uniform && !(lens.iter().all(|&l| l == 2) || lens[..] == [3, 3, 4]) {
        return true;
    }
    false
}

/// National shapes accepted without a phone word: a trunk prefix `0`, or NANP.
fn national_shape(body: &str, groups: &[&str], seps: &[char], digits: usize) -> bool {
    if groups.len() < 2 || !(9..=13).contains(&digits) {
        return false;
    }
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    let thousands = lens[0] <= 3
        && lens[1..].iter().all(|&l| l == 3)
        && seps.iter().all(|&c| c == ' ' || c == '.');
    if body.starts_with('0') && !thousands {
        return true;
    }
    if body.starts_with('(') && lens[0] <= 4 {
        return true;
    }
    matches!(lens[..], [3, 3, 4] | [1, 3, 3, 4])
        && seps.iter().all(|&c| c == '-' || c == '.' || c == ' ')
}

fn followed_by_currency(text: &str, end: usize) -> bool {
    let rest = text.get(end..).unwrap_or_default().trim_start();
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphabetic() || matches!(c, '€' | '$' | '£'))
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(
        word.as_str(),
        "€" | "$"
            | "£"
            | "eur"
            | "euro"
            | "euros"
            | "usd"
            | "gbp"
            | "chf"
            | "sek"
            | "nok"
            | "dkk"
            | "kr"
            | "yen"
            | "jpy"
            | "dollars"
            | "pounds"
            | "rows"
            | "events"
            | "requests"
            | "users"
            | "km"
            | "kg"
            | "mb"
            | "gb"
            | "ms"
    )
}

/// `Some(true)` if the nearest keyword before `at` is a phone word, `Some(false)` if it is an
/// id word, `None` without either.
fn phone_context(r: &Rules, text: &str, at: usize) -> Option<bool> {
    let start = window_start(text, at, 40);
    let window = text.get(start..at)?;
    let mut last = None;
    for m in r.phone_words.find_iter(window) {
        let boundary = window[..m.start()]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        if boundary {
            last = r.phone_word_positive.get(m.pattern().as_usize()).copied();
        }
    }
    last
}

/// Spans of `re`'s matches that stand as words of their own, trimmed of trailing punctuation; a
/// match glued to a digit by one of `glue` is part of a longer token (a time, a code) and dropped.
fn standalone<'t>(
    re: &'t Regex,
    text: &'t str,
    glue: &'t [char],
) -> impl Iterator<Item = (usize, usize)> + 't {
    re.find_iter(text).filter_map(move |m| {
        if is_word(prev_char(text, m.start())) {
            return None;
        }
        let end = m.start()
            + m.as_str()
                .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .len();
        let glued = next_char(text, end).is_some_and(|c| glue.contains(&c))
            && next_char(text, end + 1).is_some_and(|c| c.is_ascii_digit());
        (!is_word(next_char(text, end)) && !glued).then_some((m.start(), end))
    })
}

fn addresses(r: &Rules, text: &str, found: &mut Found) {
    let street = |start: usize, end: usize, found: &mut Found| {
        let end = address_tail(r, text, end);
        found.push(start, end, Kind::Address);
    };
    for m in r.street_number_first_en.find_iter(text) {
        if is_word(prev_char(text, m.start()))
            || matches!(
                prev_char(text, m.start()),
                Some('.' | '-' | '/' | ':' | '#')
            )
        {
            continue;
        }
        if address_vetoed(r, text, m.start()) {
            continue;
        }
        let s = m.as_str();
        let trimmed = s.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '.');
        let end = m.start() + trimmed.len();
        street(m.start(), end, found);
    }
    for m in r.street_number_first_fr.find_iter(text) {
        if is_word(prev_char(text, m.start())) || address_vetoed(r, text, m.start()) {
            continue;
        }
        let s = m.as_str().trim_end();
        // The name ends on a capitalised word, not on a particle.
        let mut end = m.start() + s.len();
        let words: Vec<&str> = s.split(' ').collect();
        let mut keep = words.len();
        while keep > 2 {
            let w = words[keep - 1];
            if w.chars().any(char::is_uppercase) {
                break;
            }
            keep -= 1;
        }
        if keep <= 2 {
            continue;
        }
        let cut: usize = words[..keep].iter().map(|w| w.len() + 1).sum::<usize>() - 1;
        end = end.min(m.start() + cut);
        street(m.start(), end, found);
    }
    for (re, glue) in [
        (&r.street_type_first, &[':', '.', '-', '/'][..]),
        (&r.street_compound, &[':', '.', '-', '/', ','][..]),
        (&r.street_de_two_words, &[':', '.', '-', '/', ','][..]),
    ] {
        for (start, end) in standalone(re, text, glue) {
            street(start, end, found);
        }
    }
    for m in r.street_jp.find_iter(text) {
        if is_word(prev_char(text, m.start())) || !m.as_str().contains(", ") {
            continue;
        }
        street(m.start(), m.end(), found);
    }
    for m in r.po_box.find_iter(text) {
        if is_word(prev_char(text, m.start())) || is_word(next_char(text, m.end())) {
            continue;
        }
        street(m.start(), m.end(), found);
    }
    for c in r.postcode_in_context.captures_iter(text) {
        let (Some(whole), Some(code)) = (c.get(0), c.get(1)) else {
            continue;
        };
        if is_word(prev_char(text, whole.start())) || is_word(next_char(text, code.end())) {
            continue;
        }
        found.push(code.start(), code.end(), Kind::Address);
    }
    for m in r.uk_postcode.find_iter(text) {
        if is_word(prev_char(text, m.start())) || is_word(next_char(text, m.end())) {
            continue;
        }
        if m.as_str().ends_with("GB") || m.as_str().ends_with("TB") || m.as_str().ends_with("PB") {
            continue;
        }
        found.push(m.start(), m.end(), Kind::Address);
    }
}

fn address_vetoed(r: &Rules, text: &str, at: usize) -> bool {
    let start = window_start(text, at, 12);
    let Some(window) = text.get(start..at) else {
        return false;
    };
    let trimmed = window.trim_end();
    r.address_veto
        .find_iter(trimmed)
        .any(|m| m.end() == trimmed.len())
}

/// Extends a street line over what follows it on the line: unit, town and postcode, state.
fn address_tail(r: &Rules, text: &str, mut end: usize) -> usize {
    for _ in 0..4 {
        let Some(rest) = text.get(end..) else { break };
        let Some(m) = r.address_tail.find(rest) else {
            break;
        };
        if m.end() == 0 || is_word(next_char(text, end + m.end())) {
            break;
        }
        end += m.end();
    }
    end
}
