//! The payload file (`<db>.payloads`): every object's payload bytes, one
//! after another in the order objects are numbered, outside the B-tree. An
//! object's row keeps where its bytes start (`ObjectRow::at`) and how many
//! there are (`size`), so the rows of objects `0..n` cover the file from 0
//! to their end without a gap, and the database's `meta` records that end
//! (`META_PAYLOAD_LEN`) in the transaction that writes the rows.
//!
//! Why outside: a payload in redb is copied into a fresh page at every read
//! (a 64 KiB payload takes a 128 KiB page), so `verify` spent as long
//! fetching as hashing; here it reads the file in order into reused buffers.
//! And a batch's payloads are one append instead of one B-tree insert each.
//!
//! Durability needs no sync of its own per batch: the write-ahead log's
//! frames carry the payloads, and the file is synced before every durable
//! commit (a checkpoint), so a durable database never names bytes the file
//! may lack. Bytes past the recorded end are a lost batch's (or zeros set
//! aside); opening keeps them as room that appends overwrite, and replaying
//! the log writes the lost batch's again at the same offsets (requests are
//! deterministic), so a replay on a full disk needs no new space. Space for
//! a batch is set aside before its frames are written (`reserve`), so a
//! batch whose frames are durable cannot meet a full disk while it is
//! applied: zeros are written and synced ahead of the end, as the log's are
//! (plain writes: every file system refuses them when full, where
//! `fallocate` may not be there at all), so a batch's append overwrites
//! blocks the file already has.

use crate::media::WalIo;
use std::io;
use std::sync::Arc;

/// `meta` key: where the payload file ends, as the database's rows have it.
pub(crate) const META_PAYLOAD_LEN: &str = "payload_len";

/// Space set aside past a batch's needs, so that most batches set aside none.
pub const PAYLOAD_ALLOCATE_BYTES: u64 = 4 << 20;

/// The writer's hold on the payload file.
pub(crate) struct PayloadFile {
    io: Arc<dyn WalIo>,
    /// Where the database's rows end: the next batch appends here.
    end: u64,
    /// How far the file has room for appends to overwrite: zeros set
    /// aside, or the bytes of a batch the database lost.
    filled: u64,
}

impl PayloadFile {
    /// The file of a database whose rows end at `recorded`: what lies past it
    /// is room (cutting it off would give up the space a replay after an
    /// engine error on a full disk needs). A file shorter than that lost
    /// bytes the database names.
    pub(crate) fn open(io: Box<dyn WalIo>, recorded: u64) -> io::Result<PayloadFile> {
        let len = io.len()?;
        if len < recorded {
            return Err(io::Error::other(format!(
                "the payload file holds {len} bytes but the database's objects end at {recorded}: it was cut short or replaced (restore it, or import an export)"
            )));
        }
        Ok(PayloadFile { io: Arc::from(io), end: recorded, filled: len })
    }

    /// The database's rows now end at `end` (a batch was committed, or the
    /// log replayed); the file holds at least that much. Told, not asked of
    /// the file: a stat of it in every batch cost one more device write per
    /// batch (3.1 against 2.2 at one committer, measured on Linux 6.18, whose
    /// multigrain timestamps give a write after a stat a fresh mtime).
    pub(crate) fn advance(&mut self, end: u64) {
        self.end = end;
        self.filled = self.filled.max(end);
    }

    /// Sets aside room for `bytes` more past the end, before a batch that
    /// may append that much is journaled: zeros up to `PAYLOAD_ALLOCATE_BYTES`
    /// past it, written and synced. A full disk leaves what it let through.
    pub(crate) fn reserve(&mut self, bytes: u64) -> io::Result<()> {
        let need = self.end + bytes;
        if need <= self.filled {
            return Ok(());
        }
        crate::media::write_zeros(self.io.as_ref(), &mut self.filled, need + PAYLOAD_ALLOCATE_BYTES)?;
        self.io.sync_data()
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        self.io.sync_data()
    }

    /// Cuts off the zeros past the end.
    pub(crate) fn trim(&mut self) -> io::Result<()> {
        self.io.set_len(self.end)?;
        self.filled = self.end;
        Ok(())
    }

    pub(crate) fn io(&self) -> &Arc<dyn WalIo> {
        &self.io
    }
}

/// One transaction's appends: bytes gathered while its objects are written
/// and put in the file at once when it finishes (`W::finish`).
pub(crate) struct Appends<'t> {
    io: &'t dyn WalIo,
    /// Where the database's rows end, read at the first append.
    end: Option<u64>,
    bytes: Vec<u8>,
}

impl<'t> Appends<'t> {
    pub(crate) fn new(io: &'t dyn WalIo) -> Appends<'t> {
        Appends { io, end: None, bytes: vec![] }
    }

    /// Queues `payload`; returns where it will start. `recorded` reads the
    /// database's end once.
    pub(crate) fn push<E>(&mut self, payload: &[u8], recorded: impl FnOnce() -> Result<u64, E>) -> Result<u64, E> {
        let end = match self.end {
            Some(end) => end,
            None => *self.end.insert(recorded()?),
        };
        let at = end + self.bytes.len() as u64;
        self.bytes.extend_from_slice(payload);
        Ok(at)
    }

    /// Writes what was queued (once); returns the new end to record, if any moved.
    pub(crate) fn write(&mut self) -> io::Result<Option<u64>> {
        let (Some(end), bytes) = (self.end.take(), std::mem::take(&mut self.bytes)) else { return Ok(None) };
        if !bytes.is_empty() {
            self.io.write_at(end, &bytes)?;
        }
        Ok(Some(end + bytes.len() as u64))
    }
}

/// Reads `size` bytes at `at`: one object's payload.
pub(crate) fn read(io: &dyn WalIo, at: u64, size: u64) -> io::Result<Vec<u8>> {
    let size = usize::try_from(size).map_err(|_| io::Error::other(format!("a payload of {size} bytes")))?;
    let mut out = vec![0u8; size];
    io.read_at(at, &mut out)?;
    Ok(out)
}

/// A payload file in memory, for engines built on memory in tests.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct MemoryFile(std::sync::Mutex<Vec<u8>>);

#[cfg(test)]
impl WalIo for MemoryFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.lock().unwrap().len() as u64)
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let data = self.0.lock().unwrap();
        let at = offset as usize;
        let src = data.get(at..at + out.len()).ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        out.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut file = self.0.lock().unwrap();
        let end = offset as usize + data.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(bytes: &[u8]) -> Box<MemoryFile> {
        let file = MemoryFile::default();
        file.write_at(0, bytes).unwrap();
        Box::new(file)
    }

    #[test]
    fn what_the_database_does_not_account_for_is_room_that_appends_overwrite() {
        let mut payloads = PayloadFile::open(file_of(b"kept|lost batch"), 5).unwrap();
        payloads.reserve(10).unwrap();
        assert_eq!(payloads.io().len().unwrap(), 15, "the lost batch's bytes are the room");
        let mut appends = Appends::new(payloads.io().as_ref());
        appends.push(b"replayed", || Ok::<_, ()>(5)).unwrap();
        assert_eq!(appends.write().unwrap(), Some(13));
        assert_eq!(read(payloads.io().as_ref(), 0, 13).unwrap(), b"kept|replayed");
    }

    #[test]
    fn a_file_shorter_than_the_database_says_is_refused() {
        let told = PayloadFile::open(file_of(b"cut"), 10).err().expect("refused").to_string();
        assert!(told.contains("holds 3 bytes") && told.contains("end at 10"), "{told}");
    }

    #[test]
    fn room_is_zeros_ahead_of_the_end_written_once_per_stretch() {
        let mut payloads = PayloadFile::open(file_of(b"data"), 4).unwrap();
        payloads.reserve(10).unwrap();
        let filled = payloads.io().len().unwrap();
        assert_eq!(filled, 4 + 10 + PAYLOAD_ALLOCATE_BYTES);
        assert_eq!(read(payloads.io().as_ref(), 0, 6).unwrap(), b"data\0\0");
        payloads.advance(14);
        payloads.reserve(10).unwrap();
        assert_eq!(payloads.io().len().unwrap(), filled, "the room set aside is used before more is");
        // Reopened, the room past the database's end is still there.
        let mut all = vec![0u8; filled as usize];
        payloads.io().read_at(0, &mut all).unwrap();
        let mut reopened = PayloadFile::open(file_of(&all), 14).unwrap();
        reopened.reserve(10).unwrap();
        assert_eq!(reopened.io().len().unwrap(), filled);
    }

    #[test]
    fn a_batch_appends_after_the_recorded_end_and_tells_the_new_one() {
        let file = file_of(b"0123");
        let mut appends = Appends::new(file.as_ref());
        assert_eq!(appends.push(b"ab", || Ok::<_, ()>(4)).unwrap(), 4);
        assert_eq!(appends.push(b"cde", || -> Result<u64, ()> { panic!("read once") }).unwrap(), 6);
        assert_eq!(appends.write().unwrap(), Some(9));
        assert_eq!(read(file.as_ref(), 0, 9).unwrap(), b"0123abcde");
        assert_eq!(Appends::new(file.as_ref()).write().unwrap(), None, "a batch without objects records nothing");
    }
}
