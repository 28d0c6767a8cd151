//! A fresh PostgreSQL database per test, on the cluster `WORLD_TEST_POSTGRES`
//! names (the admin URL `scripts/postgres start` prints; the test script
//! starts one for the whole run), or else on a private cluster this test
//! binary starts with the same script and stops when it exits.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres");

static PRIVATE: Mutex<Option<PathBuf>> = Mutex::new(None);

extern "C" fn stop_private_cluster() {
    if let Some(dir) = PRIVATE.lock().ok().and_then(|mut d| d.take()) {
        let _ = std::process::Command::new(SCRIPT).arg("stop").arg(&dir).status();
    }
}

fn admin_url() -> &'static str {
    static ADMIN: OnceLock<String> = OnceLock::new();
    ADMIN.get_or_init(|| {
        if let Ok(url) = std::env::var("WORLD_TEST_POSTGRES") {
            return url;
        }
        let dir = std::env::temp_dir().join(format!("world-test-pg-{}", std::process::id()));
        let out = std::process::Command::new(SCRIPT).arg("start").arg(&dir).output().expect("run scripts/postgres");
        assert!(out.status.success(), "scripts/postgres start: {}", String::from_utf8_lossy(&out.stderr));
        *PRIVATE.lock().unwrap() = Some(dir);
        // SAFETY: registers a plain function to run at process exit.
        unsafe { libc::atexit(stop_private_cluster) };
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

/// The admin URL with another database.
pub fn url_of(database: &str) -> String {
    let admin = admin_url();
    let cut = admin.rfind('/').expect("a database in the admin URL");
    format!("{}/{database}", &admin[..cut])
}

/// A new, empty database with World's schema; its URL.
pub fn fresh_database() -> String {
    let name = format!("w_{}", hex::encode(rand_bytes()));
    let mut admin = postgres::Client::connect(admin_url(), postgres::NoTls).expect("connect to the test cluster");
    admin.batch_execute(&format!("CREATE DATABASE {name}")).expect("create a test database");
    let url = url_of(&name);
    world_store::postgres::init(&url).expect("create the schema");
    url
}

fn rand_bytes() -> [u8; 8] {
    let mut b = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut b).unwrap();
    b
}

/// A cluster of this test's own, for tests that stop or restart the server;
/// stopped and removed when dropped.
pub struct Private {
    dir: PathBuf,
    pub admin: String,
}

impl Private {
    pub fn start() -> Private {
        let dir = std::env::temp_dir().join(format!(
            "world-test-pg-own-{}-{}",
            std::process::id(),
            hex::encode(rand_bytes())
        ));
        let out = std::process::Command::new(SCRIPT).arg("start").arg(&dir).output().expect("run scripts/postgres");
        assert!(out.status.success(), "scripts/postgres start: {}", String::from_utf8_lossy(&out.stderr));
        Private { dir, admin: String::from_utf8(out.stdout).unwrap().trim().to_string() }
    }

    /// A new database with World's schema; its URL.
    pub fn database(&self) -> String {
        let mut admin = postgres::Client::connect(&self.admin, postgres::NoTls).expect("connect to the test cluster");
        admin.batch_execute("CREATE DATABASE world").expect("create the database");
        let url = format!("{}/world", &self.admin[..self.admin.rfind('/').unwrap()]);
        world_store::postgres::init(&url).expect("create the schema");
        url
    }

    /// Stops the server as a crash would and starts it again.
    pub fn restart(&self) {
        self.script("restart");
    }

    /// Stops the server as a crash would, until `resume`.
    pub fn pause(&self) {
        self.script("pause");
    }

    pub fn resume(&self) {
        self.script("resume");
    }

    fn script(&self, verb: &str) {
        let out = std::process::Command::new(SCRIPT).arg(verb).arg(&self.dir).output().expect("run scripts/postgres");
        assert!(out.status.success(), "scripts/postgres {verb}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = std::process::Command::new(SCRIPT).arg("stop").arg(&self.dir).status();
    }
}
