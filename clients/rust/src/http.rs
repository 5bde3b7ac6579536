//! The HTTP/1.1 this client speaks: one request per connection
//! (`Connection: close`), a request's head, a response's head, and its body framed by
//! Content-Length, chunked transfer encoding, or the connection's end.

use std::io::{self, BufRead, Read};

/// The longest line of a response's head (status line, header) read.
const MAX_LINE: u64 = 64 << 10;
/// The most header lines of a response read.
const MAX_HEADERS: usize = 256;

/// A request's head: Host, Connection: close, the extra headers, and
/// for a body (of content_length bytes) Content-Type: application/json
/// and Content-Length.
pub(crate) fn request_head(
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    content_length: Option<usize>,
) -> Vec<u8> {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n",
        method, path
    );
    for (k, v) in extra {
        head.push_str(&format!("{}: {}\r\n", k, v));
    }
    if let Some(n) = content_length {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            n
        ));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// A response's status line and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) reason: String,
    /// The headers in order, names as sent.
    pub(crate) headers: Vec<(String, String)>,
}

impl Head {
    /// The values of the header name (case-insensitive), in order.
    fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first value of the header name (case-insensitive).
    #[cfg(test)]
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.all(name).first().copied()
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn early_eof(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the connection ended {}", what),
    )
}

/// Reads one line, at most MAX_LINE bytes, without its CRLF (or LF).
fn read_line<R: BufRead>(r: &mut R, what: &str) -> io::Result<String> {
    let mut line = Vec::new();
    r.take(MAX_LINE).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        if line.len() as u64 >= MAX_LINE {
            return Err(invalid(format!("{} longer than {} bytes", what, MAX_LINE)));
        }
        return Err(early_eof(&format!("inside {}", what)));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map_err(|_| invalid(format!("{} is not UTF-8", what)))
}

/// Reads a response's head; interim (1xx) responses are skipped.
pub(crate) fn read_head<R: BufRead>(r: &mut R) -> io::Result<Head> {
    loop {
        let line = read_line(r, "the status line")?;
        let mut parts = line.splitn(3, ' ');
        let version = parts.next().unwrap_or("");
        let code = parts.next().unwrap_or("");
        let reason = parts.next().unwrap_or("").to_string();
        if !version.starts_with("HTTP/1.")
            || code.len() != 3
            || !code.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(invalid(format!("not an HTTP/1.x status line: {:?}", line)));
        }
        let status: u16 = code
            .parse()
            .map_err(|_| invalid(format!("bad status {:?}", code)))?;
        let mut headers = Vec::new();
        loop {
            let line = read_line(r, "a header")?;
            if line.is_empty() {
                break;
            }
            if headers.len() >= MAX_HEADERS {
                return Err(invalid(format!("more than {} headers", MAX_HEADERS)));
            }
            let (k, v) = match line.split_once(':') {
                Some(kv) => kv,
                None => return Err(invalid(format!("a header line with no ':': {:?}", line))),
            };
            if k.is_empty() || k.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(invalid(format!("a bad header name: {:?}", k)));
            }
            headers.push((k.to_string(), v.trim_matches(&[' ', '\t'][..]).to_string()));
        }
        if (100..200).contains(&status) && status != 101 {
            continue; // 100 Continue and the like: the response follows
        }
        return Ok(Head {
            status,
            reason,
            headers,
        });
    }
}

/// How a response's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (204, 304).
    Empty,
    /// Content-Length bytes.
    Length(u64),
    /// Chunked transfer encoding.
    Chunked,
    /// Everything until the connection ends.
    Close,
}

/// The framing of the body that follows head (a response to anything
/// but HEAD).
pub(crate) fn framing(head: &Head) -> io::Result<Framing> {
    if head.status == 204 || head.status == 304 {
        return Ok(Framing::Empty);
    }
    let te: Vec<&str> = head
        .all("Transfer-Encoding")
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(last) = te.last() {
        // Transfer-Encoding wins over any Content-Length (RFC 9112 6.3);
        // chunked must be the last coding, and this client decodes no
        // other.
        if te.len() == 1 && last.eq_ignore_ascii_case("chunked") {
            return Ok(Framing::Chunked);
        }
        return Err(invalid(format!(
            "unsupported Transfer-Encoding: {}",
            te.join(", ")
        )));
    }
    let mut length = None;
    for v in head.all("Content-Length") {
        for part in v.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid(format!("a bad Content-Length: {:?}", v)));
            }
            let n: u64 = part
                .parse()
                .map_err(|_| invalid(format!("a bad Content-Length: {:?}", v)))?;
            if length.map_or(false, |l| l != n) {
                return Err(invalid("Content-Length headers that differ".to_string()));
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    })
}

/// A response's body, read as its framing says: it ends (read returns
/// 0) where the body does, and fails (UnexpectedEof, InvalidData) when
/// the connection ends early or the framing is broken.
pub(crate) struct Body<R> {
    r: R,
    framing: Framing,
    /// Length: the bytes left; Chunked: the bytes left of this chunk.
    left: u64,
    chunk: ChunkState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Before a chunk's size line.
    Size,
    /// In a chunk's data.
    Data,
    /// Past the last chunk and its trailers.
    Done,
}

impl<R: BufRead> Body<R> {
    pub(crate) fn new(r: R, framing: Framing) -> Body<R> {
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        Body {
            r,
            framing,
            left,
            chunk: ChunkState::Size,
        }
    }

    /// Reads a chunk's size line (its extensions ignored); at the last
    /// chunk, reads the trailers too.
    fn next_chunk(&mut self) -> io::Result<()> {
        let line = read_line(&mut self.r, "a chunk's size line")?;
        let size = line
            .split(';')
            .next()
            .unwrap_or("")
            .trim_end_matches([' ', '\t']);
        if size.is_empty() || size.len() > 16 || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(invalid(format!("a bad chunk size: {:?}", line)));
        }
        let n = u64::from_str_radix(size, 16)
            .map_err(|_| invalid(format!("a bad chunk size: {:?}", line)))?;
        if n == 0 {
            // The trailer section, to its empty line.
            let mut count = 0;
            while !read_line(&mut self.r, "the trailers")?.is_empty() {
                count += 1;
                if count > MAX_HEADERS {
                    return Err(invalid(format!("more than {} trailers", MAX_HEADERS)));
                }
            }
            self.chunk = ChunkState::Done;
        } else {
            self.left = n;
            self.chunk = ChunkState::Data;
        }
        Ok(())
    }

    fn read_chunked(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.chunk {
                ChunkState::Done => return Ok(0),
                ChunkState::Size => self.next_chunk()?,
                ChunkState::Data => {
                    let want = buf
                        .len()
                        .min(usize::try_from(self.left).unwrap_or(usize::MAX));
                    let n = self.r.read(&mut buf[..want])?;
                    if n == 0 {
                        return Err(early_eof("inside a chunk"));
                    }
                    self.left -= n as u64;
                    if self.left == 0 {
                        let mut crlf = [0u8; 2];
                        self.r.read_exact(&mut crlf).map_err(|e| {
                            if e.kind() == io::ErrorKind::UnexpectedEof {
                                early_eof("after a chunk")
                            } else {
                                e
                            }
                        })?;
                        if &crlf != b"\r\n" {
                            return Err(invalid("a chunk not followed by CRLF".to_string()));
                        }
                        self.chunk = ChunkState::Size;
                    }
                    return Ok(n);
                }
            }
        }
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self.framing {
            Framing::Empty => Ok(0),
            Framing::Close => self.r.read(buf),
            Framing::Chunked => self.read_chunked(buf),
            Framing::Length(_) => {
                if self.left == 0 {
                    return Ok(0);
                }
                let want = buf
                    .len()
                    .min(usize::try_from(self.left).unwrap_or(usize::MAX));
                let n = self.r.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(early_eof(&format!(
                        "{} bytes before the end of the body",
                        self.left
                    )));
                }
                self.left -= n as u64;
                Ok(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    /// A reader that hands out at most n bytes per read: framing must
    /// not depend on how the bytes arrive.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Reads a whole response: its head and its body.
    fn response(raw: &[u8], per_read: usize) -> io::Result<(Head, Vec<u8>)> {
        let mut r = BufReader::with_capacity(per_read.max(1), Trickle(raw, per_read));
        let head = read_head(&mut r)?;
        let f = framing(&head)?;
        let mut body = Vec::new();
        Body::new(&mut r, f).read_to_end(&mut body)?;
        Ok((head, body))
    }

    fn every_way(raw: &[u8]) -> io::Result<(Head, Vec<u8>)> {
        let first = response(raw, raw.len().max(1));
        for n in [1, 2, 3, 7] {
            let other = response(raw, n);
            match (&first, &other) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "read {} bytes at a time", n),
                (Err(a), Err(b)) => assert_eq!(
                    a.kind(),
                    b.kind(),
                    "read {} bytes at a time: {} vs {}",
                    n,
                    a,
                    b
                ),
                _ => panic!("read {} bytes at a time: {:?} vs {:?}", n, first, other),
            }
        }
        first
    }

    #[test]
    fn request_bytes() {
        let head = request_head("POST", "/v1/exec", &[("Hutch-Stdin", "stream")], Some(4));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /v1/exec HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nHutch-Stdin: stream\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n"
        );
        let head = request_head("GET", "/v1/health", &[], None);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn content_length() {
        let (h, body) = every_way(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 11\r\n\r\n{\"a\":true}\nIGNORED").unwrap();
        assert_eq!((h.status, h.reason.as_str()), (200, "OK"));
        assert_eq!(h.header("CONTENT-TYPE"), Some("application/json"));
        assert_eq!(body, b"{\"a\":true}\n");
        let (h, body) = every_way(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!((h.status, body.len()), (404, 0));
        // Repeated, equal: one length.
        assert_eq!(
            every_way(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nab")
                .unwrap()
                .1,
            b"ab"
        );
        // The connection ends before the body does.
        let e = every_way(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        for bad in [
            &b"Content-Length: 2\r\nContent-Length: 3"[..],
            b"Content-Length: -1",
            b"Content-Length: 0x10",
            b"Content-Length: ",
            b"Content-Length: 99999999999999999999999",
        ] {
            let raw = [&b"HTTP/1.1 200 OK\r\n"[..], bad, b"\r\n\r\nab"].concat();
            assert_eq!(
                every_way(&raw).unwrap_err().kind(),
                io::ErrorKind::InvalidData,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn chunked() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n\
                    13\r\n{\"type\":\"started\"}\n\r\n\
                    5;ext=1\r\nhello\r\n\
                    A \r\n0123456789\r\n\
                    0\r\nTrailer: x\r\n\r\nNEXT";
        let (_, body) = every_way(raw).unwrap();
        assert_eq!(body, b"{\"type\":\"started\"}\nhello0123456789");
        // Transfer-Encoding wins over Content-Length.
        let (_, body) = every_way(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n").unwrap();
        assert_eq!(body, b"ab");
        // Chunk data holding CRLFs and binary bytes.
        let (_, body) = every_way(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n\r\n\xff\x00\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(body, b"\r\n\xff\x00");
        // An empty body.
        assert_eq!(
            every_way(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
                .unwrap()
                .1,
            b""
        );
    }

    #[test]
    fn chunked_broken() {
        let pre = &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..];
        for (rest, kind) in [
            (&b"5\r\nhel"[..], io::ErrorKind::UnexpectedEof),
            (b"5\r\nhello", io::ErrorKind::UnexpectedEof),
            (b"5\r\nhello\r\n", io::ErrorKind::UnexpectedEof),
            (b"5\r\nhello\r\n0\r\n", io::ErrorKind::UnexpectedEof),
            (b"", io::ErrorKind::UnexpectedEof),
            (b"5\r\nhelloXY0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"5\r\nhello world\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"g\r\n", io::ErrorKind::InvalidData),
            (b"-1\r\n", io::ErrorKind::InvalidData),
            (b"\r\n", io::ErrorKind::InvalidData),
            (b"+5\r\nhello\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"11111111111111111\r\n", io::ErrorKind::InvalidData),
            (b"0x5\r\nhello\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
        ] {
            let e = every_way(&[pre, rest].concat()).unwrap_err();
            assert_eq!(e.kind(), kind, "{:?}: {}", String::from_utf8_lossy(rest), e);
        }
        // A coding this client does not decode.
        let e =
            every_way(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").unwrap_err();
        assert!(e.to_string().contains("gzip"), "{}", e);
    }

    #[test]
    fn until_close_and_empty() {
        let (_, body) = every_way(b"HTTP/1.1 200 OK\r\n\r\nall of it\n").unwrap();
        assert_eq!(body, b"all of it\n");
        let (h, body) = every_way(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n").unwrap();
        assert_eq!((h.status, body.len()), (204, 0));
    }

    #[test]
    fn heads() {
        // An interim response is skipped; LF alone ends a line too.
        let (h, body) = every_way(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\nX-A:  spaced \t\nContent-Length: 1\n\nz").unwrap();
        assert_eq!(
            (
                h.status,
                h.reason.as_str(),
                h.header("x-a"),
                body.as_slice()
            ),
            (403, "Forbidden", Some("spaced"), &b"z"[..])
        );
        // A reason is optional.
        assert_eq!(
            every_way(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n")
                .unwrap()
                .0
                .status,
            200
        );
        for raw in [
            &b"HTTP/2 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n: x\r\n\r\n",
        ] {
            assert_eq!(
                every_way(raw).unwrap_err().kind(),
                io::ErrorKind::InvalidData,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        for raw in [&b""[..], b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK\r\nA: b\r\n"] {
            assert_eq!(
                every_way(raw).unwrap_err().kind(),
                io::ErrorKind::UnexpectedEof,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        let long = [
            &b"HTTP/1.1 200 OK\r\nX: "[..],
            &vec![b'a'; MAX_LINE as usize],
            b"\r\n\r\n",
        ]
        .concat();
        assert!(response(&long, 4096)
            .unwrap_err()
            .to_string()
            .contains("longer than"));
        let many = [
            &b"HTTP/1.1 200 OK\r\n"[..],
            &b"A: b\r\n".repeat(MAX_HEADERS + 1),
            b"\r\n",
        ]
        .concat();
        assert!(response(&many, 4096)
            .unwrap_err()
            .to_string()
            .contains("headers"));
    }

    #[test]
    fn body_stops_at_its_end() {
        // The reader is left just past the body: nothing beyond is read.
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\nREST";
        let mut r = Cursor::new(&raw[..]);
        let head = read_head(&mut r).unwrap();
        let mut body = Vec::new();
        Body::new(&mut r, framing(&head).unwrap())
            .read_to_end(&mut body)
            .unwrap();
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        assert_eq!((body.as_slice(), rest.as_str()), (&b"a"[..], "REST"));
    }
}
