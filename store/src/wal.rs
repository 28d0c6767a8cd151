//! The write-ahead log: the store's durability point.
//!
//! `<db>.wal` is `WAL_MAGIC` followed by frames of
//! `[u32 LE body length][blake3(body), 32 bytes][body]` (the export stream's
//! framing), where a body is the frame's sequence number (u64 LE) and then the
//! batch's requests, each one CBOR value. A batch is acknowledged only after
//! its frames are written and the file fdatasynced; the redb commit that
//! follows is not durable on its own. Each redb transaction records the last
//! frame it contains (`meta["wal_seq"]`), so at open the frames after it are
//! replayed, whatever redb's last durable commit was. A checkpoint (a durable
//! redb commit) makes every frame obsolete, and the file is cut back to its
//! magic.

use crate::media::WalIo;
use crate::ops::Op;
use std::io;

/// First bytes of a write-ahead log.
pub const WAL_MAGIC: &[u8; 8] = b"WRLDWAL1";
/// Frame header: length and checksum.
const FRAME_HEAD: usize = 36;
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

/// Why an append failed.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// A write failed and the file was cut back: nothing of the batch is in the log.
    Write(io::Error),
    /// The sync failed: the frames may or may not be durable.
    Sync(io::Error),
    /// A write failed and cutting the file back failed too.
    CutBack(io::Error),
}

/// What reading the log at open found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalScan {
    /// Frames read whole, in order.
    pub frames: u64,
    /// Bytes after the last whole frame: a torn write that was never
    /// acknowledged. They are cut off.
    pub torn_bytes: u64,
    /// Sequence number of the last whole frame (0 when none).
    pub last_seq: u64,
}

/// One frame read back.
pub(crate) struct Frame {
    pub seq: u64,
    pub ops: Vec<Op>,
}

/// The open log: where the next frame goes.
pub(crate) struct Wal {
    io: Box<dyn WalIo>,
    end: u64,
    /// Bytes of frames since the last checkpoint.
    pub(crate) pending_bytes: u64,
}

impl Wal {
    /// Opens the log (writing its magic when it is new), reads every whole
    /// frame, and cuts a torn tail. A frame that fails its checksum while a
    /// whole frame follows it is damage, not a torn tail, and is refused.
    pub(crate) fn open(io: Box<dyn WalIo>) -> Result<(Wal, Vec<Frame>, WalScan), WalError> {
        let len = io.len()?;
        if len < WAL_MAGIC.len() as u64 {
            // New, or torn before its magic was whole: nothing was ever acknowledged.
            io.set_len(0)?;
            io.write_at(0, WAL_MAGIC)?;
            io.sync_data()?;
            let torn_bytes = len;
            let wal = Wal { io, end: WAL_MAGIC.len() as u64, pending_bytes: 0 };
            return Ok((wal, vec![], WalScan { torn_bytes, ..WalScan::default() }));
        }
        let mut magic = [0u8; 8];
        io.read_at(0, &mut magic)?;
        if &magic != WAL_MAGIC {
            return Err(WalError::Damaged { offset: 0, detail: "not a World write-ahead log (bad magic)".into() });
        }
        let mut frames = vec![];
        let mut at = WAL_MAGIC.len() as u64;
        let mut scan = WalScan::default();
        loop {
            match read_frame(io.as_ref(), at, len) {
                Ok(Some((frame, next))) => {
                    if scan.last_seq != 0 && frame.seq != scan.last_seq + 1 {
                        return Err(WalError::Damaged {
                            offset: at,
                            detail: format!("frame {} follows frame {}", frame.seq, scan.last_seq),
                        });
                    }
                    scan.frames += 1;
                    scan.last_seq = frame.seq;
                    frames.push(frame);
                    at = next;
                }
                Ok(None) => break,
                Err(Bad { next: Some(next), detail })
                    if read_frame(io.as_ref(), next, len).is_ok_and(|f| f.is_some()) =>
                {
                    return Err(WalError::Damaged {
                        offset: at,
                        detail: format!("{detail}, and whole frames follow it"),
                    });
                }
                Err(Bad { .. }) => break,
            }
        }
        scan.torn_bytes = len - at;
        if scan.torn_bytes > 0 {
            io.set_len(at)?;
            io.sync_data()?;
        }
        let wal = Wal { io, end: at, pending_bytes: at - WAL_MAGIC.len() as u64 };
        Ok((wal, frames, scan))
    }

    /// Writes `frames` after the last one and syncs once. A failed write is
    /// cut back, so nothing of the batch remains to replay; a failed sync
    /// leaves it unknown whether the frames are durable.
    pub(crate) fn append(&mut self, frames: &[Vec<u8>]) -> Result<(), AppendError> {
        let start = self.end;
        let mut at = start;
        for f in frames {
            if let Err(e) = self.io.write_at(at, f) {
                return match self.io.set_len(start) {
                    Ok(()) => Err(AppendError::Write(e)),
                    Err(cut) => Err(AppendError::CutBack(cut)),
                };
            }
            at += f.len() as u64;
        }
        self.io.sync_data().map_err(AppendError::Sync)?;
        self.end = at;
        self.pending_bytes += at - start;
        Ok(())
    }

    /// After a checkpoint: every frame is in the durable database.
    pub(crate) fn reset(&mut self) -> io::Result<()> {
        self.io.set_len(WAL_MAGIC.len() as u64)?;
        self.io.sync_data()?;
        self.end = WAL_MAGIC.len() as u64;
        self.pending_bytes = 0;
        Ok(())
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
    pub(crate) fn last_seq(&self) -> Option<u64> {
        (!self.frames.is_empty()).then(|| self.next_seq - 1)
    }

    /// Seals every frame: length and checksum into its head.
    pub(crate) fn seal(mut self) -> Vec<Vec<u8>> {
        for f in &mut self.frames {
            let body_len = (f.len() - FRAME_HEAD) as u32;
            let sum = *blake3::hash(&f[FRAME_HEAD..]).as_bytes();
            f[..4].copy_from_slice(&body_len.to_le_bytes());
            f[4..FRAME_HEAD].copy_from_slice(&sum);
        }
        self.frames
    }
}

struct Bad {
    /// Where the next frame would start, when the length field is believable.
    next: Option<u64>,
    detail: String,
}

/// Reads the frame at `at`: `Ok(None)` at the end of the file.
fn read_frame(io: &dyn WalIo, at: u64, len: u64) -> Result<Option<(Frame, u64)>, Bad> {
    if at == len {
        return Ok(None);
    }
    let io_err = |e: io::Error| Bad { next: None, detail: format!("read failed: {e}") };
    if len - at < FRAME_HEAD as u64 {
        return Err(Bad { next: None, detail: "a frame head is cut short".into() });
    }
    let mut head = [0u8; FRAME_HEAD];
    io.read_at(at, &mut head).map_err(io_err)?;
    let body_len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as u64;
    let next = at + FRAME_HEAD as u64 + body_len;
    if body_len < 8 || body_len > WAL_FRAME_MAX as u64 || next > len {
        return Err(Bad { next: None, detail: format!("frame length {body_len} does not fit the file") });
    }
    let mut body = vec![0u8; body_len as usize];
    io.read_at(at + FRAME_HEAD as u64, &mut body).map_err(io_err)?;
    if blake3::hash(&body).as_bytes() != &head[4..] {
        return Err(Bad { next: Some(next), detail: "frame checksum mismatch".into() });
    }
    let seq = u64::from_le_bytes(body[..8].try_into().expect("eight bytes"));
    let mut rest = &body[8..];
    let mut ops = vec![];
    while !rest.is_empty() {
        let op: Op = ciborium::from_reader(&mut rest)
            .map_err(|e| Bad { next: Some(next), detail: format!("frame {seq} does not decode: {e}") })?;
        ops.push(op);
    }
    Ok(Some((Frame { seq, ops }, next)))
}
