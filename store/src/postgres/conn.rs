//! A connection and its prepared statements: each statement text is parsed
//! and planned once per connection, then only bound and executed (one round
//! trip, no planning). Pooled readers and the writer alike.

use postgres::types::{ToSql, Type};
use postgres::{Client, Config, NoTls, Row, Statement};
use std::collections::HashMap;

/// Most statements a connection keeps prepared; past it, the set starts over.
pub const PREPARED_MAX: usize = 256;

/// A statement parameter and its type.
pub(crate) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

pub(crate) struct Conn {
    client: Client,
    prepared: HashMap<String, Statement>,
}

impl Conn {
    pub(crate) fn new(client: Client) -> Conn {
        Conn { client, prepared: HashMap::new() }
    }

    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Runs `sql` (prepared on first use) with `params`.
    pub(crate) fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, postgres::Error> {
        let statement = match self.prepared.get(sql) {
            Some(s) => s.clone(),
            None => {
                let types: Vec<Type> = params.iter().map(|p| p.1.clone()).collect();
                let s = self.client.prepare_typed(sql, &types)?;
                if self.prepared.len() >= PREPARED_MAX {
                    self.prepared.clear();
                }
                self.prepared.insert(sql.to_string(), s.clone());
                s
            }
        };
        let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.0).collect();
        self.client.query(&statement, &values)
    }
}

/// Makes pooled connections.
pub(crate) struct Manager {
    pub(crate) config: Config,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Conn, postgres::Error> {
        self.config.connect(NoTls).map(Conn::new)
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), postgres::Error> {
        conn.client.simple_query("").map(|_| ())
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client.is_closed()
    }
}
