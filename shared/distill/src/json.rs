//! Canonical JSON writer — RFC 0062 run contract §4 ("byte-stable for a given source set +
//! budget").
//!
//! Byte stability is a property of the encoder, so the archive and index are written by this
//! small infallible writer rather than by a general serializer whose spacing, escaping or field
//! order could drift between versions: objects are written in the caller's fixed field order,
//! no whitespace, integers only (no floats), and strings escaped minimally — `"` and `\` as
//! `\"` and `\\`, the control characters U+0000–U+001F as `\b \f \n \r \t` or `\u00XX`, every
//! other character as raw UTF-8. Any RFC 8259 parser reads the result.

pub(crate) struct Writer {
    out: String,
    first: Vec<bool>,
}

impl Writer {
    pub(crate) fn new() -> Self {
        Self {
            out: String::with_capacity(1024),
            first: Vec::new(),
        }
    }

    fn separator(&mut self) {
        if let Some(first) = self.first.last_mut() {
            if *first {
                *first = false;
            } else {
                self.out.push(',');
            }
        }
    }

    pub(crate) fn begin_object(&mut self) {
        self.separator();
        self.out.push('{');
        self.first.push(true);
    }

    pub(crate) fn end_object(&mut self) {
        self.first.pop();
        self.out.push('}');
    }

    pub(crate) fn begin_array(&mut self) {
        self.separator();
        self.out.push('[');
        self.first.push(true);
    }

    pub(crate) fn end_array(&mut self) {
        self.first.pop();
        self.out.push(']');
    }

    /// Writes `"name":` ; the value call that follows must not add a separator.
    pub(crate) fn key(&mut self, name: &str) {
        self.separator();
        self.push_string(name);
        self.out.push(':');
        if let Some(first) = self.first.last_mut() {
            *first = true;
        }
    }

    pub(crate) fn string(&mut self, value: &str) {
        self.separator();
        self.push_string(value);
    }

    pub(crate) fn int(&mut self, value: i64) {
        self.separator();
        self.out.push_str(&value.to_string());
    }

    pub(crate) fn string_field(&mut self, name: &str, value: &str) {
        self.key(name);
        self.string(value);
        self.after_value();
    }

    pub(crate) fn int_field(&mut self, name: &str, value: i64) {
        self.key(name);
        self.int(value);
        self.after_value();
    }

    pub(crate) fn string_array_field(&mut self, name: &str, values: &[String]) {
        self.key(name);
        self.begin_array();
        for value in values {
            self.string(value);
        }
        self.end_array();
        self.after_value();
    }

    /// Restores "not first" after a keyed value so the next key gets its comma.
    pub(crate) fn after_value(&mut self) {
        if let Some(first) = self.first.last_mut() {
            *first = false;
        }
    }

    fn push_string(&mut self, value: &str) {
        self.out.push('"');
        for c in value.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\u{08}' => self.out.push_str("\\b"),
                '\u{0c}' => self.out.push_str("\\f"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                c if u32::from(c) < 0x20 => {
                    self.out.push_str(&format!("\\u{:04x}", u32::from(c)));
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    /// The document followed by one `\n`, so the object is also a well-formed text file.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.out.push('\n');
        self.out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_compact_ordered_json() {
        let mut w = Writer::new();
        w.begin_object();
        w.string_field("z", "a\"b\\c\n\u{1}é");
        w.int_field("a", -3);
        w.string_array_field("list", &["x".to_owned(), "y".to_owned()]);
        w.string_array_field("empty", &[]);
        w.key("nested");
        w.begin_object();
        w.int_field("n", 1);
        w.end_object();
        w.after_value();
        w.end_object();
        let bytes = w.finish();
        let text = String::from_utf8(bytes).unwrap_or_default();
        assert_eq!(
            text,
            "{\"z\":\"a\\\"b\\\\c\\n\\u0001é\",\"a\":-3,\"list\":[\"x\",\"y\"],\"empty\":[],\"nested\":{\"n\":1}}\n"
        );
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(parsed["z"], "a\"b\\c\n\u{1}é");
    }
}
