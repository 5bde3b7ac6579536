//! Standard base64 (RFC 4648, with padding), as Go's
//! `base64.StdEncoding` writes it: the encoding of `content_base64` and
//! of an exec stream's `"base64":true` chunks.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// data in base64.
pub(crate) fn encode(data: &[u8]) -> String {
    let mut out = String::with_capacity((data.len() + 2) / 3 * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn sextet(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// The bytes of s, strictly: padded to a multiple of 4, the standard
/// alphabet only, no whitespace, the unused bits of the last group zero.
pub(crate) fn decode(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return Err(format!(
            "base64 of {} characters: not a multiple of 4",
            b.len()
        ));
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (g, group) in b.chunks(4).enumerate() {
        let last = (g + 1) * 4 == b.len();
        let pad = group.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(format!("misplaced '=' in base64 at {}", g * 4));
        }
        let mut n = 0u32;
        for (i, &c) in group[..4 - pad].iter().enumerate() {
            match sextet(c) {
                Some(v) => n |= v << (18 - 6 * i),
                None => return Err(format!("not base64: {:?} at {}", char::from(c), g * 4 + i)),
            }
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - pad;
        if bytes[keep..].iter().any(|&x| x != 0) {
            return Err(format!("base64 with non-zero padding bits at {}", g * 4));
        }
        out.extend_from_slice(&bytes[..keep]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), enc);
            assert_eq!(decode(enc).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).collect();
        for n in 0..all.len() {
            assert_eq!(decode(&encode(&all[..n])).unwrap(), &all[..n]);
        }
        assert_eq!(encode(&[0xff, 0xfe, 0x00]), "//4A");
        assert_eq!(encode(&[0xfb, 0xef]), "++8=");
    }

    #[test]
    fn refuses_what_is_not_base64() {
        for s in [
            "Zg", "Zg=", "Z===", "Zg==Zg==", "Zm9v\n", "Zm 9v", "Zm9-", "Zm9_", "Zh==", "Zm9=x===",
            "====",
        ] {
            assert!(decode(s).is_err(), "{:?} accepted", s);
        }
    }
}
