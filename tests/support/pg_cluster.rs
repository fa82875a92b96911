//! A PostgreSQL cluster of one test's own, made as `.ci/postgres` makes the shared one: `initdb`
//! (as the `postgres` OS user when run as root) into a new temporary folder, started by `pg_ctl`
//! on a free port, password (scram) authentication over TCP. A test may restart it, or have it
//! listen on addresses of its own; it is stopped and its folder removed when the value is
//! dropped, a failing test's too.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The bootstrap superuser's login over TCP (the cluster is this test's alone).
const SUPERUSER: &str = "postgres";

pub struct PrivateCluster {
    dir: PathBuf,
    bindir: PathBuf,
    pub port: u16,
    password: String,
}

/// Whether this process runs as root: `/proc/self` belongs to the process's effective user.
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The folder of `initdb` and `pg_ctl`, as `.ci/postgres` finds it.
fn bindir() -> PathBuf {
    let named = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    match named {
        Some(dir) if dir.join("initdb").is_file() => dir,
        _ => PathBuf::from("/usr/lib/postgresql/15/bin"),
    }
}

impl PrivateCluster {
    /// A cluster listening on `listen` (addresses that exist on this machine) besides
    /// 127.0.0.1, and letting in, with a password, the clients of `subnets` (CIDR) besides
    /// loopback's.
    pub fn start(listen: &[&str], subnets: &[&str]) -> PrivateCluster {
        let bindir = bindir();
        let dir = tempfile::Builder::new()
            .prefix("memscope-pg-private.")
            .tempdir_in("/tmp")
            .expect("a folder for the private cluster")
            .keep();
        let password = format!("pw{}x{:x}", std::process::id(), nanos());
        let mut cluster = PrivateCluster {
            dir,
            bindir,
            port: 0,
            password,
        };
        std::fs::write(
            cluster.dir.join("pwfile"),
            format!("{}\n", cluster.password),
        )
        .unwrap();
        if is_root() {
            let owned = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&cluster.dir)
                .status()
                .expect("chown runs");
            assert!(owned.success(), "the postgres OS user owns the folder");
        }
        cluster.as_postgres(
            "initdb",
            &[
                "-D",
                &cluster.data(),
                "-U",
                SUPERUSER,
                "--pwfile",
                &cluster.dir.join("pwfile").to_string_lossy(),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
        );
        if !subnets.is_empty() {
            use std::io::Write;
            let hba = cluster.dir.join("data/pg_hba.conf");
            let mut f = std::fs::OpenOptions::new().append(true).open(&hba).unwrap();
            for subnet in subnets {
                writeln!(f, "host all all {subnet} scram-sha-256").unwrap();
            }
        }
        let listen = std::iter::once("127.0.0.1")
            .chain(listen.iter().copied())
            .collect::<Vec<_>>()
            .join(",");
        for _ in 0..8 {
            cluster.port = free_port();
            let options = format!(
                "-c listen_addresses={listen} -p {} -c unix_socket_directories={} -c fsync=off -c max_connections=100 -c log_connections=on",
                cluster.port,
                cluster.dir.display()
            );
            if cluster.pg_ctl(&["-o", &options, "start"]) {
                return cluster;
            }
        }
        panic!(
            "the private PostgreSQL cluster did not start:\n{}",
            cluster.log()
        );
    }

    fn data(&self) -> String {
        self.dir.join("data").to_string_lossy().into_owned()
    }

    /// Runs a PostgreSQL program as the postgres OS user (when root), from `/`; panics with
    /// its output when it fails.
    fn as_postgres(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program, args)
            .output()
            .unwrap_or_else(|e| panic!("{program} runs: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let path = self.bindir.join(program);
        let mut c = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        c.args(args).current_dir("/").stdin(Stdio::null());
        c
    }

    /// `pg_ctl … ACTION`, waiting for it; whether it succeeded.
    fn pg_ctl(&self, args: &[&str]) -> bool {
        let log = self.dir.join("server.log");
        let data = self.data();
        let mut all = vec!["-D", &data, "-w", "-t", "120", "-l"];
        let log = log.to_string_lossy();
        all.push(&log);
        all.extend_from_slice(args);
        // The server's output goes to its log: nothing holds our pipes open.
        self.command("pg_ctl", &all)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// `pg_ctl restart -m immediate`: every server process is killed without a checkpoint
    /// (as a crash would) and the server starts again, recovering from its WAL.
    pub fn restart_immediately(&self) {
        assert!(
            self.pg_ctl(&["-m", "immediate", "restart"]),
            "the private cluster restarts:\n{}",
            self.log()
        );
    }

    /// The address of database `db` through `host` (an address the cluster listens on).
    pub fn url(&self, host: &str, db: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@{host}:{}/{db}",
            self.password, self.port
        )
    }

    /// A new database on the cluster; its address through 127.0.0.1.
    pub fn create_database(&self, name: &str) -> String {
        let mut admin = self.client("postgres");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("a database on the private cluster");
        self.url("127.0.0.1", name)
    }

    /// A raw client on database `db`, through 127.0.0.1.
    pub fn client(&self, db: &str) -> postgres::Client {
        postgres::Client::connect(&self.url("127.0.0.1", db), postgres::NoTls)
            .unwrap_or_else(|e| panic!("the private cluster answers: {e}\n{}", self.log()))
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
}

/// A port nothing listens on at the moment (the server may still lose it to another process
/// before it binds: the caller tries again).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
