//! What the PostgreSQL benches share: sizes from the environment, and a database of a round's
//! own with memscope's schema, dropped with it (on a panic too).

use memscope::store::postgres::{schema, Address, PgStore};
use postgres::{Client, NoTls};
use std::ffi::OsStr;

/// `key` from the environment as a number, else `default`.
pub fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `url` with its database replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("an address with a database");
    format!("{base}/{db}")
}

/// A database of its own on `server`, named `memscope_bench_{tag}_{pid}`, with memscope's
/// schema; dropped with the value.
pub struct BenchDb {
    server: String,
    name: String,
    pub url: String,
}

impl BenchDb {
    pub fn new(server: &str, tag: &str) -> BenchDb {
        let name = format!("memscope_bench_{tag}_{}", std::process::id());
        let mut admin = Client::connect(server, NoTls).expect("the server answers");
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("no leftover bench database of this run");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("a bench database (the role needs CREATEDB)");
        let db = BenchDb {
            server: server.to_string(),
            url: with_database(server, &name),
            name,
        };
        schema::migrate(&mut db.client()).expect("memscope's schema");
        db
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).expect("the bench database answers")
    }

    #[allow(dead_code)] // Not every bench opens a store on it.
    pub fn store(&self) -> PgStore {
        let address = Address::recognise(OsStr::new(&self.url))
            .expect("a PostgreSQL address")
            .expect("a valid address");
        PgStore::open(&address).expect("the store opens")
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(&self.server, NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}
