//! An incremental Server-Sent Events decoder over a byte stream (WHATWG HTML §9.2.6).
//!
//! Feed it bytes as they arrive, in any split; it yields each complete event once its blank line
//! arrives. No line-length limit (a 10 MB `data:` line decodes), LF, CRLF and lone-CR line ends,
//! comments (`:` keep-alives), multi-line `data`, a leading BOM. Every byte is scanned once, so a
//! long line fed in small reads costs linear time.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when given (the default type is "message").
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` seen so far.
    pub id: Option<String>,
}

/// Decoder state between reads.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned for a line end.
    scanned: usize,
    /// The previous line ended in CR: skip one LF that follows.
    after_cr: bool,
    started: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    last_id: Option<String>,
    /// Comment lines seen (keep-alives).
    pub comments: u64,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `bytes`, appending every event completed by them to `out`.
    ///
    /// Lines wholly inside `bytes` are decoded where they lie; only an unfinished line's bytes
    /// are kept (copied) for the next read.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started || !self.buf.is_empty() {
            self.buf.extend_from_slice(bytes);
            if !self.started {
                if self.buf.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.buf) {
                    return; // maybe a BOM still arriving
                }
                self.started = true;
                if self.buf.starts_with(b"\xEF\xBB\xBF") {
                    self.buf.drain(..3);
                }
            }
            // the buffer is taken out while its lines are handed to `line` (which needs
            // `&mut self`), so that a line is borrowed, not copied
            let buf = std::mem::take(&mut self.buf);
            let start = self.lines(&buf, self.scanned, out);
            self.buf = buf;
            self.buf.drain(..start);
        } else {
            // nothing pending (the usual case: reads end at event boundaries): no copy
            let start = self.lines(bytes, 0, out);
            self.buf.extend_from_slice(&bytes[start..]);
        }
        self.scanned = self.buf.len();
    }

    /// Hands every complete line of `buf` to [`Self::line`], scanning for line ends from
    /// `from`; returns where the unfinished rest begins.
    fn lines(&mut self, buf: &[u8], from: usize, out: &mut Vec<SseEvent>) -> usize {
        let mut start = 0;
        let mut i = from;
        while i < buf.len() {
            if self.after_cr && i == start {
                self.after_cr = false;
                if buf[i] == b'\n' {
                    start += 1;
                    i += 1;
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', &buf[i..]) {
                None => break,
                Some(k) => {
                    let end = i + k;
                    let raw = &buf[start..end];
                    // valid UTF-8 (the usual case) is checked on the fast path and borrowed
                    match std::str::from_utf8(raw) {
                        Ok(line) => self.line(line, out),
                        Err(_) => self.line(&String::from_utf8_lossy(raw), out),
                    }
                    self.after_cr = buf[end] == b'\r';
                    start = end + 1;
                    i = start;
                }
            }
        }
        start
    }

    /// Bytes of the event being received: its data so far and its unfinished line.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() + self.data.len()
    }

    /// Gives back an event's `data` once it has been read, so the next event's text reuses its
    /// allocation (optional: a decoder that is given nothing back allocates per event).
    pub fn recycle(&mut self, mut data: String) {
        if self.data.capacity() == 0 && !self.has_data {
            data.clear();
            self.data = data;
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                    id: self.last_id.clone(),
                });
            }
            self.data.clear();
            self.has_data = false;
            self.event = None;
            return;
        }
        if line.starts_with(':') {
            self.comments += 1;
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            _ => {}
        }
    }

    /// True when bytes of an unfinished line or event are pending (the stream ended mid-event).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.has_data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        out
    }

    fn data(v: &[SseEvent]) -> Vec<&str> {
        v.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn basic_events_and_line_endings() {
        let lf = decode(&[b"data: a\n\ndata: b\n\n"]);
        let crlf = decode(&[b"data: a\r\n\r\ndata: b\r\n\r\n"]);
        let cr = decode(&[b"data: a\r\rdata: b\r\r"]);
        assert_eq!(data(&lf), vec!["a", "b"]);
        assert_eq!(lf, crlf);
        assert_eq!(lf, cr);
    }

    #[test]
    fn split_anywhere_including_between_cr_and_lf() {
        let whole = b"data: {\"x\":1}\r\n\r\n: keep-alive\r\n\r\ndata: [DONE]\r\n\r\n";
        let expect = decode(&[whole]);
        assert_eq!(data(&expect), vec!["{\"x\":1}", "[DONE]"]);
        for cut in 0..whole.len() {
            for cut2 in cut..whole.len() {
                let got = decode(&[&whole[..cut], &whole[cut..cut2], &whole[cut2..]]);
                assert_eq!(got, expect, "cuts at {cut}, {cut2}");
            }
        }
    }

    #[test]
    fn comments_multiline_fields_and_bom() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.feed(b"\xEF\xBB", &mut out);
        d.feed(b"\xBF: hi\nevent: error\ndata: line1\ndata:line2\ndata\nid: 7\nretry: 5\nunknown: x\n\n", &mut out);
        assert_eq!(
            out,
            vec![SseEvent { event: Some("error".into()), data: "line1\nline2\n".into(), id: Some("7".into()) }]
        );
        assert_eq!(d.comments, 1);
        // an event with no data is not dispatched; its event type is reset
        out.clear();
        d.feed(b"event: x\n\ndata: y\n\n", &mut out);
        assert_eq!(out, vec![SseEvent { event: None, data: "y".into(), id: Some("7".into()) }]);
    }

    #[test]
    fn ten_megabyte_line() {
        let big = "x".repeat(10 * 1024 * 1024);
        let stream = format!("data: {big}\n\ndata: [DONE]\n\n");
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in stream.as_bytes().chunks(16 * 1024) {
            d.feed(c, &mut out);
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].data.len(), big.len());
        assert!(!d.has_partial());
    }

    #[test]
    fn recycled_data_is_reused_and_direct_reads_keep_only_the_rest() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        // a read ending mid-line keeps only that line's bytes; the next completes it
        d.feed(b"data: a\n\ndata: b", &mut out);
        assert_eq!(data(&out), vec!["a"]);
        assert_eq!(d.buf, b"data: b");
        let first = out.pop().expect("event");
        let cap = first.data.capacity();
        d.recycle(first.data);
        d.feed(b"c\n\n", &mut out);
        assert_eq!(data(&out), vec!["bc"]);
        // the given-back buffer carried the next event's text
        assert_eq!(out[0].data.capacity(), cap);
        assert!(!d.has_partial());
        // invalid UTF-8 inside a line is replaced, not dropped
        out.clear();
        d.feed(b"data: x\xFFy\n\n", &mut out);
        assert_eq!(data(&out), vec!["x\u{FFFD}y"]);
    }

    #[test]
    fn partial_event_at_end_is_reported() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.feed(b"data: a\n\ndata: b", &mut out);
        assert_eq!(data(&out), vec!["a"]);
        assert!(d.has_partial());
    }

    /// Property test against an independent decoder (the `eventsource-stream` crate).
    mod against_eventsource_stream {
        use super::*;
        use futures::StreamExt;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Line {
            Data(String),
            Event(String),
            Comment(String),
            Blank,
        }

        fn line() -> impl Strategy<Value = Line> {
            let text = "[a-zA-Z0-9 {}\":,\\[\\]é]{0,12}";
            prop_oneof![
                4 => text.prop_map(Line::Data),
                1 => "[a-z]{1,6}".prop_map(Line::Event),
                1 => text.prop_map(Line::Comment),
                3 => Just(Line::Blank),
            ]
        }

        fn render(lines: &[Line], eol: &[&str]) -> Vec<u8> {
            let mut s = String::new();
            for (i, l) in lines.iter().enumerate() {
                match l {
                    Line::Data(d) => s.push_str(&format!("data: {d}")),
                    Line::Event(e) => s.push_str(&format!("event: {e}")),
                    Line::Comment(c) => s.push_str(&format!(":{c}")),
                    Line::Blank => {}
                }
                s.push_str(eol[i % eol.len()]);
            }
            s.push_str("\n\n");
            s.into_bytes()
        }

        fn reference(bytes: Vec<u8>, cuts: &[usize]) -> Vec<(String, String)> {
            let mut pieces = Vec::new();
            let mut last = 0;
            for &c in cuts {
                let c = c.min(bytes.len()).max(last);
                pieces.push(Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(&bytes[last..c])));
                last = c;
            }
            pieces.push(Ok(bytes::Bytes::copy_from_slice(&bytes[last..])));
            let stream = eventsource_stream::EventStream::new(futures::stream::iter(pieces));
            futures::executor::block_on(stream.collect::<Vec<_>>())
                .into_iter()
                .map(|e| {
                    let e = e.expect("reference decoder error");
                    (e.event, e.data)
                })
                .collect()
        }

        proptest! {
            #[test]
            fn same_events_as_reference(lines in proptest::collection::vec(line(), 0..30),
                                         crlf in any::<bool>(),
                                         mut cuts in proptest::collection::vec(0usize..400, 0..6)) {
                let eol: &[&str] = if crlf { &["\r\n"] } else { &["\n"] };
                let bytes = render(&lines, eol);
                cuts.sort();
                let want = reference(bytes.clone(), &cuts);
                let mut d = SseDecoder::new();
                let mut out = Vec::new();
                let mut last = 0;
                for &c in &cuts {
                    let c = c.min(bytes.len()).max(last);
                    d.feed(&bytes[last..c], &mut out);
                    last = c;
                }
                d.feed(&bytes[last..], &mut out);
                let got: Vec<(String, String)> = out
                    .into_iter()
                    .map(|e| (e.event.unwrap_or_else(|| "message".into()), e.data))
                    .collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
