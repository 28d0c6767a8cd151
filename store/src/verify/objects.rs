//! The pass over objects and their payloads, which dominate a store's bytes:
//! object rows and object numbers are walked together in sequence order
//! (both are keyed by it), and the payload file in file order through one
//! reused buffer per thread, over ranges of sequence numbers in parallel.

use super::redb::{Held, RowSum, Step, Verifier};
use super::report::{Counts, FaultKind, Options};
use crate::media::WalIo;
use crate::model::{EFFECT_RECORD_PREFIX, INVOCATION_RECORD_PREFIX, ObjectRow};
use crate::payloads::META_PAYLOAD_LEN;
use crate::refs::Ref;
use crate::rows;
use crate::tables::*;
use redb::{ReadableTable, ReadableTableMetadata};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of the payload file a thread reads at once.
pub const VERIFY_READ_BYTES: usize = 1 << 20;
/// What every thread of the pass reads and counts.
struct Pass<'p> {
    file: &'p dyn WalIo,
    file_len: u64,
    opts: &'p Options<'p>,
    /// Objects walked so far, of `total`.
    done: AtomicU64,
    total: u64,
}

/// What one range held: its first object's number and where the range's
/// payloads start and end in the file (to check that ranges meet), the
/// semantic index rows its objects call for, and its records claiming the
/// daemon that the journal does not name.
#[derive(Default)]
struct Walked {
    span: Option<(u64, u64, u64)>,
    semantic: RowSum,
    objects: u64,
    bytes: u64,
    held: Held,
}

impl Verifier<'_> {
    /// Rehashes every payload against the ref its object number names, and
    /// checks each object row: it has a number, it names its own sequence
    /// number, and its payload starts where the one before it ended, within
    /// the file; the rows end where `meta` says the file does. Sums the
    /// semantic index rows the objects call for (checked by `semantic_index`),
    /// and keeps in `held` the invocation records and the effect records no
    /// journal row names (checked by `owned_records`).
    pub(super) fn objects(
        &self,
        opts: &Options<'_>,
        counts: &mut Counts,
        semantic: &mut RowSum,
        held: &mut Held,
    ) -> Step {
        let Some(objects) = self.table(OBJECT_ROWS)? else { return Ok(()) };
        let total = objects.len().map_err(|e| e.to_string())?;
        let end = objects.last().map_err(|e| e.to_string())?.map(|(k, _)| k.value() + 1).unwrap_or(0);
        let file = self.snap.payload_file();
        let file_len = file.len().map_err(|e| format!("the payload file: {e}"))?;
        let pass = Pass { file, file_len, opts, done: AtomicU64::new(0), total };
        let parts = super::redb::in_ranges(end, opts.threads, |range| self.walk(range, &pass));
        let mut ended = None;
        for walked in parts {
            counts.objects += walked.objects;
            counts.payload_bytes += walked.bytes;
            semantic.rows += walked.semantic.rows;
            semantic.sum = semantic.sum.wrapping_add(walked.semantic.sum);
            held.invocations.extend(walked.held.invocations);
            held.effects.extend(walked.held.effects);
            let Some((seq, from, to)) = walked.span else { continue };
            let expected = ended.unwrap_or(0);
            if from != expected {
                let detail = format!("payload starts at {from}, the object before it ends at {expected}");
                self.sink.push("object_rows", seq, FaultKind::Mismatch, detail);
            }
            ended = Some(to);
        }
        let recorded = self.table(META)?.map(|t| t.get(META_PAYLOAD_LEN).map(|v| v.map(|v| v.value())));
        let recorded = recorded.transpose().map_err(|e| e.to_string())?.flatten().unwrap_or(0);
        if ended.unwrap_or(0) != recorded {
            let detail = format!("the objects' payloads end at {}, meta says {recorded}", ended.unwrap_or(0));
            self.sink.push("meta", META_PAYLOAD_LEN, FaultKind::Mismatch, detail);
        }
        Ok(())
    }

    /// The objects numbered in `range`.
    fn walk(&self, range: std::ops::Range<u64>, pass: &Pass<'_>) -> Walked {
        let mut walked = Walked::default();
        if let Err(e) = self.walk_rows(range, pass, &mut walked) {
            self.sink.push("object_rows", "(walk)", FaultKind::Engine, e);
        }
        walked
    }

    fn walk_rows(&self, range: std::ops::Range<u64>, pass: &Pass<'_>, walked: &mut Walked) -> Step {
        let Some(objects) = self.table(OBJECT_ROWS)? else { return Ok(()) };
        // The journal's rows by record number, walked beside the objects.
        let journal = self.table(RECORD_JOURNAL)?;
        let mut journaled = match &journal {
            Some(t) => Some(t.range(range.clone()).map_err(|e| e.to_string())?.peekable()),
            None => None,
        };
        let mut window = Window::new(pass.file, pass.file_len);
        let mut next_at = None;
        for item in objects.range(range).map_err(|e| e.to_string())? {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let seq = k.value();
            walked.objects += 1;
            let n = pass.done.fetch_add(1, Ordering::Relaxed) + 1;
            if let Some(p) = pass.opts.progress
                && (n.is_multiple_of(256) || n == pass.total)
            {
                p(n, pass.total);
            }
            let row: ObjectRow = match rows::decode("object_rows", &seq, v.value()) {
                Ok(row) => row,
                Err(c) => {
                    self.sink.corrupt(c);
                    next_at = None;
                    continue;
                }
            };
            self.check_row(seq, &row, next_at);
            next_at = Some(row.at + row.size);
            let (first, from) = walked.span.map_or((seq, row.at), |(first, from, _)| (first, from));
            walked.span = Some((first, from, row.at + row.size));
            walked.bytes += row.size;
            let r = row.hash;
            walked.semantic.add(&semantic_key(&row.semantic_id, &r), seq);
            if row.semantic_id.starts_with(INVOCATION_RECORD_PREFIX) {
                walked.held.invocations.push(seq);
            } else if row.semantic_id.starts_with(EFFECT_RECORD_PREFIX) && !has_row(&mut journaled, seq)? {
                walked.held.effects.push(r);
            }
            match window.bytes(row.at, row.size) {
                Ok(Some(payload)) => {
                    let actual = Ref::of(payload);
                    if actual != r {
                        self.sink.push("payloads", r, FaultKind::HashMismatch, format!("payload hashes to {actual}"));
                    }
                }
                Ok(None) => self.sink.push("payloads", r, FaultKind::Missing, "object has no payload"),
                Err(e) => return Err(format!("reading the payload file: {e}")),
            }
        }
        Ok(())
    }

    /// A row's own fields: its number, and where its payload starts.
    fn check_row(&self, seq: u64, row: &ObjectRow, expected_at: Option<u64>) {
        if row.seq != seq {
            self.sink.push("object_rows", seq, FaultKind::Mismatch, format!("row says payload {}", row.seq));
        }
        if let Some(expected) = expected_at
            && row.at != expected
        {
            let detail = format!("payload starts at {}, the object before it ends at {expected}", row.at);
            self.sink.push("object_rows", seq, FaultKind::Mismatch, detail);
        }
    }
}

/// Whether a walk forward over rows keyed by object number has one for
/// `seq` (asked in ascending order).
fn has_row<V: redb::Value + 'static>(
    rows: &mut Option<std::iter::Peekable<redb::Range<'_, u64, V>>>,
    seq: u64,
) -> Result<bool, String> {
    let Some(rows) = rows.as_mut() else { return Ok(false) };
    loop {
        match rows.peek() {
            Some(Ok((k, _))) if k.value() < seq => {
                rows.next();
            }
            Some(Ok((k, _))) => return Ok(k.value() == seq),
            Some(Err(e)) => return Err(e.to_string()),
            None => return Ok(false),
        }
    }
}

/// A reused buffer over the payload file, read forward.
struct Window<'f> {
    file: &'f dyn WalIo,
    file_len: u64,
    /// Where `buf` starts in the file.
    start: u64,
    buf: Vec<u8>,
    /// A payload larger than the buffer, read whole.
    large: Vec<u8>,
}

impl<'f> Window<'f> {
    fn new(file: &'f dyn WalIo, file_len: u64) -> Window<'f> {
        Window { file, file_len, start: 0, buf: vec![], large: vec![] }
    }

    /// The `size` bytes at `at`; `None` past the file's end.
    fn bytes(&mut self, at: u64, size: u64) -> std::io::Result<Option<&[u8]>> {
        let Some(end) = at.checked_add(size).filter(|end| *end <= self.file_len) else { return Ok(None) };
        let (size, in_buf) = (size as usize, at >= self.start && end <= self.start + self.buf.len() as u64);
        if in_buf {
            let from = (at - self.start) as usize;
            return Ok(Some(&self.buf[from..from + size]));
        }
        if size > VERIFY_READ_BYTES {
            self.large.resize(size, 0);
            self.file.read_at(at, &mut self.large)?;
            return Ok(Some(&self.large));
        }
        let len = (VERIFY_READ_BYTES as u64).min(self.file_len - at) as usize;
        self.buf.resize(len, 0);
        self.file.read_at(at, &mut self.buf)?;
        self.start = at;
        Ok(Some(&self.buf[..size]))
    }
}
