//! The write-ahead log: the store's durability point.
//!
//! `<db>.wal` starts with `WAL_MAGIC` and the sequence number of its first
//! frame (u64 LE), then frames of `[u32 LE body length][seq u64 LE][blake3(body),
//! 32 bytes][body]` (the export stream's framing, with the sequence number in
//! front), where a body is the frame's sequence number again, the first eight
//! bytes of the previous frame's checksum (zero for the first frame: the
//! frames are chained, so a stale frame can never pass for the next one), and
//! then the batch's requests, each one CBOR value. A batch is acknowledged only after
//! its frames are written and the file fdatasynced; the redb commit that
//! follows is not durable on its own. Each redb transaction records the last
//! frame it contains (`meta["wal_seq"]`), so at open the frames after it are
//! replayed, whatever redb's last durable commit was.
//!
//! The file is preallocated (written with zeros) and overwritten in place: an
//! `fdatasync` of a write that does not change the file's size writes the data
//! alone, not the inode as well (about half the cost of an append here). So
//! the log's end is where the frames stop following each other: a frame whose
//! sequence number is not the next one is a stale frame from before the last
//! checkpoint, or zeros. A checkpoint (a durable redb commit) makes every frame
//! obsolete; the header then names the next sequence number as the first.

use crate::media::{WalIo, is_out_of_space};
use crate::ops::Op;
use std::io;

/// First bytes of a write-ahead log.
pub const WAL_MAGIC: &[u8; 8] = b"WRLDWAL2";
/// Magic, then the first frame's sequence number.
pub const WAL_HEADER: usize = 16;
/// Frame head: length, sequence number, checksum.
const FRAME_HEAD: usize = 44;
/// Body prefix: sequence number, link to the previous frame.
const BODY_PREFIX: usize = 16;
/// Largest frame body; a batch is cut into frames of about `WAL_FRAME_TARGET`.
pub const WAL_FRAME_MAX: usize = 1 << 30;
/// A batch's frame is closed once its body passes this size.
pub const WAL_FRAME_TARGET: usize = 8 << 20;

/// Why the log could not be read at open.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("write-ahead log: {0}")]
    Io(#[from] io::Error),
    #[error("write-ahead log is damaged at byte {offset}: {detail}")]
    Damaged { offset: u64, detail: String },
}

/// What reading the log at open found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalScan {
    /// Frames read whole, in order.
    pub frames: u64,
    /// Bytes of a torn last frame (written in part, never acknowledged),
    /// which is discarded.
    pub torn_bytes: u64,
    /// Sequence number of the last whole frame (0 when none).
    pub last_seq: u64,
}

/// One frame read back.
pub(crate) struct Frame {
    pub seq: u64,
    pub ops: Vec<Op>,
}

/// Why an append failed.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// A write failed: nothing of the batch is in the log (a frame written
    /// in part is torn, and the next frame overwrites it).
    Write(io::Error),
    /// The sync failed: the frames may or may not be durable.
    Sync(io::Error),
}

/// Frames written, not yet synced (`Wal::write`).
#[must_use = "written frames are the log's once synced"]
pub(crate) struct Written {
    start: u64,
    end: u64,
}

/// The open log: where the next frame goes.
pub(crate) struct Wal {
    io: Box<dyn WalIo>,
    end: u64,
    /// The link the next frame carries: the last frame's checksum, in part.
    pub(crate) link: u64,
    /// Bytes of frames since the last checkpoint.
    pub(crate) pending_bytes: u64,
}

impl Wal {
    /// Opens the log (writing its header when it is new, with `first_seq` as
    /// its first frame), reads every whole frame in sequence, and makes sure
    /// `prealloc` bytes are allocated. A torn frame that whole frames of the
    /// sequence follow is damage, not a torn tail, and is refused.
    pub(crate) fn open(
        io: Box<dyn WalIo>,
        first_seq: u64,
        prealloc: u64,
    ) -> Result<(Wal, Vec<Frame>, WalScan), WalError> {
        let len = io.len()?;
        if len < WAL_HEADER as u64 {
            // New, or torn before its header was whole: nothing was ever acknowledged.
            io.write_at(0, &header(first_seq))?;
        }
        let mut head = [0u8; WAL_HEADER];
        io.read_at(0, &mut head)?;
        if &head[..8] != WAL_MAGIC {
            return Err(WalError::Damaged { offset: 0, detail: "not a World write-ahead log (bad magic)".into() });
        }
        let mut expected = u64::from_le_bytes(head[8..].try_into().expect("eight bytes"));
        let len = io.len()?;
        let mut frames = vec![];
        let mut at = WAL_HEADER as u64;
        let mut link = 0;
        let mut scan = WalScan::default();
        loop {
            match read_frame(io.as_ref(), at, len, expected, link) {
                Read::Whole(frame, next, sum) => {
                    scan.frames += 1;
                    scan.last_seq = frame.seq;
                    expected += 1;
                    link = sum;
                    frames.push(frame);
                    at = next;
                }
                Read::End => break,
                Read::Undecodable(detail) => return Err(WalError::Damaged { offset: at, detail }),
                Read::Torn { next, detail } => {
                    // Whatever link the frame after a torn one carries, a whole
                    // frame of the next number there means acknowledged frames.
                    if let Some(next) = next
                        && let Read::Whole(..) = read_frame(io.as_ref(), next, len, expected + 1, ANY_LINK)
                    {
                        return Err(WalError::Damaged {
                            offset: at,
                            detail: format!("{detail}, and frame {} follows it whole", expected + 1),
                        });
                    }
                    scan.torn_bytes = next.unwrap_or(len).min(len) - at;
                    break;
                }
            }
        }
        preallocate(io.as_ref(), prealloc)?;
        io.sync_data()?;
        let wal = Wal { io, end: at, link, pending_bytes: at - WAL_HEADER as u64 };
        Ok((wal, frames, scan))
    }

    /// Writes `frames` after the last one and asks the device to start on
    /// them; `sync` makes them durable. A write that fails leaves the end
    /// where it was: the next frames overwrite what it left.
    pub(crate) fn write(&mut self, frames: &[Vec<u8>]) -> Result<Written, AppendError> {
        let start = self.end;
        let mut at = start;
        for f in frames {
            self.io.write_at(at, f).map_err(AppendError::Write)?;
            at += f.len() as u64;
        }
        self.io.start_writeback(start, at - start);
        Ok(Written { start, end: at })
    }

    /// Syncs what `write` wrote (frames sealed onto `self.link`, the last
    /// of them giving `link`): they are the log's from now on.
    pub(crate) fn sync(&mut self, written: Written, link: u64) -> Result<(), AppendError> {
        debug_assert_eq!(written.start, self.end, "frames are synced in the order they are written");
        self.io.sync_data().map_err(AppendError::Sync)?;
        self.end = written.end;
        self.link = link;
        self.pending_bytes += written.end - written.start;
        Ok(())
    }

    /// After a checkpoint: every frame up to `next_seq` is in the durable
    /// database, and the log starts again at its header.
    pub(crate) fn reset(&mut self, next_seq: u64) -> io::Result<()> {
        self.io.write_at(0, &header(next_seq))?;
        self.io.sync_data()?;
        self.end = WAL_HEADER as u64;
        self.link = 0;
        self.pending_bytes = 0;
        Ok(())
    }
}

/// Whether the log holds a frame (that the database may lack): what a
/// reader asks before it opens a store no writer runs on.
pub(crate) fn has_frames(io: &dyn WalIo) -> io::Result<bool> {
    let len = io.len()?;
    if len < WAL_HEADER as u64 {
        return Ok(false);
    }
    let mut head = [0u8; WAL_HEADER];
    io.read_at(0, &mut head)?;
    let first = u64::from_le_bytes(head[8..].try_into().expect("eight bytes"));
    Ok(!matches!(read_frame(io, WAL_HEADER as u64, len, first, 0), Read::End))
}

fn header(first_seq: u64) -> [u8; WAL_HEADER] {
    let mut h = [0u8; WAL_HEADER];
    h[..8].copy_from_slice(WAL_MAGIC);
    h[8..].copy_from_slice(&first_seq.to_le_bytes());
    h
}

/// Writes zeros up to `len` (never over what is there). Not `fallocate`: its
/// unwritten extents would make the first sync of each block write metadata.
/// A page per write: a larger write fills the page cache with large folios,
/// and each later in-place append would then be counted as a whole folio
/// written (see `media::page_at_a_time`). A full disk only leaves the log to
/// grow as it is written.
fn preallocate(io: &dyn WalIo, len: u64) -> io::Result<()> {
    let mut at = io.len()?;
    match crate::media::write_zeros(io, &mut at, len) {
        Err(e) if is_out_of_space(&e) => Ok(()),
        other => other,
    }
}

/// Builds a batch's frames: requests are added one by one; a frame closes when
/// it passes `WAL_FRAME_TARGET`.
pub(crate) struct FrameBuilder {
    frames: Vec<Vec<u8>>,
    next_seq: u64,
}

impl FrameBuilder {
    pub(crate) fn new(next_seq: u64) -> FrameBuilder {
        FrameBuilder { frames: vec![], next_seq }
    }

    /// Encodes one request; `false` when it cannot be journaled (too large
    /// for a frame), and then nothing of it is kept.
    pub(crate) fn push(&mut self, op: &Op) -> bool {
        if self.frames.last().is_none_or(|f| f.len() >= WAL_FRAME_TARGET) {
            let mut f = Vec::with_capacity(4096);
            f.extend_from_slice(&[0u8; FRAME_HEAD]);
            f.extend_from_slice(&self.next_seq.to_le_bytes());
            f.extend_from_slice(&[0u8; 8]);
            self.next_seq += 1;
            self.frames.push(f);
        }
        let frame = self.frames.last_mut().expect("a frame was just made");
        let mark = frame.len();
        if ciborium::into_writer(op, &mut *frame).is_err() || frame.len() - FRAME_HEAD > WAL_FRAME_MAX {
            frame.truncate(mark);
            return false;
        }
        true
    }

    /// The sequence number of the last frame (the one the transaction records).
    /// The bytes of the frames so far: more than the payloads they carry.
    pub(crate) fn bytes(&self) -> u64 {
        self.frames.iter().map(|f| f.len() as u64).sum()
    }

    pub(crate) fn last_seq(&self) -> Option<u64> {
        (!self.frames.is_empty()).then(|| self.next_seq - 1)
    }

    /// Seals every frame, the first linked to `link`: link, length, sequence
    /// number and checksum. Returns the frames and the link for the next batch.
    pub(crate) fn seal(mut self, mut link: u64) -> (Vec<Vec<u8>>, u64) {
        for f in &mut self.frames {
            f[FRAME_HEAD + 8..FRAME_HEAD + BODY_PREFIX].copy_from_slice(&link.to_le_bytes());
            let body_len = (f.len() - FRAME_HEAD) as u32;
            let seq: [u8; 8] = f[FRAME_HEAD..FRAME_HEAD + 8].try_into().expect("eight bytes");
            let sum = *blake3::hash(&f[FRAME_HEAD..]).as_bytes();
            f[..4].copy_from_slice(&body_len.to_le_bytes());
            f[4..12].copy_from_slice(&seq);
            f[12..FRAME_HEAD].copy_from_slice(&sum);
            link = link_of(&sum);
        }
        (self.frames, link)
    }
}

/// The link a frame's successor carries.
fn link_of(sum: &[u8; 32]) -> u64 {
    u64::from_le_bytes(sum[..8].try_into().expect("eight bytes"))
}

/// Accept a frame whatever its link (only to tell damage from a torn tail).
const ANY_LINK: u64 = u64::MAX;

enum Read {
    /// The frame, where the next one starts, and its link.
    Whole(Frame, u64, u64),
    /// A whole frame of the sequence whose requests do not decode.
    Undecodable(String),
    /// No frame of the sequence here: zeros, a stale frame, the file's end.
    End,
    /// The expected frame, written in part. `next`: where the one after it
    /// would start, when its length is believable.
    Torn { next: Option<u64>, detail: String },
}

/// Reads the frame at `at` if it is frame `expected`, linked to `link`.
fn read_frame(io: &dyn WalIo, at: u64, len: u64, expected: u64, link: u64) -> Read {
    if len.saturating_sub(at) < FRAME_HEAD as u64 {
        return Read::End;
    }
    let mut head = [0u8; FRAME_HEAD];
    if io.read_at(at, &mut head).is_err() {
        return Read::End;
    }
    let seq = u64::from_le_bytes(head[4..12].try_into().expect("eight bytes"));
    if seq != expected {
        return Read::End;
    }
    let body_len = u32::from_le_bytes(head[..4].try_into().expect("four bytes")) as u64;
    let next = at + FRAME_HEAD as u64 + body_len;
    if body_len < BODY_PREFIX as u64 || body_len > WAL_FRAME_MAX as u64 || next > len {
        return Read::Torn { next: None, detail: format!("frame {seq}'s length {body_len} does not fit the file") };
    }
    let mut body = vec![0u8; body_len as usize];
    if let Err(e) = io.read_at(at + FRAME_HEAD as u64, &mut body) {
        return Read::Torn { next: None, detail: format!("frame {seq} cannot be read: {e}") };
    }
    let sum = blake3::hash(&body);
    if sum.as_bytes() != &head[12..] || body[..8] != head[4..12] {
        return Read::Torn { next: Some(next), detail: format!("frame {seq} fails its checksum") };
    }
    let carried = u64::from_le_bytes(body[8..BODY_PREFIX].try_into().expect("eight bytes"));
    if link != ANY_LINK && carried != link {
        // Whole, numbered as the next, but written after another frame: stale.
        return Read::End;
    }
    let mut rest = &body[BODY_PREFIX..];
    let mut ops = vec![];
    while !rest.is_empty() {
        match ciborium::from_reader::<Op, _>(&mut rest) {
            Ok(op) => ops.push(op),
            Err(e) => return Read::Undecodable(format!("frame {seq} passes its checksum but does not decode: {e}")),
        }
    }
    Read::Whole(Frame { seq, ops }, next, link_of(sum.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Surface, TaskKey};
    use crate::payloads::MemoryFile;
    use crate::refs::Ref;
    use std::sync::{Arc, Mutex};

    /// A log file in memory that records what was asked of it.
    #[derive(Debug, Default)]
    struct Recorded {
        file: MemoryFile,
        asked: Mutex<Vec<String>>,
    }

    #[derive(Debug)]
    struct RecordedIo(Arc<Recorded>);

    impl RecordedIo {
        fn note(&self, what: String) {
            self.0.asked.lock().unwrap().push(what);
        }
    }

    impl WalIo for RecordedIo {
        fn len(&self) -> io::Result<u64> {
            self.0.file.len()
        }
        fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
            self.0.file.read_at(offset, out)
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.note(format!("write {offset}+{}", data.len()));
            self.0.file.write_at(offset, data)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.note("sync".into());
            self.0.file.sync_data()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.0.file.set_len(len)
        }
        fn start_writeback(&self, offset: u64, len: u64) {
            self.note(format!("writeback {offset}+{len}"));
        }
    }

    fn begin(id: &str) -> Op {
        let key = TaskKey { surface: Surface::Mcp, episode: "e".into(), task_id: id.into() };
        Op::begin_task(key, Ref::of(b"d"), 1)
    }

    #[test]
    fn a_batchs_frames_go_to_the_device_when_written_and_are_the_logs_once_synced() {
        let file = Arc::new(Recorded::default());
        let (mut wal, frames, _) = Wal::open(Box::new(RecordedIo(file.clone())), 1, 0).unwrap();
        assert!(frames.is_empty());
        file.asked.lock().unwrap().clear();
        let mut builder = FrameBuilder::new(1);
        assert!(builder.push(&begin("a")) && builder.push(&begin("b")));
        let (frames, link) = builder.seal(wal.link);
        let end = wal.end;
        let written = wal.write(&frames).unwrap();
        let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
        let asked = file.asked.lock().unwrap().clone();
        assert_eq!(asked.last(), Some(&format!("writeback {end}+{bytes}")), "{asked:?}");
        assert!(!asked.contains(&"sync".to_string()), "synced before the batch was applied: {asked:?}");
        assert_eq!((wal.end, wal.pending_bytes), (end, 0), "the frames are not the log's before their sync");
        wal.sync(written, link).unwrap();
        assert_eq!(file.asked.lock().unwrap().last().map(String::as_str), Some("sync"));
        assert_eq!((wal.end, wal.link, wal.pending_bytes), (end + bytes, link, bytes));
        let (_, read, scan) = Wal::open(Box::new(RecordedIo(file)), 1, 0).unwrap();
        assert_eq!(frames.len(), 1, "one frame a batch");
        assert_eq!((read.len(), scan.last_seq), (frames.len(), 1), "the batch's frame reads back");
        assert_eq!(read[0].ops.len(), 2);
    }
}
