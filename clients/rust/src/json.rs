//! A small, strict JSON: a [`Value`], a parser ([`parse`], [`parse_bytes`])
//! and a serializer (`Value`'s [`Display`](fmt::Display), so
//! `value.to_string()` is its compact JSON).
//!
//! The parser takes RFC 8259 JSON and nothing else: no comments, no
//! trailing commas, no leading zeros, no `NaN`, no unescaped control
//! characters in strings, no lone surrogates in `\u` escapes, no
//! duplicate keys in an object, and nothing but whitespace after the
//! value. A number keeps the text it was written as ([`Number`]), so an
//! integer past `i64` or `u64` survives a round trip exactly.
//!
//! ```
//! use hutch_client::json::{self, Value};
//! let v = json::parse(r#"{"type":"stdout","data":"h\u00e9"}"#).unwrap();
//! assert_eq!(v["type"].as_str(), Some("stdout"));
//! assert_eq!(v["data"].as_str(), Some("hé"));
//! assert!(v["missing"].is_null());
//! assert_eq!(Value::from("a\"b\n").to_string(), r#""a\"b\n""#);
//! ```

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::ops::Index;

/// The deepest nesting of arrays and objects [`parse`] accepts: deeper
/// input is refused rather than allowed to exhaust the stack.
pub const MAX_DEPTH: usize = 512;

/// A JSON value.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object; its keys are unique, and serialized in sorted order.
    Object(BTreeMap<String, Value>),
}

/// A JSON number, kept as its text: an integer of any size, or a
/// fraction or exponent, read on demand as `i64`, `u64` or `f64`.
///
/// Two numbers are equal when their texts are (`1` and `1.0` are not).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Number(String);

impl Number {
    /// The number's text, as parsed or written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it is written as an integer: no fraction, no exponent.
    pub fn is_integer(&self) -> bool {
        !self.0.contains(['.', 'e', 'E'])
    }

    /// The number as an `i64`, when it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        if self.is_integer() {
            self.0.parse().ok()
        } else {
            None
        }
    }

    /// The number as a `u64`, when it is a non-negative integer in range.
    pub fn as_u64(&self) -> Option<u64> {
        if self.is_integer() {
            self.0.parse().ok()
        } else {
            None
        }
    }

    /// The number as the nearest `f64`; `None` when it is out of `f64`'s
    /// range (`1e400`).
    pub fn as_f64(&self) -> Option<f64> {
        self.0.parse::<f64>().ok().filter(|f| f.is_finite())
    }

    /// `f` as a number; `None` for NaN and the infinities, which JSON
    /// cannot say.
    pub fn from_f64(f: f64) -> Option<Number> {
        if f.is_finite() {
            // Display is the shortest text that reads back as the same
            // f64, with neither exponent nor "inf": valid JSON.
            Some(Number(format!("{}", f)))
        } else {
            None
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! number_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Number {
            fn from(n: $t) -> Number {
                Number(n.to_string())
            }
        }
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(Number::from(n))
            }
        }
    )*};
}
number_from_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl From<Number> for Value {
    fn from(n: Number) -> Value {
        Value::Number(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Value {
        Value::Array(v)
    }
}

impl From<BTreeMap<String, Value>> for Value {
    fn from(m: BTreeMap<String, Value>) -> Value {
        Value::Object(m)
    }
}

static NULL: Value = Value::Null;

impl Value {
    /// An object of these keys and values (a later key replaces an
    /// earlier one of the same name).
    pub fn object<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Object(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The member `key` of an object; `None` for another key or value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.get(key),
            _ => None,
        }
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if it is one.
    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(Number::as_i64)
    }

    /// The number as a `u64`, if it is a non-negative integer in range.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(Number::as_u64)
    }

    /// The number as an `f64`, if it is a number in `f64`'s range.
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().and_then(Number::as_f64)
    }

    /// The elements, if it is an array.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The members, if it is an object.
    pub fn as_object(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
}

/// `value["key"]`: the member, or `Null` when there is none (or the
/// value is no object).
impl Index<&str> for Value {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

/// `value[i]`: the element, or `Null` when there is none (or the value
/// is no array).
impl Index<usize> for Value {
    type Output = Value;
    fn index(&self, i: usize) -> &Value {
        match self {
            Value::Array(a) => a.get(i).unwrap_or(&NULL),
            _ => &NULL,
        }
    }
}

/// The value as compact JSON: `to_string()` serializes it.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => f.write_str(if *b { "true" } else { "false" }),
            Value::Number(n) => f.write_str(&n.0),
            Value::String(s) => write_string(f, s),
            Value::Array(a) => {
                f.write_char('[')?;
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    fmt::Display::fmt(v, f)?;
                }
                f.write_char(']')
            }
            Value::Object(m) => {
                f.write_char('{')?;
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_string(f, k)?;
                    f.write_char(':')?;
                    fmt::Display::fmt(v, f)?;
                }
                f.write_char('}')
            }
        }
    }
}

/// Writes s as a JSON string: `"` and `\` escaped, control characters as
/// `\n`, `\t`... or `\u00XX`, U+2028 and U+2029 as `\u` escapes (so the
/// text is also valid JavaScript), anything else as its UTF-8.
fn write_string<W: fmt::Write>(w: &mut W, s: &str) -> fmt::Result {
    w.write_char('"')?;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            _ => None,
        };
        let special = esc.is_some() || (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}';
        if !special {
            continue;
        }
        w.write_str(&s[start..i])?;
        match esc {
            Some(e) => w.write_str(e)?,
            None => write!(w, "\\u{:04x}", c as u32)?,
        }
        start = i + c.len_utf8();
    }
    w.write_str(&s[start..])?;
    w.write_char('"')
}

/// Why a text is not JSON, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The byte offset in the input where the fault was found.
    pub offset: usize,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses text as exactly one JSON value (surrounded by whitespace at
/// most).
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i < p.b.len() {
        return Err(p.err("more after the JSON value"));
    }
    Ok(v)
}

/// Parses bytes, which must be UTF-8, as [`parse`] does text.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value, ParseError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => parse(s),
        Err(e) => Err(ParseError {
            offset: e.valid_up_to(),
            message: "not UTF-8".to_string(),
        }),
    }
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, msg: &str) -> ParseError {
        ParseError {
            offset: self.i,
            message: msg.to_string(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        match self.peek() {
            None => Err(self.err("the input ends where a value should be")),
            Some(b'{') => self.nested(Parser::object),
            Some(b'[') => self.nested(Parser::array),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(_) => Err(self.err("not a JSON value")),
        }
    }

    fn nested(
        &mut self,
        f: fn(&mut Self) -> Result<Value, ParseError>,
    ) -> Result<Value, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        self.depth += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, ParseError> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("not a JSON value"))
        }
    }

    fn object(&mut self) -> Result<Value, ParseError> {
        self.i += 1; // {
        let mut m = BTreeMap::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Value::Object(m));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a string key"));
            }
            let at = self.i;
            let k = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expected ':' after the key"));
            }
            self.i += 1;
            self.ws();
            let v = self.value()?;
            if m.contains_key(&k) {
                return Err(ParseError {
                    offset: at,
                    message: format!("duplicate key {}", Value::String(k)),
                });
            }
            m.insert(k, v);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(m));
                }
                _ => return Err(self.err("expected ',' or '}' in the object")),
            }
        }
    }

    fn array(&mut self) -> Result<Value, ParseError> {
        self.i += 1; // [
        let mut a = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Value::Array(a));
        }
        loop {
            self.ws();
            a.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(a));
                }
                _ => return Err(self.err("expected ',' or ']' in the array")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.i += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.err("a number with a leading zero"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("expected a digit after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("expected a digit in the exponent"));
            }
        }
        Ok(Value::Number(Number(self.s[start..self.i].to_string())))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let mut n = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(self.err("expected 4 hex digits after \\u")),
            };
            n = n * 16 + u32::from(d);
            self.i += 1;
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1; // "
        let mut out = String::new();
        let mut run = self.i; // start of the bytes not yet copied
        loop {
            let c = match self.peek() {
                None => return Err(self.err("the input ends inside a string")),
                Some(c) => c,
            };
            match c {
                b'"' => {
                    out.push_str(&self.s[run..self.i]);
                    self.i += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.s[run..self.i]);
                    self.i += 1;
                    let e = match self.peek() {
                        None => return Err(self.err("the input ends inside a string")),
                        Some(e) => e,
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => {
                            self.i -= 1;
                            return Err(self.err("an invalid escape"));
                        }
                    }
                    run = self.i;
                }
                0..=0x1f => return Err(self.err("a control character in a string (escape it)")),
                _ => self.i += 1,
            }
        }
    }

    /// The character of a \u escape (its "\u" read), a surrogate pair's
    /// two escapes together.
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let at = self.i - 2;
        let hi = self.hex4()?;
        let cp = match hi {
            0xD800..=0xDBFF => {
                if !self.b[self.i..].starts_with(b"\\u") {
                    return Err(ParseError {
                        offset: at,
                        message: "a high surrogate with no low surrogate after it".to_string(),
                    });
                }
                self.i += 2;
                let lo = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return Err(ParseError {
                        offset: at,
                        message: "a high surrogate with no low surrogate after it".to_string(),
                    });
                }
                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
            }
            0xDC00..=0xDFFF => {
                return Err(ParseError {
                    offset: at,
                    message: "a low surrogate with no high surrogate before it".to_string(),
                })
            }
            _ => hi,
        };
        // Every code point left is a char: surrogates were handled above.
        char::from_u32(cp).ok_or_else(|| ParseError {
            offset: at,
            message: "not a character".to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Value {
        parse(s).unwrap_or_else(|e| panic!("parse {:?}: {}", s, e))
    }

    fn bad(s: &str) -> ParseError {
        match parse(s) {
            Ok(v) => panic!("parse {:?} accepted: {:?}", s, v),
            Err(e) => e,
        }
    }

    #[test]
    fn scalars() {
        assert_eq!(ok("null"), Value::Null);
        assert_eq!(ok(" true "), Value::Bool(true));
        assert_eq!(ok("\t\r\nfalse\n"), Value::Bool(false));
        assert_eq!(ok(r#""""#), Value::String(String::new()));
        assert_eq!(ok("0").as_i64(), Some(0));
        assert_eq!(ok("-0").as_i64(), Some(0));
    }

    #[test]
    fn numbers() {
        assert_eq!(ok("42").as_i64(), Some(42));
        assert_eq!(ok("42").as_u64(), Some(42));
        assert_eq!(ok("42").as_f64(), Some(42.0));
        assert_eq!(ok("-7").as_u64(), None);
        assert_eq!(ok("-9223372036854775808").as_i64(), Some(i64::MIN));
        assert_eq!(ok("9223372036854775807").as_i64(), Some(i64::MAX));
        assert_eq!(ok("9223372036854775808").as_i64(), None);
        assert_eq!(ok("18446744073709551615").as_u64(), Some(u64::MAX));
        assert_eq!(ok("1.5").as_i64(), None);
        assert_eq!(ok("1.5").as_f64(), Some(1.5));
        assert_eq!(ok("-2.5e-3").as_f64(), Some(-0.0025));
        assert_eq!(ok("1E+2").as_f64(), Some(100.0));
        assert_eq!(ok("1e2").as_i64(), None, "an exponent is no integer text");
        assert_eq!(ok("1e400").as_f64(), None, "out of f64's range");
        // A big integer: exact as text, approximate as f64.
        let big = "123456789012345678901234567890";
        let v = ok(big);
        assert_eq!(v.as_i64(), None);
        assert_eq!(v.as_u64(), None);
        assert_eq!(v.as_number().unwrap().as_str(), big);
        assert_eq!(v.to_string(), big);
        assert!((v.as_f64().unwrap() - 1.2345678901234568e29).abs() < 1e15);
        for s in [
            "01",
            "-",
            "-a",
            "1.",
            ".5",
            "1e",
            "1e+",
            "+1",
            "0x10",
            "NaN",
            "Infinity",
            "-Infinity",
            "1.e3",
            "00",
        ] {
            bad(s);
        }
    }

    #[test]
    fn number_out() {
        assert_eq!(Value::from(-12i64).to_string(), "-12");
        assert_eq!(Value::from(u64::MAX).to_string(), "18446744073709551615");
        assert_eq!(Number::from_f64(0.1).unwrap().to_string(), "0.1");
        assert_eq!(Number::from_f64(1e21).unwrap().as_f64(), Some(1e21));
        assert_eq!(Number::from_f64(-1.5e-9).unwrap().as_f64(), Some(-1.5e-9));
        assert_eq!(Number::from_f64(f64::MAX).unwrap().as_f64(), Some(f64::MAX));
        assert!(Number::from_f64(f64::NAN).is_none());
        assert!(Number::from_f64(f64::INFINITY).is_none());
        // What it writes, it reads back.
        for f in [0.0, -0.0, 3.25, 1e-300, 123456.789, f64::MIN_POSITIVE] {
            let n = Number::from_f64(f).unwrap();
            assert_eq!(ok(n.as_str()).as_f64(), Some(f), "{}", n);
        }
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(
            ok(r#""a\"b\\c\/d\b\f\n\r\t""#).as_str(),
            Some("a\"b\\c/d\u{8}\u{c}\n\r\t")
        );
        assert_eq!(ok(r#""\u0041\u00e9\u4e2d""#).as_str(), Some("Aé中"));
        assert_eq!(ok(r#""\u00E9""#).as_str(), Some("é"));
        assert_eq!(ok(r#""\u0000""#).as_str(), Some("\0"));
        // Raw UTF-8, of every width.
        assert_eq!(ok("\"é中😀\"").as_str(), Some("é中😀"));
        // A surrogate pair is one character.
        assert_eq!(ok(r#""\ud83d\ude00""#).as_str(), Some("😀"));
        assert_eq!(ok(r#""x\uD834\uDD1Ey""#).as_str(), Some("x𝄞y"));
        assert_eq!(ok(r#""\udbff\udfff""#).as_str(), Some("\u{10ffff}"));
        // Lone or misordered surrogates have no character.
        for s in [
            r#""\ud83d""#,
            r#""\ud83dx""#,
            r#""\ud83d\u0041""#,
            r#""\ude00""#,
            r#""\ude00\ud83d""#,
            r#""\ud83d\""#,
        ] {
            let e = bad(s);
            assert!(
                e.message.contains("surrogate")
                    || e.message.contains("hex")
                    || e.message.contains("ends"),
                "{}: {}",
                s,
                e
            );
        }
        for s in [
            r#""\x41""#,
            r#""\u12""#,
            r#""\u12g4""#,
            "\"a",
            "\"a\\",
            r#""\'""#,
            "\"tab\there\"",
            "\"nl\n\"",
            "\"\u{1}\"",
        ] {
            bad(s);
        }
    }

    #[test]
    fn nested() {
        let v = ok(
            r#" { "a" : [1, {"b": [true, null, "x"]}, []], "c": {}, "d": {"e": {"f": -1.5}} } "#,
        );
        assert_eq!(v["a"][0].as_i64(), Some(1));
        assert_eq!(v["a"][1]["b"][0].as_bool(), Some(true));
        assert!(v["a"][1]["b"][1].is_null());
        assert_eq!(v["a"][1]["b"][2].as_str(), Some("x"));
        assert_eq!(v["a"][2].as_array().map(Vec::len), Some(0));
        assert_eq!(v["c"].as_object().map(BTreeMap::len), Some(0));
        assert_eq!(v["d"]["e"]["f"].as_f64(), Some(-1.5));
        assert!(v["a"][9].is_null() && v["zz"]["y"].is_null() && v[0].is_null());
        // Round trip: serialized, it parses back to the same value.
        assert_eq!(ok(&v.to_string()), v);
        assert_eq!(
            v.to_string(),
            r#"{"a":[1,{"b":[true,null,"x"]},[]],"c":{},"d":{"e":{"f":-1.5}}}"#
        );
    }

    #[test]
    fn depth_limit() {
        let deep_ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        ok(&deep_ok);
        let too_deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(bad(&too_deep).message.contains("deep"));
        // Far deeper: refused, not a stack overflow.
        bad(&"{\"a\":".repeat(100_000));
    }

    #[test]
    fn refuses_what_is_not_json() {
        for s in [
            "",
            " ",
            "{",
            "}",
            "[",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{a:1}",
            "{'a':1}",
            "{\"a\":}",
            "{1:2}",
            "tru",
            "nul",
            "True",
            "nulll",
            "1 2",
            "{} {}",
            "{}x",
            "[]]",
            "\"a\"\"b\"",
            "/*c*/1",
            "1 // c",
            "\u{feff}1",
            "\u{a0}1",
        ] {
            bad(s);
        }
        let e = bad("{\"a\":1} x");
        assert_eq!(e.offset, 8);
        assert!(e.to_string().contains("byte 8"), "{}", e);
        let e = bad(r#"{"a":1,"b":2,"a":3}"#);
        assert!(e.message.contains("duplicate key \"a\""), "{}", e);
        assert!(parse_bytes(b"\"\xff\"").is_err());
        assert_eq!(
            parse_bytes(b"[\"\xc3\xa9\"]").unwrap()[0].as_str(),
            Some("é")
        );
    }

    #[test]
    fn serializer_escapes() {
        let s: String = (0u8..0x20).map(char::from).collect();
        let out = Value::from(s.as_str()).to_string();
        assert_eq!(
            out,
            r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f""#
        );
        assert_eq!(ok(&out).as_str(), Some(s.as_str()));
        assert_eq!(Value::from("q\"b\\s/").to_string(), r#""q\"b\\s/""#);
        // Non-ASCII goes as UTF-8; U+2028/9 escaped; DEL as is.
        assert_eq!(Value::from("é中😀\u{7f}").to_string(), "\"é中😀\u{7f}\"");
        assert_eq!(
            Value::from("a\u{2028}b\u{2029}").to_string(),
            r#""a\u2028b\u2029""#
        );
        let obj = Value::object(vec![
            ("z\n", Value::from(1)),
            ("a", Value::from(vec![Value::Null, Value::from(false)])),
        ]);
        assert_eq!(obj.to_string(), r#"{"a":[null,false],"z\n":1}"#);
        for s in [
            "",
            "\u{10ffff}",
            "\0",
            "\\u0041",
            "\"\"",
            "\u{fffd}\u{feff}",
        ] {
            let v = Value::from(s);
            assert_eq!(ok(&v.to_string()), v);
        }
    }
}
