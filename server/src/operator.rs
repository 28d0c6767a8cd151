//! The operator's credential, for a daemon whose reads are private (`serve
//! --private-reads`): a token made at every start and written beside the
//! store, `<store>.operator-token` (mode 0600, `stores::write_private`), so
//! that whoever may read the store's own files may read what the daemon
//! serves of it, and nobody else. The daemon keeps only its sha256, as it
//! keeps sessions'; a start makes a new token, and the last one stops working.

use crate::sessions;
use std::path::{Path, PathBuf};
use world_store::Ref;

/// The file beside a store (or a node's local path) that holds its operator token.
pub fn token_path(local: &Path) -> PathBuf {
    let mut s = local.as_os_str().to_owned();
    s.push(".operator-token");
    PathBuf::from(s)
}

/// What a daemon whose reads are private knows of its operator.
#[derive(Clone, Debug)]
pub struct PrivateReads {
    /// The sha256 of this start's operator token.
    operator: Ref,
    /// Where the token was written.
    pub token_file: PathBuf,
}

impl PrivateReads {
    /// Makes this start's operator token and writes it to `token_path(local)`.
    pub fn issue(local: &Path) -> Result<PrivateReads, String> {
        let token = sessions::new_token();
        let token_file = token_path(local);
        crate::stores::write_private(&token_file, |f| {
            use std::io::Write;
            f.write_all(token.as_bytes()).and_then(|()| f.write_all(b"\n")).map_err(|e| e.to_string())
        })?;
        Ok(PrivateReads { operator: sessions::credential_id(&token), token_file })
    }

    /// Whether `token` is this start's operator token (compared by its sha256).
    pub fn is_operator(&self, token: &str) -> bool {
        sessions::credential_id(token) == self.operator
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_start_writes_a_new_private_token_and_only_it_is_the_operator() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("world.db");
        let first = PrivateReads::issue(&local).unwrap();
        let first_token = std::fs::read_to_string(&first.token_file).unwrap();
        let second = PrivateReads::issue(&local).unwrap();
        let token = std::fs::read_to_string(&second.token_file).unwrap();
        assert_eq!(second.token_file, dir.path().join("world.db.operator-token"));
        assert_eq!(std::fs::metadata(&second.token_file).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(second.is_operator(token.trim()));
        assert!(!second.is_operator(first_token.trim()), "the last start's token stops working");
        assert!(!second.is_operator(&sessions::new_token()));
    }

    #[test]
    fn a_link_planted_where_the_token_goes_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("world.db");
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, token_path(&local)).unwrap();
        let e = PrivateReads::issue(&local).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(!elsewhere.exists());
    }
}
