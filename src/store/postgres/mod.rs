//! The PostgreSQL backend (README, "Running on PostgreSQL"): recognising a `postgres://`
//! address, connecting with every failure said in one sentence, the schema contract with its
//! guards (`schema`), and the store over them (`store`, the UI's side in `ui`). [`not_served`]
//! is what a command that needs a file (`demo`) says when given an address. The driver is the
//! synchronous `postgres` crate, so the backend keeps the store's blocking,
//! one-connection-per-process shape.

mod alias;
mod browse;
mod check;
mod gc;
mod incident;
pub mod roles;
pub mod schema;
mod spellings;
mod store;
mod suspects;
mod transfer;
mod ui;
mod vacuum;

pub use store::PgStore;
pub use ui::PgUi;

use anyhow::{anyhow, bail, Result};
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};
use std::ffi::OsStr;
use std::time::Duration;

/// The oldest server this backend accepts (`server_version_num`).
pub const MIN_SERVER_VERSION: i32 = 130_000;

/// How long connecting may take when the address sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long data sent may go unacknowledged before the connection is given up, when the
/// address sets no `tcp_user_timeout`: a network that went away (a laptop asleep, Wi-Fi or a
/// VPN dropped) ends the call within this instead of hanging until it comes back (found by an
/// exploratory test: an MCP call, every call queued behind it and the UI waited for minutes).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(20);

/// TCP keepalives, when the address sets none: probes after this much silence, every
/// [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_RETRIES`] of them — a connection whose peer is gone is
/// found while it waits for an answer or idles between calls, not two hours later (the
/// driver's default).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;

/// The driver's keepalive idle time when the address names none.
const DRIVER_KEEPALIVE_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// A PostgreSQL address, parsed. Its password never leaves it: [`Address::describe`] and every
/// error name the user, host, port and database only.
#[derive(Clone)]
pub struct Address {
    config: Config,
    /// `sslmode=require` (or `verify-ca`, `verify-full`): TLS, the server's certificate
    /// verified against `sslrootcert` (a PEM file of CA certificates), else the web's roots.
    tls: Option<Tls>,
}

/// How an address encrypts its connection.
#[derive(Clone, Debug)]
struct Tls {
    root: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Address({})", self.describe())
    }
}

/// Whether `text` starts like a PostgreSQL address (`postgres://` or `postgresql://`, any
/// case): such a `--db` or `$MEMSCOPE_DB` is never a file name.
pub fn is_address(text: &OsStr) -> bool {
    scheme_len(&text.to_string_lossy()).is_some()
}

fn scheme_len(text: &str) -> Option<usize> {
    ["postgres://", "postgresql://"].into_iter().find_map(|s| {
        text.get(..s.len())
            .filter(|head| head.eq_ignore_ascii_case(s))
            .map(|_| s.len())
    })
}

impl Address {
    /// Parses a `postgres://USER:PASSWORD@HOST:PORT/DATABASE` address (`postgresql://` too, the
    /// scheme in any case, the driver's `?key=value` options after it). `None`: not an address.
    /// A text that starts `postgres:` or `postgresql:` without the `//` is a mistyped address,
    /// refused rather than taken for a file name (which would create `postgres:/…` folders,
    /// the password in a folder's name).
    pub fn recognise(text: &OsStr) -> Option<Result<Address>> {
        let text = text.to_string_lossy();
        let Some(scheme) = scheme_len(&text) else {
            let head = text.get(..text.find(':')? + 1)?;
            return ["postgres:", "postgresql:"]
                .iter()
                .any(|s| head.eq_ignore_ascii_case(s))
                .then(|| {
                    Err(anyhow!(
                        "the database looks like a PostgreSQL address without the // after \"{head}\": write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE (a file of that name: ./{head}…)"
                    ))
                });
        };
        Some(Address::parse(&format!("postgresql://{}", &text[scheme..])))
    }

    fn parse(text: &str) -> Result<Address> {
        const FORM: &str = "postgres://USER:PASSWORD@HOST:PORT/DATABASE";
        let (text, tls) = tls_options(text)?;
        // The driver's parse errors name no part of the address, so they are safe to repeat.
        let mut config: Config = text.parse().map_err(|e: postgres::Error| {
            let why = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.to_string());
            anyhow!("the PostgreSQL address cannot be read ({why}): write it as {FORM}")
        })?;
        if config.get_hosts().is_empty() {
            bail!("the PostgreSQL address names no host: write it as {FORM}");
        }
        // A second `@` (in a password, unescaped) would put part of the password into the host
        // and every message that names it.
        if config
            .get_hosts()
            .iter()
            .any(|h| matches!(h, postgres::config::Host::Tcp(h) if h.contains('@')))
        {
            bail!("the PostgreSQL address has more than one @ before its host: write an @ in the password or user as %40");
        }
        if config.get_user().is_none_or(str::is_empty) {
            bail!("the PostgreSQL address names no user: write it as {FORM}");
        }
        if config.get_dbname().is_none_or(str::is_empty) {
            bail!("the PostgreSQL address names no database: write it as {FORM}");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        if config.get_keepalives_idle() == DRIVER_KEEPALIVE_IDLE {
            config.keepalives_idle(KEEPALIVE_IDLE);
        }
        if config.get_keepalives_interval().is_none() {
            config.keepalives_interval(KEEPALIVE_INTERVAL);
        }
        if config.get_keepalives_retries().is_none() {
            config.keepalives_retries(KEEPALIVE_RETRIES);
        }
        config.application_name("memscope");
        let tls = tls.or_else(|| {
            (config.get_ssl_mode() == postgres::config::SslMode::Require)
                .then_some(Tls { root: None })
        });
        Ok(Address { config, tls })
    }

    /// `USER@HOST:PORT/DATABASE`, without the password.
    pub fn describe(&self) -> String {
        format!(
            "{}@{}/{}",
            self.user(),
            self.server(),
            self.config.get_dbname().unwrap_or_default()
        )
    }

    /// The role the address logs in as.
    pub fn user(&self) -> &str {
        self.config.get_user().unwrap_or_default()
    }

    /// The database the address names.
    pub fn database(&self) -> &str {
        self.config.get_dbname().unwrap_or_default()
    }

    /// `HOST:PORT` (the first host, and its port or 5432).
    pub fn server(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(postgres::config::Host::Tcp(h)) if h.contains(':') => format!("[{h}]"),
            Some(postgres::config::Host::Tcp(h)) => h.clone(),
            Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => String::new(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        format!("{host}:{port}")
    }

    /// Connects and makes sure the server is PostgreSQL 13 or newer. Every failure is one
    /// sentence naming the problem and what to do; nothing is written.
    ///
    /// The driver's `connect_timeout` bounds the socket's connect only: a server, proxy or
    /// tunnel that accepts the connection and then says nothing would hold the handshake
    /// forever. So the handshake runs on a thread of its own and is given up after the same
    /// time per host (the thread is left to end with its socket).
    pub fn connect(&self) -> Result<Client> {
        // Every connection takes the session's lock timeout from it: a value that is no
        // number is refused here, before the server is reached, by every command alike.
        crate::store::busy_timeout_setting()?;
        // What the address allows; the thread is given a second more, so that a handshake
        // the driver ends at its own timeout reports the driver's cause.
        let allowed = self
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT)
            * self.config.get_hosts().len().max(1) as u32;
        let limit = allowed + Duration::from_secs(1);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let address = self.clone();
        std::thread::Builder::new()
            .name("memscope-pg-connect".into())
            .spawn(move || {
                let _ = tx.send(address.handshake());
            })
            .map_err(|e| anyhow!("cannot start connecting to PostgreSQL: {e}"))?;
        rx.recv_timeout(limit).unwrap_or_else(|_| {
            Err(anyhow!(
                "the PostgreSQL server at {} took the connection but did not finish connecting within {} s: check that the PostgreSQL address points at a PostgreSQL server, and that nothing on the way (a proxy, a tunnel) holds it up",
                self.server(),
                allowed.as_secs()
            ))
        })
    }

    /// The connection, the server's version checked and the session's lock timeout and the
    /// server's side of the socket ([`Address::server_socket`]) set, in one round trip after
    /// the login.
    fn handshake(&self) -> Result<Client> {
        let mut client = match &self.tls {
            None => self.config.connect(NoTls),
            Some(tls) => self.config.connect(tls.connector(self)?),
        }
        .map_err(|e| connect_error(self, &e))?;
        let timeout = format!("{}ms", lock_timeout().as_millis());
        let [idle, interval, count, user_timeout] = self.server_socket();
        let text = postgres::types::Type::TEXT;
        let row = client
            .query_typed_one(
                // Each only where memscope has a value (a server's own configuration stands
                // otherwise), and `tcp_user_timeout` only where the server knows it (12 and
                // later): an older one is told it is too old, below, not refused here.
                "SELECT current_setting('server_version_num'), set_config('lock_timeout', $1, false),
                        CASE WHEN $2::text IS NOT NULL
                             THEN set_config('tcp_keepalives_idle', $2, false) END,
                        CASE WHEN $3::text IS NOT NULL
                             THEN set_config('tcp_keepalives_interval', $3, false) END,
                        CASE WHEN $4::text IS NOT NULL
                             THEN set_config('tcp_keepalives_count', $4, false) END,
                        CASE WHEN $5::text IS NOT NULL
                                  AND current_setting('tcp_user_timeout', true) IS NOT NULL
                             THEN set_config('tcp_user_timeout', $5, false) END",
                &[
                    (&timeout, text.clone()),
                    (&idle, text.clone()),
                    (&interval, text.clone()),
                    (&count, text.clone()),
                    (&user_timeout, text),
                ],
            )
            .map_err(|e| connect_error(self, &e))?;
        let version: String = row.get(0);
        require_version(self, version.trim().parse().unwrap_or(0))?;
        Ok(client)
    }
}

/// How long a statement waits for a lock another session holds before it gives up (the
/// session's `lock_timeout`): `MEMSCOPE_BUSY_TIMEOUT_MS`, as on SQLite, else 15 s. A writer
/// behind a transaction left open (a `psql` session, a stuck client) says so instead of
/// waiting forever. 0 waits as little as the server can (1 ms: its 0 would wait forever).
/// Connecting refused a value that is no number ([`crate::store::busy_timeout_setting`]).
pub fn lock_timeout() -> Duration {
    let ms = crate::store::busy_timeout_setting()
        .ok()
        .flatten()
        .unwrap_or(15_000);
    Duration::from_millis(ms.max(1))
}

impl Address {
    /// The server's side of the connection's socket, as the address sets memscope's side:
    /// keepalive idle time, interval and count, and the user timeout (`tcp_keepalives_idle`,
    /// `tcp_keepalives_interval`, `tcp_keepalives_count`, `tcp_user_timeout`; `None` leaves
    /// the server's own, as do keepalives turned off in the address; a Unix socket ignores
    /// them). Found by review: after a network cut, a backend that had answered into the dead
    /// link kept its transaction — and the identity's locks — open for the kernel's fifteen
    /// minutes of retransmissions, so a writer elsewhere waited for a memory no one was
    /// writing any more.
    fn server_socket(&self) -> [Option<String>; 4] {
        let c = &self.config;
        let probes = c.get_keepalives();
        let secs =
            |d: Option<Duration>| d.filter(|_| probes).map(|d| d.as_secs().max(1).to_string());
        [
            secs(Some(c.get_keepalives_idle())),
            secs(c.get_keepalives_interval()),
            c.get_keepalives_retries()
                .filter(|_| probes)
                .map(|n| n.to_string()),
            c.get_tcp_user_timeout().map(|d| d.as_millis().to_string()),
        ]
    }

    /// Asks the server to stop the query running on the connection of `token` (over TLS when
    /// the address asks for it); a failure is nobody's to hear (the query ends anyway, or the
    /// connection is gone).
    pub fn cancel(&self, token: &postgres::CancelToken) {
        let _ = match &self.tls {
            None => token.cancel_query(NoTls),
            Some(tls) => match tls.connector(self) {
                Ok(c) => token.cancel_query(c),
                Err(_) => return,
            },
        };
    }
}

/// Refuses a server older than [`MIN_SERVER_VERSION`] (`num` as in `server_version_num`).
pub fn require_version(address: &Address, num: i32) -> Result<()> {
    if num < MIN_SERVER_VERSION {
        bail!(
            "the PostgreSQL address reaches a server at {} that runs PostgreSQL {}, and memscope needs PostgreSQL 13 or newer: upgrade the server or point the address at a newer one",
            address.server(),
            if num >= 100_000 {
                format!("{}", num / 10_000)
            } else {
                format!("{}.{}", num / 10_000, num / 100 % 100)
            }
        );
    }
    Ok(())
}

/// One sentence for a failed connection: what went wrong, where, and what to do.
/// Takes the TLS options out of an address's `?key=value` part (the driver knows `sslmode`'s
/// `disable`, `prefer` and `require` only, and no `sslrootcert`): `verify-ca` and `verify-full`
/// are `require` (the certificate is always verified, its host name too), `sslrootcert` names
/// the CA file. `prefer`, the driver's default, connects without TLS.
fn tls_options(text: &str) -> Result<(String, Option<Tls>)> {
    let Some((base, query)) = text.split_once('?') else {
        return Ok((text.to_string(), None));
    };
    let mut kept = Vec::new();
    let (mut verify, mut root) = (false, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslmode", "verify-ca" | "verify-full")) => verify = true,
            Some(("sslrootcert", path)) => {
                let path = percent_decode(path);
                if path.is_empty() {
                    bail!("sslrootcert in the PostgreSQL address names no file: give the path of the CA certificates (PEM)");
                }
                root = Some(std::path::PathBuf::from(path));
            }
            _ => kept.push(pair),
        }
    }
    let text = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let requires = verify || kept.contains(&"sslmode=require");
    if root.is_some() && !requires {
        bail!("the PostgreSQL address names sslrootcert but not sslmode=require (or verify-full): add it, or the connection is not encrypted");
    }
    if verify {
        let text = format!(
            "{text}{}sslmode=require",
            if text.contains('?') { "&" } else { "?" }
        );
        return Ok((text, Some(Tls { root })));
    }
    Ok((text, requires.then_some(Tls { root })))
}

/// `%XX` escapes of an address's option value, decoded (an undecodable one is kept as is).
fn percent_decode(text: &str) -> String {
    crate::model::percent_decoded(text).into_owned()
}

impl Tls {
    /// A connector that verifies the server's certificate against the CA file, else the web's
    /// roots; a CA file it cannot read is one sentence.
    fn connector(&self, address: &Address) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        match &self.root {
            Some(path) => {
                let certs = rustls_pki_types::CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| anyhow!("cannot read the CA certificates in {} (sslrootcert of the PostgreSQL address for {}): {e}; give a PEM file", path.display(), address.describe()))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    bail!("{} holds no CA certificate (sslrootcert of the PostgreSQL address for {}): give a PEM file of CA certificates", path.display(), address.describe());
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

fn connect_error(address: &Address, e: &postgres::Error) -> anyhow::Error {
    let server = address.server();
    if let Some(tls) = tls_cause(e) {
        return anyhow!(
            "the TLS connection to the PostgreSQL server at {server} failed ({tls}): check that the server has TLS on and that sslrootcert names the CA that signed its certificate for this host name"
        );
    }
    let user = address.user();
    let db = address.database();
    if let Some(db_error) = e.as_db_error() {
        let code = db_error.code();
        return if *code == SqlState::INVALID_PASSWORD {
            anyhow!("the PostgreSQL server at {server} refused the password for user \"{user}\": correct the user or the password in the PostgreSQL address")
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            anyhow!("the PostgreSQL address names the database \"{db}\", which does not exist on the server at {server}: create it (`createdb {db}`, or CREATE DATABASE) or correct the name in the address")
        } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
            anyhow!("the PostgreSQL server at {server} does not let user \"{user}\" connect to \"{db}\" from here ({}): correct the user in the PostgreSQL address, or allow it in the server's pg_hba.conf", db_error.message())
        } else if *code == SqlState::TOO_MANY_CONNECTIONS {
            anyhow!("the PostgreSQL server at {server} has no connection left for user \"{user}\": try again later, or raise its max_connections")
        } else if *code == SqlState::CANNOT_CONNECT_NOW {
            anyhow!("the PostgreSQL server at {server} is starting up or shutting down: try again in a moment")
        } else {
            anyhow!(
                "the PostgreSQL server at {server} refused the connection of the PostgreSQL address ({}): check the address and the server",
                db_error.message()
            )
        };
    }
    let io = io_cause(e);
    match io.map(std::io::Error::kind) {
        Some(std::io::ErrorKind::ConnectionRefused) => anyhow!(
            "nothing answers at {server}, where the PostgreSQL address points (connection refused): start PostgreSQL there, or correct the host and port in the address"
        ),
        Some(std::io::ErrorKind::TimedOut) => anyhow!(
            "the PostgreSQL server at {server} did not answer within {} s: check that the host and port of the PostgreSQL address are right and reachable",
            address.config.get_connect_timeout().map_or(0, Duration::as_secs)
        ),
        _ if e.to_string().contains("timeout") => anyhow!(
            "the PostgreSQL server at {server} did not answer in time: check that the host and port of the PostgreSQL address are right and reachable"
        ),
        _ if std::error::Error::source(e)
            .is_some_and(|s| s.to_string().contains("password missing")) =>
        {
            anyhow!("the PostgreSQL server at {server} asks user \"{user}\" for a password, and the PostgreSQL address gives none: write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE")
        }
        _ if io.is_some_and(|io| io.to_string().contains("lookup")) => anyhow!(
            "the host of the PostgreSQL address, {server}, cannot be found: correct the host name"
        ),
        // A reset or unreachable network is the connection's fault; anything else means
        // what answered did not speak PostgreSQL's protocol (an HTTP server, a closed socket).
        Some(
            kind @ (std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::HostUnreachable
            | std::io::ErrorKind::NetworkUnreachable
            | std::io::ErrorKind::AddrNotAvailable
            | std::io::ErrorKind::PermissionDenied),
        ) => anyhow!(
            "the connection to {server}, where the PostgreSQL address points, failed ({kind}): check the address and that a PostgreSQL server runs there"
        ),
        _ => anyhow!(
            "what answers at {server}, where the PostgreSQL address points, does not speak PostgreSQL's protocol ({}): check the host and port in the address",
            io.map_or_else(|| e.to_string(), |io| io.to_string())
        ),
    }
}

/// The TLS failure under a connection error, if that is what it is: rustls's own error, or the
/// server saying it has no TLS.
fn tls_cause(e: &postgres::Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<rustls::Error>() {
            return Some(r.to_string());
        }
        if c.to_string().contains("server does not support TLS") {
            return Some("the server does not support TLS".into());
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if let Some(r) = io.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>()) {
                return Some(r.to_string());
            }
        }
        cause = c.source();
    }
    None
}

fn io_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cause = c.source();
    }
    None
}

/// What memscope serves from PostgreSQL (README, "Running on PostgreSQL").
pub const SERVED: &str =
    "every command runs on it, the terminal UI included (only `demo` builds a SQLite file of its own)";

/// What opening a PostgreSQL address as a SQLite store says (only `demo`, which builds a file,
/// opens one by the address it is given): it connects first (so a wrong or unreachable address
/// gets its own sentence), reads the schema's state without writing, and then says that this
/// command needs a file.
pub fn not_served(address: &Address) -> anyhow::Error {
    let mut client = match address.connect() {
        Ok(c) => c,
        Err(e) => return e,
    };
    let held = match schema::state(&mut client) {
        Ok(state) => state,
        Err(e) => return e.context(format!("reading {}", address.describe())),
    };
    let what = match held {
        schema::State::Empty => {
            "holds no memscope schema yet (`memscope --db … init` prepares it)".to_string()
        }
        schema::State::Current => format!(
            "holds a memscope schema (PostgreSQL schema {})",
            schema::SCHEMA_VERSION
        ),
        schema::State::Older(v) => format!(
            "holds memscope PostgreSQL schema {v} (`memscope --db … init` brings it to {})",
            schema::SCHEMA_VERSION
        ),
        schema::State::Newer(v) => format!(
            "holds memscope PostgreSQL schema {v}, newer than this memscope knows ({})",
            schema::SCHEMA_VERSION
        ),
        schema::State::Foreign(names) => format!(
            "holds tables memscope did not create ({})",
            names.join(", ")
        ),
    };
    anyhow!(
        "the PostgreSQL address reaches {}, which {what}, but this command builds a SQLite file (every other command runs on PostgreSQL): give it a file path with --db",
        address.describe()
    )
}

/// What `memscope --db postgres://… init` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepared {
    /// The schema was created (or brought forward from this version).
    Created { from: i64 },
    /// It was there already, up to date; its guards were made again when a raw client had
    /// dropped or changed them.
    UpToDate { restored_guards: bool },
}

/// Connects and creates the schema (or brings it forward) in one transaction.
pub fn prepare(address: &Address) -> Result<Prepared> {
    let mut client = address.connect()?;
    let from = match schema::migrate(&mut client) {
        Ok(from) => from,
        Err(e) => return Err(explain(address, e, &mut client)),
    };
    // An existing database — up to date, or just brought forward, whose guards a raw client
    // may have dropped before — gets its guards made again (found by review: one brought
    // forward kept a dropped key until a second `init`).
    let mut restore = || -> Result<bool> {
        let mut tx = client.transaction()?;
        let restored = check::restore_guards(&mut tx)?;
        tx.commit()?;
        Ok(restored)
    };
    let restored_guards = match from {
        0 => false,
        _ => match restore() {
            Ok(restored) => restored,
            Err(e) => return Err(explain(address, e, &mut client)),
        },
    };
    Ok(if from == schema::SCHEMA_VERSION {
        Prepared::UpToDate { restored_guards }
    } else {
        Prepared::Created { from }
    })
}

/// Turns a refusal of the server while preparing into one sentence naming the address. Where
/// memscope's tables stand, only their owner may bring them forward or make their guards again:
/// it is named, and no privilege that would widen the login's rights is suggested (found by
/// review: a curator was told to be granted CREATE, which rebuilds no guard).
fn explain(address: &Address, e: anyhow::Error, client: &mut Client) -> anyhow::Error {
    let code = e
        .downcast_ref::<postgres::Error>()
        .and_then(|p| p.code().cloned());
    if code == Some(SqlState::INSUFFICIENT_PRIVILEGE) {
        let user = address.user();
        let owner = client
            .query_one(
                "SELECT c.relowner::regrole::text FROM pg_class c
                  WHERE c.oid = to_regclass('memscope_schema')",
                &[],
            )
            .ok()
            .map(|r| r.get::<_, String>(0));
        if let Some(owner) = owner {
            return anyhow!(
                "the PostgreSQL address logs in as user \"{user}\", which may not change memscope's tables in the database \"{}\" at {} (bringing them forward or making their guards again is their owner's): run `memscope init` as the database's owner, the role that owns memscope's tables (\"{owner}\")",
                address.database(),
                address.server()
            );
        }
        anyhow!(
            "the PostgreSQL address logs in as user \"{user}\", which may not create memscope's tables in the database \"{}\" at {}: connect as the database's owner, or GRANT CREATE on its schema (usually public) to \"{user}\"",
            address.database(),
            address.server()
        )
    } else {
        anyhow!(
            "the PostgreSQL address reaches {}, but {e:#}",
            address.describe()
        )
    }
}

#[cfg(test)]
mod tls_tests {
    use super::tls_options;

    #[test]
    fn tls_options_are_taken_out_of_the_address() {
        let (text, tls) = tls_options("postgresql://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&connect_timeout=5").unwrap();
        assert_eq!(
            text,
            "postgresql://u@h/db?connect_timeout=5&sslmode=require"
        );
        assert_eq!(
            tls.unwrap().root.unwrap(),
            std::path::PathBuf::from("/etc/ca dir/ca.pem")
        );
        let (text, tls) = tls_options("postgresql://u@h/db?sslmode=require").unwrap();
        assert_eq!(text, "postgresql://u@h/db?sslmode=require");
        assert!(tls.unwrap().root.is_none());
        for plain in ["postgresql://u@h/db", "postgresql://u@h/db?sslmode=prefer"] {
            assert!(tls_options(plain).unwrap().1.is_none(), "{plain}");
        }
        let refused = tls_options("postgresql://u@h/db?sslrootcert=/ca.pem").unwrap_err();
        assert!(refused.to_string().contains("sslmode=require"), "{refused}");
        assert!(tls_options("postgresql://u@h/db?sslmode=require&sslrootcert=").is_err());
    }
}
